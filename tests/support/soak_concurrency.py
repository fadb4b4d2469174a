"""Concurrency with table services: N writer processes and one service process, then every
acknowledged write is checked against the writers' ledgers by our reader and by hudi-rs.

Each writer owns its keys, so its ledger alone fixes each key's final state: the value of its
last acknowledged insert/upsert, or absent after an acknowledged delete. The outcome counts:

* ``lost``: an acknowledged key (or value) missing from the table;
* ``stale``: the key shows an older acknowledged value (or is back after an acknowledged delete);
* ``failed_visible``: a write that raised shows (its value, its insert or its delete);
* ``duplicates``: a key on more than one row;
* ``lost_column``: a key whose writer's own column ``c<proc>`` (``servicechild.py``: the writers
  evolve the schema concurrently) is not what its last acknowledged write gave it: that value,
  or null when that write did not carry the column;
* ``unreadable_slices``: latest file slices whose files are gone (the rest is still counted).

``ours_storage_listing`` (our reader without the metadata table) is reported for diagnosis only.
``metadata_listing``: the metadata table's ``files`` listing against storage (the files of
completed instants): it must claim to be up to date and list exactly those files (``missing``:
in storage, not listed; ``extra``: listed, not in storage -- what makes hudi-rs fail). A log
file counts as committed by the instants in its blocks' headers, not by the instant in its
name: a v6 log file carries its slice's base instant, which is a *pending* compaction's when a
deltacommit wrote to a file group while the compaction was pending.

hudi-rs's known gap (``known_gap``, ``test_hudi_rs_gaps.py``): on table version 6, hudi-rs 0.5
skips the log files named with a pending compaction's instant (it does not merge that slice with
the one before it, as Hudi's readers do), so it shows those file groups without them. A key of
such a file group may show in hudi-rs exactly as our reader reads the same slice without those
log files (``known_gap`` counts the keys where that differs from the ledger, printed apart);
any other value is lost/stale as usual, and our reader is held to the ledger for every key.

Bounded runs are in ``test_concurrency_services.py``; a long run:
``python -m tests.support.soak_concurrency --seconds 300 [--table-type MERGE_ON_READ] [--version 6]``.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import hudi_format as hudi  # noqa: E402
from servicechild import AGGRESSIVE, home, rows  # noqa: E402
import soakclock  # noqa: E402

CHILD = HERE / "servicechild.py"
SEED_KEYS = [f"seed_{i}" for i in range(12)]
PARTITION_PATH = "_hoodie_partition_path"


def create(url: str, table_type: str, version: int, storage_options=None) -> None:
    hudi.write(url, rows(SEED_KEYS, 0), operation="insert", record_key="id", ordering_field="ts",
               partition_by="p", table_type=table_type, table_version=version, options=AGGRESSIVE,
               storage_options=storage_options)


def run(url: str, workdir: Path, seconds: float, writers: int = 3, storage_options=None,
        service: bool = True) -> dict:
    """Run the writers (and the service process) for ``seconds``, and on until each has done its
    least (:mod:`soakclock`); the ledgers and service log."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **{soakclock.ENV: "1"})
    extra = [json.dumps(storage_options)] if storage_options else []
    procs = []
    for p in range(writers):
        ledger = workdir / f"ledger{p}.jsonl"
        args = [sys.executable, str(CHILD), "writer", url, str(p), str(seconds), str(ledger)] + extra
        procs.append(subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True))
    service_out = workdir / "service.json"
    if service:
        args = [sys.executable, str(CHILD), "service", url, str(seconds), str(service_out)] + extra
        procs.append(subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True))
    exits = []
    for proc in procs:
        _, err = proc.communicate(timeout=seconds + 600)
        exits.append((proc.returncode, err[-2000:]))
    ledgers = [[json.loads(line) for line in (workdir / f"ledger{p}.jsonl").read_text().splitlines()]
               for p in range(writers) if (workdir / f"ledger{p}.jsonl").exists()]
    services = json.loads(service_out.read_text()) if service and service_out.exists() else None
    return {"ledgers": ledgers, "service": services, "exits": exits}


def expected_state(ledgers: list[list[dict]]) -> tuple[dict, dict]:
    """``key -> value`` (``None``: absent) by the acknowledged writes, and ``key -> (op, value)``
    of the write that failed on a key (keys are retired after one)."""
    want: dict[str, int | None] = {k: 0 for k in SEED_KEYS}
    failed: dict[str, tuple[str, int]] = {}
    for ledger in ledgers:
        for e in ledger:
            for k in e["keys"]:
                if not e["ok"]:
                    failed[k] = (e["op"], e["value"])
                    want.setdefault(k, None)
                elif e["op"] == "delete":
                    want[k] = None
                else:
                    want[k] = e["value"]
    return want, failed


def expected_columns(ledgers: list[list[dict]]) -> dict[str, tuple[str, str | None]]:
    """``key -> (its writer's column, the text it must hold)`` by the last acknowledged insert
    or upsert of the key (``None``: that write did not carry the column)."""
    out: dict[str, tuple[str, str | None]] = {}
    for proc, ledger in enumerate(ledgers):
        for e in ledger:
            if e["ok"] and e["op"] in ("insert", "upsert", "move"):
                for k in e["keys"]:
                    out[k] = (f"c{proc}", str(e["value"]) if e.get("column") else None)
    return out


def expected_partitions(ledgers: list[list[dict]]) -> dict[str, str]:
    """``key -> partition`` by the last acknowledged write that placed the key (moves included)."""
    out: dict[str, str] = {k: home(k) for k in SEED_KEYS}
    for ledger in ledgers:
        for e in ledger:
            if e["ok"] and e["op"] != "delete":
                out.update(zip(e["keys"], e.get("parts") or [home(k) for k in e["keys"]]))
    return out


def outcome(table: pa.Table, ledgers: list[list[dict]], gap: dict | None = None) -> dict:
    """Counts of lost / stale / failed-but-visible / duplicate keys in ``table`` (id, v).

    ``gap`` (hudi-rs only, see :func:`hudi_rs_gap`): ``key -> value`` (``None``: absent) that
    the table may show for those keys instead of the ledger's: ``known_gap`` counts the keys
    where it does and that differs from the ledger; any other value is judged as usual."""
    want, failed = expected_state(ledgers)
    ids = table.column("id").to_pylist()
    vals = table.column("v").to_pylist()
    got = dict(zip(ids, vals))
    dup = sum(1 for _, n in Counter(ids).items() if n > 1)
    lost = stale = failed_visible = known_gap = 0
    examples: list[str] = []
    gap_examples: list[str] = []

    def note(kind: str, key: str, detail: str) -> None:
        if len(examples) < 10:
            examples.append(f"{kind} {key}: {detail}")

    excused = set()
    for key, expect in sorted((gap or {}).items()):
        shows = got.get(key) if key in got else None
        if key not in want or (key in got) != (expect is not None) or shows != expect \
                or (key in failed and shows == failed[key][1]) or expect == want[key]:
            continue   # not the gap's value (judged below), or the gap does not show on this key
        excused.add(key)
        known_gap += 1
        if len(gap_examples) < 5:
            gap_examples.append(f"{key}: acknowledged {want[key]}, shows {expect} (without the "
                                "log files named with a pending compaction's instant)")
    for key, value in want.items():
        if key in excused:
            continue
        have = got.get(key, None) if key in got else None
        present = key in got
        if key in failed:
            op, fval = failed[key]
            shows_failed = (present and have == fval) or (op == "delete" and not present and value is not None)
            if shows_failed:
                failed_visible += 1
                note("failed_visible", key, f"failed {op} of {fval} shows (table {have}, acked {value})")
                continue
        if value is None:
            if present:
                stale += 1
                note("stale", key, f"acknowledged absent but has {have}")
        elif not present:
            lost += 1
            note("lost", key, f"acknowledged {value}, absent")
        elif have != value:
            stale += 1
            note("stale", key, f"acknowledged {value}, table has {have}")
    unknown = sum(1 for k in got if k not in want)
    lost_column = 0
    columns = {c: table.column(c).to_pylist() for c in table.column_names if c.startswith("c")}
    index = {k: i for i, k in enumerate(ids)}
    for key, (column, text) in expected_columns(ledgers).items():
        if key in excused or key not in index or got[key] != want.get(key):
            continue   # absent or another value: counted above
        have = columns[column][index[key]] if column in columns else None
        if have != text:
            lost_column += 1
            note("lost_column", key, f"{column} is {have!r}, acknowledged {text!r}")
    misplaced = 0
    # the partition the row lives in (the data column ``p`` shows what was written, not where)
    parts = dict(zip(ids, table.column(PARTITION_PATH).to_pylist())) if PARTITION_PATH in table.column_names else {}
    for key, part in expected_partitions(ledgers).items():
        if key in excused or key in failed or key not in got or got[key] != want.get(key) or key not in parts:
            continue   # absent, another value or a failed write's key: counted above
        if parts[key] != part:
            misplaced += 1
            note("misplaced", key, f"in partition {parts[key]!r}, acknowledged {part!r}")
    out = {"keys": len(want), "lost": lost, "stale": stale, "failed_visible": failed_visible,
           "duplicates": dup, "unknown": unknown, "lost_column": lost_column, "misplaced": misplaced,
           "examples": examples}
    if gap is not None:
        out.update(gap_keys=len(gap), known_gap=known_gap, gap_examples=gap_examples)
    return out


def summary(ledgers: list[list[dict]]) -> dict:
    ops = Counter((e["op"], e["ok"]) for ledger in ledgers for e in ledger)
    errors = Counter(e["error"].split(":", 1)[0] for ledger in ledgers for e in ledger if not e["ok"])
    return {"acknowledged": sum(n for (_, ok), n in ops.items() if ok),
            "failed": sum(n for (_, ok), n in ops.items() if not ok),
            "by_op": {f"{op}/{'ok' if ok else 'failed'}": n for (op, ok), n in sorted(ops.items())},
            "errors": dict(errors)}


def read_ours(url: str, storage_options=None) -> tuple[pa.Table, list[str]]:
    """The table's (id, v); when a whole read fails (a file of a latest slice is gone), the
    slices that still read, and why the others did not: the figures are still wanted."""
    from hudi_format.read.snapshot import ReadState
    table = hudi.open_table(url, storage_options=storage_options)
    try:
        return _data(table.read()), []
    except hudi.HudiError:
        pass
    state = ReadState(table.config, table.timeline)
    pieces, problems = [], []
    names = _data(table.schema().empty_table()).column_names
    for s in state.file_slices(table._view):
        try:
            pieces.append(table._read_slice(s, state, names, []).select(names))
        except hudi.HudiError as exc:
            problems.append(f"{s.partition_path}/{s.file_id}: {exc}"[:300])
    return pa.concat_tables(pieces) if pieces else pa.table({"id": pa.array([], pa.string()),
                                                               "v": pa.array([], pa.int64())}), problems


def read_hudi_rs(url: str, storage_options=None) -> tuple[pa.Table, list[str]]:
    from hudi import HudiTableBuilder
    builder = HudiTableBuilder.from_base_uri(url)
    for k, v in _rs_storage_options(storage_options).items():
        builder = builder.with_storage_option(k, v)
    t = builder.build()
    batches = t.read()
    if not batches:
        return pa.table({"id": pa.array([], pa.string()), "v": pa.array([], pa.int64())}), []
    return _data(pa.Table.from_batches(batches)), []


def _data(table: pa.Table) -> pa.Table:
    """``id``, ``v``, the partition path and the writers' own columns (``c<proc>``)."""
    return table.select([c for c in table.column_names if c in ("id", "v", PARTITION_PATH) or c.startswith("c")])


def hudi_rs_gap(url: str, storage_options=None) -> dict:
    """Table version 6: ``key -> value`` (``None``: absent) of every key of a file group that has
    log files named with its pending compaction's instant, as hudi-rs 0.5 reads it: our reader's
    read of the latest slice without those log files (``test_hudi_rs_gaps.py``). Empty otherwise."""
    import attrs

    from hudi_format.read.snapshot import ReadState
    from hudi_format.services import pending_compaction_base_instants
    from hudi_format.view.file_names import parse_log_file_name
    table = hudi.open_table(url, storage_options=storage_options)
    if table.version >= 8 or table.table_type != "MERGE_ON_READ":
        return {}
    pending = pending_compaction_base_instants(table.storage, table.config, table.timeline)
    state = ReadState(table.config, table.timeline)
    gap: dict[str, int | None] = {}
    for s in state.file_slices(table._view):
        compaction = pending.get((s.partition_path, s.file_id))
        names = [parse_log_file_name(posixpath.basename(f)) for f in s.log_files]
        keep = [i for i, lf in enumerate(names) if lf is None or lf.instant_time != compaction]
        if compaction is None or len(keep) == len(s.log_files):
            continue
        without = attrs.evolve(s, log_files=tuple(s.log_files[i] for i in keep),
                               log_file_sizes=tuple(s.log_file_sizes[i] for i in keep) if s.log_file_sizes else ())
        full = table._read_slice(s, state, ["id", "v"], [])
        older = table._read_slice(without, state, ["id", "v"], [])
        gap.update(dict.fromkeys(full.column("id").to_pylist()))
        gap.update(zip(older.column("id").to_pylist(), older.column("v").to_pylist()))
    return gap


def _rs_storage_options(storage_options) -> dict:
    """s3fs options as hudi-rs (object_store) names them."""
    if not storage_options:
        return {}
    endpoint = (storage_options.get("client_kwargs") or {}).get("endpoint_url")
    out = {"aws_access_key_id": storage_options.get("key", ""),
           "aws_secret_access_key": storage_options.get("secret", ""),
           "aws_region": "us-east-1"}
    if endpoint:
        out.update(aws_endpoint=endpoint, aws_allow_http="true")
    return out


def metadata_listing(url: str, storage_options=None) -> dict:
    """The metadata table's ``files`` listing compared with storage (completed instants)."""
    from hudi_format.log import read_log_file
    from hudi_format.metadata.reader import MetadataTable
    from hudi_format.read.snapshot import ReadState
    from hudi_format.view.file_names import parse_base_file_name, parse_log_file_name
    table = hudi.open_table(url, storage_options=storage_options)
    st, timeline = table.storage, table.timeline
    mt = MetadataTable(st, table.config, timeline)
    stale = mt.staleness()
    if stale is not None:
        return {"error": f"not up to date: {stale}"}
    listed = {f.path for infos in mt.files_listing().values() for f in infos}
    state = ReadState(table.config, timeline)

    def committed(instant_time: str | None) -> bool:   # a write, or a rollback's command block
        return instant_time is not None and (state.visible(instant_time) or timeline.is_completed(instant_time))

    stored = set()
    for f in st.walk_files("", skip_dirs=(".hoodie",)):
        name = posixpath.basename(f.path)
        if name.startswith("."):
            # by what wrote it: a v6 log file is named with its slice's base instant, a pending
            # compaction's when a deltacommit wrote it while that compaction was pending
            if parse_log_file_name(name) is not None and \
                    any(committed(b.instant_time) for b in read_log_file(st, f.path) if not b.is_corrupted):
                stored.add(f.path)
            continue
        parsed = parse_base_file_name(name)
        if parsed is not None and state.visible(parsed.instant_time):
            stored.add(f.path)
    missing, extra = sorted(stored - listed), sorted(listed - stored)
    return {"files": len(stored), "missing": len(missing), "extra": len(extra),
            "examples": (missing[:3] + extra[:3])}


def soak(url: str, workdir: Path, seconds: float, table_type: str, version: int, writers: int = 3,
         storage_options=None) -> dict:
    """Create the table, run, and check with both readers."""
    create(url, table_type, version, storage_options)
    started = time.monotonic()
    result = run(url, workdir, seconds, writers, storage_options)
    report = {"table_type": table_type, "version": version, "seconds": round(time.monotonic() - started, 1),
              "writes": summary(result["ledgers"]), "service": result["service"],
              "child_exits": [code for code, _ in result["exits"]]}
    report["child_errors"] = [err for code, err in result["exits"] if code != 0][:2]
    report.update(check(url, result["ledgers"], storage_options))
    return report


def check(url: str, ledgers: list[list[dict]], storage_options=None) -> dict:
    """The readers' outcomes against the ledgers, and the metadata listing against storage."""
    def ours_storage_listing(url, storage_options):  # diagnosis: is it the metadata table?
        table = hudi.open_table(url, storage_options=storage_options, options={"hoodie.metadata.enable": "false"})
        return _data(table.read()), []

    report: dict = {}
    for name, reader in (("ours", read_ours), ("hudi_rs", read_hudi_rs),
                         ("ours_storage_listing", ours_storage_listing)):
        try:
            rows, unreadable = reader(url, storage_options)
            gap = hudi_rs_gap(url, storage_options) if name == "hudi_rs" else None
            report[name] = outcome(rows, ledgers, gap)
            report[name]["unreadable_slices"] = unreadable
        except Exception as exc:  # noqa: BLE001 - a reader that cannot read is a finding too
            report[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        report["metadata_listing"] = metadata_listing(url, storage_options)
    except Exception as exc:  # noqa: BLE001
        report["metadata_listing"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    from hudi_format.cli.validate import ERROR, record_index_problems
    try:   # the record index, when the table keeps one: every key, where it lives
        report["record_index_errors"] = [str(p)[:300] for p in record_index_problems(url, storage_options)
                                         if p.severity == ERROR]
    except Exception as exc:  # noqa: BLE001
        report["record_index_errors"] = [f"{type(exc).__name__}: {exc}"[:500]]
    return report


def clean(report: dict) -> bool:
    listing = report.get("metadata_listing") or {"error": "not checked"}
    if "error" in listing or listing["missing"] or listing["extra"] or report.get("record_index_errors"):
        return False
    return all(isinstance(report.get(r), dict) and "error" not in report[r]
               and not report[r]["unreadable_slices"] and report[r]["lost"] == report[r]["stale"] == report[r]["failed_visible"]
               == report[r]["duplicates"] == report[r]["lost_column"] == report[r].get("misplaced", 0) == 0 for r in ("ours", "hudi_rs"))


def parse_args(argv, description: str, writers: int, writers_help: str = "writer processes") -> argparse.Namespace:
    """A soak's command line; ``--option``s go to every process (``SOAK_OPTIONS``) and to this
    one's ``servicechild.AGGRESSIVE``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--writers", type=int, default=writers, help=writers_help)
    ap.add_argument("--table-type", action="append", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    ap.add_argument("--version", action="append", type=int, choices=[6, 8])
    ap.add_argument("--dir", help="where to put the tables (default: a temporary folder)")
    ap.add_argument("--option", action="append", default=[], metavar="K=V",
                    help="a write/service option of every process (e.g. hoodie.index.type=RECORD_INDEX)")
    args = ap.parse_args(argv)
    if args.option:   # the child processes read them from the environment
        os.environ["SOAK_OPTIONS"] = json.dumps(dict(o.split("=", 1) for o in args.option))
        AGGRESSIVE.update(json.loads(os.environ["SOAK_OPTIONS"]))
    return args


def soak_each(args: argparse.Namespace, one, prefix: str, judge=None) -> int:
    """``one(url, workdir, table_type, version)`` (a report) for each layout asked for, printed;
    the exit code: 0 when every report is clean (by ``judge``, default :func:`clean`)."""
    base = Path(args.dir or tempfile.mkdtemp(prefix=prefix))
    ok = True
    for version in args.version or [8, 6]:
        for table_type in args.table_type or ["COPY_ON_WRITE", "MERGE_ON_READ"]:
            work = base / f"{table_type}-v{version}"
            work.mkdir(parents=True, exist_ok=True)
            report = one(str(work / "t"), work, table_type, version)
            print(json.dumps(report, indent=1), flush=True)
            ok &= (judge or clean)(report)
    return 0 if ok else 1


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.split("\n\n")[0], 3)
    return soak_each(args, lambda url, work, table_type, version: soak(url, work, args.seconds, table_type,
                                                                        version, args.writers), "hudi-soak-")


if __name__ == "__main__":
    sys.exit(main())
