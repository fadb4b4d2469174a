"""Records flagged ``_hoodie_is_deleted`` in a write delete their keys, as in Hudi.

Hudi's precombine keeps one record per key by ordering value, flagged or not; the write handles
then apply a flagged winner as a delete (the merge handle drops the key, the append handle writes
it to a delete block, the create handle writes nothing for it). Checked by both readers.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from writemodel import canonical_rows, hudi_rs_read

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("v", pa.int64()),
                    ("_hoodie_is_deleted", pa.bool_())])


def _rows(ids, ts, v, deleted=None) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "ts": ts if isinstance(ts, list) else [ts] * len(ids),
                     "p": ["a" if i % 3 else "b" for i in ids], "v": [v] * len(ids),
                     "_hoodie_is_deleted": deleted or [False] * len(ids)}, schema=SCHEMA)


def _read_both(path: str) -> dict[str, tuple]:
    cols = ["id", "ts", "v"]
    ours = canonical_rows(hudi.open_table(path).read().select(cols))
    theirs = canonical_rows(hudi_rs_read(path).select(cols))
    assert ours == theirs, "our reader and hudi-rs disagree"
    return {r["id"]: (r["ts"], r["v"]) for r in ours}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("version", [6, 8])
def test_flagged_records_delete_their_keys(tmp_path, table_type, version):
    path = str(tmp_path / "t")
    key = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, table_version=version)
    hudi.write(path, _rows(range(12), 10, 0), operation="insert", **key)
    # k1, k3: flagged, newer -> deleted; k2: flagged but older than the stored record -> stays
    # under event-time ordering, deleted under commit-time ordering; k4: updated; k20: a new key flagged -> never appears; k21: inserted;
    # k5 twice: the flagged, newer one wins the precombine -> deleted
    batch = _rows([1, 3, 2, 4, 20, 21, 5, 5], [20, 20, 5, 20, 20, 20, 20, 30], 1,
                  [True, True, True, False, True, False, False, True])
    hudi.write(path, batch, operation="upsert", **key)
    got = _read_both(path)
    assert {"k0001", "k0003", "k0005", "k0020"}.isdisjoint(got)
    assert got["k0004"] == (20, 1) and got["k0021"] == (20, 1)
    if hudi.open_table(path).config.merge_mode == "EVENT_TIME_ORDERING":
        assert got["k0002"] == (10, 0) and len(got) == 12 - 3 + 1
    else:   # commit-time ordering (v6's default payload): the latest write wins, ordering aside
        assert "k0002" not in got and len(got) == 12 - 4 + 1
    # a later upsert of a deleted key brings it back
    hudi.write(path, _rows([1], 40, 2), operation="upsert", **key)
    assert _read_both(path)["k0001"] == (40, 2)


@pytest.mark.parametrize("operation", ["insert", "bulk_insert"])
def test_flagged_records_of_an_insert_are_not_written(tmp_path, operation):
    path = str(tmp_path / "t")
    hudi.write(path, _rows(range(6), 10, 0, [False, True, False, False, True, False]), operation=operation,
               record_key="id", ordering_field="ts", partition_by="p")
    assert set(_read_both(path)) == {"k0000", "k0002", "k0003", "k0005"}
    t = hudi.open_table(path)
    stats = [s for ss in t.timeline.metadata(t.timeline.completed[-1]).partition_to_write_stats.values() for s in ss]
    assert sum(s.num_writes for s in stats) == 4


@pytest.mark.parametrize("version", [6, 8])
def test_mor_writes_flagged_records_as_delete_records(tmp_path, version):
    """As Hudi's append handle: a flagged record goes to the log as a delete record carrying its
    ordering value, not as a data row."""
    from hudi_format.log import BlockType, read_log_file
    path = str(tmp_path / "t")
    key = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
               table_version=version)
    hudi.write(path, _rows(range(6), 10, 0), operation="insert", **key)
    inst = hudi.write(path, _rows([1, 2], [20, 21], 1, [True, False]), operation="upsert", **key)
    t = hudi.open_table(path)
    blocks = [b for s in t.file_slices() for f in s.log_files for b in read_log_file(t.storage, f)
              if b.instant_time == inst.timestamp]
    data = [r for b in blocks if b.block_type != BlockType.DELETE for r in b.records().to_pylist()]
    deletes = [r for b in blocks if b.block_type == BlockType.DELETE for r in b.deleted_keys().to_pylist()]
    assert [r["id"] for r in data] == ["k0002"]
    assert [(r["record_key"], r["ordering_value"]) for r in deletes] == [("k0001", 20)]
    stats = [s for ss in t.timeline.metadata(inst).partition_to_write_stats.values() for s in ss]
    assert sum(s.num_deletes for s in stats) == 1 and sum(s.num_writes for s in stats) == 1
    assert "k0001" not in _read_both(path)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_flagged_record_ordered_zero_loses_to_a_newer_one(tmp_path, table_type):
    """A flagged record with ordering value 0 (a long) is an older record like any other: both
    table types keep the stored, newer one (MOR's delete record carries a LongWrapper 0, which
    Hudi and hudi-rs do not take for "no ordering value")."""
    path = str(tmp_path / "t")
    key = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type)
    hudi.write(path, _rows(range(4), 10, 0), operation="insert", **key)
    hudi.write(path, _rows([1, 2], [0, 11], 1, [True, True]), operation="upsert", **key)
    got = _read_both(path)
    assert got["k0001"] == (10, 0) and "k0002" not in got


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_soft_delete_that_loses_keeps_the_key_in_the_record_index(tmp_path, table_type):
    """Found by the torture (seed 310025): a MOR soft delete older than the stored record lost
    the merge but took the key out of the record index, so the next write of the key was
    tagged as an insert and its soft delete went nowhere: the key stayed."""
    path = str(tmp_path / "t")
    opts = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
            "hoodie.metadata.record.index.min.filegroup.count": "1"}
    key = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, options=opts)
    hudi.write(path, _rows(range(4), 10, 0), operation="insert", **key)
    hudi.write(path, _rows([1], 5, 1, [True]), operation="upsert", **key)      # older: loses
    assert _read_both(path)["k0001"] == (10, 0)
    assert hudi.open_table(path).lookup(["k0001"]).num_rows == 1
    hudi.write(path, _rows([1], 20, 2, [True]), operation="upsert", **key)     # newer: deletes
    assert "k0001" not in _read_both(path)
