"""Queries of history whose files the cleaner removed: incremental queries over cleaned commits
(a consumer that fell behind) and time travel to an instant whose file slices are gone.

Incremental queries:

The exact answer (each record at its state as of the range's end) needs the file slices as of
that end; once the cleaner removed them it cannot be computed. It used to come back empty or
partial, silently: the view as of the end was built from a listing without those files. As in
Hudi 1.x: ``hoodie.datasource.read.incr.fallback.fulltablescan.enable`` (default true from table
version 8, false for 6) reads the latest snapshot's records of the range's commits instead, and
without it the query fails naming the option.

Time travel: a view as of an old instant built from today's listing silently took the older
slices the cleaner left (older rows) or none (rows gone); now it fails naming a removed file,
while instants whose slices are all kept read exactly as before.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.errors import FileMissingError

KEY = dict(record_key="id", ordering_field="ts", partition_by="part")
CLEANING = {"hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "4",
            "hoodie.keep.max.commits": "5", "hoodie.compact.inline": "true",
            "hoodie.compact.inline.max.delta.commits": "2"}
FALLBACK = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"


def _history(path: str, table_type: str, version: int, commits: int = 24, seed: int = 3):
    """Upserts of random keys; returns each commit's completion bound and the keys it wrote."""
    rng = random.Random(seed)
    bounds, wrote = [], []
    for ts in range(1, commits + 1):
        keys = sorted(rng.sample(range(60), rng.randint(3, 15)))
        hudi.write(path, pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array([ts] * len(keys), pa.int64()),
                                   "part": pa.array([f"p{k % 3}" for k in keys])}),
                   operation="upsert", table_type=table_type,
                   options={**CLEANING, "hoodie.write.table.version": str(version)}, **KEY)
        last = hudi.open_table(path).timeline.write_instants()[-1]
        bounds.append(last.completion_time or last.timestamp)
        wrote.append(keys)
    return bounds, wrote


def _latest_of_range(wrote: list[list[int]], lo: int, hi: int) -> dict[int, int]:
    """Model: keys whose latest write is a commit numbered (lo, hi] (1-based), with its ts."""
    last: dict[int, int] = {}
    for ts, keys in enumerate(wrote, start=1):
        for k in keys:
            last[k] = ts
    return {k: ts for k, ts in last.items() if lo < ts <= hi}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_cleaned_range_reads_the_latest_records_of_its_commits(tmp_path, table_type):
    path = str(tmp_path / "t")
    bounds, wrote = _history(path, table_type, 8)
    table = hudi.open_table(path)
    got = table.read_incremental(bounds[3], bounds[7], columns=["id", "ts"])   # commits 5-8: cleaned
    assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == _latest_of_range(wrote, 4, 8)
    assert _latest_of_range(wrote, 4, 8), "the sequence must leave some record of that range"
    # a range still fully in storage is read exactly, as of its end
    recent = table.read_incremental(bounds[-2], bounds[-1], columns=["id", "ts"])
    assert sorted(recent.column("id").to_pylist()) == wrote[-1]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_cleaned_range_fails_without_the_fallback(tmp_path, table_type):
    path = str(tmp_path / "t")
    bounds, _ = _history(path, table_type, 8, commits=14)
    table = hudi.open_table(path, options={FALLBACK: "false"})
    with pytest.raises(FileMissingError, match=FALLBACK):
        table.read_incremental(bounds[1], bounds[5])
    table.read_incremental(bounds[-2], bounds[-1])          # what is still there reads as before


def test_version_6_fails_by_default_as_hudi_does(tmp_path):
    path = str(tmp_path / "t")
    bounds, wrote = _history(path, "MERGE_ON_READ", 6, commits=14)
    with pytest.raises(FileMissingError, match=FALLBACK):
        hudi.open_table(path).read_incremental(bounds[1], bounds[5])
    got = hudi.open_table(path, options={FALLBACK: "true"}).read_incremental(bounds[1], bounds[5], columns=["id", "ts"])
    assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == _latest_of_range(wrote, 2, 6)


def _as_of_model(wrote: list[list[int]], n: int) -> dict[int, int]:
    """Model: every key written by commits 1..n, with the ts of its latest write among them."""
    out: dict[int, int] = {}
    for ts, keys in enumerate(wrote[:n], start=1):
        for k in keys:
            out[k] = ts
    return out


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 6)])
def test_time_travel_to_a_cleaned_instant_fails_and_a_kept_one_reads_exactly(tmp_path, table_type, version):
    path = str(tmp_path / "t")
    bounds, wrote = _history(path, table_type, version, commits=16)
    table = hudi.open_table(path)
    with pytest.raises(FileMissingError, match="cleaner removed"):
        table.read(as_of=bounds[2], columns=["id", "ts"])
    with pytest.raises(FileMissingError, match="cleaner removed"):   # the slices an engine would plan from
        table.file_slices(as_of=bounds[2])
    assert table.file_slices(as_of=bounds[-1]) == table.file_slices()
    for n in (len(bounds), len(bounds) - 1):              # the last commits: their slices are kept
        got = table.read(as_of=bounds[n - 1], columns=["id", "ts"])
        assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == _as_of_model(wrote, n)
    latest = table.read(columns=["id", "ts"])
    assert dict(zip(latest.column("id").to_pylist(), latest.column("ts").to_pylist())) == _as_of_model(wrote, 16)


def test_time_travel_before_a_cleaned_delete_partition_fails(tmp_path):
    """A partition deleted whole and then cleaned is in no listing; its cleaned files still
    tell that a time travel to before the deletion cannot be answered (it answered without
    that partition's rows: torture seed 360028)."""
    path = str(tmp_path / "t")
    bounds, wrote = _history(path, "COPY_ON_WRITE", 8, commits=3)
    hudi.write(path, pa.table({"id": pa.array([], pa.int64()), "ts": pa.array([], pa.int64()),
                               "part": pa.array([], pa.string())}),
               operation="delete_partition", options={**CLEANING, "hoodie.datasource.write.partitions.to.delete": "p2"})
    for ts in range(4, 8):                      # the replacecommit falls behind what the cleaner keeps
        keys = [k for k in range(0, 30, 3)]     # partition p0 only
        hudi.write(path, pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array([ts] * len(keys), pa.int64()),
                                   "part": pa.array(["p0"] * len(keys))}), operation="upsert", options=CLEANING, **KEY)
    assert not (tmp_path / "t" / "p2").exists() or not any((tmp_path / "t" / "p2").glob("*.parquet"))
    table = hudi.open_table(path)
    with pytest.raises(FileMissingError, match="cleaner removed"):
        table.read(as_of=bounds[2], filters=[("part", "=", "p2")])
    with pytest.raises(FileMissingError, match="cleaner removed"):
        table.read(as_of=bounds[2])


@pytest.mark.parametrize("table_type,version,listing", [("COPY_ON_WRITE", 8, "storage"), ("MERGE_ON_READ", 6, "storage"),
                                                       ("COPY_ON_WRITE", 6, "metadata"), ("MERGE_ON_READ", 8, "metadata")])
@pytest.mark.parametrize("clean_state", ["completed", "inflight"])
def test_a_reader_whose_snapshot_was_cleaned_meanwhile_is_told_which_clean_and_what_to_do(
        tmp_path, table_type, version, listing, clean_state):
    """A table opened (its timeline pinned), then written and cleaned past that snapshot by
    another process: reads and lookups fail (the files are gone), saying that a clean after the
    snapshot removed them and how to avoid it; refreshed, the table reads the latest state. It
    used to answer no rows at all, silently: its view, listed at the read, lacked the cleaned
    slices and could not see the newer ones."""
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.write.table.version": str(version),
            "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1",
            "hoodie.metadata.record.index.enable": "true"}

    def upsert(ts: int) -> None:
        hudi.write(path, pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([ts, ts], pa.int64()),
                                   "part": ["p0", "p0"]}), operation="upsert", table_type=table_type,
                   options=opts, **KEY)

    upsert(1)
    stale = hudi.open_table(path, options={"hoodie.metadata.enable": str(listing == "metadata").lower()})
    for ts in (2, 3, 4):
        upsert(ts)
    timeline = hudi.open_table(path).timeline
    cleans = [i for i in timeline.completed if i.action == "clean"]
    assert cleans, "the test needs a clean after the snapshot"
    if clean_state == "inflight":   # a clean deletes its files, then completes: caught in between
        for c in cleans:
            (Path(path) / timeline.timeline_dir / c.file_name).unlink()
        assert not [i for i in hudi.open_table(path).timeline.completed if i.action == "clean"]
    with pytest.raises(FileMissingError) as err:
        stale.read()
    text = str(err.value)
    assert "removed by clean" in text and any(c.timestamp in text for c in cleans), text
    assert "hoodie.cleaner.commits.retained" in text and "refresh()" in text, text
    with pytest.raises(FileMissingError, match="removed by clean"):
        stale.lookup([1])
    assert sorted(stale.refresh().read(columns=["ts"]).column("ts").to_pylist()) == [4, 4]
    from hudi import HudiTableBuilder   # the table itself is whole: hudi-rs reads the same
    rs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    assert sorted(rs.column("ts").to_pylist()) == [4, 4]


def test_a_held_snapshot_whose_later_cleans_were_archived_already_still_fails(tmp_path):
    """The cleans that removed a held table's slices may have left the active timeline by the
    time it reads again (archival ran too): they are looked up in the archive. It used to
    answer an empty table: the metadata table's listing no longer held the slices, and no clean
    after the snapshot was on the active timeline."""
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.compact.inline": "true",
            "hoodie.compact.inline.max.delta.commits": "1", "hoodie.metadata.compact.max.delta.commits": "1",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}

    def upsert(ts: int, keys: list[str], part: str) -> None:
        hudi.write(path, pa.table({"id": keys, "ts": [ts] * len(keys), "part": [part] * len(keys)}),
                   operation="upsert", table_type="MERGE_ON_READ", options=opts, **KEY)

    upsert(1, ["a1", "a2"], "a")
    upsert(1, ["b1", "b2"], "b")
    upsert(2, ["a1"], "a")
    held = hudi.open_table(path)
    assert held.read().num_rows == 4
    clustering = dict(opts, **{"hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)})
    for r in range(3):
        hudi.open_table(path).cluster(options=clustering)
        upsert(10 + r, ["a1"], "a")
        upsert(10 + r, ["b1"], "b")
        hudi.open_table(path).clean(opts)
    now = hudi.open_table(path).timeline
    later = [i for i in now.archived().completed if i.action == "clean"
             and i.timestamp > held.timeline.instants[-1].timestamp]
    assert later, "the test needs a clean after the snapshot that was archived since"
    with pytest.raises(FileMissingError, match="removed by clean"):
        held.read()
    with pytest.raises(FileMissingError, match="removed by clean"):
        held.lookup(["a2"])


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 6)])
@pytest.mark.parametrize("undo", ["rollback", "restore"])
def test_a_held_snapshot_whose_commit_was_rolled_back_or_restored_away_fails(tmp_path, table_type, version, undo):
    """A rollback or restore another process ran after the table was opened undid a commit its
    snapshot holds (deleting its files; on version 6 MOR, appending a command block to its log
    instead): reading it used to answer the state before that commit, under a timeline that
    still has it."""
    path = str(tmp_path / "t")

    def upsert(ts: int):
        return hudi.write(path, pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([ts, ts], pa.int64()),
                                          "part": ["p0", "p0"]}), operation="upsert", table_type=table_type,
                          table_version=version, **KEY)

    first = upsert(1)
    if undo == "restore":
        hudi.open_table(path).savepoint(first.timestamp)
    last = upsert(2)
    held = hudi.open_table(path)
    if undo == "rollback":
        hudi.open_table(path).rollback(last.timestamp)
    else:
        hudi.open_table(path).restore(first.timestamp)
    with pytest.raises(FileMissingError, match=f"(removed|undone) by {undo}"):
        held.read()
    assert sorted(held.refresh().read(columns=["ts"]).column("ts").to_pylist()) == [1, 1]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_rollback_killed_before_it_hid_its_target_does_not_fail_readers(tmp_path, monkeypatch, table_type):
    """A rollback planned (its requested file written) but killed before it hid its target has
    undone nothing: readers take the target as committed, as Hudi's do, and read it."""
    import hudi_format.services.rollback as rollbacks
    path = str(tmp_path / "t")
    for ts in (1, 2):
        last = hudi.write(path, pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([ts, ts], pa.int64()),
                                          "part": ["p0", "p0"]}), operation="upsert", table_type=table_type, **KEY)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")
    monkeypatch.setattr(rollbacks, "_hide", killed)
    with pytest.raises(KeyboardInterrupt):
        hudi.open_table(path).rollback(last.timestamp)
    monkeypatch.undo()
    table = hudi.open_table(path)
    assert [i.action for i in table.timeline.pending] == ["rollback"]
    assert sorted(table.read(columns=["ts"]).column("ts").to_pylist()) == [2, 2]


def test_rolling_back_a_replacecommit_whose_replaced_groups_were_cleaned_is_refused(tmp_path):
    """Rolling back an ``insert_overwrite`` makes the file groups it replaced live again; once
    the cleaner has removed them, their rows would come back from nowhere: the rows vanished
    (torture seed 410191: savepoint at the replacecommit, cleans, restore, then its rollback).
    The rollback is refused, naming a removed group, and the table is left as it was."""
    from hudi_format.errors import InvalidOptionError
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1"}

    def write(op: str, keys: list[int], ts: int):
        return hudi.write(path, pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array([ts] * len(keys), pa.int64()),
                                          "part": [f"p{k % 2}" for k in keys]}),
                          operation=op, options=opts, **KEY)

    write("insert", [0, 1, 2, 3], 1)
    overwrite = write("insert_overwrite", [1, 5], 2)        # replaces p1's group
    hudi.open_table(path).savepoint(overwrite.timestamp)
    for ts in (3, 4, 5):
        write("upsert", [0], ts)
    hudi.open_table(path).clean(opts)
    hudi.open_table(path).restore(overwrite.timestamp)
    hudi.open_table(path).delete_savepoint(overwrite.timestamp)
    before = sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist())
    assert before == [0, 1, 2, 5]
    with pytest.raises(InvalidOptionError, match="cleaner has removed file groups it replaced"):
        hudi.open_table(path).rollback(overwrite.timestamp)
    assert sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist()) == before
    from hudi import HudiTableBuilder
    rs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    assert sorted(rs.column("id").to_pylist()) == before


@pytest.mark.parametrize("version", [8, 6])
def test_rolling_back_a_commit_whose_rewritten_versions_were_cleaned_is_refused(tmp_path, version):
    """Rolling back a COW commit deletes the base file versions it wrote, so the versions
    before them become the latest again. Once commits after it were rolled back, the cleaner
    may have removed those earlier versions already: the rollback then took the rows earlier
    commits wrote to those file groups with it (torture seed 590022: 12 of 22 rows gone). It is
    refused, naming a removed version, and the table is left as it was."""
    from hudi_format.errors import InvalidOptionError
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1"}

    def write(op: str, keys: list[int], ts: int):
        return hudi.write(path, pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array([ts] * len(keys), pa.int64()),
                                          "part": ["p0"] * len(keys)}),
                          operation=op, options=opts, table_version=version, **KEY)

    write("insert", [0, 1, 2], 1)
    second = write("upsert", [0], 2)         # rewrites the group: its first version is superseded
    third = write("upsert", [1], 3)
    hudi.open_table(path).clean(opts)        # keeps the third's version and the second's
    hudi.open_table(path).rollback(third.timestamp)
    before = sorted(hudi.open_table(path).read(columns=["id", "ts"]).to_pylist(), key=lambda r: r["id"])
    assert [r["ts"] for r in before] == [2, 1, 1]
    with pytest.raises(InvalidOptionError, match="cleaner has removed the file versions it rewrote"):
        hudi.open_table(path).rollback(second.timestamp)
    after = sorted(hudi.open_table(path).read(columns=["id", "ts"]).to_pylist(), key=lambda r: r["id"])
    assert after == before
    from hudi import HudiTableBuilder
    rs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    assert sorted(rs.column("id").to_pylist()) == [0, 1, 2]


def test_time_travel_past_an_archived_clustering_takes_the_groups_it_retired_as_gone(tmp_path):
    """Torture seed 340004's defect, reduced: file groups a clustering retired, then cleaned,
    are no slice a later instant needs, also once the replacecommit that retired them is
    archived (the check looked for it in the active timeline only and failed the read)."""
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3", "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false", "hoodie.metadata.enable": "false"}

    def rows(keys, ts):
        return pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array([ts] * len(keys), pa.int64()),
                         "part": ["p0"] * len(keys)})

    for i in range(3):        # three file groups, clustered into one
        hudi.write(path, rows(list(range(i * 10, i * 10 + 10)), i), operation="bulk_insert", options=opts, **KEY)
    table = hudi.open_table(path)
    assert table.cluster(options=opts) is not None
    bounds = []
    for ts in range(10, 14):
        hudi.write(path, rows([ts - 10], ts), operation="upsert", options=opts, **KEY)
        last = hudi.open_table(path).timeline.write_instants()[-1]
        bounds.append(last.completion_time or last.timestamp)
    table.refresh()
    assert table.clean(options=opts) is not None          # the retired groups' files go
    archived = table.archive(options=opts)
    assert "replacecommit" in {i.action for i in archived}
    for n, bound in ((3, bounds[-2]), (4, bounds[-1])):
        got = table.read(as_of=bound, columns=["id", "ts"])
        want = {k: 0 if k < 10 else (1 if k < 20 else 2) for k in range(30)}
        want.update({k: 10 + k for k in range(n)})
        assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == want
