"""Spark writes on a real cluster of separate executor JVMs, executors killed mid-write.

Run by ``tests/test_spark_cluster.py`` in its own process (one SparkContext per process): a
``local-cluster[2,1,1024]`` master, two workers and two executor JVMs with their own Python
workers, so nothing the adapter does may lean on local mode (one JVM sharing the driver's
blocks). For each table it writes, through ``df.write.format("hudi_format")``, the batches
:func:`batches` gives (insert, upsert of updates and new keys, delete), and kills executors
(``SIGKILL``, as a lost node) during some of them, at one of these moments:

- ``between``: after an upsert has tagged its records (kept on the executors) and before its
  write stage reads them: the tagged rows on the lost executor must be computed again;
- ``in_task``: by a write task itself (``cluster_site/sitecustomize.py``, on the executors'
  Python path), right after it wrote its first file group and before Spark has its result:
  the retry on the surviving (or relaunched) executor writes the bucket again, and the files
  of the dead attempt must stay out of the commit;
- ``in_ri``: by a task of the commit's record index job, once it wrote its metadata table log
  files: the retry writes them again, and the dead attempt's files must go.

Then the first table is streamed (``spark.readStream.format("hudi_format")``) into a new table
by the streaming sink, whose first write task kills its executor.

It prints one JSON line: per table, the writes acknowledged (or the error) and the kills made,
the rows ``spark.read.format("hudi_format")`` reads back (scanned by the executors), and how
the stream went.
The parent checks the tables (our reader, hudi-rs, the metadata table's listing, no file
outside a commit).

    python tests/support/spark_cluster_child.py WORKDIR
"""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import time

import pyarrow as pa

ROWS = 3_000
STREAM_COPY = "stream_copy"    # the first table, copied through the streaming source and sink
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_site")   # executors' fault
# name -> (table type, extra options, first operation, the kill during each write of
# :func:`batches`, as many writes as it names). The record index looked up by executor tasks,
# the tagged rows kept there (Spark's join path); a bulk insert (each task writes its own rows)
# and the simple index run where each partition's rows meet (the tag-rows path). An executor
# lost costs a write 5-15 s.
TABLES = {
    "cow_record_index": ("COPY_ON_WRITE", {"hoodie.index.type": "RECORD_INDEX",
                                           "hoodie.metadata.record.index.enable": "true"},
                         "insert", (None, "between", "in_ri")),
    "mor_simple": ("MERGE_ON_READ", {"hoodie.index.type": "SIMPLE"}, "bulk_insert", ("in_task", "in_task", None)),
}


def batches(first: str = "insert") -> list[tuple[str, pa.Table]]:
    """(operation, rows) written in order: an insert (or ``first``, a bulk_insert), an upsert
    (half updates, half new keys), a delete of some stored keys."""
    def rows(ids, ts):
        ids = list(ids)
        return pa.table({"id": [f"k{i:05d}" for i in ids], "ts": pa.array([ts] * len(ids), pa.int64()),
                         "p": [f"p{i % 3}" for i in ids], "v": pa.array([i * 10 + ts for i in ids], pa.int64())})
    upsert = pa.concat_tables([rows(range(0, ROWS, 3), 2), rows(range(ROWS, ROWS + ROWS // 3), 2)])
    return [(first, rows(range(ROWS), 1)), ("upsert", upsert), ("delete", rows(range(1, ROWS, 7), 3))]


def options(table_type: str, extra: dict, operation: str) -> dict:
    return {"hoodie.table.name": "cluster", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.table.type": table_type, "hoodie.datasource.write.operation": operation,
            **extra}


class Killer:
    """Kills executor JVMs of the application (``SIGKILL``) and records what it killed."""

    def __init__(self, spark):
        self.sc = spark.sparkContext
        self.app = self.sc.applicationId
        self.kills: list[str] = []

    def executors(self) -> list[int]:
        out = []
        for f in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(f, "rb") as fh:
                    cmd = fh.read()
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmd and self.app.encode() in cmd:
                out.append(int(f.split("/")[2]))
        return sorted(out)

    def kill_one(self, when: str) -> None:
        pids = self.executors()
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            self.kills.append(when)


def main(workdir: str) -> int:
    began = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_adapter
    from spark_adapter import writer
    from spark_jvm import TEST_JVM_OPTIONS
    kills_dir = os.path.join(workdir, "kills")
    os.makedirs(kills_dir)
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("hudi_format cluster test")
             .config("spark.executorEnv.PYTHONPATH", SITE)
             .config("spark.executorEnv.HUDI_FORMAT_CLUSTER_KILLS", kills_dir)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "4")
             .config("spark.sql.session.timeZone", "UTC").config("spark.task.maxFailures", "8")
             .config("spark.executor.memory", "768m")
             .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
             .config("spark.executor.extraJavaOptions", TEST_JVM_OPTIONS)
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    spark_adapter.register(spark)
    killer = Killer(spark)
    mode: dict = {"kill": None}

    run_tasks = writer.DistributedWrite._run_tasks

    def killing_run_tasks(self, *args, **kwargs):
        # the tagged records are on the executors now; the write stage is about to read them
        if mode["kill"] == "between":
            killer.kill_one("between")
        return run_tasks(self, *args, **kwargs)
    writer.DistributedWrite._run_tasks = killing_run_tasks

    report: dict = {"master": spark.sparkContext.master, "tables": {},
                    "startup_seconds": round(time.monotonic() - began, 1)}
    for name, (table_type, extra, first, kills) in TABLES.items():
        path = os.path.join(workdir, name)
        done = []
        for (op, rows), kill in zip(batches(first), kills):
            mode["kill"] = kill
            if kill in ("in_task", "in_ri"):   # the first task to claim it kills its executor
                open(os.path.join(kills_dir, "armed" if kill == "in_task" else "armed-ri"), "w").close()
            before = len(killer.kills)
            start = time.monotonic()
            try:
                spark.createDataFrame(rows).write.format("hudi_format") \
                    .options(**options(table_type, extra, op)).mode("append").save(path)
                done.append({"op": op, "ok": True, "kills": killer.kills[before:],
                             "seconds": round(time.monotonic() - start, 1)})
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                done.append({"op": op, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}",
                             "kills": killer.kills[before:]})
            killed = glob.glob(os.path.join(kills_dir, "killed-*"))
            # by the task that claimed the arming
            done[-1]["kills"] += ["in_ri" if kill == "in_ri" else "in_task"] * len(killed)
            for f in glob.glob(os.path.join(kills_dir, "*")):
                os.remove(f)
        read = spark.read.format("hudi_format").load(path).select("id", "p", "ts", "v").toArrow()
        report["tables"][name] = done
        report.setdefault("spark_read", {})[name] = sorted(map(list, zip(*(read.column(c).to_pylist()
                                                                           for c in read.column_names))))
    # Structured Streaming: the first table streamed commit by commit (the source's reads run
    # on the executors) into a new MOR table by the sink, whose first write task kills its
    # executor; the query must still deliver every record once
    open(os.path.join(kills_dir, "armed"), "w").close()
    src, dst = os.path.join(workdir, next(iter(TABLES))), os.path.join(workdir, STREAM_COPY)
    start = time.monotonic()
    query = (spark.readStream.format("hudi_format").load(src).writeStream.format("hudi_format")
             .options(**options("MERGE_ON_READ", {}, "upsert")).option("checkpointLocation", os.path.join(workdir, "cp"))
             .start(dst))
    try:
        query.processAllAvailable()
        report["stream"] = {"ok": True, "seconds": round(time.monotonic() - start, 1)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        report["stream"] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
    finally:
        query.stop()
    report["stream"]["kills"] = ["in_task"] * len(glob.glob(os.path.join(kills_dir, "killed-*")))
    spark.stop()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
