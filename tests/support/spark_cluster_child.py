"""Spark writes on a real cluster of separate executor JVMs, executors killed mid-write.

Run by ``tests/test_spark_cluster.py`` in its own process (one SparkContext per process): a
``local-cluster[2,1,1024]`` master, two workers and two executor JVMs with their own Python
workers, so nothing the adapter does may lean on local mode (one JVM sharing the driver's
blocks). For each table it writes, through ``df.write.format("hudi_format")``, the batches
:func:`batches` gives (insert, upsert of updates and new keys, delete), and kills executors
(``SIGKILL``, as a lost node) during some of them, at one of two moments:

- ``between``: after an upsert has tagged its records (kept on the executors) and before its
  write stage reads them: the tagged rows on the lost executor must be computed again;
- ``during``: while the write stage's tasks run: their attempts die with partial files, the
  retries on the surviving (or relaunched) executor write the bucket again.

It prints one JSON line: per table, the writes acknowledged (or the error) and the kills made,
and the rows ``spark.read.format("hudi_format")`` reads back (scanned by the executors).
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
import threading
import time

import pyarrow as pa

ROWS = 3_000
# name -> (table type, extra options, first operation, the kill during each write of
# :func:`batches`): the record index looked up by executor tasks, the tagged rows kept there
# (Spark's join path); a bulk insert (each task writes its own rows) and the simple index run
# where each partition's rows meet (the tag-rows path). A recovery costs 5-15 s.
TABLES = {
    "cow_record_index": ("COPY_ON_WRITE", {"hoodie.index.type": "RECORD_INDEX",
                                           "hoodie.metadata.record.index.enable": "true"},
                         "insert", (None, "between", None)),
    "mor_simple": ("MERGE_ON_READ", {"hoodie.index.type": "SIMPLE"}, "bulk_insert", ("during", "during", None)),
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

    def during_tasks(self, timeout: float = 60.0) -> threading.Thread:
        """A thread that kills an executor once a task of a job started from now runs."""
        tracker = self.sc.statusTracker()
        before = set(tracker.getJobIdsForGroup(None) or ())

        def watch() -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for job in set(tracker.getActiveJobsIds()) - before:
                    info = tracker.getJobInfo(job)
                    stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else ())]
                    if any(s is not None and s.numActiveTasks > 0 for s in stages):
                        time.sleep(0.2)          # the tasks are under way
                        self.kill_one("during")
                        return
                time.sleep(0.02)
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        return t


def main(workdir: str) -> int:
    began = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_adapter
    from hudi_format import engine
    from spark_adapter import writer
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("hudi_format cluster test")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "4")
             .config("spark.sql.session.timeZone", "UTC").config("spark.task.maxFailures", "8")
             .config("spark.executor.memory", "768m").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    spark_adapter.register(spark)
    killer = Killer(spark)
    mode: dict = {"kill": None, "watcher": None}

    def before_write_stage() -> None:
        if mode["kill"] == "between":
            killer.kill_one("between")
        elif mode["kill"] == "during":
            mode["watcher"] = killer.during_tasks()

    run_tasks = writer.DistributedWrite._run_tasks

    def killing_run_tasks(self, *args, **kwargs):
        # the tagged records are on the executors now; the write stage is about to read them
        before_write_stage()
        return run_tasks(self, *args, **kwargs)
    writer.DistributedWrite._run_tasks = killing_run_tasks
    open_new_files = engine.open_new_files

    def killing_open_new_files(*args, **kwargs):
        # a bulk insert: sampled, the instant open; its write job comes next
        target = open_new_files(*args, **kwargs)
        before_write_stage()
        return target
    engine.open_new_files = killing_open_new_files

    report: dict = {"master": spark.sparkContext.master, "tables": {},
                    "startup_seconds": round(time.monotonic() - began, 1)}
    for name, (table_type, extra, first, kills) in TABLES.items():
        path = os.path.join(workdir, name)
        done = []
        for (op, rows), kill in zip(batches(first), kills):
            mode["kill"] = kill
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
            if mode["watcher"] is not None:
                mode["watcher"].join()
                mode["watcher"] = None
                done[-1]["kills"] = killer.kills[before:]
        read = spark.read.format("hudi_format").load(path).select("id", "p", "ts", "v").toArrow()
        report["tables"][name] = done
        report.setdefault("spark_read", {})[name] = sorted(map(list, zip(*(read.column(c).to_pylist()
                                                                           for c in read.column_names))))
    spark.stop()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
