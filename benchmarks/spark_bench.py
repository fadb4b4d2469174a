"""PySpark through spark_adapter against Spark's own Parquet data source, in one Spark session.

One run, one cached DataFrame of ``rows`` generated trip-like records in 10 partitions:

- write: ``df.write.format("hudi_format")`` (bulk_insert and insert into a new COW table) vs
  ``df.write.partitionBy("city").parquet`` of the same DataFrame, same codec (gzip, Hudi's default)
- upsert of 10% into the COW table (no Parquet peer: Parquet cannot upsert; shown for scale)
- read: ``spark.read.format("hudi_format")`` of that table vs ``spark.read.parquet`` of the very
  same base files, both fully materialised (``noop`` sink)

Run: ``python -m benchmarks spark [--rows N]`` (needs the ``spark`` extra and Java 17).
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


def _opts(operation: str) -> dict:
    return {"hoodie.datasource.write.recordkey.field": "uuid", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.operation": operation,
            "hoodie.table.name": "trips"}


def run(rows: int, cores: int | None = None) -> list[tuple[str, float, float]]:
    cores = cores or os.cpu_count() or 2
    spark = _session(cores)
    data = make_data(spark, rows).cache()
    data.count()
    n_up = rows // 10
    upd = make_data(spark, n_up // 2, 0, 2).unionByName(make_data(spark, n_up - n_up // 2, rows, 2)).cache()
    upd.count()
    results = []
    tmp = Path(tempfile.mkdtemp(prefix="spark_bench_"))
    try:
        def hudi_write(path, op, df=data, mode="overwrite"):
            return lambda: df.write.format("hudi_format").options(**_opts(op)).mode(mode).save(str(path))

        def parquet_write(path):
            return lambda: data.write.partitionBy("city").option("compression", "gzip") \
                .mode("overwrite").parquet(str(path))

        # JIT, Python workers and imports warm for both sides
        parquet_write(tmp / "warmup")()
        make_data(spark, 1000).write.format("hudi_format").options(**_opts("insert")).save(str(tmp / "warmup_hudi"))
        peer = _time(parquet_write(tmp / "parquet"))
        ours = _time(hudi_write(tmp / "bulk", "bulk_insert"))
        results.append(("write: bulk_insert vs parquet (gzip)", ours, peer))
        ours = _time(hudi_write(tmp / "cow", "insert"))
        results.append(("write: insert vs parquet (gzip)", ours, peer))
        ours = _time(hudi_write(tmp / "cow", "upsert", upd, "append"))
        results.append(("write: upsert 10% into COW (no parquet peer)", ours, float("nan")))

        def scan(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        base_files = sorted(glob.glob(str(tmp / "bulk" / "*" / "*.parquet")))
        hudi_df = spark.read.format("hudi_format").load(str(tmp / "bulk"))
        parquet_df = spark.read.parquet(*base_files)
        scan(parquet_df)()
        peer = _time(scan(parquet_df))
        ours = _time(scan(hudi_df))
        results.append(("read: snapshot vs parquet of the same files", ours, peer))
        peer = _time(lambda: parquet_df.filter("city = 'city-3'").write.format("noop").mode("overwrite").save())
        ours = _time(lambda: hudi_df.filter("city = 'city-3'").write.format("noop").mode("overwrite").save())
        results.append(("read: one partition (filter) vs parquet", ours, peer))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()

    print(f"\nPySpark benchmark, {rows:,} rows, local[{cores}]\n")
    print(f"| {'case':48} | spark_adapter s | spark parquet s | ratio |")
    print(f"|{'-' * 50}|-----------------|-----------------|-------|")
    for name, ours, peer in results:
        ratio = ours / peer if peer == peer and peer > 0 else float("nan")
        print(f"| {name:48} | {ours:15.2f} | {peer:15.2f} | {ratio:5.2f} |")
    return results


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
