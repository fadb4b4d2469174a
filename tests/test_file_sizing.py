"""File sizing: the worked example of Hudi's file sizing design, and the planner's edges."""

from __future__ import annotations

from hudi_format.writer.file_sizing import (InsertBucket, SizingConfig, assign_inserts,
                                           average_record_size, small_files)

MB = 1024 * 1024


def test_worked_example_from_the_hudi_design():
    # Files of 40, 80, 90, 130 and 105 MB; max 120 MB, small-file limit 100 MB.
    cfg = SizingConfig(max_file_size=120 * MB, small_file_limit=100 * MB,
                       insert_split_size=120_000, auto_split=False)
    sizes = [("f40", 40 * MB), ("f80", 80 * MB), ("f90", 90 * MB), ("f130", 130 * MB), ("f105", 105 * MB)]
    small = small_files(sizes, cfg)
    assert [f.file_id for f in small] == ["f40", "f80", "f90"]
    avg = 1024  # 1 KB records: 80 MB of inserts is 81920 records
    capacity = (80 + 40 + 30) * MB // avg
    buckets = assign_inserts(capacity + 300_000, small, avg, cfg)
    assert buckets[:3] == [InsertBucket(80 * MB // avg, "f40"), InsertBucket(40 * MB // avg, "f80"),
                           InsertBucket(30 * MB // avg, "f90")]
    assert buckets[3:] == [InsertBucket(120_000), InsertBucket(120_000), InsertBucket(60_000)]


def test_small_file_limit_zero_turns_bin_packing_off():
    cfg = SizingConfig(max_file_size=120 * MB, small_file_limit=0, insert_split_size=100, auto_split=False)
    assert small_files([("a", 1)], cfg) == []
    assert assign_inserts(250, [], 10, cfg) == [InsertBucket(100), InsertBucket(100), InsertBucket(50)]


def test_bulk_insert_does_not_bin_pack():
    cfg = SizingConfig(max_file_size=1000, small_file_limit=800, insert_split_size=10, auto_split=True)
    small = small_files([("a", 100)], cfg)
    assert assign_inserts(25, small, 100, cfg, bin_pack=False) == [
        InsertBucket(10), InsertBucket(10), InsertBucket(5)]
    assert assign_inserts(25, small, 100, cfg)[0] == InsertBucket(9, "a")


def test_average_record_size_uses_the_newest_large_enough_commit():
    assert average_record_size([(100, 10), (10_000, 100)], small_file_limit=1000) == 100
    assert average_record_size([(50, 0)], small_file_limit=0, default=77) == 77
