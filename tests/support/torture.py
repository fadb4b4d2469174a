"""Model-based torture test: random sequences of writes and table services, checked after every
step against a model of the rows (tests/writemodel.py) with our reader and with hudi-rs.

Each sequence is generated from one seed (table type, version, options and steps all follow from
it), so a failure replays with ``python -m tests.support.torture --seed S``; ``--shrink`` then drops
steps while the same failure remains and prints the shortest sequence it found as JSON (replay it
with ``--replay FILE``).

    python -m tests.support.torture --minutes 10                     # soak: new seeds until time is up
    python -m tests.support.torture --seed 17 [--steps 25] [-v]      # replay one sequence
    python -m tests.support.torture --seed 17 --shrink               # and reduce it

After every step: our snapshot and hudi-rs's equal the model (rows and ``_hoodie_commit_time``),
the metadata table's files listing equals storage (when it has one), no instant is left pending,
time travel to a few earlier commits still retained gives the rows as of then, and a filtered read
(column-stats pruning when the table keeps them) gives the model's rows that pass the filter.

Half of the sequences evolve the schema on the way: some writes carry a new nullable column
``extra`` and widen ``n`` from int to long (values beyond int's range), others do not, so base
files, log blocks, clustering and compaction meet both schemas, and rollbacks and restores undo
the evolution.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hudi_format as hudi  # noqa: E402
from hudi_format.errors import ConcurrentWriteError, InvalidOptionError  # noqa: E402
from hudi_format.writer import client, merge_handle  # noqa: E402
from conformance.model import IS_DELETED  # noqa: E402
# the sequences' configuration and the row comparison live beside this module (names kept here)
from torture_compare import COMPARED, EXTRA, _diff, data_rows, model_rows  # noqa: E402,F401
from torture_config import (LAYOUTS, PARTS, RACED_OPS, WEIGHTS, WRITE_OPS, key_id, part_of,  # noqa: E402,F401
                            merges_by_event_time, mixed_writer, replay_command, sequence_config)
from writemodel import Model, hudi_rs_read, make_rows, metadata_listing_problem  # noqa: E402


RACE_CLEAN = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"}


class TortureFailure(AssertionError):
    """A sequence went wrong; the message says how to replay it."""


class Sequence:
    """One table, one model, and the bookkeeping that rollback, restore and time travel need."""

    def __init__(self, path: str, config: dict[str, Any], log: Callable[[str], None] | None = None):
        self.path = path
        self.cfg = config
        self.opts = dict(config["options"])
        self.table_type, self.version = config["table_type"], config["version"]
        self.event_time = merges_by_event_time(config)
        self.model = Model(self.event_time)
        self.ts = 0                    # ordering value of the next batch (grows each step)
        self.next_key = 0
        self.before: dict[str, tuple[dict, dict]] = {}   # write instant -> (rows, writer) before it
        self.history: list[tuple[str, str, dict]] = []    # (instant, time-travel bound, rows after)
        self.savepoints: list[tuple[str, dict, dict, int]] = []  # (instant, rows, writer, len(history))
        self.log = log or (lambda s: None)
        self.steps_done: list[dict] = []
        self.checks = 0
        self.tolerated: list[str] = []

    # -- generation ----------------------------------------------------------------------------------
    def _keys_in(self, parts=None) -> list[int]:
        return sorted(int(k[1:]) for k, r in self.model.rows.items() if parts is None or r["p"] in parts)

    def _fresh(self, n: int, parts=None) -> list[int]:
        out = []
        while len(out) < n:
            k = self.next_key
            self.next_key += 1
            if parts is None or part_of(k) in parts:
                out.append(k)
        return out

    def generate(self, rng: random.Random) -> dict:
        """The next step, given the model's current state."""
        if not self.model.rows and not self.steps_done:
            return {"op": "insert", "keys": self._fresh(rng.randint(10, 30))}
        ops = dict(WEIGHTS)
        if self.table_type != "MERGE_ON_READ":
            ops.pop("compaction"), ops.pop("log_compaction")
        if not self.savepoints:
            ops.pop("restore")
        op = rng.choices(list(ops), weights=list(ops.values()))[0]
        existing = self._keys_in()
        step = self._generate(rng, op, existing)
        if self.cfg.get("evolve") and op in ("insert", "bulk_insert", "upsert", "insert_overwrite",
                                             "insert_overwrite_table") and rng.random() < 0.35:
            step["wide"] = True    # this write carries the column ``extra`` and a long ``n``
        # (a generator of its own: the sequences of seeds without races stay as they were)
        if self.cfg.get("races") and op in RACED_OPS and \
                random.Random(f"race-{self.cfg['seed']}-{len(self.steps_done)}").random() < 0.3:
            step["raced"] = True   # a clustering and a clean land after the write loads the table
        return step

    def _generate(self, rng: random.Random, op: str, existing: list[int]) -> dict:
        if op in ("insert", "bulk_insert"):
            step = {"op": op, "keys": self._fresh(rng.randint(1, 25))}
            if rng.random() < 0.15:   # flagged records of an insert are not written
                step["flagged"] = sorted(rng.sample(step["keys"], max(1, len(step["keys"]) // 4)))
            return step
        if op == "upsert":
            old = rng.sample(existing, min(len(existing), rng.randint(0, 20)))
            step = {"op": op, "keys": sorted(old + self._fresh(rng.randint(0 if old else 1, 8)))}
            if self.event_time and old and rng.random() < 0.3:
                step["stale"] = sorted(rng.sample(old, max(1, len(old) // 3)))  # lower ordering value
            if rng.random() < 0.25:   # records flagged _hoodie_is_deleted: they delete their keys
                step["flagged"] = sorted(rng.sample(step["keys"], max(1, len(step["keys"]) // 3)))
            if self.cfg.get("moves") and old:   # (its own generator: the other seeds' steps stay)
                mrng = random.Random(f"moves-{self.cfg['seed']}-{len(self.steps_done)}")
                moved = mrng.sample(old, max(1, len(old) // 3)) if mrng.random() < 0.6 else []
                step["moved"] = [[k, mrng.choice([p for p in PARTS if p != self._part(k)])] for k in sorted(moved)]
            return step
        if op == "delete":
            keys = rng.sample(existing, min(len(existing), rng.randint(1, 10)))
            if rng.random() < 0.3:
                keys.append(self.next_key + 100_000)   # a key that does not exist
            return {"op": op, "keys": sorted(keys)}
        if op == "insert_overwrite":
            parts = sorted(rng.sample(PARTS, rng.randint(1, 2)))
            mine = self._keys_in(parts)
            keys = rng.sample(mine, min(len(mine), rng.randint(0, 6))) + self._fresh(rng.randint(1, 8), parts)
            return {"op": op, "keys": sorted(keys)}
        if op == "insert_overwrite_table":
            keys = rng.sample(existing, min(len(existing), rng.randint(0, 10))) + self._fresh(rng.randint(1, 15))
            return {"op": op, "keys": sorted(keys)}
        if op == "delete_partition":
            return {"op": op, "partitions": [rng.choice(PARTS)]}
        if op == "clustering":
            return {"op": op, "sort_by": rng.choice([None, "n", "score"])}
        if op == "savepoint":
            return {"op": op, "delete_old": bool(self.savepoints) and rng.random() < 0.3}
        if op == "restore":
            return {"op": op, "then_delete": rng.random() < 0.5}
        return {"op": op}

    # -- execution -----------------------------------------------------------------------------------
    def _part(self, key: int) -> str:
        """The partition ``key`` lives in (keys move only in ``moves`` sequences)."""
        row = self.model.rows.get(key_id(key))
        return row["p"] if row is not None else part_of(key)

    def _placed(self, table: pa.Table, moved: list = (), stale: list[int] = ()) -> pa.Table:
        """``table`` with each key in the partition it lives in, or in the one ``moved`` gives
        it; a stale record of a moved key stays where ``make_rows`` put it (another partition,
        under a record that outranks it: the key must not move)."""
        if not self.cfg.get("moves"):
            return table
        to = {key_id(k): p for k, p in moved}
        keep = {key_id(k) for k in stale if self._part(k) != part_of(k)}
        ids = table.column("id").to_pylist()
        parts = [to.get(i) or (p if i in keep else self._part(int(i[1:])))
                 for i, p in zip(ids, table.column("p").to_pylist())]
        return table.set_column(table.schema.get_field_index("p"), "p", pa.array(parts, pa.string()))

    def _rows(self, keys: list[int], stale: list[int] = (), flagged: list[int] = (), wide: bool = False,
              moved: list = ()) -> pa.Table:
        fresh = [k for k in keys if k not in set(stale)]
        pieces = [make_rows(fresh, ts=self.ts, seed=self.ts % 97)] if fresh else []
        for k in stale:   # an update with a lower ordering value than the stored row
            stored = self.model.rows[key_id(k)]["ts"]
            pieces.append(make_rows([k], ts=stored - 1, seed=(self.ts + 1) % 97))
        table = self._placed(pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0], moved, stale)
        if wide:   # a new nullable column, and n widened to long with values int cannot hold
            ns = table.column("n").to_pylist()
            table = table.set_column(table.schema.get_field_index("n"), "n",
                                     pa.array([v + (1 << 33) * (v % 3) for v in ns], pa.int64()))
            table = table.append_column(EXTRA, pa.array([f"e{i}-{self.ts}" for i in table.column("id").to_pylist()]))
        # every write of these tables carries Hudi's soft-delete flag
        ids = {key_id(k) for k in flagged}
        return table.append_column(IS_DELETED, pa.array([i in ids for i in table.column("id").to_pylist()]))

    def _write(self, op: str, data, partitions=None, raced: bool = False) -> str | None:
        """The write, applied to the model; ``raced``: another process clusters and cleans the
        table between the write's loading it and its planning (a retry allowed); a write that
        still loses the conflict changes nothing (returns why)."""
        opts = {**self.opts, **mixed_writer(self.cfg, len(self.steps_done))}
        if op == "delete_partition":
            opts["hoodie.datasource.write.partitions.to.delete"] = ",".join(partitions)
        before = (dict(self.model.rows), dict(self.model.writer))
        try:
            with self._raced(raced, opts):
                inst = hudi.write(self.path, data, operation=op, record_key="id", ordering_field="ts",
                                  partition_by="p", table_type=self.table_type, table_version=self.version,
                                  options=opts)
        except ConcurrentWriteError as exc:
            if not raced:
                raise
            return f"lost the race: {str(exc)[:120]}"
        self.before[inst.timestamp] = before
        self.model.apply(op, data, inst.timestamp, partitions)
        bound = inst.completion_time if self.version >= 8 else inst.timestamp
        self.history.append((inst.timestamp, bound, (dict(self.model.rows), dict(self.model.writer))))
        return None

    @contextlib.contextmanager
    def _raced(self, raced: bool, opts: dict):
        """While a raced write runs: its first planning is preceded by a clustering and a clean
        of the table (after it loaded its timeline, before it lists files) that keeps one
        version of each file group, so the groups the clustering replaced go at once."""
        if not raced:
            yield
            return
        opts["hoodie.write.num.retries.on.conflict.failures"] = "2"
        plan, done = client.plan_write, []

        def racing(job, data):
            if not done:
                done.append(True)
                hudi.open_table(self.path).cluster(options=self.opts)
                hudi.open_table(self.path).clean(options=dict(self.opts, **RACE_CLEAN))
            return plan(job, data)
        client.plan_write = racing
        try:
            yield
        finally:
            client.plan_write = plan

    def apply(self, step: dict) -> str:
        """Run one step; returns a note on what it did (for the log)."""
        op = step["op"]
        self.ts += 10
        table = hudi.open_table(self.path) if self.steps_done else None
        if op in ("insert", "bulk_insert", "upsert", "insert_overwrite", "insert_overwrite_table"):
            data = self._rows(step["keys"], step.get("stale", []), step.get("flagged", []), step.get("wide", False),
                              step.get("moved", []))
            lost = self._write(op, data, raced=step.get("raced", False))
            return lost or f"{len(step['keys'])} keys"
        if op == "delete":
            lost = self._write(op, make_rows(step["keys"], ts=self.ts).select(["id", "p"]),
                               raced=step.get("raced", False))
            return lost or f"{len(step['keys'])} keys"
        if op == "delete_partition":
            self._write(op, None, step["partitions"])
            return str(step["partitions"])
        if op == "compaction":
            return str(table.compact(options=self.opts))
        if op == "log_compaction":
            return str(table.log_compact(options=self.opts))
        if op == "clustering":
            return str(table.cluster(sort_by=step.get("sort_by"), options=self.opts))
        if op == "clean":
            return str(table.clean(options=self.opts))
        if op == "archive":
            return f"{len(table.archive(options=self.opts))} archived"
        if op == "rollback":
            latest = table.timeline.latest_completed_write()
            if latest is None or any(s.action == "savepoint" and s.timestamp == latest.timestamp
                                     for s in table.timeline.completed):
                return "skipped (nothing to roll back, or savepointed)"
            try:
                table.rollback(latest.timestamp, options=self.opts)
            except InvalidOptionError as exc:
                if "earlier commits are archived" in str(exc):
                    return "refused (the last active commit over archived ones)"
                if "the cleaner has removed file groups it replaced" in str(exc):
                    return "refused (the groups it replaced were cleaned)"
                if "the cleaner has removed the file versions it rewrote" in str(exc):
                    return "refused (the versions it rewrote were cleaned)"
                raise
            if latest.timestamp in self.before:
                self.model.rows, self.model.writer = map(dict, self.before.pop(latest.timestamp))
            self.history = [h for h in self.history if h[0] != latest.timestamp]
            return f"rolled back {latest}"
        if op == "savepoint":
            if step.get("delete_old") and self.savepoints:
                old = self.savepoints.pop(0)
                table.delete_savepoint(old[0])
                table = hudi.open_table(self.path)
            latest = table.timeline.latest_completed_write()
            if latest is None or any(s[0] == latest.timestamp for s in self.savepoints):
                return "skipped (already savepointed)"
            table.savepoint(latest.timestamp)
            self.savepoints.append((latest.timestamp, dict(self.model.rows), dict(self.model.writer),
                                    len(self.history)))
            return f"savepoint {latest}"
        if op == "restore":
            if not self.savepoints:
                return "skipped (no savepoint)"
            ts, rows, writer, n = self.savepoints[-1]
            table.restore(ts, options=self.opts)
            self.model.rows, self.model.writer = dict(rows), dict(writer)
            self.history = self.history[:n]
            self.before = {k: v for k, v in self.before.items() if k <= ts}
            if step.get("then_delete"):
                self.savepoints.pop()
                hudi.open_table(self.path).delete_savepoint(ts)
            return f"restored {ts}"
        raise ValueError(f"unknown op {op}")

    # -- checks --------------------------------------------------------------------------------------
    def check(self, rng: random.Random) -> None:
        """Both readers == model; metadata listing == storage; nothing pending; time travel."""
        self.checks += 1
        want = model_rows(self.model.rows)
        table = hudi.open_table(self.path)
        ours = table.read()
        got = data_rows(ours)
        if got != want:
            raise AssertionError("our snapshot != model: " + _diff(got, want))
        try:
            theirs = self._hudi_rs()
        except Exception as exc:  # noqa: BLE001
            if want or "no create schema" not in str(exc):
                raise
            # NEW-A (test_torture.py): with every commit rolled back, hoodie.properties lacks the
            # hoodie.table.create.schema Hudi writes, and hudi-rs cannot open the table
            self.tolerated.append(f"hudi-rs: {exc}")
            theirs = pa.table({})
        got_rs = data_rows(theirs) if theirs is not None else want
        if got_rs != want:
            raise AssertionError("hudi-rs snapshot != model: " + _diff(got_rs, want))
        times = {r["id"]: r["_hoodie_commit_time"]
                 for r in ours.select(["id", "_hoodie_commit_time"]).to_pylist()} if ours.num_rows else {}
        if times != self.model.writer:
            bad = {k: (times.get(k), self.model.writer.get(k)) for k in set(times) | set(self.model.writer)
                   if times.get(k) != self.model.writer.get(k)}
            raise AssertionError(f"_hoodie_commit_time (ours, model) differs for {len(bad)} keys: "
                                 f"{dict(list(bad.items())[:5])}")
        problem = metadata_listing_problem(self.path)
        if problem:
            raise AssertionError(problem)
        pending = [str(i) for i in table.timeline.pending
                   if not (i.is_requested and i.action in ("compaction", "logcompaction", "replacecommit",
                                                           "clustering"))]
        if pending:
            raise AssertionError(f"instants left pending: {pending}")
        for inst, bound, (rows, _) in self._time_travel_targets(table, rng):
            expect = model_rows(rows)
            got = data_rows(table.read(as_of=bound))
            if got != expect:
                raise AssertionError(f"time travel to {inst} (as_of {bound}), ours: " + _diff(got, expect))
            theirs = self._hudi_rs(as_of=bound)
            got = data_rows(theirs) if theirs is not None else expect
            if got != expect:
                raise AssertionError(f"time travel to {inst} (as_of {bound}), hudi-rs: " + _diff(got, expect))
        self._check_filtered_read(table, rng)
        self._check_lookup(table, rng)
        self._check_history_reads(table, rng)

    def _hudi_rs(self, **opts) -> pa.Table | None:
        """hudi-rs's read, or ``None`` where hudi-rs 0.5 cannot read the table: Merge-on-Read log
        blocks written before ``n`` was widened to long fail its merge ("partial-update column 'n'
        has type Int32 but the table schema expects Int64"), as they would in a table Apache Hudi
        evolved the same way; our reader is checked against the model there all the same."""
        try:
            return hudi_rs_read(self.path, **opts)
        except Exception as exc:  # noqa: BLE001
            if self.cfg.get("evolve") and "partial-update column 'n' has type Int32" in str(exc):
                self.tolerated.append(f"hudi-rs: {exc}")
                return None
            raise

    def _check_lookup(self, table, rng: random.Random) -> None:
        """``lookup`` of some live keys and some deleted or never written ones gives exactly
        the model's rows (through the record index when the table keeps one, which must then
        hold exactly the snapshot's keys, each where it lives)."""
        from hudi_format.cli.validate import ERROR, record_index_problems
        live = sorted(self.model.rows)
        keys = rng.sample(live, min(5, len(live))) + [key_id(rng.randrange(self.next_key + 5)) for _ in range(3)]
        want = model_rows({k: r for k, r in self.model.rows.items() if k in keys})
        got = data_rows(table.lookup(keys))
        if got != want:
            raise AssertionError(f"lookup of {keys}: " + _diff(got, want))
        if "record_index" in table.config.metadata_partitions:
            # errors only: a soft delete under event-time ordering keeps its key (a warning)
            problems = [str(p) for p in record_index_problems(self.path) if p.severity == ERROR]
            if problems:
                raise AssertionError(f"record index != snapshot: {problems}")

    def _check_filtered_read(self, table, rng: random.Random) -> None:
        """A read with a filter on a data column (pruned by column stats when the table keeps
        them) or on the partition gives exactly the model's rows passing it."""
        rows = list(self.model.rows.values())
        choices = [("n", ">="), ("n", "<"), ("ts", ">="), ("score", "<="), ("p", "=")]
        if EXTRA in table.schema().names:   # the evolved column: stats of older files lack it
            choices.append((EXTRA, "="))
        column, op = rng.choice(choices)
        values = [r.get(column) for r in rows if r.get(column) is not None]
        pick = rng.choice(values) if values else {"p": PARTS[0], EXTRA: "none"}.get(column, 0)
        passes = {">=": lambda v: v is not None and v >= pick, "<": lambda v: v is not None and v < pick,
                  "<=": lambda v: v is not None and v <= pick, "=": lambda v: v == pick}[op]
        want = model_rows({r["id"]: r for r in rows if passes(r.get(column))})
        got = data_rows(table.read(filters=[(column, op, pick)]))
        if got != want:
            raise AssertionError(f"read with filter {column} {op} {pick!r}: " + _diff(got, want))

    def _check_history_reads(self, table, rng: random.Random) -> None:
        """Any earlier write on the active timeline, cleaned or not: time travel there gives
        the model's rows or fails as cleaned (``FileMissingError``), never other rows; an
        incremental query between two of them gives each record of the range's commits at its
        state as of the range's end, or (its files cleaned: the fallback) at its latest state
        (version 6: or fails as cleaned, its default)."""
        active = {i.timestamp for i in table.timeline.completed}
        earlier = [h for h in self.history[:-1] if h[0] in active]
        for inst, bound, (rows, _) in rng.sample(earlier, min(2, len(earlier))):
            try:
                got = data_rows(table.read(as_of=bound))
            except hudi.FileMissingError:
                continue
            if got != model_rows(rows):
                raise AssertionError(f"time travel to {inst} (as_of {bound}) answered wrong rows without "
                                     f"an error: " + _diff(got, model_rows(rows)))
        points = [h for h in self.history if h[0] in active]
        if len(points) < 2:
            return
        (_, lo, _), (_, hi, (rows_hi, writer_hi)) = sorted(rng.sample(points, 2), key=lambda h: h[1])
        in_range = {h[0] for h in self.history if lo < h[1] <= hi}
        exact = model_rows({k: r for k, r in rows_hi.items() if writer_hi.get(k) in in_range})
        latest = model_rows({k: r for k, r in self.model.rows.items() if self.model.writer.get(k) in in_range})
        try:
            got = data_rows(table.read_incremental(lo, hi))
        except hudi.FileMissingError:
            if self.version >= 8:     # version 8+ falls back to the latest state by default
                raise
            return                    # version 6: no fallback unless asked, as Hudi
        if got != exact and got != latest:
            raise AssertionError(f"incremental ({lo}, {hi}]: neither the state as of its end nor the "
                                 f"latest state of its commits' records: " + _diff(got, exact))

    def _time_travel_targets(self, table, rng: random.Random) -> list:
        """Up to two earlier writes whose files the cleaner still retains (at or after the last
        clean's earliest commit to retain, or savepointed) and that are on the active timeline."""
        tl = table.timeline
        active = {i.timestamp for i in tl.completed}
        savepointed = {i.timestamp for i in tl.completed if i.action == "savepoint"}
        ecr = ""
        for inst in tl.completed:
            if inst.action == "clean":
                meta = tl.raw_metadata(inst)
                # a clean keeping file versions (a race's) retains the state of its last commit only
                ecr = max(ecr, meta.get("earliestCommitToRetain") or meta.get("lastCompletedCommitTimestamp") or "")
        alive = [h for h in self.history[:-1] if h[0] in active and (h[0] >= ecr or h[0] in savepointed)]
        return rng.sample(alive, min(2, len(alive)))

    def validate(self) -> None:
        from hudi_format.cli.validate import ERROR, validate_table
        errors = [str(p) for p in validate_table(self.path) if p.severity == ERROR]
        if errors:
            raise AssertionError(f"validate: {errors[:5]}")


def run_sequence(cfg: dict, steps: int = 20, workdir: str | None = None, given: list[dict] | None = None,
                 log: Callable[[str], None] | None = None, keep: bool = False) -> dict:
    """Run one sequence (generated from ``cfg['seed']``, or the ``given`` steps); raise
    ``TortureFailure`` naming the seed, the step and the steps so far. Returns figures."""
    log = log or (lambda s: None)
    base = tempfile.mkdtemp(prefix=f"torture-{cfg['seed']}-", dir=workdir)
    path = os.path.join(base, "t")
    seq = Sequence(path, cfg, log)
    rng = random.Random(cfg["seed"])
    n = len(given) if given is not None else steps
    ok = False
    saved = merge_handle._STREAM_ABOVE_ROWS, merge_handle._MERGE_BATCH_ROWS, merge_handle._MERGE_BUFFER_BYTES
    if cfg.get("merge_batch_rows"):
        merge_handle._STREAM_ABOVE_ROWS = merge_handle._MERGE_BATCH_ROWS = cfg["merge_batch_rows"]
        merge_handle._MERGE_BUFFER_BYTES = 4096
    try:
        for i in range(n):
            step = given[i] if given is not None else seq.generate(rng)
            try:
                note = seq.apply(step)
                seq.steps_done.append(step)
                log(f"  step {i:2d} {json.dumps(step)} -> {note}")
                seq.check(random.Random(f"{cfg['seed']}-{i}"))
            except Exception as exc:  # noqa: BLE001 - any error is a finding
                if step not in seq.steps_done:
                    seq.steps_done.append(step)
                raise TortureFailure(
                    f"seed {cfg['seed']} failed at step {i} {step['op']}: {type(exc).__name__}: {exc}\n"
                    f"  {cfg['table_type']} v{cfg['version']} {cfg['profile']}, options {cfg['options']}, "
                    f"merge batch rows {cfg.get('merge_batch_rows')}\n"
                    f"  step: {json.dumps(step)}\n  replay: {replay_command(cfg, n)}\n"
                    f"  steps: {json.dumps(seq.steps_done)}\n  table kept at {path}\n"
                    + "".join(traceback.format_exception(exc)[-6:])) from exc
        try:
            seq.validate()
        except AssertionError as exc:
            raise TortureFailure(
                f"seed {cfg['seed']} failed in the final validate: {exc}\n"
                f"  {cfg['table_type']} v{cfg['version']} {cfg['profile']}, options {cfg['options']}\n"
                f"  replay: {replay_command(cfg, n)}\n  steps: {json.dumps(seq.steps_done)}\n"
                f"  table kept at {path}\n") from exc
        ok = True
    finally:
        merge_handle._STREAM_ABOVE_ROWS, merge_handle._MERGE_BATCH_ROWS, merge_handle._MERGE_BUFFER_BYTES = saved
        if ok and not keep:
            shutil.rmtree(base, ignore_errors=True)
    return {"steps": n, "checks": seq.checks, "path": path}


def signature(exc: BaseException) -> str:
    """What kind of failure this is, stable across shrinking (step numbers and keys removed)."""
    cause = exc.__cause__ or exc
    text = str(cause).split(":")[0] if not isinstance(cause, AssertionError) else str(cause).split(":")[0]
    return f"{type(cause).__name__}:{text[:60]}"


def shrink(cfg: dict, steps: list[dict], workdir: str | None = None) -> list[dict]:
    """Greedily drop steps (chunks, then single ones) while the failure keeps its signature."""
    def fails(candidate: list[dict]) -> str | None:
        try:
            run_sequence(cfg, given=candidate, workdir=workdir)
        except TortureFailure as exc:
            return signature(exc)
        return None

    want = fails(steps)
    if want is None:
        return steps
    chunk = max(1, len(steps) // 2)
    while chunk >= 1:
        i = 0
        while i < len(steps):
            cand = steps[:i] + steps[i + chunk:]
            if cand and cand[0]["op"] in ("insert", "bulk_insert", "upsert") and fails(cand) == want:
                steps = cand
            else:
                i += chunk
        chunk //= 2
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=None, help="soak: run new seeds until time is up")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--first-seed", type=int, default=None, help="soak: start from this seed")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--table-type", choices=["COPY_ON_WRITE", "MERGE_ON_READ", "COW", "MOR"], default=None)
    ap.add_argument("--version", type=int, choices=[6, 8], default=None)
    ap.add_argument("--profile", choices=["default", "aggressive"], default=None)
    ap.add_argument("--replay", help="a JSON file with the steps to run (from a failure or --shrink)")
    ap.add_argument("--moves", action="store_true", help="replay: a global index, keys moving partitions")
    ap.add_argument("--races", action="store_true", help="replay: services racing some writes")
    ap.add_argument("--mixed", action="store_true", help="replay: writers keeping other metadata indexes")
    ap.add_argument("--shrink", action="store_true", help="reduce a failing sequence")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    ttype = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(args.table_type or "", args.table_type)
    log = print if args.verbose else None

    if args.seed is not None or args.replay:
        cfg = sequence_config(args.seed or 0, ttype, args.version, args.profile, args.moves, args.races, args.mixed)
        given = json.load(open(args.replay)) if args.replay else None
        print(f"config: {json.dumps(cfg)}")
        try:
            figures = run_sequence(cfg, args.steps, args.workdir, given, log, keep=args.verbose)
        except TortureFailure as exc:
            print(str(exc))
            if args.shrink:
                steps = json.loads(str(exc).split("  steps: ", 1)[1].split("\n", 1)[0])
                small = shrink(cfg, steps, args.workdir)
                print(f"shrunk to {len(small)} steps (signature {signature(exc)}):\n{json.dumps(small)}")
            return 1
        print(f"ok: {figures['steps']} steps, {figures['checks']} checks")
        return 0

    deadline = time.time() + 60 * (args.minutes or 1)
    seed = args.first_seed if args.first_seed is not None else random.randrange(1_000_000)
    runs = steps = 0
    failures: list[str] = []
    while time.time() < deadline:
        cfg = sequence_config(seed, ttype, args.version, args.profile, seed % 3 == 0, seed % 2 == 1,
                              args.mixed or seed % 4 == 3)
        try:
            figures = run_sequence(cfg, args.steps, args.workdir, log=log)
            steps += figures["steps"]
        except TortureFailure as exc:
            failures.append(f"seed {seed}: {signature(exc)}")
            print(str(exc).split("\n  steps:")[0], flush=True)
        runs += 1
        seed += 1
    print(f"{runs} sequences, {steps} steps in passing sequences, {len(failures)} failed")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
