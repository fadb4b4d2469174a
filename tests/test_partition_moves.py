"""A key arriving in another partition under a global index (GLOBAL_SIMPLE, GLOBAL_BLOOM,
RECORD_INDEX) with ``update.partition.path``: Hudi merges the incoming record with the stored
one first (``HoodieIndexUtils.mergeForPartitionUpdatesIfNeeded``). Only when the incoming one
wins does the key move (deleted there, inserted here); when the stored one outranks it (event-time
ordering, a higher ordering value) the key stays where it is, with its stored record."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from writemodel import hudi_rs_read

INDEXES = {
    "GLOBAL_SIMPLE": {},
    "GLOBAL_BLOOM": {},
    "RECORD_INDEX": {"hoodie.metadata.record.index.enable": "true", "hoodie.record.index.update.partition.path": "true"},
}


def _rows(path: str) -> list[tuple]:
    return sorted((r["id"], r["p"], r["_hoodie_partition_path"], r["ts"], r["v"])
                  for r in hudi.open_table(path).read().to_pylist())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", list(INDEXES))
def test_a_stale_record_in_another_partition_does_not_move_a_newer_stored_one(tmp_path, index, table_type):
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": index, **INDEXES[index]}
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, options=opts)
    hudi.write(path, pa.table({"id": ["k1", "k2", "k3", "k4", "k5"], "ts": [10] * 5, "p": ["a"] * 5,
                               "v": [1] * 5}), operation="upsert", **kw)
    # k1 stale (5 < 10): stays in a, unchanged; k2 newer: moves to b; k3 a tie: the incoming
    # record wins ties, so it moves; k4 stale and flagged deleted: the stored record outranks
    # the delete too; k0 new and k5 updated in place come first (the moves are not the batch's
    # first rows)
    hudi.write(path, pa.table({"id": ["k0", "k5", "k1", "k2", "k3", "k4"], "ts": [7, 11, 5, 20, 10, 5],
                               "p": ["b", "a", "b", "b", "b", "b"], "v": [2] * 6,
                               "_hoodie_is_deleted": [False] * 5 + [True]}), operation="upsert", **kw)
    want = [("k0", "b", "b", 7, 2), ("k1", "a", "a", 10, 1), ("k2", "b", "b", 20, 2), ("k3", "b", "b", 10, 2),
            ("k4", "a", "a", 10, 1), ("k5", "a", "a", 11, 2)]
    assert _rows(path) == want
    theirs = sorted((r["id"], r["p"], r["_hoodie_partition_path"], r["ts"], r["v"])
                    for r in hudi_rs_read(path).to_pylist())
    assert theirs == want
    # a later newer record of k1 in b moves it after all
    hudi.write(path, pa.table({"id": ["k1"], "ts": [30], "p": ["b"], "v": [3],
                               "_hoodie_is_deleted": [False]}), operation="upsert", **kw)
    want[1] = ("k1", "b", "b", 30, 3)
    assert _rows(path) == want
    if table_type == "MERGE_ON_READ":   # compaction keeps what the reads showed
        hudi.open_table(path).compact(options=opts)
        assert _rows(path) == want


def test_commit_time_ordering_moves_whatever_the_ordering_value(tmp_path):
    """Under commit-time ordering the incoming record always wins: the key moves."""
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", options=opts)
    hudi.write(path, pa.table({"id": ["k1"], "ts": [10], "p": ["a"], "v": [1]}), operation="upsert", **kw)
    hudi.write(path, pa.table({"id": ["k1"], "ts": [5], "p": ["b"], "v": [2]}), operation="upsert", **kw)
    assert _rows(path) == [("k1", "b", "b", 5, 2)]


@pytest.mark.parametrize("service", ["insert_overwrite", "clustering"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_replacing_the_groups_a_key_moved_out_of_keeps_its_record_index_entry(tmp_path, table_type, service):
    """A key moved from partition a to b is still in an older version of a's file group until
    the cleaner removes it. Replacing a's groups (insert_overwrite of a, or clustering them)
    dropped the record-index entry of every key any file of those groups holds, so the moved
    key fell out of the index: its next upsert was taken for an insert (a second copy of the
    record). Only the keys the index still places in the replaced groups are dropped."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
            "hoodie.record.index.update.partition.path": "true", "hoodie.clean.automatic": "false",
            "hoodie.parquet.small.file.limit": "0"}     # each write: new file groups
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, options=opts)
    hudi.write(path, pa.table({"id": ["k1", "k2", "k3"], "ts": [1, 1, 1], "p": ["a", "a", "b"], "v": [1, 1, 1]}),
               operation="upsert", **kw)
    hudi.write(path, pa.table({"id": ["k4"], "ts": [1], "p": ["a"], "v": [1]}), operation="upsert", **kw)
    hudi.write(path, pa.table({"id": ["k1"], "ts": [2], "p": ["b"], "v": [2]}), operation="upsert", **kw)
    if service == "insert_overwrite":
        hudi.write(path, pa.table({"id": ["k9"], "ts": [3], "p": ["a"], "v": [3]}), operation="insert_overwrite", **kw)
        want = [("k1", "b", "b", 2, 2), ("k3", "b", "b", 1, 1), ("k9", "a", "a", 3, 3)]
    else:   # partition a's two groups (k1 moved out of the first) are clustered into one
        done = hudi.open_table(path).cluster(options={
            **opts, "hoodie.clustering.plan.strategy.partition.selected": "a"})
        assert done is not None
        replaced = hudi.open_table(path).timeline.metadata(done).partition_to_replace_file_ids
        assert len(replaced["a"]) == 2 and not replaced.get("b")
        want = [("k1", "b", "b", 2, 2), ("k2", "a", "a", 1, 1), ("k3", "b", "b", 1, 1), ("k4", "a", "a", 1, 1)]
    assert _rows(path) == want
    assert [p for p in record_index_problems(path) if p.severity == ERROR] == []
    hudi.write(path, pa.table({"id": ["k1"], "ts": [4], "p": ["b"], "v": [4]}), operation="upsert", **kw)
    want[0] = ("k1", "b", "b", 4, 4)
    assert _rows(path) == want
    assert sorted((r["id"], r["v"]) for r in hudi_rs_read(path).to_pylist()) == [(w[0], w[4]) for w in want]


@pytest.mark.parametrize("index, option", [("GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path"),
                                           ("GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path"),
                                           ("RECORD_INDEX", "hoodie.record.index.update.partition.path")])
@pytest.mark.parametrize("moves", ["true", "false", None])
def test_each_global_index_moves_keys_by_its_own_option(tmp_path, index, option, moves):
    """Each global index reads its own ``update.partition.path`` option, with Hudi's defaults:
    the simple and bloom indexes move a key to the partition its new record names, the record
    index updates the record where it is (the new record's partition field is kept as given)."""
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": index, "hoodie.metadata.record.index.enable": "true"}
    if moves is not None:
        opts[option] = moves
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", options=opts)
    hudi.write(path, pa.table({"id": ["k1"], "ts": [1], "p": ["a"], "v": [1]}), operation="upsert", **kw)
    hudi.write(path, pa.table({"id": ["k1"], "ts": [2], "p": ["b"], "v": [2]}), operation="upsert", **kw)
    moved = moves == "true" or (moves is None and index != "RECORD_INDEX")
    assert _rows(path) == [("k1", "b", "b" if moved else "a", 2, 2)]
    assert [(r["id"], r["v"]) for r in hudi_rs_read(path).to_pylist()] == [("k1", 2)]


def test_an_engine_planning_by_keys_only_is_told_to_give_the_rows_for_moves(tmp_path):
    """Planned from keys and partitions only (the engine API), an upsert that would move keys
    under event-time ordering cannot tell a stale record: it is refused, nothing written."""
    from hudi_format import engine
    from hudi_format.errors import InvalidOptionError
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": "GLOBAL_SIMPLE"}
    hudi.write(path, pa.table({"id": ["k1"], "ts": [10], "p": ["a"], "v": [1]}), operation="upsert",
               record_key="id", ordering_field="ts", partition_by="p", options=opts)
    job = engine.begin_write(path, "upsert", schema=hudi.open_table(path).schema(), options=opts)
    with pytest.raises(InvalidOptionError, match="ordering value"):
        engine.plan_write(job, keys=["k1"], partitions=["b"])
    engine.abort(job)
    assert _rows(path) == [("k1", "a", "a", 10, 1)]
    assert not [i for i in hudi.open_table(path).timeline.instants if i.state.name != "COMPLETED"]
