"""PySpark through spark_adapter against Spark's own Parquet data source, in one Spark session.

One run, one cached DataFrame of ``rows`` generated trip-like records in 10 partitions; the
rows of issue 14's table, each a ratio to its peer (same codec on both sides):

- write: ``df.write.format("hudi_format")`` bulk_insert and insert into a new COW table vs
  ``df.write.partitionBy("city").parquet`` of the same DataFrame (snappy; gzip, Hudi's
  default codec, again with ``codecs=("snappy", "gzip")``)
- upsert of 10% (half updates, half new keys) into that COW table through Spark vs the core
  alone (``hudi_format.write`` in this one Python process) on a copy of the same table; and,
  for the record, the floor under any Spark design of it: the same rows shuffled into one Python
  task per file group that does nothing (on local[2] about the core's whole upsert at 1M rows),
  and the same floor under the insert (its rows shuffled to one idle task per file group)
- read: ``spark.read.format("hudi_format")`` of the table vs ``spark.read.parquet`` of the very
  same base files, both fully materialised (``noop`` sink); and a filter on the partition
  column (``city = 'city-3'``): the files the Hudi scan plans are counted (one partition's)

Run: ``python -m benchmarks spark [--rows N] [--codec snappy|gzip|both]`` (the ``spark`` extra, Java 17).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _tree_cpu() -> float:
    """CPU seconds of this process and its descendants (the JVM, its Python workers; exited
    children as their parents reaped them), from ``/proc`` (NaN elsewhere): on a shared
    machine, the work a side did, whatever the load made its wall time."""
    if not os.path.isdir("/proc/self/task"):
        return float("nan")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.split("/")[2])
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:15]) / tick    # utime stime cutime cstime
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of ``fn()``."""
    c0, t0 = _tree_cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _tree_cpu() - c0


def _session(cores: int):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("spark_bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
             .config("spark.sql.shuffle.partitions", str(cores * 2)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import spark_adapter
    spark_adapter.register(spark)
    return spark


def make_data(spark, rows: int, start: int = 0, ts: int = 1):
    from pyspark.sql import functions as F
    idx = F.col("id")
    return spark.range(start, start + rows).select(
        F.concat(F.lit("trip-"), idx.cast("string")).alias("uuid"),
        F.lit(ts).cast("long").alias("ts"),
        F.concat(F.lit("city-"), (idx % 10).cast("string")).alias("city"),
        ((idx * 7919) % 65536 / 100.0).alias("fare"),
        F.concat(F.lit("rider-"), (idx % 4096).cast("string")).alias("rider"),
        ((idx * 31) % 1024).cast("int").alias("distance"),
        F.timestamp_seconds(F.lit(1_700_000_000) + idx).alias("pickup_at"))


def _nothing(batches):
    """A ``mapInArrow`` function that only counts its rows (the floor of a Python stage)."""
    import pyarrow as pa
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def _idle_shuffle(df, tasks: int):
    """``df``'s rows shuffled by city into ``tasks`` Python tasks that do nothing with them."""
    return lambda: df.repartition(tasks, "city").mapInArrow(_nothing, "n long").write.format("noop") \
        .mode("overwrite").save()


def _opts(operation: str, codec: str) -> dict:
    return {"hoodie.datasource.write.recordkey.field": "uuid", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.operation": operation,
            "hoodie.table.name": "trips", "hoodie.parquet.compression.codec": codec}


def _planned_files(path: str, city: str) -> tuple[int, int]:
    """(files the hudi_format scan of ``city = <city>`` plans, files of the table)."""
    from spark_adapter.datasource import HudiDataSource
    from pyspark.sql.datasource import EqualTo
    source = HudiDataSource({"path": path})
    reader = source.reader(source.schema())
    everything = sum(len(g.slices) for g in reader.partitions())
    reader = source.reader(source.schema())
    list(reader.pushFilters([EqualTo(("city",), city)]))
    return sum(len(g.slices) for g in reader.partitions()), everything


def run(rows: int, cores: int | None = None, codecs: tuple[str, ...] = ("snappy",)) -> list[tuple[str, float, float]]:
    import hudi_format as hudi
    cores = cores or os.cpu_count() or 2
    spark = _session(cores)
    data = make_data(spark, rows).cache()
    data.count()
    n_up = rows // 10
    upd = make_data(spark, n_up // 2, 0, 2).unionByName(make_data(spark, n_up - n_up // 2, rows, 2)).cache()
    upd.count()
    results = []
    notes = []
    tmp = Path(tempfile.mkdtemp(prefix="spark_bench_"))
    try:
        def hudi_write(path, op, codec, df=data, mode="overwrite"):
            return lambda: df.write.format("hudi_format").options(**_opts(op, codec)).mode(mode).save(str(path))

        def parquet_write(path, codec):
            return lambda: data.write.partitionBy("city").option("compression", codec) \
                .mode("overwrite").parquet(str(path))

        # JIT, Python workers and imports warm for both sides: one untimed write of the same
        # DataFrame each, and on our side one of each operation timed (the insert's count,
        # shuffle and broadcast join are code the bulk_insert does not run: its first run in a
        # JVM took 4.8-6.9 s against 3.3-4.1 s after, with the peer's write warm already)
        parquet_write(tmp / "warmup", "snappy")()
        hudi_write(tmp / "warmup_insert", "insert", "snappy")()
        shutil.rmtree(tmp / "warmup_insert", ignore_errors=True)
        hudi_write(tmp / "warmup_hudi", "bulk_insert", "snappy")()
        main = codecs[0]
        parquet_s = {}
        for codec in codecs:
            peer = parquet_s[codec] = _time(parquet_write(tmp / f"parquet_{codec}", codec))
            ours = _time(hudi_write(tmp / f"bulk_{codec}", "bulk_insert", codec))
            results.append((f"write: bulk_insert vs parquet ({codec})", ours, peer))
            ours = _time(hudi_write(tmp / f"cow_{codec}", "insert", codec))
            results.append((f"write: insert vs parquet ({codec})", ours, peer))
        # the floor under an insert sized into file groups as Hudi sizes it (a shuffle to the
        # tasks writing them), for the record: the rows shuffled into as many idle Python tasks
        groups = len(hudi.open_table(str(tmp / f"cow_{main}")).file_slices())
        results.append((f"floor: insert's shuffle into {groups} idle tasks", _time(_idle_shuffle(data, groups)),
                        parquet_s[main]))

        # the 10% upsert: through Spark, and by the core alone on a copy of the same table;
        # each side first upserts once, untimed, into a copy of the warm-up table
        for name in ("core", "warm_spark", "warm_core"):
            shutil.copytree(tmp / (f"cow_{main}" if name == "core" else "warmup_hudi"), tmp / name)
        upd_arrow = upd.toArrow()
        opts = _opts("upsert", main)
        opts.pop("hoodie.datasource.write.operation")
        hudi_write(tmp / "warm_spark", "upsert", main, upd, "append")()
        hudi.write(str(tmp / "warm_core"), upd_arrow, operation="upsert", options=opts)
        ours, ours_cpu = _timed(hudi_write(tmp / f"cow_{main}", "upsert", main, upd, "append"))
        peer, peer_cpu = _timed(lambda: hudi.write(str(tmp / "core"), upd_arrow, operation="upsert", options=opts))
        results.append((f"write: upsert 10% vs the core alone ({main})", ours, peer))
        notes.append(f"upsert 10%: CPU of driver, JVM and Python workers {ours_cpu:.2f} s vs the core's "
                     f"{peer_cpu:.2f} s (cpu ratio {ours_cpu / peer_cpu if peer_cpu > 0 else float('nan'):.2f})")
        # the floor under any Spark upsert: the upsert's rows shuffled to one Python task per
        # file group that does nothing with them (no tagging, no merge, no file written)
        groups = len(hudi.open_table(str(tmp / "core")).file_slices())
        results.append((f"floor: upsert's shuffle into {groups} idle tasks", _time(_idle_shuffle(upd, groups)), peer))

        def scan(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        table = str(tmp / f"bulk_{main}")
        base_files = sorted(glob.glob(os.path.join(table, "*", "*.parquet")))
        hudi_df = spark.read.format("hudi_format").load(table)
        parquet_df = spark.read.parquet(*base_files)
        # each query once untimed on both sides: the session's first Python data source
        # read starts its planner workers (a one-off, reported below), Spark's JIT warms
        cold = _time(scan(hudi_df))
        for df in (parquet_df, parquet_df.filter("city = 'city-3'"), hudi_df.filter("city = 'city-3'")):
            scan(df)()
        notes.append(f"first hudi_format read of the session (planner workers start, JIT): {cold:.2f} s")
        peer = _time(scan(parquet_df))
        ours = _time(scan(hudi_df))
        results.append(("read: snapshot vs parquet of the same files", ours, peer))
        peer = _time(scan(parquet_df.filter("city = 'city-3'")))
        ours = _time(scan(hudi_df.filter("city = 'city-3'")))
        results.append(("read: partition filter vs parquet", ours, peer))
        planned, total = _planned_files(table, "city-3")
        notes.append(f"partition filter: the hudi_format scan plans {planned} of the table's {total} files")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()

    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"\nPySpark benchmark, {rows:,} rows, local[{cores}], load average {load}\n")
    print(f"| {'case':48} | spark_adapter s |   peer s | ratio |")
    print(f"|{'-' * 50}|-----------------|----------|-------|")
    for name, ours, peer in results:
        ratio = ours / peer if peer == peer and peer > 0 else float("nan")
        print(f"| {name:48} | {ours:15.2f} | {peer:8.2f} | {ratio:5.2f} |")
    for note in notes:
        print(note)
    return results


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
