"""spark_adapter on a local[2] Spark: reads of every Apache Hudi fixture table, writes of every
operation to COW and MOR tables checked against hudi-rs and a model of the table, a
multi-task write of several file groups per partition, failed writes, save modes, types, filter
push-down, partition pruning and column pruning.

Needs pyspark and pandas (the ``dev`` and ``spark`` extras) and Java 17 (skipped without
pyspark); they share the session-wide ``spark`` fixture of conftest.py. Marked ``spark``:
``make test`` runs them, ``make test-spark`` runs only these, ``-m "not spark"`` leaves them out."""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
import re

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pandas")   # PySpark's mapInArrow insists on it

import pyarrow as pa  # noqa: E402

import hudi_format as hudi  # noqa: E402
from canonical import canonical_rows, sort_expected  # noqa: E402
from conftest import FIXTURE_TABLES, expected  # noqa: E402
from writemodel import Model, hudi_rs_read  # noqa: E402

from pyspark.sql import functions as F  # noqa: E402

from spark_adapter.arrow import (spark_arrow_schema, spark_schema, to_hudi_arrow,  # noqa: E402
                                 to_spark_arrow)


def sdf(spark, rows: pa.Table):
    """A DataFrame of ``rows`` with their exact Spark types (Spark would read a zone-less
    timestamp as TIMESTAMP, not TIMESTAMP_NTZ)."""
    return spark.createDataFrame(rows, schema=spark_schema(rows.schema))


def spark_rows(df) -> list[dict]:
    return canonical_rows(df.toArrow())


def load(spark, path, **options):
    reader = spark.read.format("hudi_format")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


# -- reads of Apache Hudi's fixture tables --------------------------------------------------------
def _as_of_value(exp: dict, ts: str) -> str:
    if exp["query_bounds_use"] == "completion_time":
        return next(i["completion_time"] for i in exp["completed_write_instants"] if i["timestamp"] == ts)
    return ts


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_fixture_snapshot(spark, fixture_tables, name):
    exp = expected(name)
    df = load(spark, fixture_tables(name))
    assert spark_rows(df) == sort_expected(exp["snapshot"])
    # the Spark schema is the core's, type for type
    assert df.schema == spark_schema(hudi.open_table(fixture_tables(name)).schema())


def _query_cases():
    """Read-optimized of every MOR fixture; the middle time travel and the last incremental
    query of every fixture (each is one more Spark job; the core's tests run them all)."""
    for name in FIXTURE_TABLES:
        exp = expected(name)
        if exp.get("read_optimized") is not None:
            yield pytest.param(name, "read_optimized", None, id=f"{name}-ro")
        tts = sorted(exp.get("time_travel", {}))
        if tts:
            yield pytest.param(name, "time_travel", tts[len(tts) // 2], id=f"{name}-as_of")
        if exp.get("incremental"):
            yield pytest.param(name, "incremental", len(exp["incremental"]) - 1, id=f"{name}-incremental")


@pytest.mark.parametrize("name,query,arg", list(_query_cases()))
def test_fixture_queries(spark, fixture_tables, name, query, arg):
    exp = expected(name)
    path = fixture_tables(name)
    if query == "read_optimized":
        df, want = load(spark, path, **{"hoodie.datasource.query.type": "read_optimized"}), exp["read_optimized"]
    elif query == "time_travel":
        df, want = load(spark, path, **{"as.of.instant": _as_of_value(exp, arg)}), exp["time_travel"][arg]
    else:
        inc = exp["incremental"][arg]
        df = load(spark, path, **{"hoodie.datasource.query.type": "incremental",
                                  "hoodie.datasource.read.begin.instanttime": inc["start_exclusive"],
                                  "hoodie.datasource.read.end.instanttime": inc["end_inclusive"]})
        want = inc["rows"]
    assert spark_rows(df) == sort_expected(want)


def test_one_input_partition_per_file_slice(spark, fixture_tables):
    name = "sample_table__mor__avro__v9_txns_simple_meta"
    path = fixture_tables(name)
    slices = hudi.open_table(path).file_slices()
    assert len(slices) > 1
    assert load(spark, path, maxPartitionBytes=1).rdd.getNumPartitions() == len(slices)
    assert load(spark, path).rdd.getNumPartitions() == 1       # small slices share a partition


def test_filter_push_down_and_column_pruning(spark, fixture_tables):
    name = "sample_table__cow__v8_complexkeygen_hivestyle"
    path = fixture_tables(name)
    table = hudi.open_table(path)
    all_rows = table.read().to_pylist()
    # Spark pushes the comparisons into the core (partition pruning + row filter)
    df = load(spark, path).filter((F.col("id") >= 2) & (F.col("name") != "Carol")
                                  & F.col("intField").isin(15000, 25000, 45000))
    want = [r for r in all_rows if r["id"] >= 2 and r["name"] != "Carol" and r["intField"] in (15000, 25000, 45000)]
    assert len(want) == 2
    assert spark_rows(df) == canonical_rows(want)
    # what Spark still filters itself is only the null checks it adds
    plan = df._jdf.queryExecution().executedPlan().toString()
    spark_filter = "\n".join(line for line in plan.splitlines() if "Filter (" in line)
    assert "isnotnull" in spark_filter and not re.search(r">=|IN \(|Carol", spark_filter), plan
    # a filter Spark keeps for itself still filters correctly (floats: NaN semantics differ)
    df = load(spark, path).filter(F.col("doubleField") > 1.0)
    assert spark_rows(df) == canonical_rows([r for r in all_rows if r["doubleField"] is not None and r["doubleField"] > 1.0])
    # a user schema reads only those columns
    df = spark.read.format("hudi_format").schema("id int, decimalField decimal(10,5)").load(str(path))
    assert spark_rows(df) == canonical_rows(table.read(columns=["id", "decimalField"]))


def test_push_filters_unit(fixture_tables):
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNull, Not
    from spark_adapter.datasource import HudiDataSource
    path = str(fixture_tables("sample_table__cow__v9_txns_simple_meta"))
    source = HudiDataSource({"path": path})
    reader = source.reader(source.schema())
    pushed = [EqualTo(("region",), "us"), GreaterThan(("txn_ts",), 5), In(("currency",), ("USD", None)),
              Not(EqualTo(("txn_type",), "debit")), IsNull(("merchant_name",)),
              GreaterThan(("txn_datetime",), dt.datetime(2024, 1, 1)), EqualTo(("nope",), 1)]
    left = list(reader.pushFilters(pushed))
    assert left == pushed[4:]          # null tests, timestamps and unknown columns stay in Spark
    assert reader.filters == [("region", "=", "us"), ("txn_ts", ">", 5), ("currency", "in", ("USD",)),
                              ("txn_type", "!=", "debit")]
    # partition pruning: only slices of region=us are planned
    slices = [s for g in reader.partitions() for s in g.slices]
    assert slices and {s.partition_path for s in slices} == {"region=us"}


def test_partition_filter_plans_only_that_partitions_files(spark, tmp_path):
    """A filter on the partition column reaches the core, which plans only that partition's
    file slices: counted as Spark tasks (one per slice with maxPartitionBytes=1)."""
    path = str(tmp_path / "pruned")
    for i in range(2):      # two file groups per partition: no small-file top-up
        sdf(spark, rs_rows(range(i * 60, i * 60 + 60), ts=1)).write.format("hudi_format") \
            .options(**_opts("COPY_ON_WRITE", "insert", **{"hoodie.parquet.small.file.limit": "0"})) \
            .mode("append").save(path)
    by_part: dict[str, int] = {}
    for s in hudi.open_table(path).file_slices():
        by_part[s.partition_path] = by_part.get(s.partition_path, 0) + 1
    assert sorted(by_part) == ["a", "b", "c"] and by_part["b"] >= 2
    one_each = {"maxPartitionBytes": 1}
    assert load(spark, path, **one_each).rdd.getNumPartitions() == sum(by_part.values())
    df = load(spark, path, **one_each).filter(F.col("p") == "b")
    assert df.rdd.getNumPartitions() == by_part["b"]
    assert {r["p"] for r in spark_rows(df)} == {"b"} and df.count() == 40
    df = load(spark, path, **one_each).filter(F.col("p").isin("a", "c"))
    assert df.rdd.getNumPartitions() == by_part["a"] + by_part["c"]


class _Task:
    def __init__(self, size, i):
        from types import SimpleNamespace
        self.size = size
        self.file_slice = SimpleNamespace(partition_path="p", file_id=f"f{i:03d}")


def test_slices_packed_like_spark_file_splits():
    from spark_adapter.datasource import DEFAULT_MAX_PARTITION_BYTES as MAX, OPEN_COST_BYTES, _pack
    mb = 1024 * 1024
    tiny = [_Task(10_000, i) for i in range(8)]
    assert [len(g) for g in _pack(tiny, MAX, 2)] == [8]                # under 4 MiB: one task
    assert [len(g) for g in _pack(tiny, 1, 2)] == [1] * 8              # maxPartitionBytes=1: one each
    ten = [_Task(int((3.5 + 0.01 * i) * mb), i) for i in range(10)]    # 35 MiB
    groups = _pack(ten, MAX, 2)
    assert sorted(len(g) for g in groups) == [5, 5]                    # both cores busy, balanced
    loads = [sum(t.size for t in g) for g in groups]
    assert max(loads) - min(loads) < mb
    assert len(_pack(ten, MAX, 1)) == 1
    assert len(_pack(ten, 8 * mb, 1)) == 5                             # maxPartitionBytes caps a task
    assert len(_pack(ten, MAX, 64)) == 9                               # 4 MiB floor: ceil(35.45 / 4) tasks
    assert sorted(t.file_slice.file_id for g in _pack(ten, MAX, 3) for t in g) == [t.file_slice.file_id for t in ten]
    assert _pack([], MAX, 2) == [] and OPEN_COST_BYTES == 4 * mb
    # never past maxPartitionBytes: 7 + 2 MiB would balance better but exceed 8 MiB
    odd = [_Task(7 * mb, 0), _Task(7 * mb, 1), _Task(2 * mb, 2)]
    assert sorted(sum(t.size for t in g) for g in _pack(odd, 8 * mb, 1)) == [2 * mb, 7 * mb, 7 * mb]
    assert [len(g) for g in _pack([_Task(20 * mb, 0)], 8 * mb, 1)] == [1]


# -- types -------------------------------------------------------------------------------------------
ROW_SCHEMA = pa.schema([
    ("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()),
    ("amount", pa.decimal128(12, 2)), ("big", pa.decimal128(38, 10)), ("score", pa.float64()),
    ("n", pa.int32()), ("small", pa.int16()), ("tiny", pa.int8()), ("ratio", pa.float32()),
    ("when", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")), ("day", pa.date32()),
    ("flag", pa.bool_()), ("bin", pa.binary()), ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.int64())),
    ("info", pa.struct([("a", pa.int64()), ("b", pa.string()),
                        ("inner", pa.struct([("xs", pa.list_(pa.int32())), ("d", pa.decimal128(5, 1))]))])),
])


def make_rows(ids, ts: int, seed: int = 0, partitions=("a", "b", "c")) -> pa.Table:
    rows = []
    for k in ids:
        k = int(k)
        rows.append({
            "id": f"k{k:06d}", "ts": ts, "p": partitions[k % len(partitions)],
            "amount": decimal.Decimal(k * 7 + seed) / 100,
            "big": decimal.Decimal(f"-{k * 12345678901234567890 + seed}.{k * 1234567891 % 10**10:010d}")
            if k % 5 else None,
            "score": k * 0.5 + seed, "n": k + seed, "small": (k % 300) - 150, "tiny": (k % 200) - 100,
            "ratio": float(k % 7) / 4, "when": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=k * 1_000_003 + seed),
            "local": dt.datetime(1969, 12, 31, 23, 59) + dt.timedelta(seconds=k + seed), "day": dt.date(1960, 1, 1) + dt.timedelta(days=k * 37 + seed),
            "flag": (k + seed) % 2 == 0 if k % 7 else None, "bin": bytes([k % 256, seed % 256, 0, 255]),
            "tags": [f"t{k % 3}", f"s{seed}"] if k % 4 else None,
            "attrs": [("x", k), ("y", seed)] if k % 3 else [],
            "info": {"a": k * seed, "b": f"v{seed}", "inner": {"xs": [k, None, seed], "d": decimal.Decimal(k % 1000) / 10}} if k % 6 else None})
    return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)


# What Hudi stores for what Spark writes: bytes and shorts become Avro ints.
STORED = pa.schema([pa.field(f.name, pa.int32() if f.name in ("small", "tiny") else f.type) for f in ROW_SCHEMA])
DATA_COLS = ROW_SCHEMA.names


# hudi-rs 0.5 cannot read Avro local-timestamp-micros (Spark TIMESTAMP_NTZ) yet: the tables it
# checks leave that column out.
RS_COLS = [c for c in DATA_COLS if c != "local"]


def rs_rows(ids, ts, seed=0, partitions=("a", "b", "c")) -> pa.Table:
    return make_rows(ids, ts, seed, partitions).select(RS_COLS)


def stored(table: pa.Table) -> pa.Table:
    return table.cast(pa.schema([STORED.field(n) for n in table.column_names]))


def data_rows(table: pa.Table, cols=RS_COLS) -> list[dict]:
    return canonical_rows(to_hudi_arrow(table.select(cols)))


def model_rows(rows: dict, cols=RS_COLS) -> list[dict]:
    schema = pa.schema([ROW_SCHEMA.field(c) for c in cols])
    return canonical_rows(stored(pa.Table.from_pylist([{c: r[c] for c in cols} for r in rows.values()], schema=schema)))


def test_only_local_mode_counts_as_local():
    """Tagged rows are kept in a local checkpoint only where no executor can be lost (one JVM);
    a ``local-cluster`` master has executor JVMs of its own (test_spark_cluster.py loses one)."""
    from spark_adapter.writer import local_master
    assert all(local_master(m) for m in ("local", "local[2]", "local[*]", "local[4,3]", "local[*,2]"))
    assert not any(local_master(m) for m in ("local-cluster[2,1,1024]", "spark://h:7077", "yarn",
                                             "k8s://https://h:443", "mesos://h:5050"))


def test_write_buckets_packed_into_tasks_by_their_bytes():
    from types import SimpleNamespace as B

    from spark_adapter.writer import TASK_BYTES, TASKS_PER_CORE, pack_buckets
    mb = 1024 * 1024

    def merge(size, records=0):
        return B(kind="merge", file_slice=B(total_size=size), num_records=records)
    big = [merge(40 * mb) for _ in range(10)]
    assert pack_buckets(big, 100, 2) == tuple(range(10))             # 400 MB: a task each
    assert pack_buckets(big[:4], 100, 2) == (0, 1, 2, 3)              # few buckets: a task each
    small = [merge(3 * mb, 10_000) for _ in range(90)]                # 90 x 3.4 MB: 10 tasks of 32 MB
    task_of = pack_buckets(small, 40, 2)
    assert sorted(set(task_of)) == list(range(-(-90 * (3 * mb + 400_000) // TASK_BYTES)))
    assert {task_of.count(t) for t in set(task_of)} == {9}
    # appends and new file groups weigh their records only: a huge slice does not count
    appends = [B(kind="append", file_slice=B(total_size=10 * 1024 * mb), num_records=1) for _ in range(90)]
    assert len(set(pack_buckets(appends, 100, 2))) == TASKS_PER_CORE * 2
    assert len(set(pack_buckets(appends, 100, 64))) == 90
    # mixed sizes: largest first to the least loaded, so no task is a bucket above another
    mixed = [merge((i % 7 + 1) * mb) for i in range(40)]
    task_of = pack_buckets(mixed, 1, 2)
    loads = [sum(b.file_slice.total_size for b, t in zip(mixed, task_of) if t == k) for k in set(task_of)]
    assert len(loads) == TASKS_PER_CORE * 2 and max(loads) - min(loads) <= 7 * mb
    assert pack_buckets([], 100, 2) == ()


def test_arrow_conversions_keep_types_and_values():
    t = make_rows(range(40), ts=3, seed=2)
    sliced = t.slice(7, 20)
    target = spark_arrow_schema(spark_schema(sliced.schema))
    back = to_spark_arrow(sliced, target)
    assert back.schema.equals(target)
    assert back.to_pylist() == sliced.to_pylist()
    assert to_hudi_arrow(back).to_pylist() == stored(sliced).to_pylist()
    assert to_hudi_arrow(back).schema.field("when").type == pa.timestamp("us", tz="UTC")
    assert to_hudi_arrow(back).schema.field("local").type == pa.timestamp("us")


def test_spark_types_round_trip(spark, tmp_path):
    data = make_rows(range(60), ts=1, seed=3)
    df = sdf(spark, data)
    assert df.schema == spark_schema(data.schema)
    path = tmp_path / "types"
    df.write.format("hudi_format").options(**_opts("COPY_ON_WRITE", "bulk_insert")).save(str(path))
    table = hudi.open_table(path)
    assert table.schema().remove_metadata() == pa.schema(
        [pa.field(n, pa.string()) for n in hudi.open_table(path).schema().names[:5]] + list(STORED))
    assert data_rows(table.read(), DATA_COLS) == canonical_rows(stored(data))
    assert data_rows(load(spark, path).toArrow(), DATA_COLS) == canonical_rows(stored(data))


# -- writes of every operation, read back by Spark, the core and hudi-rs --------------------------------
def _opts(table_type, operation, **extra):
    return {"hoodie.table.name": "spark_trips", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.table.type": table_type, "hoodie.datasource.write.operation": operation,
            **extra}


def _check(spark, path, model: Model):
    ours = hudi.open_table(path).read()
    theirs = hudi_rs_read(str(path))
    via_spark = load(spark, path).toArrow()
    assert data_rows(via_spark) == model_rows(model.rows)
    assert canonical_rows(to_hudi_arrow(via_spark)) == canonical_rows(ours)
    assert canonical_rows(to_hudi_arrow(via_spark).select(theirs.column_names)) == canonical_rows(theirs)


# each table type and each version once (the tagging tests write MOR v8 through Spark too)
@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 6)])
def test_every_operation_through_df_write(spark, tmp_path, table_type, version):
    path = str(tmp_path / "t")
    model = Model(event_time=version >= 8)     # 0.x tables: the latest write wins (payload)
    extra = {"hoodie.write.table.version": str(version)}
    steps = [
        ("bulk_insert", rs_rows(range(0, 300), ts=1), "errorifexists"),
        ("insert", rs_rows(range(300, 360), ts=1, seed=1), "append"),
        ("upsert", rs_rows(list(range(0, 40)) + list(range(350, 380)), ts=2, seed=2), "append"),
        ("upsert", rs_rows(range(10, 20), ts=0, seed=9), "append"),          # older ordering value
        ("delete", rs_rows(range(100, 130), ts=3), "append"),
        ("insert_overwrite", rs_rows(range(1000, 1010, 3), ts=4, seed=4), "append"),   # partition b
        ("delete_partition", rs_rows([1001], ts=5), "append"),                             # partition c
        ("upsert", rs_rows(range(200, 260), ts=6, seed=6), "append"),
    ]
    instants = []
    for op, rows, mode in steps:
        df = sdf(spark, rows)
        if op == "delete":
            df = df.select("id", "p", "ts")
        df.write.format("hudi_format").options(**_opts(table_type, op, **extra)).mode(mode).save(path)
        partitions = {rows.column("p")[0].as_py()} if op == "delete_partition" else None
        model.apply(op, rows if op != "delete_partition" else None, len(instants), partitions)
        table = hudi.open_table(path)
        instants = table.timeline.write_instants()
        assert len(instants) == len(model.history), op
        _check(spark, path, model)
    assert table.version == version and table.table_type == table_type
    # one more: overwrite mode replaces the table
    rows = rs_rows(range(5000, 5020), ts=7, seed=7)
    sdf(spark, rows).write.format("hudi_format").options(**_opts(table_type, "upsert", **extra)) \
        .mode("overwrite").save(path)
    model.apply("insert_overwrite_table", rows, len(instants))
    assert hudi.open_table(path).timeline.write_instants()[-1].action == "replacecommit"
    _check(spark, path, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_soft_deletes_through_spark(spark, tmp_path, table_type):
    """Records flagged ``_hoodie_is_deleted`` delete their keys through Spark as through the
    core: a newer flagged record deletes, an older one loses (event time), a flagged new key is
    never written."""
    path = str(tmp_path / "t")
    model = Model(event_time=True)

    def flagged(rows: pa.Table, ids=()) -> pa.Table:
        want = {f"k{int(i):06d}" for i in ids}
        return rows.append_column("_hoodie_is_deleted", pa.array([k in want for k in rows.column("id").to_pylist()]))
    steps = [("bulk_insert", flagged(rs_rows(range(0, 60), ts=5))),
             ("upsert", pa.concat_tables([flagged(rs_rows([1, 2, 3, 70, 71], ts=9, seed=1), [1, 2, 70]),
                                          flagged(rs_rows([4], ts=1, seed=1), [4])]))]
    for n, (op, rows) in enumerate(steps):
        sdf(spark, rows).write.format("hudi_format").options(**_opts(table_type, op)).mode("append").save(path)
        model.apply(op, rows, n)
        _check(spark, path, model)
    assert {"k000001", "k000002", "k000070"}.isdisjoint({r["id"] for r in model.rows.values()})
    assert "k000004" in {r["id"] for r in model.rows.values()} and len(model.rows) == 60 - 2 + 1
    # only flagged records of new keys in a partition: nothing is planned there, no file written
    only = flagged(rs_rows([80, 81], ts=9, partitions=("z",)), [80, 81])
    sdf(spark, only).write.format("hudi_format").options(**_opts(table_type, "upsert")).mode("append").save(path)
    model.apply("upsert", only, len(steps))
    _check(spark, path, model)
    assert not glob.glob(f"{path}/z/*.parquet") and not glob.glob(f"{path}/z/.*.log.*")


def test_save_modes(spark, tmp_path):
    path = str(tmp_path / "modes")
    first = sdf(spark, rs_rows(range(10), ts=1))
    opts = _opts("COPY_ON_WRITE", "insert")
    first.write.format("hudi_format").options(**opts).save(path)          # errorifexists: creates
    with pytest.raises(hudi.HudiError, match="already exists"):
        first.write.format("hudi_format").options(**opts).save(path)
    sdf(spark, rs_rows(range(10, 20), ts=1)).write.format("hudi_format").options(**opts) \
        .mode("ignore").save(path)
    assert len(hudi.open_table(path).timeline.write_instants()) == 1
    assert hudi.open_table(path).read().num_rows == 10
    # save(path, format=..., mode=...) keyword forms and partitionBy()
    other = str(tmp_path / "kw")
    first.write.partitionBy("p").save(other, format="hudi_format", mode="overwrite",
                                      **{k: v for k, v in opts.items() if "partitionpath" not in k})
    assert hudi.open_table(other).config.partition_fields == ["p"]
    assert hudi.open_table(other).read().num_rows == 10
    # other formats are untouched by the hook
    first.select("id", "ts").write.mode("overwrite").parquet(str(tmp_path / "plain"))
    assert spark.read.parquet(str(tmp_path / "plain")).count() == 10


def test_staged_writes_through_the_data_source_api(spark, tmp_path):
    """Without the driver hook (e.g. SQL), Spark's data source writer stages and commits once."""
    from pyspark.sql.readwriter import DataFrameWriter
    path = str(tmp_path / "staged")
    df = sdf(spark, rs_rows(range(50), ts=1)).repartition(3)
    w = df.write.format("hudi_format").options(**_opts("MERGE_ON_READ", "insert")).mode("append")
    DataFrameWriter.save.__wrapped__(w, path)
    up = sdf(spark, rs_rows(range(40, 60), ts=2, seed=1))
    w = up.write.format("hudi_format").options(**_opts("MERGE_ON_READ", "upsert")).mode("append")
    DataFrameWriter.save.__wrapped__(w, path)
    model = Model(event_time=True)
    model.apply("insert", rs_rows(range(50), ts=1), 0)
    model.apply("upsert", rs_rows(range(40, 60), ts=2, seed=1), 1)
    assert len(hudi.open_table(path).timeline.write_instants()) == 2
    assert not glob.glob(f"{path}/.hoodie/.temp/spark-staging-*/*")
    _check(spark, path, model)


# -- scale and failures --------------------------------------------------------------------------------
def test_many_rows_in_parallel_tasks_one_commit(spark, tmp_path):
    """400k rows into 4 partitions, several file groups each: the plan sizes new files by
    Hudi's record size estimate (1 KiB a record for a table without commits) against a
    40 MB max file size, so ~40k records a file group and one Spark task each."""
    path = str(tmp_path / "big")
    n = 400_000
    df = spark.range(n).select(
        F.format_string("key-%08d", F.col("id")).alias("key"),
        (F.col("id") % 4).cast("string").alias("part"),
        F.col("id").alias("ts"), (F.col("id") * 0.25).alias("value"))
    df.write.format("hudi_format").options(**{
        "hoodie.datasource.write.recordkey.field": "key", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.operation": "insert",
        "hoodie.parquet.compression.codec": "snappy",
        "hoodie.parquet.max.file.size": str(40 * 1024 * 1024)}).mode("overwrite").save(path)
    table = hudi.open_table(path)
    instants = table.timeline.write_instants()
    assert [i.action for i in instants] == ["commit"]
    files = [os.path.basename(f) for f in glob.glob(f"{path}/*/*.parquet")]
    tokens = {re.match(r".+?_(\d+-\d+-\d+)_\d+\.parquet$", f).group(1) for f in files}
    # one Spark task per file group: several tasks, each with its own partition id and attempt
    assert len(files) >= 8 and len(tokens) == len(files)
    assert len({t.split("-")[0] for t in tokens}) == len(files)
    # reads: the session's two cores each get a task; minPartitions=1 packs the table into one
    assert sum(s.total_size for s in table.file_slices()) > 8 * 1024 * 1024
    assert load(spark, path).rdd.getNumPartitions() == 2
    assert load(spark, path, minPartitions=1).rdd.getNumPartitions() == 1
    assert load(spark, path).count() == n
    keys = table.read(columns=["key"]).column("key")
    assert len(keys) == n and len(set(keys.to_pylist())) == n


def _data_files(path):
    return sorted(f for f in glob.glob(f"{path}/**/*", recursive=True)
                  if os.path.isfile(f) and "/.hoodie" not in f and not f.endswith(".hoodie_partition_metadata"))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_failed_job_leaves_nothing(spark, tmp_path, table_type, codec_executors_refuse):
    path = str(tmp_path / "fail")
    base = rs_rows(range(100), ts=1)
    sdf(spark, base).write.format("hudi_format").options(**_opts(table_type, "insert")).save(path)
    before_files = _data_files(path)
    before = hudi.open_table(path).read()
    with pytest.raises(Exception, match="failed in a Spark task.*no-such-codec"):
        # part of it goes to existing file groups (MOR: log files that do get written), part to
        # new file groups in a new partition, whose base files fail
        sdf(spark, rs_rows(range(200, 260), ts=2, partitions=("a", "z"))).write.format("hudi_format") \
            .options(**_opts(table_type, "insert", **{"hoodie.parquet.compression.codec": codec_executors_refuse})) \
            .mode("append").save(path)
    table = hudi.open_table(path)
    assert [i.state.name for i in table.timeline.instants if i.action in ("commit", "deltacommit")] == ["COMPLETED"]
    assert _data_files(path) == before_files
    assert not glob.glob(f"{path}/.hoodie/.temp/*/**/*.marker.*", recursive=True)
    assert canonical_rows(table.read()) == canonical_rows(before)


def test_crashed_driver_is_rolled_back_by_the_next_write(spark, tmp_path, monkeypatch, codec_executors_refuse):
    path = str(tmp_path / "crash")
    opts = _opts("MERGE_ON_READ", "upsert")
    model = Model(event_time=True)
    rows = rs_rows(range(100), ts=1)
    sdf(spark, rows).write.format("hudi_format").options(**opts).save(path)
    model.apply("upsert", rows, 0)
    before_files = _data_files(path)
    # the driver "dies" after the job failed: nothing cleans up
    from hudi_format.transaction import Transaction
    monkeypatch.setattr(Transaction, "abort", lambda self, *a, **k: self.heartbeat and self.heartbeat.stop())
    with pytest.raises(Exception):
        sdf(spark, rs_rows(range(50, 150), ts=2, seed=1, partitions=("a", "z"))).write.format("hudi_format") \
            .options(**{**opts, "hoodie.parquet.compression.codec": codec_executors_refuse}).mode("append").save(path)
    monkeypatch.undo()
    pending = [i for i in hudi.open_table(path).timeline.instants if i.state.name != "COMPLETED"]
    assert len(pending) == 1
    _check(spark, path, model)                 # readers do not see the failed write
    rows = rs_rows(range(90, 120), ts=3, seed=2)
    sdf(spark, rows).write.format("hudi_format").options(**opts).mode("append").save(path)
    model.apply("upsert", rows, 1)
    table = hudi.open_table(path)
    assert pending[0].timestamp not in {i.timestamp for i in table.timeline.write_instants()}
    assert not [i for i in table.timeline.instants if i.state.name != "COMPLETED" and i.action != "rollback"]
    assert not set(_data_files(path)) - set(before_files) - {
        os.path.join(path, f) for f in _files_of(table, table.timeline.write_instants()[-1])}
    _check(spark, path, model)


def _files_of(table, instant):
    meta = table.timeline.metadata(instant)
    out = []
    for stats in meta.partition_to_write_stats.values():
        for st in stats:
            out.append(st.path)
    return out


def test_spark_hash_partitioning_is_inverted_exactly(spark):
    from spark_adapter.writer import _murmur3_int, partition_keys
    got = spark.range(-50, 50).select(F.hash(F.col("id").cast("int")).alias("h")).toArrow().column("h").to_pylist()
    assert got == [_murmur3_int(v) for v in range(-50, 50)]
    keys = partition_keys(7)
    df = spark.createDataFrame([(k,) for k in keys], "v int").repartition(7, "v")
    assert df.rdd.mapPartitionsWithIndex(lambda i, it: [(i, r.v) for r in it]).collect() == list(enumerate(keys))


def test_global_index_moves_duplicates_and_empty_writes(spark, tmp_path):
    """A key that changes partition under a global index is deleted there and inserted here;
    duplicates of a key in one DataFrame are combined by the ordering field (in one task);
    an empty DataFrame commits nothing but an empty instant."""
    path = str(tmp_path / "global")
    opts = _opts("MERGE_ON_READ", "upsert", **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    model = Model(event_time=True)
    first = rs_rows(range(30), ts=1)
    sdf(spark, first).write.format("hudi_format").options(**opts).save(path)
    model.apply("upsert", first, 0)
    moved = rs_rows(range(0, 6), ts=2, seed=1, partitions=("z",))               # a/b/c -> z
    dupes = pa.concat_tables([rs_rows(range(40, 44), ts=5, seed=5), rs_rows(range(40, 44), ts=3, seed=3),
                              rs_rows(range(10, 12), ts=1, seed=8), rs_rows(range(10, 12), ts=4, seed=4)])
    batch = pa.concat_tables([moved, dupes])
    sdf(spark, batch).repartition(3).write.format("hudi_format").options(**opts).mode("append").save(path)
    model.apply("upsert", moved, 1)
    model.apply("upsert", pa.concat_tables([dupes.slice(0, 4), dupes.slice(10, 2)]), 1)
    model.history.pop(-2)
    _check(spark, path, model)
    assert {r["p"] for r in hudi.open_table(path).read(filters=[("id", "in", ["k000000", "k000005"])]).to_pylist()} == {"z"}
    empty = sdf(spark, rs_rows([], ts=9))
    empty.write.format("hudi_format").options(**opts).mode("append").save(path)
    instants = hudi.open_table(path).timeline.write_instants()
    assert len(instants) == 3
    _check(spark, path, model)

