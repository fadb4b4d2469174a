"""Crash at every step of every table service: prepare a table, count the storage mutations of one
service run (M), then for N in 1..M kill a child running that service at its N-th mutation
(before it starts, or right after it completed) on a fresh copy of the table, and check:

- both readers (ours and hudi-rs) see exactly the committed rows (services never change rows;
  a killed rollback or restore shows the state before or after it, whole);
- the next run of the same service succeeds (for rollback and restore: the interrupted one is
  finished, by that run or by the next write's recovery), and the next write succeeds and is
  visible, with both readers equal to the model after each;
- with the metadata table on, its files listing equals storage once recovered; nothing is left
  pending but requested service plans.

    python -m tests.support.crash_services                       # every N of every case (long)
    python -m tests.support.crash_services --service clean --layout MERGE_ON_READ-8 --every 1 -v
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hudi_format as hudi  # noqa: E402
from preloaded import run_script  # noqa: E402
from torture import _diff  # noqa: E402
from writemodel import (Model, data_rows, hudi_rs_read, make_rows, metadata_listing_problem,  # noqa: E402
                        model_rows)

CHILD = Path(__file__).with_name("servicecrashchild.py")
SERVICES = ["compaction", "log_compaction", "clustering", "clean", "archive", "rollback", "restore"]
MOR_ONLY = ("compaction", "log_compaction")
LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]
WHEN = ("before", "after")


def layout_id(layout) -> str:
    return f"{layout[0]}-{layout[1]}"


class Prepared:
    """A table ready for one service run, with the rows it holds (and, for rollback and restore,
    the rows once the service completed)."""

    def __init__(self, path: str, table_type: str, version: int, options: dict[str, str]):
        self.path, self.table_type, self.version = path, table_type, version
        self.options = dict(options)
        self.model = Model(version >= 8)
        self.arg = ""
        self.after: tuple[dict, dict] | None = None   # rows/writer once a rollback/restore completed
        self.states: list[dict] = []   # rows after each write (a killed restore may show any since
        self.since = 0                 # the savepoint: it rolls instants back one by one)

    def write(self, op: str, keys, ts: int, **extra) -> Any:
        rows = make_rows(keys, ts=ts, seed=ts)
        inst = hudi.write(self.path, rows, operation=op, record_key="id", ordering_field="ts",
                          partition_by="p", table_type=self.table_type, table_version=self.version,
                          options=dict(self.options, **extra))
        self.model.apply(op, rows, inst.timestamp)
        self.states.append(dict(self.model.rows))
        return inst

    def table(self):
        return hudi.open_table(self.path)


def prepare(service: str, table_type: str, version: int, path: str, options: dict[str, str] | None = None) -> Prepared:
    """A table on which ``service`` has work to do."""
    p = Prepared(path, table_type, version, options or {})
    small = {"hoodie.parquet.small.file.limit": "0"}
    if service in ("compaction", "log_compaction"):
        p.write("insert", range(0, 30), 1)
        for i in range(3):
            p.write("upsert", range(i * 5, i * 5 + 12), 2 + i)
    elif service == "clustering":
        for i in range(4):
            p.write("insert", range(i * 8, i * 8 + 8), 1 + i, **small)
        p.write("upsert", range(0, 32, 3), 6)
    elif service == "clean":
        keep = {"hoodie.clean.automatic": "false"}
        p.write("insert", range(0, 30), 1, **keep)
        for i in range(3):
            p.write("upsert", range(0, 30, 2), 2 + i, **keep)
            if table_type == "MERGE_ON_READ":
                p.table().compact(options=p.options)
    elif service == "archive":
        keep = {"hoodie.archive.automatic": "false", "hoodie.cleaner.commits.retained": "1"}
        p.write("insert", range(0, 30), 1, **keep)
        for i in range(7):
            p.write("upsert", range(i * 3, i * 3 + 6), 2 + i, **keep)
        if table_type == "MERGE_ON_READ":
            p.table().compact(options=p.options)
            p.write("upsert", range(0, 4), 20, **keep)
    elif service == "rollback":
        p.write("insert", range(0, 30), 1)
        p.write("upsert", range(0, 10), 2)
        before = (dict(p.model.rows), dict(p.model.writer))
        last = p.write("upsert", range(5, 40), 3)
        p.arg = last.timestamp
        p.after = before
    elif service == "restore":
        p.write("insert", range(0, 30), 1)
        sp = p.write("upsert", range(0, 10), 2)
        p.table().savepoint(sp.timestamp)
        p.arg = sp.timestamp
        p.after = (dict(p.model.rows), dict(p.model.writer))
        p.since = len(p.states) - 1
        p.write("upsert", range(5, 40), 3)
        p.write("delete", range(20, 25), 4)
        if table_type == "MERGE_ON_READ":
            p.table().compact(options=p.options)
        p.write("upsert", range(40, 45), 5)
    else:
        raise ValueError(service)
    return p


def _env(options: dict[str, str]) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
                CRASH_SERVICE_OPTIONS=json.dumps(options))


def count_mutations(p: Prepared, service: str, workdir: str) -> list[str]:
    """The mutations of one uncrashed run of ``service`` on a copy of the prepared table."""
    copy = os.path.join(workdir, "count")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(p.path, copy)
    proc = run_script(CHILD, [copy, service, p.arg, "count"], env=_env(p.options))
    if proc.returncode != 0:
        raise AssertionError(f"uncrashed {service} failed: {proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(copy, ignore_errors=True)
    return out["names"]


def _readers(path: str) -> tuple[list[dict], list[dict]]:
    return data_rows(hudi.open_table(path).read()), data_rows(hudi_rs_read(path))


def _pending(path: str) -> list[str]:
    tl = hudi.open_table(path).timeline
    return [str(i) for i in tl.pending
            if not (i.is_requested and i.action in ("compaction", "logcompaction", "replacecommit", "clustering"))]


def _expect(path: str, want: list[dict], what: str) -> None:
    ours, theirs = _readers(path)
    assert ours == want, f"{what}: our reader != model: {_diff(ours, want)}"
    assert theirs == want, f"{what}: hudi-rs != model: {_diff(theirs, want)}"


def check_kill(p: Prepared, service: str, n: int, when: str, workdir: str) -> str:
    """Kill ``service`` at mutation ``n`` on a copy of the prepared table and check recovery.
    Returns what the readers saw right after the kill ("before"/"after" for rollback/restore)."""
    path = os.path.join(workdir, f"kill-{n}-{when}")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(p.path, path)
    proc = run_script(CHILD, [path, service, p.arg, str(n), when], env=_env(p.options))
    if proc.returncode != -signal.SIGKILL:
        raise AssertionError(f"the child was not killed at mutation {n} (exit {proc.returncode}): "
                             f"{(proc.stdout + proc.stderr)[-1500:]}")
    model = Model(p.version >= 8)
    model.rows, model.writer = dict(p.model.rows), dict(p.model.writer)
    states = {"before": model_rows(model.rows)}
    if p.after is not None:
        states["after"] = model_rows(p.after[0])
    if service == "restore":   # rolled back newest first: any state since the savepoint is committed
        for i in range(p.since, len(p.states)):
            states.setdefault(f"state{i}", model_rows(p.states[i]))
    ours, theirs = _readers(path)
    seen = next((k for k, v in states.items() if v == ours), None)
    assert seen is not None, f"after the kill our reader shows neither committed state ({len(ours)} rows)"
    assert theirs == ours, f"after the kill hudi-rs ({len(theirs)} rows) != our reader ({len(ours)} rows)"

    # The next run of the same service, then a write, then the service once more. (A pending
    # clustering rejects upserts to its file groups, as in Hudi: the service goes first.)
    # A rollback/restore: the same one again, unless the interrupted one already took its target
    # away, in which case the next write's recovery finishes it.
    if p.after is not None:
        tl = hudi.open_table(path).timeline
        if service == "restore" or any(i.timestamp == p.arg and i.is_completed for i in tl.instants):
            _run_service(path, service, p)
        model.rows, model.writer = dict(p.after[0]), dict(p.after[1])
    else:
        _run_service(path, service, p)
    _expect(path, model_rows(model.rows), f"after the next {service}")
    nxt = make_rows(list(range(0, 60, 7)), ts=50, seed=50)
    inst = hudi.write(path, nxt, operation="upsert", record_key="id", ordering_field="ts", partition_by="p",
                      table_type=p.table_type, table_version=p.version, options=p.options)
    model.apply("upsert", nxt, inst.timestamp)
    _expect(path, model_rows(model.rows), "after the next write")
    if p.after is None:
        _run_service(path, service, p)
        _expect(path, model_rows(model.rows), f"after one more {service}")
    problem = metadata_listing_problem(path)
    assert problem is None, problem
    pending = _pending(path)
    assert not pending, f"left pending: {pending}"
    shutil.rmtree(path, ignore_errors=True)
    return seen


def _run_service(path: str, service: str, p: Prepared) -> None:
    from servicecrashchild import run_service
    try:
        run_service(path, service, p.arg, p.options)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"the next {service} failed: {type(exc).__name__}: {exc}") from exc


def kill_points(names: list[str], every: int) -> list[int]:
    """1..M, every ``every``-th, plus the mutations around each instant completion (of the
    metadata table's and the data table's timeline): where defect-prone transitions happen."""
    m = len(names)
    points = set(range(1, m + 1, every)) | {m}
    for i, name in enumerate(names, 1):
        if name.startswith("create_if_absent ") and re.search(r"\.hoodie/(timeline/)?[0-9_]+\.[a-z]+$", name):
            points.update(j for j in (i - 1, i, i + 1) if 1 <= j <= m)
    return sorted(points)


def named_points(names: list[str]) -> dict[str, tuple[int, str]]:
    """A few kill points of one service run, by role: its first mutation done (the plan, or
    the first archived file), half its work done, the metadata table's instant completed (the
    data instant not yet), and everything done but the last mutation."""
    m = len(names)
    out = {"first": (1, "after"), "half": (max(1, m // 2), "before")}
    mdt = [i for i, n in enumerate(names, 1) if n.startswith("create_if_absent MDT:")
           and re.search(r"\.hoodie/(timeline/)?[0-9_]+\.[a-z]+$", n)]
    if mdt:
        out["metadata-committed"] = (mdt[-1], "after")
    drop = [i for i, n in enumerate(names, 1) if n.startswith("delete MDT:files/")]
    if drop and not mdt:   # a restore drops the metadata table file by file
        out["metadata-dropping"] = (drop[0], "after")
    out["last"] = (m, "before")
    return out


def run_case(service: str, layout, every: int = 1, when=WHEN, options: dict | None = None,
             log=None, workdir: str | None = None) -> dict:
    """Every sampled kill point of one (service, layout); returns figures and failures."""
    log = log or (lambda s: None)
    base = tempfile.mkdtemp(prefix=f"svc-crash-{service}-", dir=workdir)
    try:
        p = prepare(service, layout[0], layout[1], os.path.join(base, "prepared"), options)
        names = count_mutations(p, service, base)
        assert names, f"{service} had nothing to do on the prepared table"
        points = kill_points(names, every)
        failures: list[str] = []
        survived = 0
        seen: dict[str, int] = {}
        for n in points:
            for w in when:
                try:
                    s = check_kill(p, service, n, w, base)
                    survived += 1
                    seen[s] = seen.get(s, 0) + 1
                    log(f"  ok   {service} {layout_id(layout)} N={n}/{len(names)} {w}: {names[n - 1]}")
                except Exception as exc:  # noqa: BLE001 - every failure is reported
                    msg = f"N={n}/{len(names)} {w} [{names[n - 1]}]: {type(exc).__name__}: {str(exc)[:300]}"
                    failures.append(msg)
                    log(f"  FAIL {service} {layout_id(layout)} {msg}")
        return {"mutations": len(names), "kills": len(points) * len(when), "survived": survived,
                "failures": failures, "names": names, "seen": seen}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def cases(services=SERVICES, layouts=LAYOUTS):
    for s in services:
        for layout in layouts:
            if s in MOR_ONLY and layout[0] != "MERGE_ON_READ":
                continue
            yield s, layout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--service", choices=SERVICES, action="append")
    ap.add_argument("--layout", action="append", help="e.g. MERGE_ON_READ-8")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--when", choices=WHEN, action="append")
    ap.add_argument("--no-metadata", action="store_true")
    ap.add_argument("--list", action="store_true", help="print the mutations of each case and stop")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    layouts = [(lay.split("-")[0], int(lay.split("-")[1])) for lay in args.layout] if args.layout else LAYOUTS
    options = {"hoodie.metadata.enable": "false"} if args.no_metadata else {}
    total = {"kills": 0, "survived": 0, "failures": 0}
    start = time.time()
    for service, layout in cases(args.service or SERVICES, layouts):
        if args.list:
            base = tempfile.mkdtemp()
            p = prepare(service, layout[0], layout[1], os.path.join(base, "t"), options)
            names = count_mutations(p, service, base)
            print(f"{service} {layout_id(layout)}: {len(names)} mutations")
            for i, n in enumerate(names, 1):
                print(f"  {i:3d} {n}")
            shutil.rmtree(base, ignore_errors=True)
            continue
        r = run_case(service, layout, args.every, tuple(args.when or WHEN), options,
                     print if args.verbose else None)
        print(f"{service:15s} {layout_id(layout):16s} M={r['mutations']:3d} kills={r['kills']:3d} "
              f"survived={r['survived']:3d} failed={len(r['failures'])} seen={r['seen']}", flush=True)
        for f in r["failures"]:
            print("    " + f)
        for k in total:
            total[k] += r[k] if k != "failures" else len(r["failures"])
    print(f"total: {total} in {time.time() - start:.0f}s")
    return 1 if total["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
