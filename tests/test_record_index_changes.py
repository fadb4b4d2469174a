"""The record index changes the write handles report equal what the written files hold.

A commit updates the metadata table's ``record_index`` from the key changes its write handles
report (``metadata.key_changes``) instead of reading the written files back. These tests run
randomised write sequences and, at every commit, compute the delta both ways: from the handles'
changes and by reading the files, as the commit did before (and still does for files no handle
described). The two must be equal, and the index must match the table after every step.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.cli.validate import ERROR, record_index_problems
from hudi_format.metadata import keys as K
from hudi_format.metadata import writer as mdw
from hudi_format.metadata.data_files import DataFiles
from hudi_format.writer import merge_handle
from test_metadata_writer import ALL_INDEXES, _write
from writemodel import Model, make_rows


def _resolved(changes: pa.Table) -> tuple[dict, set]:
    """A commit's record index change rows as the index gets them: key -> (partition, file id)
    placed, keys removed."""
    from hudi_format.metadata.record_index_update import resolve
    placed, gone = resolve(changes)
    return dict(zip(placed.column("key").to_pylist(), zip(placed.column("partition").to_pylist(),
                                                         placed.column("file_id").to_pylist()))), set(gone.to_pylist())


def _both_ways(monkeypatch) -> list[int]:
    """Make every commit with handle-reported changes also read the files back and compare;
    returns a list that counts the commits checked so."""
    real = mdw.MetadataWriter.commit_deltas
    checked = []

    def commit_deltas(self, instant, metadata, record_keys=None):
        out = real(self, instant, metadata, record_keys)
        if record_keys and K.RECORD_INDEX in out:
            given_placed, given_gone = _resolved(out[K.RECORD_INDEX].changes)
            read_placed, read_gone = _resolved(real(self, instant, metadata, None)[K.RECORD_INDEX].changes)
            assert given_placed == read_placed, sorted(set(given_placed.items()) ^ set(read_placed.items()))[:10]
            assert given_gone == read_gone, sorted(given_gone ^ read_gone)[:10]
            checked.append(len(given_placed) + len(given_gone))
        return out
    monkeypatch.setattr(mdw.MetadataWriter, "commit_deltas", commit_deltas)
    return checked


def _flagged(rows: pa.Table, rng: random.Random) -> pa.Table:
    return rows.append_column("_hoodie_is_deleted", pa.array([rng.random() < 0.4 for _ in range(rows.num_rows)]))


@pytest.mark.parametrize("ttype,version,mode,seed", [
    ("COPY_ON_WRITE", 8, "EVENT_TIME_ORDERING", 1),
    ("COPY_ON_WRITE", 6, None, 2),
    ("MERGE_ON_READ", 8, "COMMIT_TIME_ORDERING", 3),
    ("MERGE_ON_READ", 8, "EVENT_TIME_ORDERING", 4),
    ("MERGE_ON_READ", 6, None, 5),
])
def test_reported_changes_equal_the_written_files(tmp_path, monkeypatch, ttype, version, mode, seed):
    checked = _both_ways(monkeypatch)
    # base files of more than 40 rows are merged batch by batch (the streamed merge)
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 40)
    monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 16)
    rng = random.Random(seed)
    path = tmp_path / "t"
    opts = {**ALL_INDEXES, "hoodie.index.type": "RECORD_INDEX",
            "hoodie.parquet.small.file.limit": str(rng.choice([0, 1 << 20])),
            **({"hoodie.record.merge.mode": mode} if mode else {})}
    model = Model(event_time=mode == "EVENT_TIME_ORDERING")
    first = make_rows(range(120), ts=0)   # new keys: as the model goes, any of these inserts them
    if seed % 2:   # streamed in: each new file keeps the keys it wrote
        first = pa.RecordBatchReader.from_batches(first.schema, first.to_batches(max_chunksize=32))
    _write(path, first, op=("upsert", "bulk_insert")[seed % 2], ttype=ttype, version=version, options=opts)
    first = make_rows(range(120), ts=0)
    model.apply("upsert", first, 0)
    for step in range(1, 9):
        lo = rng.randrange(0, 150)
        ids = sorted(rng.sample(range(lo, lo + 60), rng.randrange(5, 40)))
        op = rng.choice(["upsert", "upsert", "upsert_flagged", "delete", "insert_moved"])
        rows = make_rows(ids, ts=step * rng.choice([1, -1]) + 10, seed=step)
        if op == "upsert_flagged":
            rows, op = _flagged(rows, rng), "upsert"
        elif op == "insert_moved":   # keys move partitions (the record index is global)
            rows, op = make_rows(ids, ts=step + 10, seed=step, partitions=("c", "a")), "upsert"
        _write(path, rows, op=op, ttype=ttype, version=version, options=opts)
        model.apply(op, rows, step)
        got = hudi.open_table(str(path)).read(columns=["id"]).column("id").to_pylist()
        assert sorted(got) == sorted(model.rows), f"step {step}"
        problems = [p for p in record_index_problems(str(path)) if p.severity == ERROR]
        assert problems == [], f"step {step} ({op}): {problems[:3]}"
    assert len(checked) == 9 and sum(checked) > 0   # every write, the first included


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_write_commits_its_record_index_without_reading_its_files_back(tmp_path, monkeypatch, ttype):
    """The files a write's handles wrote are not read again for their keys at the commit."""
    path = tmp_path / "t"
    opts = {**ALL_INDEXES, "hoodie.index.type": "RECORD_INDEX"}
    _write(path, make_rows(range(60), ts=0), ttype=ttype, options=opts)
    reads = []
    monkeypatch.setattr(DataFiles, "base_keys", lambda self, p: reads.append(p) or pa.array([], pa.string()))
    monkeypatch.setattr(DataFiles, "log_keys", lambda self, p: reads.append(p) or (pa.array([], pa.string()),) * 2)
    _write(path, make_rows(range(40, 90), ts=1, seed=1), ttype=ttype, options=opts)
    _write(path, make_rows(range(0, 10), ts=2), op="delete", ttype=ttype, options=opts)
    fresh = make_rows(range(200, 260), ts=3)   # streamed: each new file keeps the keys it wrote
    _write(path, pa.RecordBatchReader.from_batches(fresh.schema, fresh.to_batches(max_chunksize=16)),
           op="bulk_insert", ttype=ttype, options=opts)
    _write(path, make_rows(range(260, 300), ts=3), op="bulk_insert", ttype=ttype, options=opts)
    assert reads == []
    monkeypatch.undo()
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []


class _WorkerHeldUpdate:
    """An engine's record index update (``engine.RecordIndexUpdate``) in one process: the
    results' changes as rows of ``engine.RECORD_INDEX_CHANGES``, hashed to the target's file
    groups and written in two 'tasks' (a key's rows in one), as Spark's job does."""

    def __init__(self, results):
        from hudi_format import engine
        pieces = [r.keys.rows(r.partition, r.stat.file_id) for r in results]
        self.changes = pa.concat_tables(pieces) if pieces else engine.RECORD_INDEX_CHANGES.empty_table()
        self.calls = 0

    def write(self, target, deleted):
        from hudi_format import engine
        from hudi_format.storage import Storage
        self.calls += 1
        gone = pa.table({"key": deleted, "partition": pa.nulls(len(deleted), pa.string()),
                         "file_id": pa.nulls(len(deleted), pa.string()),
                         "deleted": pa.repeat(True, len(deleted))}, schema=engine.RECORD_INDEX_CHANGES)
        changes = pa.concat_tables([self.changes, gone])
        groups = target.group_indexes(changes.column("key").combine_chunks())
        stats = []
        for task in (0, 1):
            mine = changes.filter(pa.array(groups % 2 == task))
            stats += engine.write_record_index_changes(Storage(target.table_uri), target, mine, f"{task}-7-{task}")
        return stats


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_engine_writing_the_record_index_itself_builds_the_index_the_core_builds(tmp_path, ttype):
    """Through the engine API, the commit hands the record index update to the engine, whose
    'workers' write it with write_record_index_changes: the index is the one the core's own
    commit builds for the same writes (entry by entry), and matches the table. Buckets told
    their updates in place (``updates=job.updates_of(b)``) report no entry for them."""
    from hudi_format import engine
    from hudi_format.metadata.reader import MetadataTable
    from hudi_format.storage import Storage
    from hudi_format.config import TableConfig
    opts = {**ALL_INDEXES, "hoodie.index.type": "RECORD_INDEX", "hoodie.parquet.small.file.limit": "0",
            "hoodie.record.index.update.partition.path": "true"}
    # the last write moves keys to other partitions: one commit removes each from its old file
    # group and places it in a new one, which must win
    writes = [("upsert", make_rows(range(80), ts=0)), ("upsert", make_rows(range(60, 120), ts=1, seed=1)),
              ("delete", make_rows(range(0, 30, 3), ts=2)), ("upsert", make_rows(range(10, 20), ts=3, seed=2)),
              ("upsert", make_rows(range(40, 50), ts=4, seed=3, partitions=("c", "a")))]
    held = tmp_path / "engine"
    core = tmp_path / "core"
    for i, (op, rows) in enumerate(writes):
        _write(core, rows, op=op, ttype=ttype, options=opts)
        kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=ttype) if i == 0 else {}
        job = engine.begin_write(str(held), op, schema=rows.schema, options=opts, **kw)
        results = []
        for b in engine.plan_write(job, rows):
            w, d = job.rows_of(b)
            results.append(engine.write_bucket(b, rows.take(w), deletes=rows.take(d), updates=job.updates_of(b)))
        update = _WorkerHeldUpdate(results)
        if i == 1:   # 60..79 updated in place (no entry, as Hudi), 80..119 inserted
            assert sorted(k for r in results for k in r.keys.upserted.to_pylist()) == \
                [f"k{k:05d}" for k in range(80, 120)]
        engine.commit(job, results, record_index=update)
        assert update.calls == 1
        assert [p for p in record_index_problems(str(held)) if p.severity == ERROR] == []

    def index(path):
        st = Storage(str(path))
        return {k: (loc.partition, loc.file_id is not None)
                for k, loc in MetadataTable(st, TableConfig.load(st)).all_record_locations().items()}
    assert index(held) == index(core) and len(index(core)) == 120 - 10 + 3   # 12, 15, 18 came back
    assert {index(held)[f"k{k:05d}"][0] for k in range(40, 50)} == {"a", "c"}


def _entries(path) -> dict[str, tuple[str, str, int]]:
    from hudi_format.config import TableConfig
    from hudi_format.metadata.reader import MetadataTable
    from hudi_format.storage import Storage
    st = Storage(str(path))
    mt = MetadataTable(st, TableConfig.load(st))
    found = mt.record_index(pa.array([f"k{i:05d}" for i in range(200)], pa.string()))
    return {k: (p, f, ms) for k, p, f, ms in zip(*(found.column(c).to_pylist()
                                                  for c in ("key", "partition", "file_id", "instant_ms")))}


def _commit_entries(path) -> int:
    """Record index entries the data table's latest commit wrote (its metadata deltacommit's
    HFile data blocks in ``record_index``)."""
    from hudi_format.log.block import BlockType
    from hudi_format.log.reader import read_log_file
    from hudi_format.storage import Storage
    table = hudi.open_table(str(path))
    latest = table.timeline.completed[-1].timestamp
    st = Storage(str(path / ".hoodie" / "metadata"))
    n = 0
    for f in st.list("record_index"):
        if latest in f.name and f.name.startswith("."):
            for b in read_log_file(st, f.path):
                if b.block_type == BlockType.HFILE_DATA:
                    from hudi_format.hfile import HFileReader
                    n += HFileReader.from_bytes(b.content(), "t").num_entries
    return n


@pytest.mark.parametrize("version", [8, 6])
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_updates_in_place_leave_their_record_index_entries_as_they_are(tmp_path, ttype, version):
    """As Hudi (``getRecordIndexUpserts``): a record updated in the file group the index
    found it in keeps its entry (and the instant of the write that placed it); only inserted,
    moved and deleted keys change the index. A MOR upsert's log files hold its updates, yet
    its metadata commit writes entries for its inserts alone -- inserts that small-file
    handling appends to the same file groups as the updates included."""
    path = tmp_path / "t"
    opts = {**ALL_INDEXES, "hoodie.index.type": "RECORD_INDEX", "hoodie.parquet.small.file.limit": str(100 << 20)}
    _write(path, make_rows(range(100), ts=0), ttype=ttype, version=version, options=opts)
    before = _entries(path)
    _write(path, make_rows(list(range(0, 40, 2)) + list(range(100, 110)), ts=1, seed=1), ttype=ttype,
           version=version, options=opts)
    after = _entries(path)
    assert {k: after[k] for k in before} == before            # 20 updated in place: untouched
    assert len(after) == 110 and {after[f"k{i:05d}"][2] for i in range(100, 110)} != {before["k00000"][2]}
    if version == 8:
        assert _commit_entries(path) == 10
    if ttype == "MERGE_ON_READ":   # the inserts went to the updated file groups' log files
        files = {s.file_id for s in hudi.open_table(str(path)).file_slices()}
        assert {after[f"k{i:05d}"][1] for i in range(100, 110)} <= files and len(files) <= 3
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []
