"""Index tagging on the executors (issue 14): every index type through ``df.write`` gives the
table the core gives in one process (read by the core and hudi-rs), the driver receives counts
only (rows reaching it do not grow with the input), and bad input fails on the driver with a
``HudiError`` leaving the table as it was.

Needs pyspark and Java 17; marked ``spark``."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pandas")   # PySpark's mapInArrow insists on it

import pyarrow as pa  # noqa: E402

import hudi_format as hudi  # noqa: E402
from canonical import canonical_rows  # noqa: E402
from writemodel import hudi_rs_read  # noqa: E402

from pyspark.sql import DataFrame, functions as F  # noqa: E402


META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def rows(ids, ts, partitions=("a", "b", "c", "d"), seed=0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array([f"k{i:07d}" for i in ids], pa.string()),
                     "ts": pa.array([ts] * len(ids), pa.int64()),
                     "p": pa.array([partitions[i % len(partitions)] for i in ids], pa.string()),
                     "v": pa.array([i * 0.5 + seed for i in ids], pa.float64())})


def opts(index, table_type, version, op, **extra):
    return {"hoodie.table.name": "tagging", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.table.type": table_type, "hoodie.datasource.write.operation": op,
            "hoodie.write.table.version": str(version), "hoodie.index.type": index,
            "hoodie.metadata.record.index.enable": str(index == "RECORD_INDEX").lower(), **extra}


def spark_write(spark, path, data: pa.Table, o: dict, mode="append"):
    spark.createDataFrame(data).repartition(3).write.format("hudi_format").options(**o).mode(mode).save(str(path))


def core_write(path, data: pa.Table, o: dict):
    op = o["hoodie.datasource.write.operation"]
    rest = {k: v for k, v in o.items() if k not in ("hoodie.datasource.write.operation",)}
    hudi.write(str(path), data, operation=op, options=rest)


def content(path) -> list[dict]:
    t = hudi.open_table(str(path)).read()
    return canonical_rows(t.drop_columns([c for c in META if c in t.column_names]))


# -- every index type: Spark's distributed tagging == the core's --------------------------------------
@pytest.mark.parametrize("index,table_type,version", [
    ("SIMPLE", "COPY_ON_WRITE", 8), ("BLOOM", "MERGE_ON_READ", 8), ("GLOBAL_SIMPLE", "MERGE_ON_READ", 6),
    ("GLOBAL_BLOOM", "COPY_ON_WRITE", 6), ("RECORD_INDEX", "COPY_ON_WRITE", 8),
    ("RECORD_INDEX", "MERGE_ON_READ", 8)])   # the core writes v6 and v8
def test_index_types_tag_on_executors_as_the_core_does(spark, tmp_path, index, table_type, version):
    ours, core = tmp_path / "spark", tmp_path / "core"
    moved = ("z",)   # global indexes move these keys; the others insert them again in z
    steps = [
        ("insert", rows(range(0, 400), ts=1), {}),
        ("upsert", pa.concat_tables([rows(range(350, 450), ts=2, seed=1), rows(range(0, 8), ts=2, partitions=moved),
                                     rows(range(20, 24), ts=3, seed=5), rows(range(20, 24), ts=2, seed=6)]), {}),
        ("delete", rows(list(range(100, 120)) + list(range(9000, 9005)), ts=3), {}),      # unknown keys dropped
        ("insert", rows(range(440, 470), ts=4, seed=2),
         {"hoodie.datasource.write.insert.drop.duplicates": "true"}),                   # known keys skipped
        ("upsert", rows(range(0, 4), ts=5, seed=3), {}),                               # back from z (global)
    ]
    for op, data, extra in steps:
        o = opts(index, table_type, version, op, **extra)
        spark_write(spark, ours, data, o)
        core_write(core, data, o)
        assert content(ours) == content(core), (op, index)
    table = hudi.open_table(str(ours))
    assert table.version == version and table.table_type == table_type
    theirs, mine = hudi_rs_read(str(ours)), table.read()
    assert canonical_rows(theirs.select(mine.column_names)) == canonical_rows(mine)
    if index.startswith("GLOBAL") or index == "RECORD_INDEX":
        where = {r["id"]: r["p"] for r in table.read(columns=["id", "p"]).to_pylist()}
        assert where["k0000005"] == "z" and where["k0000001"] == "b"   # moved, and moved back


@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM"])
def test_composite_keys_tag_where_the_rows_are_as_the_core_does(spark, tmp_path, index):
    """Keys Spark cannot render (COMPLEX: ``id:..,v:..``) are computed in Python before the
    rows go to the tasks tagging their partition; duplicates in a batch are precombined."""
    ours, core = tmp_path / "spark", tmp_path / "core"
    composite = {"hoodie.datasource.write.recordkey.field": "id,ts0",
                 "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator"}

    def keyed(t: pa.Table) -> pa.Table:
        return t.append_column("ts0", pa.array([7] * t.num_rows, pa.int64()))

    steps = [
        ("insert", keyed(rows(range(0, 300), ts=1))),
        ("upsert", keyed(pa.concat_tables([rows(range(250, 400), ts=2, seed=1), rows(range(20, 24), ts=3, seed=5),
                                           rows(range(20, 24), ts=2, seed=6)]))),
        ("delete", keyed(rows(list(range(100, 110)) + list(range(9000, 9003)), ts=3))),
    ]
    for op, data in steps:
        o = {**opts(index, "COPY_ON_WRITE", 8, op), **composite}
        spark_write(spark, ours, data, o)
        core_write(core, data, o)
        assert content(ours) == content(core), (op, index)
    assert len(content(ours)) == 400 - 10


@pytest.mark.parametrize("limit,local", [(0, False), (10_000, True)])
def test_one_big_partition_is_tagged_per_file_slice(spark, tmp_path, monkeypatch, limit, local):
    """A partition bringing more than ``LOCAL_TAG_ROWS`` records is not tagged by one task:
    the lookups run per file slice instead."""
    from spark_adapter import writer
    monkeypatch.setattr(writer, "LOCAL_TAG_ROWS", limit)
    calls = []
    orig = writer.DistributedWrite._tag_rows
    monkeypatch.setattr(writer.DistributedWrite, "_tag_rows", lambda self, *a: calls.append(1) or orig(self, *a))
    ours, core = tmp_path / "spark", tmp_path / "core"
    for op, data in [("insert", rows(range(0, 300), ts=1, partitions=("a",))),
                     ("upsert", rows(range(250, 400), ts=2, partitions=("a",)))]:
        o = opts("SIMPLE", "COPY_ON_WRITE", 8, op)
        spark_write(spark, ours, data, o)
        core_write(core, data, o)
        assert content(ours) == content(core), op
    assert bool(calls) == local


# -- rows reaching the driver ----------------------------------------------------------------------
class DriverRows:
    """Counts the rows DataFrames hand to the driver (toArrow, collect, toPandas, take)."""

    def __init__(self, monkeypatch, spark):
        self.rows = 0
        self.calls = 0
        for cls in {DataFrame, type(spark.range(1))}:     # Spark 4: the classic subclass
            for name in ("toArrow", "collect", "toPandas"):
                if name in vars(cls):
                    monkeypatch.setattr(cls, name, self._wrap(vars(cls)[name]))

    def _wrap(self, real):
        def counted(df, *a, **k):
            out = real(df, *a, **k)
            self.calls += 1
            self.rows += out.num_rows if isinstance(out, pa.Table) else len(out)
            return out
        return counted


def _upsert_driver_rows(spark, tmp_path, monkeypatch, n: int, index: str) -> int:
    path = tmp_path / f"{index}-{n}"
    o = opts(index, "COPY_ON_WRITE", 8, "bulk_insert")
    base = spark.range(n).select(F.format_string("k%07d", "id").alias("id"), F.lit(1).cast("long").alias("ts"),
                                 (F.col("id") % 4).cast("string").alias("p"), (F.col("id") * 0.5).alias("v"))
    base.write.format("hudi_format").options(**o).mode("overwrite").save(str(path))
    # 10%: half updates of existing keys, half new keys
    upd = spark.range(0, n, 20).union(spark.range(n, n + n // 20)).select(
        F.format_string("k%07d", "id").alias("id"), F.lit(2).cast("long").alias("ts"),
        (F.col("id") % 4).cast("string").alias("p"), (F.col("id") * 0.25).alias("v"))
    counter = DriverRows(monkeypatch, spark)
    upd.write.format("hudi_format").options(**{**o, "hoodie.datasource.write.operation": "upsert"}) \
        .mode("append").save(str(path))
    monkeypatch.undo()
    table = hudi.open_table(str(path))
    assert table.read(columns=["id"]).num_rows == n + n // 20
    assert counter.calls >= 2     # the counts and the write results did reach the driver
    return counter.rows


@pytest.mark.parametrize("index", ["SIMPLE", "GLOBAL_BLOOM"])
def test_rows_reaching_the_driver_do_not_grow_with_the_input(spark, tmp_path, monkeypatch, index):
    small = _upsert_driver_rows(spark, tmp_path, monkeypatch, 10_000, index)
    large = _upsert_driver_rows(spark, tmp_path, monkeypatch, 100_000, index)
    assert small == large
    assert 0 < large < 100   # partitions, per file group counts, one result per bucket


def _task_function_bytes(spark, tmp_path, monkeypatch, partitions: int, index: str) -> int:
    """The largest pickled function (``mapInArrow``) the tasks of a Spark upsert run, on a table
    of one-row partitions whose every file group the upsert updates."""
    from pyspark import cloudpickle
    path = tmp_path / f"{index}-{partitions}"
    parts = tuple(f"p{i:04d}" for i in range(partitions))
    core_write(path, rows(range(partitions), ts=1, partitions=parts), opts(index, "COPY_ON_WRITE", 8, "insert"))
    sizes: list = []
    for cls in {DataFrame, type(spark.range(1))}:     # Spark 4: the classic subclass
        if "mapInArrow" in vars(cls):
            real = vars(cls)["mapInArrow"]
            monkeypatch.setattr(cls, "mapInArrow", lambda df, func, *a, real=real, **k:
                                sizes.append(len(cloudpickle.dumps(func))) or real(df, func, *a, **k))
    spark_write(spark, path, rows(range(partitions), ts=2, partitions=parts), opts(index, "COPY_ON_WRITE", 8, "upsert"))
    monkeypatch.undo()
    got = hudi.open_table(str(path)).read(columns=["id", "ts"])
    assert got.num_rows == partitions and set(got.column("ts").to_pylist()) == {2}
    assert sizes
    return max(sizes)


@pytest.mark.parametrize("index", ["SIMPLE", "RECORD_INDEX"])
def test_the_functions_tasks_run_do_not_grow_with_the_table(spark, tmp_path, monkeypatch, index):
    """Every task unpickles the function it runs: the write's buckets and the index's lookup
    tasks (one per file group) go to the executors as broadcasts, once per Python worker, so
    the function of an upsert over 24 file groups is the size of one over 3 (rows tagged by
    partition; keys probing the record index)."""
    small = _task_function_bytes(spark, tmp_path, monkeypatch, 3, index)
    large = _task_function_bytes(spark, tmp_path, monkeypatch, 24, index)
    assert large < small + 1024, (small, large)


def test_small_file_groups_share_write_tasks(spark, tmp_path):
    """An upsert into 24 file groups of one row each (and new keys topping them up): a Python
    task costs more than such a merge, so the buckets share TASKS_PER_CORE tasks per core (the
    write tokens name the Spark partitions), and the table is the one the core writes."""
    from spark_adapter.writer import TASKS_PER_CORE
    parts = tuple(f"p{i:04d}" for i in range(24))
    ours, core = tmp_path / "spark", tmp_path / "core"
    core_write(ours, rows(range(24), ts=1, partitions=parts), opts("SIMPLE", "COPY_ON_WRITE", 8, "insert"))
    shutil.copytree(ours, core)
    upsert = rows(range(48), ts=2, partitions=parts, seed=1)
    spark_write(spark, ours, upsert, opts("SIMPLE", "COPY_ON_WRITE", 8, "upsert"))
    core_write(core, upsert, opts("SIMPLE", "COPY_ON_WRITE", 8, "upsert"))
    table = hudi.open_table(str(ours))
    stats = [st for sts in table.timeline.metadata(table.timeline.write_instants()[-1])
             .partition_to_write_stats.values() for st in sts]
    tasks = {os.path.basename(st.path).split("_")[1].split("-")[0] for st in stats}
    assert len(stats) == 24 and len({st.file_id for st in stats}) == 24
    assert len(tasks) == TASKS_PER_CORE * spark.sparkContext.defaultParallelism
    assert content(ours) == content(core)
    assert len(content(ours)) == 48
    t = hudi_rs_read(str(ours))
    assert canonical_rows(t.drop_columns([c for c in META if c in t.column_names])) == content(core)


# -- bad input: a HudiError on the driver, the table as it was ---------------------------------------
def _files(path):
    return sorted(f for f in glob.glob(f"{path}/**/*", recursive=True) if os.path.isfile(f))


@pytest.fixture()
def table(spark, tmp_path):
    path = tmp_path / "bad"
    spark_write(spark, path, rows(range(100), ts=1), opts("SIMPLE", "MERGE_ON_READ", 8, "insert"))
    return path


def _unchanged(path, before_files, before_rows):
    t = hudi.open_table(str(path))
    assert [i.state.name for i in t.timeline.instants] == ["COMPLETED"]
    assert _files(path) == before_files
    assert content(path) == before_rows


@pytest.mark.parametrize("case", ["schema", "missing_key", "missing_column", "unknown_option", "bad_codec",
                                  "null_keys", "task_fails"])
def test_bad_input_fails_on_the_driver_and_leaves_the_table(spark, table, request, case):
    before_files, before_rows = _files(table), content(table)
    o = opts("SIMPLE", "MERGE_ON_READ", 8, "upsert")
    data = rows(range(90, 130), ts=2)
    if case == "schema":          # a column whose type cannot become the table's
        data = data.set_column(3, "v", pa.array([f"x{i}" for i in range(data.num_rows)]))
    elif case == "missing_key":
        data = data.drop_columns(["id"])
    elif case == "missing_column":   # an upsert would blank the column in every row it writes
        data = data.drop_columns(["v"])
    elif case == "unknown_option":
        o["hoodie.datasource.write.no.such.option"] = "1"
    elif case == "bad_codec":     # Hudi's lzo: no pyarrow writer, refused before any task runs
        data = pa.concat_tables([data, rows(range(200, 230), ts=2, partitions=("z",))])
        o["hoodie.parquet.compression.codec"] = "lzo"
    elif case == "null_keys":
        data = data.set_column(0, "id", pa.array([None if i % 7 == 0 else f"k{i:07d}" for i in range(90, 130)],
                                                 pa.string()))
    elif case == "task_fails":    # logs appended to existing groups, then base files of z fail
        data = pa.concat_tables([data, rows(range(200, 230), ts=2, partitions=("z",))])
        o["hoodie.parquet.compression.codec"] = request.getfixturevalue("codec_executors_refuse")
    with pytest.raises(hudi.HudiError) as err:
        spark_write(spark, table, data, o)
    assert str(err.value)
    if case == "bad_codec":
        assert "hoodie.parquet.compression.codec" in str(err.value) and "lzo" in str(err.value)
        assert "Spark task" not in str(err.value)
    if case == "task_fails":
        assert "Spark task" in str(err.value)
    _unchanged(table, before_files, before_rows)
    shutil.rmtree(table / ".hoodie" / ".temp", ignore_errors=True)


def test_tagged_rows_are_cached_not_checkpointed_on_a_cluster(spark, tmp_path, monkeypatch):
    """Off local mode the tagged rows are a cache Spark can recompute when an executor is lost
    (a local checkpoint would fail the write): the same table either way."""
    from spark_adapter import writer
    monkeypatch.setattr(writer, "local_master", lambda master: False)
    DataFrame = type(spark.range(1))       # the session's class (pyspark.sql.classic's)
    checkpoints = []
    orig = DataFrame.localCheckpoint
    monkeypatch.setattr(DataFrame, "localCheckpoint", lambda self, *a, **k: checkpoints.append(1) or orig(self, *a, **k))
    ours, core = tmp_path / "spark", tmp_path / "core"
    for op, data in [("insert", rows(range(0, 300), ts=1)), ("upsert", rows(range(250, 400), ts=2))]:
        o = opts("SIMPLE", "MERGE_ON_READ", 8, op)
        spark_write(spark, ours, data, o)
        core_write(core, data, o)
        assert content(ours) == content(core), op
    assert not checkpoints


def test_a_write_that_lost_a_conflict_runs_again_with_retries(spark, tmp_path, monkeypatch):
    """``hoodie.write.num.retries.on.conflict.failures``: a Spark write whose commit lost to
    another writer's over the same file groups runs again on the table as the winner left it
    (Hudi's Spark writer does); both writes' rows are in the table, read by hudi-rs alike."""
    import spark_adapter.writer as sw
    path = tmp_path / "t"
    base = opts("SIMPLE", "COPY_ON_WRITE", 8, "upsert", **{"hoodie.parquet.small.file.limit": "0"})
    core_write(path, rows(range(0, 40), ts=0), base)
    real_commit, attempts = sw.engine.commit, []

    def losing_commit(job, *a, **k):
        attempts.append(1)
        if len(attempts) == 1:   # another writer commits over the same file groups first
            core_write(path, rows(range(0, 10), ts=1, seed=1), base)
        return real_commit(job, *a, **k)
    monkeypatch.setattr(sw.engine, "commit", losing_commit)
    mine = rows(range(5, 15), ts=2, seed=2)
    with pytest.raises(hudi.ConcurrentWriteError):
        spark_write(spark, path, mine, base)
    attempts.clear()
    spark_write(spark, path, mine, {**base, "hoodie.write.num.retries.on.conflict.failures": "1"})
    assert len(attempts) == 2
    expected = {**{r["id"]: r for r in rows(range(0, 40), ts=0).to_pylist()},
                **{r["id"]: r for r in rows(range(0, 10), ts=1, seed=1).to_pylist()},
                **{r["id"]: r for r in mine.to_pylist()}}
    want = canonical_rows(pa.Table.from_pylist(list(expected.values())))
    assert canonical_rows(hudi.open_table(str(path)).read(columns=["id", "ts", "p", "v"])) == want
    assert canonical_rows(hudi_rs_read(str(path)).select(["id", "ts", "p", "v"])) == want
    assert hudi.open_table(str(path)).timeline.pending == []


# RECORD_INDEX: its tasks read the index as it is now; the simple index's (files gone) is the
# same error raised by engine.lookup (test_engine_api.py), which this test's path maps alike
@pytest.mark.parametrize("index", ["RECORD_INDEX"])
def test_a_table_changed_after_the_lookup_plan_is_a_conflict_retried(spark, tmp_path, monkeypatch, index):
    """Between the driver's lookup plan and the executors' lookups, clustering replaced the
    file groups planned and the cleaner removed them (found by ``soak_spark``): the simple
    index's tasks find their files gone, the record index places the keys in the clustering's
    new file groups. Either way the write fails with ``ConcurrentWriteError`` (not a bare task
    failure; with the record index, not keys taken for absent: a second copy of each), which
    Hudi's retry option runs again on the table as it is then; the table keeps every row."""
    import spark_adapter.writer as sw
    path = tmp_path / "t"
    base = opts(index, "COPY_ON_WRITE", 8, "upsert", **{"hoodie.cleaner.commits.retained": "1",
                                                       "hoodie.parquet.small.file.limit": "0"})
    core_write(path, rows(range(0, 20), ts=0), base)
    core_write(path, rows(range(20, 30), ts=0), base)
    real_plan, planned = sw.engine.plan_index_lookup, []

    def plan_then_cluster_and_clean(job, *a, **k):
        lookup = real_plan(job, *a, **k)
        planned.append(1)
        if len(planned) == 1:   # another process clusters every file group; a write cleans inline
            clustering = {**base, "hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}
            hudi.open_table(str(path)).cluster(options=clustering)
            core_write(path, rows(range(0, 4), ts=1, seed=1), base)
            assert not any((path / t.file_slice.base_file).exists() for t in lookup.tasks if t.file_slice)
        return lookup
    monkeypatch.setattr(sw.engine, "plan_index_lookup", plan_then_cluster_and_clean)
    mine = rows(range(10, 25), ts=2, seed=2)
    with pytest.raises(hudi.ConcurrentWriteError, match="retry"):
        spark_write(spark, path, mine, base)
    assert hudi.open_table(str(path)).timeline.pending == []
    planned.clear()
    spark_write(spark, path, mine, {**base, "hoodie.write.num.retries.on.conflict.failures": "1"})
    assert len(planned) == 2
    expected = {**{r["id"]: r for r in rows(range(0, 30), ts=0).to_pylist()},
                **{r["id"]: r for r in rows(range(0, 4), ts=1, seed=1).to_pylist()},
                **{r["id"]: r for r in mine.to_pylist()}}
    want = canonical_rows(pa.Table.from_pylist(list(expected.values())))
    assert canonical_rows(hudi.open_table(str(path)).read(columns=["id", "ts", "p", "v"])) == want
    assert canonical_rows(hudi_rs_read(str(path)).select(["id", "ts", "p", "v"])) == want


@pytest.mark.parametrize("index", ["RECORD_INDEX"])   # the check runs after any global index's lookup
def test_a_stale_record_in_another_partition_stays_put_as_the_core_keeps_it(spark, tmp_path, index):
    """A key an upsert sends to another partition moves only when its record outranks the
    stored one (event-time ordering): the executors read the stored ordering values of the
    moving keys, and the table is the core's, stale and flagged records included (GLOBAL_SIMPLE
    and GLOBAL_BLOOM measured the same; each case costs a dozen seconds of Spark)."""
    first = pa.table({"id": ["k1", "k2", "k3", "k4", "k5"], "ts": pa.array([10] * 5, pa.int64()),
                      "p": ["a"] * 5, "v": [1.0] * 5})
    second = pa.table({"id": ["k0", "k5", "k1", "k2", "k3", "k4"], "ts": pa.array([7, 11, 5, 20, 10, 5], pa.int64()),
                       "p": ["b", "a", "b", "b", "b", "b"], "v": [2.0] * 6,
                       "_hoodie_is_deleted": [False] * 5 + [True]})
    for where, write in (("spark", lambda p, d, o: spark_write(spark, p, d, o)), ("core", core_write)):
        path = tmp_path / where
        for data in (first, second):
            write(path, data, opts(index, "MERGE_ON_READ", 8, "upsert",
                                   **{"hoodie.record.index.update.partition.path": "true"}))
    want = [("k0", "b", 7), ("k1", "a", 10), ("k2", "b", 20), ("k3", "b", 10), ("k4", "a", 10), ("k5", "a", 11)]
    for path in (tmp_path / "spark", tmp_path / "core"):
        assert sorted((r["id"], r["_hoodie_partition_path"], r["ts"])
                      for r in hudi.open_table(str(path)).read().to_pylist()) == want
    assert sorted((r["id"], r["ts"]) for r in hudi_rs_read(str(tmp_path / "spark")).to_pylist()) == \
        [(k, t) for k, _, t in want]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_record_index_update_reads_no_record_keys_on_the_driver(spark, tmp_path, monkeypatch, table_type):
    """Spark writes (bulk_insert, upserts, a delete) under the record index: the keys they
    change are the executors' to turn into record index updates (staged by the write tasks, written into the
    index by a Spark job at commit); the driver (this process: Spark's Python workers are
    others) reads none and receives none, and the index matches the table after each write."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    from hudi_format.metadata import data_files, writer as mdw
    path = tmp_path / "t"
    read: list[int] = []
    held: list[int] = []
    base_keys, log_keys, commit = data_files.DataFiles.base_keys, data_files.DataFiles.log_keys, \
        mdw.MetadataWriter.commit

    def counted_base(self, p):
        keys = base_keys(self, p)
        read.append(len(keys))
        return keys

    def counted_log(self, p):
        ups, dels = log_keys(self, p)
        read.append(len(ups) + len(dels))
        return ups, dels

    def counted_commit(self, instant, deltas, *a, **k):
        ri = deltas.get("record_index")
        held.append(len(ri.upserts) + len(ri.deletes) if ri else 0)
        assert k.get("update") is not None, "the record index update was not left to the executors"
        return commit(self, instant, deltas, *a, **k)

    monkeypatch.setattr(data_files.DataFiles, "base_keys", counted_base)
    monkeypatch.setattr(data_files.DataFiles, "log_keys", counted_log)
    monkeypatch.setattr(mdw.MetadataWriter, "commit", counted_commit)
    spark_write(spark, path, rows(range(20_000), ts=1), opts("RECORD_INDEX", table_type, 8, "bulk_insert"))
    spark_write(spark, path, rows(range(0, 20_000, 10), ts=2), opts("RECORD_INDEX", table_type, 8, "upsert"))
    got = hudi.open_table(str(path)).read(columns=["id", "ts"])
    assert got.num_rows == 20_000 and got.column("ts").to_pylist().count(2) == 2_000
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []
    spark_write(spark, path, rows(range(20_000, 21_000), ts=3), opts("RECORD_INDEX", table_type, 8, "upsert"))
    spark_write(spark, path, rows(range(0, 20_000, 7), ts=4), opts("RECORD_INDEX", table_type, 8, "delete"))
    monkeypatch.undo()
    assert hudi.open_table(str(path)).read(columns=["id"]).num_rows == 21_000 - len(range(0, 20_000, 7))
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []
    assert sum(read) == 0, f"the driver read {sum(read):,} record keys from {len(read)} files"
    assert held == [0, 0, 0, 0], "record index changes reached the driver"
    assert not list((path / ".hoodie" / ".temp").glob("*/record-index-keys/*"))


def test_a_failed_record_index_job_leaves_the_table_and_the_next_write_recovers(spark, tmp_path, monkeypatch):
    """The commit's record index job fails after its tasks wrote their log files: the write
    fails, the table (data, metadata table, staged changes) is as before, and the next upsert
    commits with the index matching the table."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    from spark_adapter import record_index
    path = tmp_path / "t"
    o = opts("RECORD_INDEX", "MERGE_ON_READ", 8, "upsert")
    core_write(path, rows(range(5_000), ts=1), opts("RECORD_INDEX", "MERGE_ON_READ", 8, "insert"))
    before = content(path)
    mdt_files = sorted(p.name for p in (path / ".hoodie" / "metadata" / "record_index").iterdir())
    real = record_index.ExecutorRecordIndexUpdate.write

    def fails_after_writing(self, target, deleted):
        real(self, target, deleted)
        raise RuntimeError("the record index job failed")
    monkeypatch.setattr(record_index.ExecutorRecordIndexUpdate, "write", fails_after_writing)
    with pytest.raises(Exception, match="record index job failed"):
        spark_write(spark, path, rows(range(0, 5_000, 3), ts=2), o)
    monkeypatch.undo()
    assert content(path) == before
    assert sorted(p.name for p in (path / ".hoodie" / "metadata" / "record_index").iterdir()) == mdt_files
    assert not list((path / ".hoodie" / ".temp").glob("*/record-index-keys/*"))
    spark_write(spark, path, rows(range(0, 5_000, 4), ts=3), o)
    got = hudi.open_table(str(path)).read(columns=["id", "ts"])
    assert got.num_rows == 5_000 and got.column("ts").to_pylist().count(3) == 1_250
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []


def test_a_version_6_table_keeps_its_record_index_updated_by_the_driver(spark, tmp_path):
    """Version 6 names log files by their slice, so the metadata writer could not tell a
    discarded attempt's record index file from a kept one: its Spark writes stage nothing and
    the driver reads the written files back, as before; the index still matches the table."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    path = tmp_path / "t"
    spark_write(spark, path, rows(range(3_000), ts=1), opts("RECORD_INDEX", "MERGE_ON_READ", 6, "insert"))
    spark_write(spark, path, rows(range(0, 4_000, 5), ts=2), opts("RECORD_INDEX", "MERGE_ON_READ", 6, "upsert"))
    spark_write(spark, path, rows(range(1, 3_000, 9), ts=3), opts("RECORD_INDEX", "MERGE_ON_READ", 6, "delete"))
    got = hudi.open_table(str(path)).read(columns=["id"])
    assert got.num_rows == 3_000 + 200 - len(range(1, 3_000, 9))
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []
    assert not list((path / ".hoodie" / ".temp").glob("*/record-index-keys/*"))


def test_updates_in_place_through_spark_leave_their_record_index_entries(spark, tmp_path):
    """As the core (and Hudi): a MOR upsert through Spark writes record index entries for the
    keys it inserts (into new file groups and, by small-file handling, the updated ones' logs),
    none for the records it updates in place, whose entries keep the instant that placed them."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    from hudi_format.config import TableConfig
    from hudi_format.metadata.reader import MetadataTable
    from hudi_format.storage import Storage
    path = tmp_path / "t"

    def entries():
        st = Storage(str(path))
        found = MetadataTable(st, TableConfig.load(st)).record_index(
            pa.array([f"k{i:07d}" for i in range(3_000)], pa.string()))
        return {k: (p, f, ms) for k, p, f, ms in zip(*(found.column(c).to_pylist()
                                                      for c in ("key", "partition", "file_id", "instant_ms")))}
    o = dict(opts("RECORD_INDEX", "MERGE_ON_READ", 8, "upsert"), **{"hoodie.parquet.small.file.limit": str(100 << 20)})
    spark_write(spark, path, rows(range(2_000), ts=1), o)
    before = entries()
    spark_write(spark, path, rows(list(range(0, 2_000, 4)) + list(range(2_000, 2_300)), ts=2), o)
    after = entries()
    assert {k: after[k] for k in before} == before and len(after) == 2_300
    assert {after[f"k{i:07d}"][2] for i in range(2_000, 2_300)} != {before["k0000000"][2]}
    assert [p for p in record_index_problems(str(path)) if p.severity == ERROR] == []
    got = hudi.open_table(str(path)).read(columns=["id", "ts"])
    assert got.num_rows == 2_300 and got.column("ts").to_pylist().count(2) == 800


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_spark_writer_naming_the_record_index_off_drops_it(spark, tmp_path, table_type):
    """As the core's writers (and Hudi's): the write tracks no key changes (its executors stage
    none) and its commit drops the index; the next writer naming it on bootstraps it."""
    from hudi_format.cli.validate import validate_table
    path = tmp_path / "t"
    spark_write(spark, path, rows(range(2_000), ts=1), opts("RECORD_INDEX", table_type, 8, "insert"))
    spark_write(spark, path, rows(range(0, 2_400, 3), ts=2), opts("SIMPLE", table_type, 8, "upsert"))
    assert "record_index" not in hudi.open_table(str(path)).config.metadata_partitions
    spark_write(spark, path, rows(range(1, 2_600, 5), ts=3), opts("RECORD_INDEX", table_type, 8, "upsert"))
    assert "record_index" in hudi.open_table(str(path)).config.metadata_partitions
    want = {f"k{i:07d}": 3 if i % 5 == 1 else 2 if i % 3 == 0 else 1 for i in set(range(2_000)) |
            set(range(0, 2_400, 3)) | set(range(1, 2_600, 5))}
    got = hudi.open_table(str(path)).read(columns=["id", "ts"])
    assert dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist())) == want
    assert hudi_rs_read(str(path)).num_rows == len(want)
    assert validate_table(str(path)) == []
    assert not list((path / ".hoodie" / ".temp").glob("*/record-index-keys/*"))
