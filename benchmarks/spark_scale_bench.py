"""Spark writes at scale: what reaches the driver, and a driver of 1 GB upserting 20M rows.

- ``driver rows``: a COW table of ``rows`` records (bulk_insert), then a 10% upsert (half
  updates, half new keys) through ``df.write.format("hudi_format")``; every row a DataFrame
  hands to the driver (``toArrow``, ``collect``, ``toPandas``) is counted. The index tags on
  the executors, so the count is per partition and file group, not per record.
- ``big upsert``: in a fresh process with ``spark.driver.memory=1g`` on ``local[2]``, a table
  of ``big // 10`` records, then an upsert of ``big`` records (a tenth of them updates); prints
  the time and the peak resident memory of the driver JVM and of the Python driver (VmHWM).

Run: ``python -m benchmarks spark-scale [--rows 2000000] [--big 20000000] [--index RECORD_INDEX]``
(the ``spark`` extra and Java 17). ``--big 0`` skips the big upsert. ``--index``: the tables'
index (``RECORD_INDEX`` also keeps the metadata table's record index, whose update the
executors make: the Python driver's peak shows whether any record key reached it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def _session(cores: int, driver_memory: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("spark_scale_bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", driver_memory)
             .config("spark.sql.shuffle.partitions", str(cores * 4)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import spark_adapter
    spark_adapter.register(spark)
    return spark


def _records(spark, start: int, stop: int, ts: int):
    from pyspark.sql import functions as F
    idx = F.col("id")
    return spark.range(start, stop).select(
        F.concat(F.lit("trip-"), F.lpad(idx.cast("string"), 10, "0")).alias("uuid"),
        F.lit(ts).cast("long").alias("ts"),
        F.concat(F.lit("city-"), (idx % 10).cast("string")).alias("city"),
        ((idx * 7919) % 65536 / 100.0).alias("fare"),
        F.concat(F.lit("rider-"), (idx % 4096).cast("string")).alias("rider"))


_INDEX: dict = {}   # the tables' index options (--index)


def _opts(operation: str) -> dict:
    return {"hoodie.datasource.write.recordkey.field": "uuid", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.operation": operation,
            "hoodie.table.name": "trips", "hoodie.parquet.compression.codec": "snappy", **_INDEX}


def _use_index(index: str | None) -> None:
    _INDEX.clear()
    if index:
        _INDEX["hoodie.index.type"] = index
        if index == "RECORD_INDEX":
            _INDEX["hoodie.metadata.record.index.enable"] = "true"


class DriverRows:
    """Counts rows handed to the driver by DataFrame actions while active."""

    def __init__(self, spark):
        from pyspark.sql import DataFrame
        self.rows = 0
        # Spark 4's DataFrame methods live on the classic subclass
        self._saved = {(cls, n): vars(cls)[n] for cls in {DataFrame, type(spark.range(1))}
                       for n in ("toArrow", "collect", "toPandas") if n in vars(cls)}

    def __enter__(self):
        for (cls, name), real in self._saved.items():
            setattr(cls, name, self._wrap(real))
        return self

    def __exit__(self, *exc):
        for (cls, name), real in self._saved.items():
            setattr(cls, name, real)

    def _wrap(self, real):
        def counted(df, *a, **k):
            out = real(df, *a, **k)
            self.rows += out.num_rows if hasattr(out, "num_rows") else len(out)
            return out
        return counted


def driver_rows(rows: int) -> dict:
    spark = _session(2, "2g")
    work = tempfile.mkdtemp(prefix="spark_scale_")
    try:
        path = os.path.join(work, "t")
        t0 = time.perf_counter()
        _records(spark, 0, rows, 1).write.format("hudi_format").options(**_opts("bulk_insert")) \
            .mode("overwrite").save(path)
        base_s = time.perf_counter() - t0
        tenth = rows // 10
        upd = _records(spark, 0, rows, 2).where("id % 20 = 0").unionByName(_records(spark, rows, rows + tenth // 2, 2))
        with DriverRows(spark) as counter:
            t0 = time.perf_counter()
            upd.write.format("hudi_format").options(**_opts("upsert")).mode("append").save(path)
            up_s = time.perf_counter() - t0
        return {"rows": rows, "upserted": tenth, "driver_rows": counter.rows, "bulk_insert_s": round(base_s, 1),
                "upsert_s": round(up_s, 1)}
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _jvm_pids() -> list[int]:
    """The driver JVM: this process's java children."""
    out = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == me and comm == "java":
            out.append(int(d))
    return out


def big_upsert(big: int) -> dict:
    """Runs in its own process (the driver JVM's heap is fixed when it starts)."""
    spark = _session(2, "1g")
    work = tempfile.mkdtemp(prefix="spark_scale_big_")
    try:
        path = os.path.join(work, "t")
        t0 = time.perf_counter()
        _records(spark, 0, big // 10, 1).write.format("hudi_format").options(**_opts("bulk_insert")) \
            .mode("overwrite").save(path)
        base_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        _records(spark, 0, big, 2).write.format("hudi_format").options(**_opts("upsert")).mode("append").save(path)
        up_s = time.perf_counter() - t0
        n = spark.read.format("hudi_format").load(path).count()
        jvm = sum(_peak_kb(p) for p in _jvm_pids())
        return {"table_rows": big // 10, "upserted": big, "rows_after": n, "bulk_insert_s": round(base_s, 1),
                "upsert_s": round(up_s, 1), "driver_jvm_peak_mb": round(jvm / 1024),
                "python_driver_peak_mb": round(_peak_kb(os.getpid()) / 1024)}
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(rows: int = 2_000_000, big: int = 20_000_000, index: str | None = None) -> None:
    _use_index(index)
    if index:
        print(f"index: {index}")
    got = driver_rows(rows)
    print(f"10% upsert of {got['rows']:,} rows: {got['driver_rows']:,} rows reached the driver "
          f"(bulk_insert {got['bulk_insert_s']}s, upsert {got['upsert_s']}s)")
    if big:
        out = subprocess.run([sys.executable, "-m", "benchmarks.spark_scale_bench", "--big", str(big)]
                             + (["--index", index] if index else []),
                             capture_output=True, text=True, check=False)
        last = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode or not last:
            print(f"{big:,}-row upsert with a 1g driver FAILED (exit {out.returncode}):\n{out.stderr[-3000:]}")
            return
        r = json.loads(last[-1])
        print(f"{r['upserted']:,}-row upsert into {r['table_rows']:,} rows, local[2], spark.driver.memory=1g: "
              f"completed in {r['upsert_s']}s ({r['rows_after']:,} rows after); peak driver JVM RSS "
              f"{r['driver_jvm_peak_mb']} MB, Python driver RSS {r['python_driver_peak_mb']} MB")


if __name__ == "__main__":
    if len(sys.argv) in (3, 5) and sys.argv[1] == "--big":
        _use_index(sys.argv[4] if len(sys.argv) == 5 else None)
        print(json.dumps(big_upsert(int(sys.argv[2]))))
    else:
        run()
