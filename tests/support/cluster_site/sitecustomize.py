"""Executor-side fault for ``tests/support/spark_cluster_child.py``: on the executors' Python path
only (``spark.executorEnv.PYTHONPATH``), never imported by the tests themselves.

With ``HUDI_FORMAT_CLUSTER_KILLS`` set (a directory), the write tasks of ``spark_adapter``
(``tasks.write_buckets``: planned writes; ``bulk.write_files``: bulk inserts) are wrapped: when
the driver has armed the next write (a file ``armed`` in that directory), the first task attempt
to claim it (an atomic rename) kills its own executor JVM with ``SIGKILL`` right after it wrote
its first file group, before its result reaches Spark: a node lost with a task's files written
and unreported, which the retried attempt writes again and the commit must leave out. Armed
with ``armed-ri``, the same happens to a task of the commit's record index job
(``record_index._write_groups``) once it wrote its metadata table log files.
"""

from __future__ import annotations

import functools
import os
import signal

_DIR = os.environ.get("HUDI_FORMAT_CLUSTER_KILLS")


def _executor_jvm() -> int | None:
    """The executor JVM among this process's ancestors (worker -> pyspark daemon -> JVM)."""
    pid = os.getpid()
    for _ in range(6):
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return pid
    return None


def _claim(arm: str) -> bool:
    try:
        os.rename(os.path.join(_DIR, arm), os.path.join(_DIR, f"claimed-{os.getpid()}"))
    except OSError:
        return False
    return True


def _dying(fn, arm: str = "armed"):
    @functools.wraps(fn)
    def task(*args, **kwargs):
        fire = _claim(arm)
        for out in fn(*args, **kwargs):
            jvm = _executor_jvm() if fire else None
            if jvm is not None:
                open(os.path.join(_DIR, f"killed-{jvm}"), "w").close()
                os.kill(jvm, signal.SIGKILL)
                os._exit(1)
            yield out
    return task


if _DIR:
    from spark_adapter import bulk, record_index, tasks

    tasks.write_buckets = _dying(tasks.write_buckets)
    bulk.write_files = _dying(bulk.write_files)
    # the commit's record index job: a task dies once it wrote its file groups' log files
    record_index._write_groups = _dying(record_index._write_groups, "armed-ri")
