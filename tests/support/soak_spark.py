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

Bounded in ``test_spark_concurrency.py``; a long run:
``python -m tests.support.soak_spark --seconds 300 [--table-type MERGE_ON_READ] [--version 6]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from servicechild import AGGRESSIVE, PARTITIONS, home, moves_keys, rows  # noqa: E402
from soak_concurrency import check, clean, create, run, summary  # noqa: E402


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
    live: list[str] = []
    where: dict[str, str] = {}   # a moved key's partition
    moves = moves_keys(AGGRESSIVE)
    next_key = 0
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        value = proc * 1_000_000 + seq
        roll = rng.random()
        if roll < 0.4 or len(live) < 6:
            op = "insert"
            keys = [f"w{proc}_{next_key + i}" for i in range(rng.randint(1, 20))]
            next_key += len(keys)
        elif roll < 0.8:
            op = "upsert"
            keys = rng.sample(live, min(len(live), rng.randint(1, 20)))
        else:
            op = "delete"
            keys = rng.sample(live, min(len(live), rng.randint(1, 5)))
        parts = [where.get(k, home(k)) for k in keys]
        if op == "upsert" and moves and rng.random() < 0.3:   # to another partition
            op = "move"
            parts = [rng.choice([p for p in PARTITIONS if p != q]) for q in parts]
        data = rows(keys, value, parts)
        entry = {"op": op, "keys": keys, "value": value, "ok": True, "error": None, "column": False,
                 "parts": parts}
        try:
            (spark.createDataFrame(data.to_pandas()).repartition(2).write.format("hudi_format")
             .options(**spark_options("upsert" if op == "move" else op)).mode("append").save(url))
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome to check
            entry.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
            live = [k for k in live if k not in keys]
        else:
            if op == "insert":
                live += keys
            elif op == "move":
                where.update(zip(keys, parts))
            elif op == "delete":
                live = [k for k in live if k not in keys]
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--writers", type=int, default=1, help="core writer processes beside Spark")
    ap.add_argument("--table-type", action="append", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    ap.add_argument("--version", action="append", type=int, choices=[6, 8])
    ap.add_argument("--dir", help="where to put the tables (default: a temporary folder)")
    ap.add_argument("--option", action="append", default=[], metavar="K=V",
                    help="a write/service option of every process and the Spark writes")
    args = ap.parse_args(argv)
    if args.option:   # the child processes read them from the environment
        os.environ["SOAK_OPTIONS"] = json.dumps(dict(o.split("=", 1) for o in args.option))
        AGGRESSIVE.update(json.loads(os.environ["SOAK_OPTIONS"]))
    from pyspark.sql import SparkSession

    import spark_adapter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("hudi_format soak")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_adapter.register(spark)
    base = Path(args.dir or tempfile.mkdtemp(prefix="hudi-spark-soak-"))
    ok = True
    for version in args.version or [8, 6]:
        for table_type in args.table_type or ["MERGE_ON_READ", "COPY_ON_WRITE"]:
            work = base / f"{table_type}-v{version}"
            work.mkdir(parents=True, exist_ok=True)
            report = soak(spark, str(work / "t"), work, args.seconds, table_type, version, args.writers)
            print(json.dumps(report, indent=1), flush=True)
            ok &= clean(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
