"""Concurrency with table services, and SIGKILLs: the soak's writer processes and its service
process (:mod:`soak_concurrency`) are killed at random moments and started again, then the
table must recover and show every acknowledged write.

A writer stores each write's intent before it writes (``servicechild.settle``); a write a kill
cut short is *in doubt*: it may have committed or not, but whole. Once every process has ended,
the kills' heartbeats expire and the table is recovered by what a user would run next: a write
and a round of the services (clean rolls failed writes back, compaction and clustering take
over their killed plans). Each in-doubt write is then resolved against our reader: *applied*
when every key shows it, *not applied* when none does, *torn* otherwise (a defect: a commit is
atomic). With the in-doubt writes resolved, the ledgers are judged as in the soak (0 lost,
stale, failed-but-visible, duplicated or misplaced keys, by our reader and by hudi-rs; the
metadata listing equal to storage), and:

* ``recovery``: the write and the services after the kills succeeded;
* ``left_pending``: instants still pending after recovery, other than requested service plans.

A kill inside a commit leaves the table lock held until its lease ends (a minute; Hudi's
filesystem lock has no owner to ask), so writers fail on the lock meanwhile: those are failed
writes like any other. Writers' heartbeats are short here (``--option`` overrides), so a killed
write is rolled back within seconds.

``python -m tests.support.soak_kills --seconds 300 --kill-every 4 [--table-type MERGE_ON_READ] [--s3]``
(``--s3``: on moto's S3 server, as the tests' S3; its writes are slower, so kill less often).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import hudi_format as hudi  # noqa: E402
from servicechild import AGGRESSIVE, SERVICE_OPTIONS, home, rows, run_service, service_names, settle  # noqa: E402
from soak_concurrency import CHILD, check, clean, create, parse_args, read_ours, soak_each, summary  # noqa: E402

#: Heartbeats of a second (two misses): a killed write counts as failed 3 s after its last beat.
KILL_OPTIONS = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "2"}
RECOVERY_KEY = "final_0"


def run_with_kills(url: str, workdir: Path, seconds: float, writers: int, every: float, seed: int,
                   storage_options=None) -> dict:
    """The soak's processes for ``seconds``; every ``every`` seconds on average one of them is
    killed (SIGKILL) and started again for the time left. The settled ledgers, service logs
    and kill counts."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    extra = [json.dumps(storage_options)] if storage_options else []
    deadline = time.monotonic() + seconds
    lives: Counter = Counter()

    def start(name: str) -> subprocess.Popen:
        left = f"{max(0.5, deadline - time.monotonic()):.2f}"
        lives[name] += 1
        if name == "service":
            args = ["service", url, left, str(workdir / f"service.{lives[name]}.json")]
        else:
            p = name[len("writer"):]
            args = ["writer", url, p, left, str(workdir / f"ledger{p}.jsonl")]
        err = open(workdir / f"{name}.{lives[name]}.err", "w")
        return subprocess.Popen([sys.executable, str(CHILD)] + args + extra, env=env, stderr=err)

    procs = {name: start(name) for name in [f"writer{p}" for p in range(writers)] + ["service"]}
    rng = random.Random(seed)
    kills: Counter = Counter()
    crashed: list[str] = []
    while True:
        pause = rng.expovariate(1.0 / every)
        if time.monotonic() + pause > deadline - 1.0:
            break
        time.sleep(pause)
        name = rng.choice(sorted(procs))
        if procs[name].poll() is None:
            procs[name].kill()
            kills[name.rstrip("0123456789")] += 1
        elif procs[name].returncode:   # it ended on its own, and not well
            crashed.append(_crash(workdir, name, lives[name], procs[name].returncode))
        procs[name].wait()
        procs[name] = start(name)
    for name, proc in procs.items():
        if proc.wait(timeout=seconds + 600):
            crashed.append(_crash(workdir, name, lives[name], proc.returncode))
    ledgers = [settle(str(workdir / f"ledger{p}.jsonl")) for p in range(writers)]
    counts: dict[str, Counter] = {}
    for life in range(1, lives["service"] + 1):
        out = workdir / f"service.{life}.json"
        if out.exists():
            for service, c in json.loads(out.read_text())["counts"].items():
                counts.setdefault(service, Counter()).update(c)
    return {"ledgers": ledgers, "service": {k: dict(v) for k, v in counts.items()}, "crashed": crashed,
            "kills": dict(kills)}


def _crash(workdir: Path, name: str, life: int, code: int) -> str:
    err = (workdir / f"{name}.{life}.err").read_text(errors="replace")
    return f"{name} (life {life}) exited {code}: {err[-600:]}"


def recover(url: str, storage_options=None) -> dict:
    """What a user runs after the kills: a write, then each service once; all must succeed.
    Returns the recovery's ledger entry and what is still pending afterwards."""
    beat = int(AGGRESSIVE.get("hoodie.client.heartbeat.interval_in_ms", 60_000))
    misses = int(AGGRESSIVE.get("hoodie.client.heartbeat.tolerable.misses", 2))
    time.sleep(beat * (misses + 1) / 1000 + 1)   # the killed writes' heartbeats have expired
    errors = []
    patient = dict(AGGRESSIVE, **{"hoodie.write.lock.num_retries": "150"})   # past a killed holder's lease
    entry = {"op": "insert", "keys": [RECOVERY_KEY], "value": 9_000_000, "ok": True, "error": None,
             "column": False, "parts": [home(RECOVERY_KEY)]}
    try:
        hudi.write(url, rows([RECOVERY_KEY], entry["value"]), operation="insert", record_key="id",
                   ordering_field="ts", partition_by="p", options=patient, storage_options=storage_options)
    except Exception as exc:  # noqa: BLE001 - reported: the table is stuck
        entry.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        errors.append(f"write: {entry['error']}")
    services = dict(SERVICE_OPTIONS, **{"hoodie.write.lock.num_retries": "150"})
    for name in service_names(hudi.open_table(url, storage_options=storage_options)):
        try:
            run_service(hudi.open_table(url, storage_options=storage_options), name, services)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{name}: {type(exc).__name__}: {exc}"[:500])
    timeline = hudi.open_table(url, storage_options=storage_options).timeline
    pending = [str(i) for i in timeline.pending
               if not (i.is_requested and i.action in ("compaction", "logcompaction", "replacecommit", "clustering"))]
    return {"entry": entry, "errors": errors, "left_pending": pending}


def resolve(ledgers: list[list[dict]], url: str, storage_options=None) -> tuple[list[list[dict]], dict]:
    """The ledgers with each in-doubt write marked as our reader shows it (applied: ``ok``;
    not applied: failed), and the counts; a torn write (some keys only) stays failed and is
    counted: a commit shows whole or not at all."""
    table, _ = read_ours(url, storage_options)
    got = dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))
    figures = Counter()
    examples = []
    out = []
    for ledger in ledgers:
        resolved = []
        for e in ledger:
            if e["ok"] is None:
                shows = [k not in got for k in e["keys"]] if e["op"] == "delete" else \
                    [got.get(k) == e["value"] for k in e["keys"]]
                kind = "applied" if all(shows) else "not_applied" if not any(shows) else "torn"
                figures[kind] += 1
                if kind == "torn" and len(examples) < 5:
                    examples.append(f"{e['op']} of {e['value']}: {sum(shows)} of {len(shows)} keys show it")
                e = dict(e, ok=kind == "applied", error=None if kind == "applied" else f"killed ({kind})")
            resolved.append(e)
        out.append(resolved)
    return out, {"in_doubt": sum(figures.values()), "applied": figures["applied"],
                 "not_applied": figures["not_applied"], "torn": figures["torn"], "torn_examples": examples}


def soak_with_kills(url: str, workdir: Path, seconds: float, table_type: str, version: int,
                    writers: int = 3, every: float = 4.0, seed: int = 0, storage_options=None) -> dict:
    """Create the table, run with kills, recover, resolve the in-doubt writes and check."""
    create(url, table_type, version, storage_options)
    started = time.monotonic()
    result = run_with_kills(url, workdir, seconds, writers, every, seed, storage_options)
    recovery = recover(url, storage_options)
    ledgers, doubt = resolve(result["ledgers"] + [[recovery["entry"]]], url, storage_options)
    report = {"table_type": table_type, "version": version, "seconds": round(time.monotonic() - started, 1),
              "kills": result["kills"], "crashed": result["crashed"], "writes": summary(ledgers),
              "writers_acknowledged": sum(e["ok"] is True for ledger in result["ledgers"] for e in ledger),
              "in_doubt": doubt,
              "service": result["service"], "recovery": {k: v for k, v in recovery.items() if k != "entry"}}
    report.update(check(url, ledgers, storage_options))
    return report


def clean_after_kills(report: dict) -> bool:
    """The soak's verdict, and no torn write, and a recovery that left the table unstuck (and
    the processes did write: none ended on an error, the writers' writes were acknowledged)."""
    return clean(report) and not report["crashed"] and report["writers_acknowledged"] > 0 and not report["in_doubt"]["torn"] and not report["recovery"]["errors"] \
        and not report["recovery"]["left_pending"]


def main(argv=None) -> int:
    import argparse
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--kill-every", type=float, default=4.0, help="mean seconds between kills")
    extra.add_argument("--seed", type=int, default=0)
    extra.add_argument("--s3", action="store_true", help="on moto's S3 server (the tests' S3), not locally")
    known, rest = extra.parse_known_args(argv)
    for k, v in KILL_OPTIONS.items():   # before parse_args: --option overrides them
        rest = ["--option", f"{k}={v}"] + rest
    args = parse_args(rest, __doc__.split("\n\n")[0], 3)
    with _s3_server() if known.s3 else contextlib.nullcontext() as s3:
        def one(url: str, work: Path, table_type: str, version: int) -> dict:
            if s3 is not None:   # one table per layout in the server's bucket
                url = f"s3://kills/{table_type}-v{version}"
            return soak_with_kills(url, work, args.seconds, table_type, version, args.writers, known.kill_every,
                                   known.seed, s3)
        return soak_each(args, one, "hudi-kills-", clean_after_kills)


@contextlib.contextmanager
def _s3_server() -> Iterator[dict]:
    """moto's S3 server on loopback with a bucket ``kills``: its storage options."""
    import logging
    import socket

    import s3fs
    from moto.server import ThreadedMotoServer
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
    try:
        s3fs.S3FileSystem(**options).mkdir("kills")
        yield options
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
