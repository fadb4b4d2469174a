"""The record index at scale is built and compacted column-wise.

Bootstrapping it on an existing table (``DataSnapshot.record_index_cells``) places every key
where a lookup finds its row. Compacting it moves its cells as bytes (``compaction._record_index_cells``):
the base HFiles it writes hold exactly the cells the record-by-record merge (Avro decoded,
merged, encoded again) writes, over histories of inserts, updates, deletes (small delete blocks
and column-wise ones) and keys deleted and inserted again (both select log blocks with the
readers' rule); and lookups through the compacted index find every live row. Reading the whole
index (``validate``) column-wise gives what decoding every record gives."""

from __future__ import annotations

import random
import shutil

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.hfile import HFileReader
from hudi_format.metadata import compaction
from hudi_format.metadata import keys as K
from hudi_format.metadata import payloads as P
from hudi_format.metadata.reader import MetadataTable
from hudi_format.metadata.records import record_location_of
from hudi_format.metadata.writer import MetadataWriter
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline

OPTS = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
        "hoodie.metadata.record.index.min.filegroup.count": "3",
        "hoodie.metadata.compact.max.delta.commits": "1000", "hoodie.parquet.small.file.limit": "0"}


def _write(path, rows: pa.Table, op: str, ttype: str, version: int, options=None) -> None:
    hudi.write(str(path), rows, operation=op, record_key="id", ordering_field="ts", partition_by="p",
               table_type=ttype, table_version=version, table_name="t", options=options or OPTS)


def _rows(ids, ts: int) -> pa.Table:
    ids = sorted(ids)
    return pa.table({"id": pa.array([f"key-{i:05d}" for i in ids], pa.string()),
                     "p": pa.array([f"p{i % 3}" for i in ids], pa.string()),
                     "ts": pa.array([ts] * len(ids), pa.int64()), "v": pa.array([i * ts for i in ids], pa.int64())})


def _history(path, seed: int, ttype: str, version: int, options=None) -> None:
    rng = random.Random(seed)
    live: set[int] = set()
    for step in range(1, 9):
        kind = rng.choice(["insert", "upsert", "delete", "delete", "reinsert"]) if live else "insert"
        if kind == "insert":
            new = set(range(len(live) * 2 + step * 1000, len(live) * 2 + step * 1000 + rng.choice([50, 400])))
            _write(path, _rows(new, step), "upsert", ttype, version, options)
            live |= new
        elif kind == "upsert":
            _write(path, _rows(rng.sample(sorted(live), min(len(live), 150)), step), "upsert", ttype, version, options)
        elif kind == "delete":   # a few keys (fastavro's delete block) or many (column-wise)
            gone = set(rng.sample(sorted(live), min(len(live) - 1, rng.choice([5, 300]))))
            _write(path, _rows(gone, step), "delete", ttype, version, options)
            live -= gone
        else:                    # keys deleted earlier, inserted again
            back = set(range(1000, 1000 + rng.choice([20, 200]))) - live
            if not back:
                continue
            _write(path, _rows(back, step), "upsert", ttype, version, options)
            live |= back


def _compact(path) -> dict[str, tuple[list, list]]:
    st = Storage(str(path))
    cfg = TableConfig.load(st)
    w = MetadataWriter(st, cfg, OPTS)
    assert w.compact() is not None
    md = Timeline.load(w.md, w.md_config)
    done = md.completed[-1]
    assert done.action == "commit"
    out = {}
    for s in w.latest_slices(K.RECORD_INDEX):
        assert s.base_instant == done.timestamp and not s.log_files
        k, v = HFileReader(w.md, s.base_file).arrays()
        out[s.file_id] = (k.to_pylist(), v.to_pylist())
    return out


def _ids(path) -> list:
    return sorted(hudi.open_table(str(path)).read(columns=["id"]).column("id").to_pylist())


@pytest.mark.parametrize("ttype,version,seed", [("MERGE_ON_READ", 8, 1), ("COPY_ON_WRITE", 8, 2),
                                                ("MERGE_ON_READ", 6, 3), ("COPY_ON_WRITE", 6, 4)])
def test_record_index_compaction_keeps_the_cells_the_record_merge_keeps(tmp_path, monkeypatch, ttype, version,
                                                                         seed):
    a, b = tmp_path / "a", tmp_path / "b"
    _history(a, seed, ttype, version)
    # the whole index read column-wise (validate, all_record_locations) = the records decoded one by one
    st = Storage(str(a))
    mdt = MetadataTable(st, TableConfig.load(st))
    entries = {r["key"]: (r["partition"], r["file_id"], r["instant_ms"]) for r in mdt.record_index_entries().to_pylist()}
    decoded = {k: tuple(loc) for k, rec in mdt.read(K.RECORD_INDEX).items()
               if (loc := record_location_of(rec)) is not None}
    assert entries == decoded and len(entries) == len(_ids(a))
    shutil.copytree(a, b)
    moved = _compact(a)
    monkeypatch.setattr(compaction, "_record_index_cells", lambda s, reader: None)
    merged = _compact(b)
    assert moved == merged
    assert sum(len(k) for k, _ in moved.values()) == len(_ids(a))
    assert any(len(k) for k, _ in moved.values())
    # lookups through the compacted index find every live key where it is
    want = hudi.open_table(str(a), options={"hoodie.metadata.enable": "false"}).read(columns=["id", "v"])
    got = hudi.open_table(str(a)).lookup(want.column("id"), columns=["id", "v"])
    assert sorted(got.to_pylist(), key=str) == sorted(want.to_pylist(), key=str)



@pytest.mark.parametrize("ttype,version,seed", [("MERGE_ON_READ", 8, 5), ("COPY_ON_WRITE", 6, 6)])
def test_a_record_index_bootstrapped_on_an_existing_table_finds_every_row(tmp_path, ttype, version, seed):
    path = tmp_path / "t"
    _history(path, seed, ttype, version, {"hoodie.metadata.record.index.enable": "false",
                                          "hoodie.parquet.small.file.limit": "0"})
    assert K.RECORD_INDEX not in TableConfig.load(Storage(str(path))).metadata_partitions
    _write(path, _rows(range(7), 100), "upsert", ttype, version)   # enabling it bootstraps it
    st = Storage(str(path))
    assert K.RECORD_INDEX in TableConfig.load(st).metadata_partitions
    want = hudi.open_table(str(path), options={"hoodie.metadata.enable": "false"}).read(columns=["id", "v"])
    got = hudi.open_table(str(path)).lookup(want.column("id"), columns=["id", "v"])
    assert sorted(got.to_pylist(), key=str) == sorted(want.to_pylist(), key=str)
    assert len(MetadataWriter(st, TableConfig.load(st), OPTS).latest_slices(K.RECORD_INDEX)) == 3


def test_file_groups_no_key_hashed_to_compact_too(tmp_path, monkeypatch):
    """Three file groups, two keys: a group holding only its first empty delete block."""
    a, b = tmp_path / "a", tmp_path / "b"
    for i in (1, 2):
        _write(a, _rows([i], i), "upsert", "MERGE_ON_READ", 8)
    shutil.copytree(a, b)
    moved = _compact(a)
    monkeypatch.setattr(compaction, "_record_index_cells", lambda s, reader: None)
    assert moved == _compact(b)
    assert sorted(len(k) for k, _ in moved.values()) in ([0, 0, 2], [0, 1, 1])


def _fixtures_with_record_index() -> list[str]:
    from test_metadata_reader import META
    return META


@pytest.mark.parametrize("name", _fixtures_with_record_index())
def test_record_index_cells_hudi_wrote_move_as_they_decode(fixture_tables, name):
    """Apache Hudi's record index (its schema, its blocks): the cells compaction would move are
    exactly its entries, each value decoding to the location Hudi's own reader path gives."""
    st = Storage(str(fixture_tables(name)))
    mdt = MetadataTable(st, TableConfig.load(st))
    want = mdt.all_record_locations()
    got = {}
    for s in mdt.file_slices(K.RECORD_INDEX):
        cells = compaction._record_index_cells(s, mdt)
        assert cells is not None, "Hudi 1.x writes our metadata schema: the cells move as bytes"
        keys, values, _ = cells
        assert keys.to_pylist() == sorted(keys.to_pylist())
        for k, v in zip(keys.to_pylist(), values.to_pylist()):
            got[k.decode()] = tuple(record_location_of(P.decode_value(v, k.decode())))
    assert got == {k: tuple(v) for k, v in want.items()} and got
