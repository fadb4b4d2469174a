"""``hoodie.bulkinsert.sort.mode`` (Hudi's BulkInsertSortMode) in one process and through Spark.

Spark: every mode writes each task's rows into its own new file groups (no planning, no count
job), as Hudi's Spark bulk_insert does; the mode decides which rows a task holds and in what
order. Checked per mode: the rows (Spark, the core and hudi-rs agree with the input), how many
file groups each partition path gets, the key order inside files, the roll-over at the max file
size, and that a failed task or a bad option leaves the table as it was. In one process the
sorting modes write each file sorted by partition path and record key."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.errors import HudiError, InvalidOptionError
from writemodel import assert_both_read, canonical_rows

KEY = dict(record_key="id", ordering_field="ts", partition_by="p")
COLS = ["id", "ts", "p", "v"]


def _rows(ids, ts=1, parts=("a", "b", "c")):
    ids = list(ids)
    return pa.table({"id": [f"k{(i * 7919) % 100_003:06d}-{i}" for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()),
                     "p": [parts[i % len(parts)] for i in ids], "v": [float(i) for i in ids]})


def _files(path):
    """{partition: [keys of each base file, in file order]}"""
    out: dict[str, list[list[str]]] = {}
    for f in sorted(glob.glob(f"{path}/*/*.parquet")):
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        out.setdefault(os.path.basename(os.path.dirname(f)), []).append(keys)
    return out


def _same(path, data):
    assert_both_read(str(path), canonical_rows(data.select(COLS)), COLS)


# -- one process ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["GLOBAL_SORT", "PARTITION_SORT"])
@pytest.mark.parametrize("streamed", [False, True])
def test_core_sorting_modes_write_files_in_key_order(tmp_path, mode, streamed):
    path = str(tmp_path / "t")
    data = _rows(range(3000))
    given = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=500)) if streamed else data
    hudi.write(path, given, operation="bulk_insert",
               options={"hoodie.bulkinsert.sort.mode": mode, "hoodie.parquet.max.file.size": "30000"}, **KEY)
    files = _files(path)
    assert sum(len(v) for v in files.values()) > 3       # several files per partition
    for part, per_file in files.items():
        flat = [k for keys in sorted(per_file) for k in keys]
        assert flat == sorted(flat), part                # sorted, each file a key range of its own
    _same(path, data)


def test_core_none_keeps_the_input_order(tmp_path):
    path = str(tmp_path / "t")
    data = _rows(range(600), parts=("a",))
    hudi.write(path, data, operation="bulk_insert", **KEY)
    (keys,) = _files(path)["a"]
    assert keys == data.column("id").to_pylist() and keys != sorted(keys)


def test_unknown_sort_mode_is_refused(tmp_path):
    with pytest.raises(InvalidOptionError, match="hoodie.bulkinsert.sort.mode"):
        hudi.write(str(tmp_path / "t"), _rows(range(10)), operation="bulk_insert",
                   options={"hoodie.bulkinsert.sort.mode": "SHUFFLE_EVERYTHING"}, **KEY)
    assert not os.path.exists(tmp_path / "t" / ".hoodie" / "hoodie.properties")


# -- the engine API: tasks that each write their own rows ----------------------------------------------
def test_engine_tasks_write_new_files_and_a_discarded_attempt_is_removed(tmp_path):
    from hudi_format import engine
    path = str(tmp_path / "t")
    data = _rows(range(4000))
    job = engine.begin_write(path, "bulk_insert", schema=data.schema, record_key="id", ordering_field="ts",
                             partition_by="p", options={"hoodie.parquet.max.file.size": "15000"})
    target = engine.open_new_files(job, data.slice(0, 500))
    per_file = target.records_per_file
    assert per_file < 600          # sized from the sample: several files a task and partition
    halves = [data.slice(0, 2000), data.slice(2000)]
    # a first attempt of task 1 writes its files, then "dies": no result reports them
    lost = engine.write_new_files(target, [halves[1].slice(0, 1000)], write_token="1-0-7")
    results = []
    for task, half in enumerate(halves):
        results += engine.write_new_files(target, half.to_batches(max_chunksize=300), write_token=f"{task}-0-{task}",
                                          threads=1, buffer_bytes=1 << 20)
    stray = [f for r in lost for f in r.files]
    assert all(os.path.exists(f"{path}/{f}") for f in stray)
    done = [engine.BucketResult(index=i, partition=r.partition, stat=r.stat, files=r.files)
            for i, r in enumerate(results)]
    engine.commit(job, done)
    assert not any(os.path.exists(f"{path}/{f}") for f in stray)
    names = {os.path.basename(f) for f in glob.glob(f"{path}/*/*.parquet")}
    assert {n.split("_")[1] for n in names} == {"0-0-0", "1-0-1"}
    want = sum(-(-half.column("p").to_pylist().count(p) // per_file) for half in halves for p in "abc")
    assert len(names) == len(results) == want > 6
    _same(path, data)


def test_open_new_files_refuses_other_operations(tmp_path):
    from hudi_format import engine
    job = engine.begin_write(str(tmp_path / "t"), "upsert", schema=_rows(range(3)).schema, record_key="id",
                             ordering_field="ts", partition_by="p")
    with pytest.raises(InvalidOptionError, match="bulk_insert"):
        engine.open_new_files(job)


# -- Spark --------------------------------------------------------------------------------------------
def _spark_opts(mode=None, **extra):
    opts = {"hoodie.table.name": "bulk", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.operation": "bulk_insert", **extra}
    if mode:
        opts["hoodie.bulkinsert.sort.mode"] = mode
    return opts


def _df(spark, data, partitions):
    from spark_adapter.arrow import spark_schema
    return spark.createDataFrame(data, schema=spark_schema(data.schema)).repartition(partitions)


@pytest.mark.spark
@pytest.mark.parametrize("mode", [None, "GLOBAL_SORT", "PARTITION_SORT", "PARTITION_PATH_REPARTITION",
                                  "PARTITION_PATH_REPARTITION_AND_SORT"])
def test_spark_sort_modes(spark, tmp_path, mode):
    path = str(tmp_path / "t")
    data = _rows(range(3000))
    _df(spark, data, 3).write.format("hudi_format").options(**_spark_opts(mode)).save(path)
    table = hudi.open_table(path)
    assert [i.action for i in table.timeline.write_instants()] == ["commit"]
    _same(path, data)
    files = _files(path)
    assert sorted(files) == ["a", "b", "c"]
    if mode in (None, "PARTITION_SORT"):
        # each of the 3 tasks holds rows of every partition path: one file group each
        assert all(len(v) == 3 for v in files.values()), {p: len(v) for p, v in files.items()}
    elif mode.startswith("PARTITION_PATH_REPARTITION"):
        assert all(len(v) == 1 for v in files.values())
    if mode in ("GLOBAL_SORT", "PARTITION_SORT"):
        for per_file in files.values():
            assert all(keys == sorted(keys) for keys in per_file)
    if mode == "GLOBAL_SORT":     # key ranges: files of a partition do not overlap
        for per_file in files.values():
            flat = [k for keys in sorted(per_file) for k in keys]
            assert flat == sorted(flat)
    names = {os.path.basename(f) for f in glob.glob(f"{path}/*/*.parquet")}
    tokens = {n.split("_")[1] for n in names}
    assert len(names) == len({n.split("_")[0] for n in names})       # a file group per file
    assert len(tokens) >= (1 if mode and mode.startswith("PARTITION_PATH") else 3)


@pytest.mark.spark
def test_spark_bulk_insert_rolls_files_over_at_the_max_file_size(spark, tmp_path):
    path = str(tmp_path / "t")
    data = _rows(range(20_000))
    _df(spark, data, 2).write.format("hudi_format").options(**_spark_opts(
        "PARTITION_PATH_REPARTITION", **{"hoodie.parquet.max.file.size": "60000"})).save(path)
    files = _files(path)
    assert all(len(v) >= 3 for v in files.values()), {p: len(v) for p, v in files.items()}
    _same(path, data)
    # the next write (an upsert through the planned path) finds every key
    update = _rows(range(0, 20_000, 97), ts=2)
    _df(spark, update, 2).write.format("hudi_format").options(**_spark_opts(
        **{"hoodie.datasource.write.operation": "upsert"})).mode("append").save(path)
    merged = {r["id"]: r for r in data.to_pylist()}
    merged.update({r["id"]: r for r in update.to_pylist()})
    _same(path, pa.Table.from_pylist(list(merged.values())))


@pytest.mark.spark
def test_spark_bulk_insert_failure_leaves_the_table_as_it_was(spark, tmp_path):
    path = str(tmp_path / "t")
    first = _rows(range(300))
    _df(spark, first, 2).write.format("hudi_format").options(**_spark_opts()).save(path)
    before = sorted(glob.glob(f"{path}/*/*.parquet"))
    bad = pa.table({"id": [f"n{i}" if i % 50 else None for i in range(400)],
                    "ts": pa.array([2] * 400, pa.int64()), "p": [("a", "z")[i % 2] for i in range(400)],
                    "v": [float(i) for i in range(400)]})
    with pytest.raises(HudiError, match="null|record key"):    # a null key, found by one task mid-write
        _df(spark, bad, 4).write.format("hudi_format").options(**_spark_opts()).mode("append").save(path)
    assert sorted(glob.glob(f"{path}/*/*.parquet")) == before
    assert not glob.glob(f"{path}/.hoodie/.temp/*/**/*.marker.*", recursive=True)
    table = hudi.open_table(path)
    assert [i.state.name for i in table.timeline.instants if i.action == "commit"] == ["COMPLETED"]
    _same(path, first)
    with pytest.raises(InvalidOptionError, match="hoodie.bulkinsert.sort.mode"):
        _df(spark, _rows(range(300, 310)), 1).write.format("hudi_format").options(
            **_spark_opts("NOT_A_MODE")).mode("append").save(path)
    assert sorted(glob.glob(f"{path}/*/*.parquet")) == before


@pytest.mark.spark
def test_spark_bulk_insert_mor_streaming_batches_once(spark, tmp_path):
    """Micro-batches of a streaming sink bulk-inserted into a MOR table: each commit records
    its batch id, a replayed batch is skipped, and an upsert after them appends to the logs of
    the bulk-inserted file groups (read back by hudi-rs)."""
    from spark_adapter.streaming import MicroBatchSink, committed_batch
    path = str(tmp_path / "t")
    sink = MicroBatchSink(path, _spark_opts(**{"hoodie.datasource.write.table.type": "MERGE_ON_READ"}))
    first, second = _rows(range(600)), _rows(range(600, 900))
    sink(_df(spark, first, 2), 0)
    sink(_df(spark, first, 2), 0)                   # replayed: skipped
    sink(_df(spark, second, 2), 1)
    assert committed_batch(path, None, "default_single_writer")[0] == 1
    table = hudi.open_table(path)
    assert [i.action for i in table.timeline.write_instants()] == ["deltacommit", "deltacommit"]
    _same(path, pa.concat_tables([first, second]))
    update = _rows(range(0, 900, 7), ts=2)
    _df(spark, update, 2).write.format("hudi_format").options(**_spark_opts(**{
        "hoodie.datasource.write.operation": "upsert", "hoodie.datasource.write.table.type": "MERGE_ON_READ"})) \
        .mode("append").save(path)
    assert glob.glob(f"{path}/*/.*.log.*")
    merged = {r["id"]: r for r in pa.concat_tables([first, second]).to_pylist()}
    merged.update({r["id"]: r for r in update.to_pylist()})
    _same(path, pa.Table.from_pylist(list(merged.values())))
