"""Spark writes racing a core writer process and the table services, checked like the soak.

A Spark writer (``df.write.format("hudi_format")``, in this process) inserts, upserts and
deletes keys of its own (``w<proc>_<n>``, ``proc`` = the number of core writers) while
``soak_concurrency.run`` runs core writer processes and the service process (compact / clean /
cluster / archive, aggressive options) on the same table; under a global index that moves
keys (``--option``), a third of its upserts give their keys another partition, as the core
writers' do. The Spark writer keeps a ledger in
the core writers' format (``servicechild.writer``: keys a failed write touched are retired),
so ``soak_concurrency.check`` judges every acknowledged write of both engines with our reader
and hudi-rs: 0 lost, stale, failed-but-visible or duplicated keys, the metadata table's listing
equal to storage.

The Spark session is ``local[2]``; ``HUDI_FORMAT_SOAK_SPARK_MASTER=local-cluster[2,1,1024]``
runs it on a standalone cluster of separate executor JVMs instead.

A long run (the defects it found have deterministic tests in ``test_spark_tagging.py`` and
``test_engine_api.py``; the record index moving keys is the combination that found them):
``python -m tests.support.soak_spark --seconds 300 --table-type MERGE_ON_READ --version 8
--option hoodie.index.type=RECORD_INDEX --option hoodie.metadata.record.index.enable=true
--option hoodie.record.index.update.partition.path=true``.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from servicechild import AGGRESSIVE, Keys, rows  # noqa: E402
from soak_concurrency import check, create, parse_args, run, soak_each, summary  # noqa: E402


def spark_options(op: str) -> dict:
    """The data source options of one Spark write of the soak's table."""
    return {**AGGRESSIVE, "hoodie.datasource.write.operation": op,
            "hoodie.write.num.retries.on.conflict.failures": "3",   # as a Spark job would retry
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "p"}


def spark_writer(spark, url: str, proc: int, seconds: float, seed: int = 0) -> list[dict]:
    """Writes through Spark until the deadline; the ledger (acknowledged or failed, in order)."""
    rng = random.Random(1000 + seed + proc)
    deadline = time.monotonic() + seconds
    ledger: list[dict] = []
    mine = Keys(proc, sizes=(20, 20, 5))
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        value = proc * 1_000_000 + seq
        op, keys, parts = mine.next(rng)
        entry = {"op": op, "keys": keys, "value": value, "ok": True, "error": None, "column": False,
                 "parts": parts}
        try:
            (spark.createDataFrame(rows(keys, value, parts).to_pandas()).repartition(2).write
             .format("hudi_format").options(**spark_options("upsert" if op == "move" else op))
             .mode("append").save(url))
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome to check
            entry.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        mine.done(op, keys, parts, entry["ok"])
        ledger.append(entry)
    return ledger


def soak(spark, url: str, workdir: Path, seconds: float, table_type: str, version: int,
         writers: int = 1) -> dict:
    """Create the table, race the Spark writer with ``writers`` core writers and the services,
    and check every acknowledged write with both readers."""
    create(url, table_type, version)
    started = time.monotonic()
    result: dict = {}
    others = threading.Thread(target=lambda: result.update(run(url, workdir, seconds, writers)))
    others.start()
    try:
        mine = spark_writer(spark, url, writers, seconds)
    finally:
        others.join()
    with open(workdir / f"ledger{writers}-spark.jsonl", "w") as f:   # for diagnosis
        f.writelines(json.dumps(e) + "\n" for e in mine)
    ledgers = result["ledgers"] + [mine]
    report = {"table_type": table_type, "version": version, "seconds": round(time.monotonic() - started, 1),
              "spark_writes": summary([mine]), "core_writes": summary(result["ledgers"]),
              "service": result["service"], "child_exits": [code for code, _ in result["exits"]]}
    report["child_errors"] = [err for code, err in result["exits"] if code != 0][:2]
    report["spark_errors"] = sorted({e["error"][:200] for e in mine if not e["ok"]})[:5]
    report.update(check(url, ledgers))
    return report


def main(argv=None) -> int:
    import os
    args = parse_args(argv, __doc__.split("\n\n")[0], 1, "core writer processes beside Spark")
    from pyspark.sql import SparkSession

    import spark_adapter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # HUDI_FORMAT_SOAK_SPARK_MASTER=local-cluster[2,1,1024]: executor JVMs of their own
    spark = (SparkSession.builder.master(os.environ.get("HUDI_FORMAT_SOAK_SPARK_MASTER", "local[2]"))
             .appName("hudi_format soak")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_adapter.register(spark)
    return soak_each(args, lambda url, work, table_type, version: soak(spark, url, work, args.seconds, table_type,
                                                                        version, args.writers), "hudi-spark-soak-")


if __name__ == "__main__":
    sys.exit(main())
