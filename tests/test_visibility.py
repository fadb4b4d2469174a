"""Readers see committed data only: pending compactions, in-flight writes and their files are
invisible, on copies of Hudi-written tables put into those states."""

from __future__ import annotations

import shutil

import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import expected

MOR = "sample_table__mor__avro__v9_txns_simple_meta"
COW6 = "sample_table__cow__v6_simplekeygen_nonhivestyle"


def test_pending_compaction_is_invisible(fixture_tables, tmp_path):
    """Cut the MOR table back to a scheduled-but-unfinished compaction: its requested plan
    stays, its completed commit and everything after it is gone, its new base files remain."""
    base = tmp_path / "t"
    shutil.copytree(fixture_tables(MOR), base)
    timeline = base / ".hoodie" / "timeline"
    for f in timeline.iterdir():
        if f.is_file() and f.name[:17] > "20260307162618152":
            f.unlink()
    (timeline / "20260307162618152_20260307162619230.commit").unlink()
    (timeline / "20260307162618152.compaction.inflight").unlink()
    table = hudi.open_table(base)
    assert [i.action for i in table.timeline.pending] == ["compaction"]
    want = expected(MOR)["time_travel"]["20260307162616932"]
    assert canonical_rows(table.read()) == sort_expected(want)
    # The compaction wrote base files that are on storage but not committed.
    assert any("20260307162618152" in p.name for p in base.rglob("*.parquet"))
    assert not any("20260307162618152" in (s.base_file or "") for s in table.file_slices())


def test_inflight_commit_debris_is_ignored(fixture_tables, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(fixture_tables(COW6), base)
    # A writer died after writing a base file for a new commit: requested + inflight only.
    victim = next(base.glob("10/*.parquet"))
    file_id = victim.name.split("_")[0]
    shutil.copy(victim, victim.parent / f"{file_id}_0-99-99_29990101000000000.parquet")
    shutil.copy(victim, victim.parent / "ffffffff-0000-0000-0000-000000000000-0_0-99-99_29990101000000000.parquet")
    (base / ".hoodie" / "29990101000000000.commit.requested").write_bytes(b"")
    (base / ".hoodie" / "29990101000000000.inflight").write_bytes(b"")
    table = hudi.open_table(base)
    assert canonical_rows(table.read()) == sort_expected(expected(COW6)["snapshot"])
    assert all("29990101000000000" not in s.base_file for s in table.file_slices())


def test_refresh_sees_new_commits_and_readers_stay_pinned(fixture_tables, tmp_path):
    base = tmp_path / "t"
    shutil.copytree(fixture_tables(COW6), base)
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    last = sorted((base / ".hoodie").glob("*.commit"))[-1]
    ts = last.name.split(".")[0]
    moved = [f for f in (base / ".hoodie").iterdir() if f.name.startswith(ts)]
    for f in moved:
        f.rename(hidden / f.name)
    table = hudi.open_table(base)
    assert canonical_rows(table.read()) == sort_expected(expected(COW6)["time_travel"][
        sorted(expected(COW6)["time_travel"])[0]])
    for f in moved:
        (hidden / f.name).rename(base / ".hoodie" / f.name)
    assert table.timeline.latest_completed_write().timestamp != ts  # pinned at open
    table.refresh()
    assert canonical_rows(table.read()) == sort_expected(expected(COW6)["snapshot"])


def test_a_file_gone_since_the_listing_is_listed_again_not_failed(tmp_path):
    """Version 6 names a log file after its slice's base instant, so a reader lists the new log
    file of a write still in flight; if that write then fails, it deletes the file. The reader
    listed it and must not fail for a file its snapshot never needed: the read lists again
    (same snapshot) and answers it. (Found by ``soak_readers``: readers failed with
    ``FileMissingError`` whenever a concurrent write on a version-6 MOR table was undone.)"""
    import pyarrow as pa

    from hudi_format.errors import FileMissingError
    path = tmp_path / "t"
    for ts in (1, 2):
        hudi.write(str(path), pa.table({"id": ["a", "b"], "ts": [ts, ts], "p": ["x", "x"]}), operation="upsert",
                   record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
                   table_version=6, options={"hoodie.compact.inline": "false"})
    logs = sorted((path / "x").glob(".*.log.*"))
    assert logs
    name = logs[-1].name
    stem, version_token = name.rsplit(".log.", 1)
    version, token = version_token.split("_", 1)
    debris = logs[-1].with_name(f"{stem}.log.{int(version) + 1}_{token}")   # a failed write's new log
    debris.write_bytes(logs[-1].read_bytes())
    table = hudi.open_table(path, options={"hoodie.metadata.enable": "false"})
    assert any(debris.name in lf for s in table.file_slices() for lf in s.log_files)   # listed
    streamed = hudi.open_table(path, options={"hoodie.metadata.enable": "false"})
    streamed.file_slices()
    debris.unlink()                                   # the failed write undoes itself
    got = table.read(columns=["id", "ts"])
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [{"id": "a", "ts": 2}, {"id": "b", "ts": 2}]
    got = [r for b in streamed.scan(columns=["id", "ts"]) for r in b.to_pylist()]   # scan() too
    assert sorted(got, key=lambda r: r["id"]) == [{"id": "a", "ts": 2}, {"id": "b", "ts": 2}]
    # a committed file gone since the listing, which the metadata table lists, still fails
    table = hudi.open_table(path)
    table.file_slices()
    logs[-1].unlink()
    with pytest.raises(FileMissingError):
        table.read(columns=["id", "ts"])


def test_files_gone_since_each_listing_are_listed_again_until_one_holds(tmp_path, monkeypatch):
    """Failed writes keep coming while a version-6 reader reads (a loaded machine, a writer
    losing conflicts): each listing may hold another failed write's log file, gone by the time
    it is read. The read lists again as long as each attempt misses a different file (and no
    more than a few times), instead of failing at the second. (``test_concurrent_readers``
    failed once so under load: a read missed a second failed write's log file.)"""
    import pyarrow as pa

    import hudi_format.table as table_module
    path = tmp_path / "t"
    for ts in (1, 2):
        hudi.write(str(path), pa.table({"id": ["a", "b"], "ts": [ts, ts], "p": ["x", "x"]}), operation="upsert",
                   record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
                   table_version=6, options={"hoodie.compact.inline": "false"})
    last = sorted((path / "x").glob(".*.log.*"))[-1]
    stem, version_token = last.name.rsplit(".log.", 1)
    version, token = version_token.split("_", 1)
    debris = [last.with_name(f"{stem}.log.{int(version) + i}_{token}") for i in (1, 2, 3)]
    for d in debris:
        d.write_bytes(last.read_bytes())
    real, attempts = table_module.read_task_tables, []

    def undone_before_each_read(storage, tasks):
        attempts.append(1)
        left = [d for d in debris if d.exists()]
        if left:
            left[0].unlink()                          # the next failed write undoes itself
        return real(storage, tasks)

    monkeypatch.setattr(table_module, "read_task_tables", undone_before_each_read)
    table = hudi.open_table(path, options={"hoodie.metadata.enable": "false"})
    got = table.read(columns=["id", "ts"])
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [{"id": "a", "ts": 2}, {"id": "b", "ts": 2}]
    assert len(attempts) == 4
    # the same file missing again is no race the next listing resolves: it fails at once
    table = hudi.open_table(path)                     # listed by the metadata table: committed files
    table.file_slices()
    attempts.clear()
    last.unlink()
    with pytest.raises(hudi.errors.FileMissingError):
        table.read(columns=["id", "ts"])
    assert len(attempts) == 2
