"""Readers racing a writer and the table services: every snapshot a reader gets is exactly the
table as of one committed write, never a mix, never a failure.

One writer process inserts, upserts and deletes (one key range, inline cleaning and archival
with aggressive options), one service process loops compaction (MOR), clustering, cleaning and
archival (``servicechild.py service``), and reader processes loop ``open_table`` + ``read``.
The writer logs each acknowledged write with its instant; a reader logs, per read, the completed
instants its timeline held and the rows it got. A single writer's instants complete in order, so
the state a read must give is the state after the latest write instant on its timeline. The
outcome counts:

* ``wrong``: a read whose rows differ from that state (partial or mixed data);
* ``errors``: a read that raised (by exception type; the first messages are kept);
* ``unanchored``: a read whose active timeline held no write instant of the ledger (archival
  kept service instants only), left unchecked.

Bounded runs are in ``test_concurrent_readers.py``; a long run:
``python -m tests.support.soak_readers --seconds 120 --table-type MERGE_ON_READ --version 6``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import hudi_format as hudi  # noqa: E402
from servicechild import AGGRESSIVE, rows  # noqa: E402
import soakclock  # noqa: E402
from soakclock import SoakClock  # noqa: E402

SERVICE_CHILD = HERE / "servicechild.py"
#: The least the soak's test asserts of a run (``test_concurrent_readers.py``): more writes,
#: reads and hudi-rs reads than these; its children go on past their seconds to reach them.
MIN_WRITES, MIN_READS, MIN_RS_READS = 3, 10, 3
SEED_KEYS = [f"seed_{i}" for i in range(12)]
WRITES = ("commit", "deltacommit", "replacecommit")
NOT_DATA = ("clean", "rollback", "restore", "savepoint", "indexing")


def _append(f, entry: dict) -> None:
    f.write(json.dumps(entry) + "\n")
    f.flush()


def writer(url: str, seconds: float, ledger_path: str, seed: int) -> None:
    """Writes until the deadline; logs ``{"instant", "op", "keys", "value"}`` per acknowledged
    write (a failed write is logged with ``"instant": null`` and its keys are retired)."""
    rng = random.Random(seed)
    clock = SoakClock(seconds)
    live, next_key, seq, acked = list(SEED_KEYS), 0, 0, 0
    with open(ledger_path, "a") as ledger:
        while clock.running(acked > MIN_WRITES):
            seq += 1
            value = 1_000_000 + seq
            roll = rng.random()
            if roll < 0.35 or len(live) < 6:
                op, keys = "insert", [f"k_{next_key + i}" for i in range(rng.randint(1, 6))]
                next_key += len(keys)
            elif roll < 0.85:
                op, keys = "upsert", rng.sample(live, min(len(live), rng.randint(1, 8)))
            else:
                op, keys = "delete", rng.sample(live, min(len(live), rng.randint(1, 3)))
            data = rows(keys, value)
            if op == "delete":
                data = data.select(["id", "p"])
            try:
                done = hudi.write(url, data, operation=op, record_key="id", ordering_field="ts",
                                  partition_by="p", options=AGGRESSIVE)
            except Exception as exc:  # noqa: BLE001 - the write is not acknowledged
                live = [k for k in live if k not in keys]
                _append(ledger, {"instant": None, "op": op, "keys": keys, "value": value,
                                 "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            if op == "insert":
                live += keys
            elif op == "delete":
                live = [k for k in live if k not in keys]
            _append(ledger, {"instant": done.timestamp, "op": op, "keys": keys, "value": value})
            acked += 1


def reader(url: str, seconds: float, out_path: str, seed: int = 0) -> None:
    """Reads snapshots until the deadline; logs ``{"seen": [completed instants], "rows":
    {key: v}}`` or ``{"seen": ..., "error": ...}`` per read. Each table opened is read one to
    three times, a little apart, the first read at once or a little later (a held table stays
    pinned to its snapshot while the writer and the cleaner go on; its files are listed at its
    first read), listing files through the metadata table, then storage, in turn."""
    rng = random.Random(seed)
    clock = SoakClock(seconds)
    n = 0
    with open(out_path, "a") as out:
        while clock.running(n > MIN_READS):
            n += 1
            seen, latest = None, None
            try:
                table = hudi.open_table(url, options={"hoodie.metadata.enable": str(n % 2 == 0).lower()})
                seen = [i.timestamp for i in table.timeline.completed]
                latest = max((i.timestamp for i in table.timeline.completed if i.action in WRITES), default=None)
                # a write or service still pending then keeps the snapshot behind the instants after it
                latest = min([latest] + [i.timestamp for i in table.timeline.pending
                                         if i.action not in NOT_DATA and i.timestamp < (latest or "")])
            except Exception as exc:  # noqa: BLE001 - every failure is an outcome
                _append(out, {"seen": seen, "latest_write": latest, "error": f"{type(exc).__name__}: {exc}"[:500]})
                continue
            for held in range(rng.randint(1, 3)):
                if held or rng.random() < 0.5:   # the first listing is made at the first read
                    time.sleep(rng.uniform(0, 0.3))
                try:
                    t0 = time.perf_counter()
                    got = table.read(columns=["id", "v"])
                    took = time.perf_counter() - t0
                    entry = {"seen": seen, "held": held, "took": round(took, 3), "at": time.time(),
                             "rows": dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))}
                    if os.environ.get("SOAK_READERS_TRACE"):
                        entry["md"] = n % 2 == 0
                        entry["slices"] = [[t.file_slice.partition_path, t.file_slice.file_id[:8],
                                            t.file_slice.base_file, list(t.file_slice.log_files)]
                                           for t in table.plan_scan(["id", "v"]).tasks]
                    _append(out, entry)
                except Exception as exc:  # noqa: BLE001 - every failure is an outcome
                    entry = {"seen": seen, "latest_write": latest, "held": held,
                             "error": f"{type(exc).__name__}: {exc}"[:800]}
                    if os.environ.get("SOAK_READERS_TRACE"):
                        entry["trace"] = traceback.format_exc()[-3000:]
                    _append(out, entry)


def rs_reader(url: str, seconds: float, out_path: str) -> None:
    """:func:`reader` with hudi-rs: its table (timeline loaded when built) and its snapshot read."""
    from hudi import HudiTableBuilder
    import pyarrow as pa
    clock, n = SoakClock(seconds), 0
    with open(out_path, "a") as out:
        while clock.running(n > MIN_RS_READS):
            n += 1
            seen = None
            try:
                table = HudiTableBuilder.from_base_uri(url).build()
                timeline = table.get_timeline()
                seen = [i.timestamp for get in (timeline.get_completed_commits, timeline.get_completed_deltacommits,
                                                timeline.get_completed_replacecommits) for i in get()]
                batches = table.read()
                got = pa.Table.from_batches(batches) if batches else pa.table({"id": [], "v": []})
                entry = {"seen": seen, "rows": dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))}
                if os.environ.get("SOAK_READERS_TRACE"):
                    entry["latest"] = timeline.get_latest_commit_timestamp()
                    entry["slices"] = [[s.partition_path, s.file_id, s.base_file_name, list(s.log_file_names)]
                                       for s in table.get_file_slices()]
                _append(out, entry)
            except Exception as exc:  # noqa: BLE001 - every failure is an outcome
                _append(out, {"seen": seen, "error": f"{type(exc).__name__}: {exc}"[:500]})


def cleaned_files(url: str) -> dict[str, str]:
    """File name -> the earliest commit the clean that deleted it retained (every clean of
    the table, active or archived)."""
    from hudi_format.timeline import ArchivedTimeline
    from hudi_format.timeline.metadata import deleted_files
    table = hudi.open_table(url)
    out: dict[str, str] = {}
    for timeline in (ArchivedTimeline.load(table.storage, table.config), table.timeline):
        for i in timeline.completed:
            if i.action == "clean":
                meta = timeline.raw_metadata(i)
                for names in deleted_files(meta).values():
                    out.update((n, meta.get("earliestCommitToRetain") or "") for n in names)
    return out


def _retention_race(r: dict, cleaned: dict[str, str]) -> bool:
    """Whether a read failed on a file a clean deleted because the read's snapshot was older
    than what that clean retained: what ``hoodie.cleaner.commits.retained`` promises readers,
    and nothing more. A snapshot is as old as its latest write, or as the first write or service
    pending then if that is earlier (the cleaner, seeing it completed, retains from it on; the
    snapshot has the slices from before it)."""
    if not r["error"].startswith("FileMissingError") or not r.get("latest_write"):
        return False
    names = [w for w in re.split(r"[\s/,()]+", r["error"]) if w in cleaned]
    return bool(names) and all(cleaned[n] > r["latest_write"] for n in names)


def _states(ledger: list[dict]) -> dict[str, dict[str, int]]:
    """The table's rows (key -> v) after each acknowledged write, by its instant; ``""``: the
    rows the table was created with."""
    state = {k: 0 for k in SEED_KEYS}
    out = {"": dict(state)}
    for e in ledger:
        if e["instant"] is None:
            continue
        if e["op"] == "delete":
            for k in e["keys"]:
                state.pop(k, None)
        else:
            for k in e["keys"]:
                state[k] = e["value"]
        out[e["instant"]] = dict(state)
    return out


def check(ledger_path: str, read_paths: list[str], strict: bool = True,
          cleaned: dict[str, str] | None = None) -> dict:
    """The outcome of the reads (see the module docstring). ``strict``: a read must give the
    state after the latest write on its timeline (our reader). Otherwise (hudi-rs 0.5, whose
    snapshot of a v8 table leaves out a commit that completed after a later-requested one it
    shows) it must give the state after *some* write on its timeline, and ``older`` counts
    the reads that gave an earlier one than the latest. ``cleaned`` (:func:`cleaned_files`):
    reads that failed on a file cleaned past their snapshot count as ``retention_races``, not
    errors."""
    ledger = [json.loads(line) for line in Path(ledger_path).read_text().splitlines()]
    states = _states(ledger)
    writes = sorted(states)
    wrong, errors, messages = [], Counter(), []
    reads = unanchored = older = races = 0
    for path in read_paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            reads += 1
            if "error" in r and cleaned is not None and _retention_race(r, cleaned):
                races += 1
                continue
            if "error" in r:
                errors[r["error"].split(":", 1)[0]] += 1
                if len(messages) < 10:
                    messages.append(r["error"] + ("\n" + r["trace"] if "trace" in r else ""))
                continue
            mine = [s for s in r["seen"] if s in states]
            if not mine:
                unanchored += 1
                continue
            want = states[max(mine)]
            if r["rows"] == want:
                continue
            if not strict and any(states[w] == r["rows"] for w in writes if w < max(mine)):
                older += 1
                continue
            missing = sorted(set(want) - set(r["rows"]))
            extra = sorted(set(r["rows"]) - set(want))
            stale = sorted(k for k in want if k in r["rows"] and r["rows"][k] != want[k])
            wrong.append({"as_of": max(mine), "missing": missing[:5], "extra": extra[:5],
                          "stale": stale[:5], "counts": [len(missing), len(extra), len(stale)]})
    return {"writes": len(writes) - 1, "failed_writes": sum(e["instant"] is None for e in ledger),
            "reads": reads, "wrong": len(wrong), "wrong_first": wrong[:5], "errors": dict(errors),
            "error_messages": messages, "unanchored": unanchored, "older": older,
            "retention_races": races}


def run(workdir: str, seconds: float, table_type: str, version: int, readers: int = 2,
        seed: int = 0, rs_readers: int = 0) -> dict:
    url = str(Path(workdir) / "t")
    hudi.write(url, rows(SEED_KEYS, 0), operation="insert", record_key="id", ordering_field="ts",
               partition_by="p", table_type=table_type, table_version=version, options=AGGRESSIVE)
    ledger = str(Path(workdir) / "ledger.jsonl")
    reads = [str(Path(workdir) / f"reads{i}.jsonl") for i in range(readers)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]),
               **{soakclock.ENV: "1"})
    procs = [subprocess.Popen([sys.executable, __file__, "writer", url, str(seconds), ledger, str(seed)], env=env),
             subprocess.Popen([sys.executable, str(SERVICE_CHILD), "service", url, str(seconds),
                               str(Path(workdir) / "service.json")], env=env)]
    procs += [subprocess.Popen([sys.executable, __file__, "reader", url, str(seconds), p, str(seed + i)], env=env)
              for i, p in enumerate(reads)]
    rs = [str(Path(workdir) / f"rs-reads{i}.jsonl") for i in range(rs_readers)]
    procs += [subprocess.Popen([sys.executable, __file__, "rs-reader", url, str(seconds), p], env=env)
              for p in rs]
    for p in procs:
        if p.wait(timeout=seconds + 300) != 0:
            raise RuntimeError(f"child {p.args[1:3]} exited with {p.returncode}")
    out = check(ledger, reads, cleaned=cleaned_files(url))
    if rs:
        out["hudi_rs"] = check(ledger, rs, strict=False)
    out["service"] = json.loads(Path(workdir, "service.json").read_text())["counts"]
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "writer":
        return writer(sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    if len(sys.argv) > 1 and sys.argv[1] == "reader":
        return reader(sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    if len(sys.argv) > 1 and sys.argv[1] == "rs-reader":
        return rs_reader(sys.argv[2], float(sys.argv[3]), sys.argv[4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--table-type", default="MERGE_ON_READ")
    ap.add_argument("--version", type=int, default=8)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rs-readers", type=int, default=0, help="hudi-rs reader processes")
    ap.add_argument("--dir")
    args = ap.parse_args()
    workdir = args.dir or tempfile.mkdtemp(prefix="soak-readers-")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    print(json.dumps(run(workdir, args.seconds, args.table_type, args.version, args.readers, args.seed,
                         args.rs_readers),
                     indent=1))
    print("workdir:", workdir)


if __name__ == "__main__":
    main()
