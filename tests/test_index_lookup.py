"""The engine API's index lookup tasks (``engine.plan_index_lookup`` / ``engine.lookup``) find
what the single-process tagging finds, and ``plan_write(counts=...)`` sizes a write as the
row-based plan does; run in one process (the Spark adapter runs the same calls on executors)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hudi_format as hudi
from hudi_format import engine
from hudi_format.base_file import read_footer
from hudi_format.writer.index import known_locations


def rows(ids, ts, partitions=("a", "b", "c")):
    ids = list(ids)
    return pa.table({"id": [f"k{i:05d}" for i in ids], "ts": pa.array([ts] * len(ids), pa.int64()),
                     "p": [partitions[i % len(partitions)] for i in ids], "v": [float(i) for i in ids]})


@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM", "GLOBAL_SIMPLE", "GLOBAL_BLOOM", "RECORD_INDEX"])
def test_lookup_tasks_find_what_the_core_finds(tmp_path, index):
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": index, "hoodie.metadata.record.index.enable": str(index == "RECORD_INDEX").lower()}
    for i in range(3):
        hudi.write(path, rows(range(i * 100, i * 100 + 100), ts=1), record_key="id", ordering_field="ts",
                   partition_by="p", options={**opts, "hoodie.parquet.small.file.limit": "0"})
    incoming = rows(list(range(50, 150)) + list(range(1000, 1010)), ts=2, partitions=("a", "b", "z"))
    job = engine.begin_write(path, "upsert", schema=incoming.schema, options=opts)
    keys, parts = job.spec.keys(job.spec.conform(incoming))
    lookup = pickle.loads(pickle.dumps(engine.plan_index_lookup(job, pc.unique(parts).to_pylist())))
    assert lookup.tasks and lookup.probing == (index != "SIMPLE" and index != "GLOBAL_SIMPLE")
    if any(t.kind == "bloom" for t in lookup.tasks):
        lookup = lookup.with_key_ranges([engine.lookup_key_range(t) for t in lookup.tasks])
    if lookup.probing:
        row, task = lookup.assign(keys, parts)
        found = [engine.lookup(t, pc.take(keys, pc.filter(row, pc.equal(task, i))))
                 for i, t in enumerate(lookup.tasks)]
    else:
        found = [engine.lookup(t) for t in lookup.tasks]
        found = [f.filter(pc.is_in(f.column("key"), value_set=keys)) for f in found]
    got = pa.concat_tables(found).sort_by("key").to_pylist()
    slices = job.planner.latest_slices(job.state, job.view, None if lookup.global_index else set(parts.to_pylist()))
    want = known_locations(job.storage, job.config, job.options, job.state, slices, keys, job.planner.spec,
                           job.spec.full_schema, read_footer)
    want = want.filter(pc.is_in(want.column("key"), value_set=keys)).sort_by("key").to_pylist()
    # global: all 100 known keys wherever they are; else those still in their partition
    assert got == want and len(got) == (100 if lookup.global_index else 66)


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "SIMPLE"), ("MERGE_ON_READ", "SIMPLE"),
                                              ("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "RECORD_INDEX")])
@pytest.mark.parametrize("chunk", [None, 1])
def test_lookup_many_finds_what_each_lookup_finds(tmp_path, monkeypatch, table_type, index, chunk):
    """``engine.lookup_many`` (the tasks of a partition, the keys hashed once) gives, task by
    task, what ``engine.lookup`` gives: 3 file groups a partition, on MOR with deletes and
    updates in log files; tasks it cannot batch (bloom, record index) run one by one; chunks
    of one slice each give the same."""
    from hudi_format.writer import index_lookup
    if chunk is not None:
        monkeypatch.setattr(index_lookup, "_LOOKUP_CHUNK_BYTES", chunk)
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": index, "hoodie.metadata.record.index.enable": str(index == "RECORD_INDEX").lower(),
            "hoodie.parquet.small.file.limit": "0"}
    for i in range(3):
        hudi.write(path, rows(range(i * 100, i * 100 + 100), ts=1), record_key="id", ordering_field="ts",
                   partition_by="p", table_type=table_type, options=opts)
    hudi.write(path, rows(range(0, 300, 7), ts=2), options=opts)
    hudi.write(path, rows(range(0, 300, 11), ts=3), operation="delete", options=opts)
    incoming = rows(list(range(0, 300, 2)) + list(range(1000, 1010)), ts=4)
    job = engine.begin_write(path, "upsert", schema=incoming.schema, options=opts)
    keys, parts = job.spec.keys(job.spec.conform(incoming))
    lookup = pickle.loads(pickle.dumps(engine.plan_index_lookup(job, ["a", "b", "c"])))
    if any(t.kind == "bloom" for t in lookup.tasks):
        lookup = lookup.with_key_ranges([engine.lookup_key_range(t) for t in lookup.tasks])
    tasks = [t for t in lookup.tasks if t.partition in (None, "b")]
    assert index == "RECORD_INDEX" or len(tasks) == 3
    sent = keys.filter(pc.equal(parts, "b"))
    each = [engine.lookup(t, sent) for t in tasks]
    many = engine.lookup_many(tasks, sent)
    assert [t.sort_by("key").to_pylist() for t in many] == [t.sort_by("key").to_pylist() for t in each]
    live_b = {f"k{i:05d}" for i in range(300) if i % 3 == 1 and i % 11}
    found = [k for t in many for k in t.column("key").to_pylist()]
    want = {k for k in sent.to_pylist() if k in live_b}
    # each key once, in the file group holding it (the record index's tasks answer for any key)
    assert set(found) == want and (index == "RECORD_INDEX" or len(found) == len(want) > 0)
    assert engine.lookup_many([], sent) == []


def test_plan_from_counts_sizes_like_the_row_plan(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, rows(range(300), ts=1), record_key="id", ordering_field="ts", partition_by="p")
    incoming = rows(range(250, 400), ts=2)
    by_rows = engine.begin_write(path, "upsert", schema=incoming.schema)
    a = engine.plan_write(by_rows, incoming)
    engine.abort(by_rows)
    by_counts = engine.begin_write(path, "upsert", schema=incoming.schema)
    fids = {s.partition_path: s.file_id for s in by_counts.planner.latest_slices(by_counts.state, by_counts.view)}
    known = pc.less(pc.cast(pc.utf8_slice_codeunits(incoming.column("id"), 1), pa.int64()), 300)
    per = incoming.group_by(["p"]).aggregate([]).column("p").to_pylist()
    updates = {(p, fids[p]): incoming.filter(pc.and_(known, pc.equal(incoming.column("p"), p))).num_rows for p in per}
    inserts = {p: incoming.filter(pc.equal(incoming.column("p"), p)).num_rows - updates[(p, fids[p])] for p in per}
    b = engine.plan_write(by_counts, counts=engine.WriteCounts(updates=updates, inserts=inserts))
    engine.abort(by_counts)
    shape = sorted((x.kind, x.partition, x.file_id if x.kind != "create" else None, x.num_records, x.num_updates)
                   for x in a)
    assert shape == sorted((x.kind, x.partition, x.file_id if x.kind != "create" else None, x.num_records,
                            x.num_updates) for x in b)
    assert hudi.open_table(path).read().num_rows == 300     # both aborted: nothing written
