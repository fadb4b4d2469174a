"""Child processes of the concurrency-with-services test (``test_concurrency_services.py``).

usage: python servicechild.py writer  <table url> <proc> <seconds> <ledger.jsonl> [storage options json]
       python servicechild.py service <table url> <seconds> <out.json> [storage options json]

A *writer* inserts, upserts and deletes keys of its own range (``w<proc>_<n>``) until the
deadline and appends each outcome to its ledger, one JSON line flushed and fsynced *after*
``write()`` returned or raised: ``{"op", "keys", "value", "ok", "error", "column"}``. Keys a
failed write touched are retired (never written again), so the ledger alone fixes every key's
final state. Before each write it stores the write's intent (``<ledger>.intent``): a writer
killed and started again (:mod:`soak_kills`) records that write as in doubt (``"ok": null``)
and goes on with its keys where its last life left them. A quarter of its inserts and upserts
also carry a column of its own, ``c<proc>`` (the value as text; ``"column": true``), so the
writers evolve the schema concurrently, each differently; its other writes leave that column null.
Under a global index that updates partition paths (``moves_keys``), a third of its upserts
give the keys another partition (``"op": "move"``, ``"parts"``: each key's partition).
The *service* process loops compact (MOR) / clean / cluster / archive with aggressive options.
"""

from __future__ import annotations

import json
import os
import random
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))

import pyarrow as pa  # noqa: E402

import hudi_format as hudi  # noqa: E402
from soakclock import SoakClock  # noqa: E402
from torture_config import other_writer  # noqa: E402

#: What Hudi users set to keep a busy table small; the issue's run used these (plus the soak's
#: ``--option k=v``, passed on in ``SOAK_OPTIONS``).
AGGRESSIVE = {
    "hoodie.cleaner.commits.retained": "3",
    "hoodie.keep.min.commits": "5",
    "hoodie.keep.max.commits": "8",
    "hoodie.write.set.null.for.missing.columns": "true",   # a writer's column, left out of its other writes
    **json.loads(os.environ.get("SOAK_OPTIONS") or "{}"),
}
#: Every file is "small", groups are tiny: clustering really rewrites file groups each round.
SERVICE_OPTIONS = dict(AGGRESSIVE, **{
    "hoodie.compact.inline.max.delta.commits": "1",
    "hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
    "hoodie.clustering.plan.strategy.target.file.max.bytes": str(1024 * 1024),
    "hoodie.clustering.plan.strategy.max.num.groups": "4",
    "hoodie.clustering.inline.max.commits": "1",
})
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
PARTITIONS = ("a", "b", "c")


def writer_options(proc: int, seq: int) -> dict:
    """A write's options: the soak's, or with ``SOAK_MIXED`` set, for about a third of the
    writes, those of a writer keeping the metadata otherwise (``torture_config.other_writer``;
    the soak's index, the record index when it keeps one, is global)."""
    rng = random.Random(f"mixed-{proc}-{seq}")
    if not os.environ.get("SOAK_MIXED") or rng.random() >= 0.3:
        return AGGRESSIVE
    return dict(AGGRESSIVE, **other_writer(AGGRESSIVE, rng, True))


def home(key: str) -> str:
    """The partition a key is inserted in."""
    return PARTITIONS[int(key.rsplit("_", 1)[1]) % len(PARTITIONS)]


def moves_keys(options: dict) -> bool:
    """Whether the writers' upserts also move keys to another partition: under a global index
    that updates the partition path (the soak's ``--option``s set it)."""
    index = options.get("hoodie.index.type", "SIMPLE")
    flag = {"GLOBAL_SIMPLE": "hoodie.simple.index.update.partition.path",
            "GLOBAL_BLOOM": "hoodie.bloom.index.update.partition.path",
            "RECORD_INDEX": "hoodie.record.index.update.partition.path"}.get(index)
    return flag is not None and str(options.get(flag, "false")).lower() == "true"


def rows(keys: list[str], value: int, parts: list[str] | None = None) -> pa.Table:
    parts = parts or [home(k) for k in keys]
    return pa.table({"id": keys, "p": parts, "ts": [value] * len(keys), "v": [value] * len(keys)},
                    schema=SCHEMA)


def _append(ledger, entry: dict) -> None:
    ledger.write(json.dumps(entry) + "\n")
    ledger.flush()
    os.fsync(ledger.fileno())


class Keys:
    """One writer's keys (``w<proc>_<n>``) and what its acknowledged writes left: which are
    live, and where a moved key lives. :meth:`next` picks a write, :meth:`done` records its
    outcome (a failed write's keys are retired: never written again)."""

    def __init__(self, proc: int, sizes: tuple[int, int, int] = (4, 4, 2)):
        self.proc, self.sizes = proc, sizes   # most keys of an insert, an upsert, a delete
        self.live: list[str] = []
        self.where: dict[str, str] = {}
        self.moves = moves_keys(AGGRESSIVE)
        self.next_key = 0

    def kinds(self) -> set[str]:
        """The kinds of write this writer makes."""
        return {"insert", "upsert", "delete"} | ({"move"} if self.moves else set())

    def next(self, rng: random.Random, want: str | None = None) -> tuple[str, list[str], list[str]]:
        """``(op, keys, their partitions)``: insert, upsert, delete, or move (an upsert to
        other partitions, under a global index that moves keys); ``want`` (when keys are live)
        picks the kind instead of chance."""
        roll = rng.random()
        if want and not self.live:   # no live key to update: an insert first
            want = "insert"
        if want:
            op = "upsert" if want == "move" else want
        else:
            op = "insert" if roll < 0.4 or len(self.live) < 6 else "upsert" if roll < 0.8 else "delete"
        if op == "insert":
            keys = [f"w{self.proc}_{self.next_key + i}" for i in range(rng.randint(1, self.sizes[0]))]
            self.next_key += len(keys)
        elif op == "upsert":
            keys = rng.sample(self.live, min(len(self.live), rng.randint(1, self.sizes[1])))
        else:
            keys = rng.sample(self.live, min(len(self.live), rng.randint(1, self.sizes[2])))
        parts = [self.where.get(k, home(k)) for k in keys]
        if op == "upsert" and self.moves and (rng.random() < 0.3 if want is None else want == "move"):
            op = "move"
            parts = [rng.choice([p for p in PARTITIONS if p != q]) for q in parts]
        return op, keys, parts

    def done(self, op: str, keys: list[str], parts: list[str], ok: bool) -> None:
        if not ok:
            self.live = [k for k in self.live if k not in keys]   # retired
        elif op == "insert":
            self.live += keys
        elif op == "move":
            self.where.update(zip(keys, parts))
        elif op == "delete":
            self.live = [k for k in self.live if k not in keys]


def settle(ledger_path: str) -> list[dict]:
    """The ledger's entries, after recording the write a kill left in doubt: the intent a
    writer stores before each write, when no outcome follows it (``"ok": None``: the write may
    or may not have committed; :mod:`soak_kills` resolves it against the table)."""
    entries = []
    if os.path.exists(ledger_path):
        with open(ledger_path) as f:
            for line in f:
                try:
                    entries.append(json.loads(line))
                except ValueError:   # a line the kill cut short: its write is the intent's
                    break
    intent_path = ledger_path + ".intent"
    if os.path.exists(intent_path):
        with open(intent_path) as f:
            text = f.read()
        intent = json.loads(text) if text.strip() else None
        if intent is not None and (not entries or entries[-1]["value"] < intent["value"]):
            intent.update(ok=None, error="killed")
            entries.append(intent)
        with open(ledger_path + ".new", "w") as ledger:   # rewritten whole: no torn line is left
            for e in entries:
                ledger.write(json.dumps(e) + "\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        os.replace(ledger_path + ".new", ledger_path)   # a kill here leaves the old or the new whole
        os.remove(intent_path)
    return entries


def resumed(proc: int, entries: list[dict]) -> tuple[Keys, int]:
    """A writer's keys and last sequence number, as its earlier lives' ledger left them."""
    mine, seq = Keys(proc), 0
    for e in entries:
        mine.done(e["op"], e["keys"], e.get("parts") or [home(k) for k in e["keys"]], e["ok"] is True)
        seq = max(seq, e["value"] - proc * 1_000_000)
        mine.next_key = max([mine.next_key] + [int(k.rsplit("_", 1)[1]) + 1 for k in e["keys"]])
    return mine, seq


def _store_intent(path: str, entry: dict) -> None:
    with open(path, "w") as f:
        f.write(json.dumps(entry))
        f.flush()
        os.fsync(f.fileno())


def writer(url: str, proc: int, seconds: float, ledger_path: str, storage_options) -> None:
    entries = settle(ledger_path)   # a writer started again after a kill goes on where it was
    rng = random.Random(f"{proc}-{len(entries)}")
    clock = SoakClock(seconds)
    mine, seq = resumed(proc, entries)
    # the least a soak asks of a writer: one write acknowledged and each kind of write tried;
    # past its seconds (a slow machine) it makes the kinds it has not made yet
    acked, tried = False, set()
    with open(ledger_path, "a") as ledger:
        while clock.running(acked and tried >= mine.kinds()):
            seq += 1
            value = proc * 1_000_000 + seq  # unique, and increasing per writer (event time)
            missing = sorted(mine.kinds() - tried) if clock.remaining() == 0 else []
            op, keys, parts = mine.next(rng, missing[0] if missing else None)
            data = rows(keys, value, parts)
            column = op != "delete" and rng.random() < 0.25
            if column:   # this writer's own new column
                data = data.append_column(f"c{proc}", pa.array([str(value)] * len(keys)))
            if op == "delete":
                data = data.select(["id", "p"])
            entry = {"op": op, "keys": keys, "value": value, "ok": True, "error": None, "column": column,
                     "parts": parts}
            _store_intent(ledger_path + ".intent", entry)
            try:
                hudi.write(url, data, operation="upsert" if op == "move" else op, record_key="id", ordering_field="ts",
                           partition_by="p", options=writer_options(proc, seq), storage_options=storage_options)
            except Exception as exc:  # noqa: BLE001 - every failure is an outcome to check
                entry.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
            mine.done(op, keys, parts, entry["ok"])
            _append(ledger, entry)
            acked, tried = acked or entry["ok"], tried | {op}


def service_names(table) -> list[str]:
    """The services the service process runs on ``table``, in its order."""
    return (["compact"] if table.table_type == "MERGE_ON_READ" else []) + ["cluster", "clean", "archive"]


def run_service(table, name: str, options: dict):
    """One run of service ``name`` on ``table``: what it did (falsy: nothing to do)."""
    return table.cluster(options=options) if name == "cluster" else getattr(table, name)(options)


def service(url: str, seconds: float, out: str, storage_options) -> None:
    clock = SoakClock(seconds)
    counts: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    while clock.running(any(c["ok"] for c in counts.values())):   # at least one service did something
        table = hudi.open_table(url, storage_options=storage_options)
        for name in service_names(table):
            c = counts.setdefault(name, {"ok": 0, "noop": 0, "failed": 0})
            try:
                done = run_service(table, name, SERVICE_OPTIONS)
                c["ok" if done else "noop"] += 1
            except Exception as exc:  # noqa: BLE001
                c["failed"] += 1
                if len(errors) < 20:
                    errors.append(f"{name}: {type(exc).__name__}: {exc}"[:500])
                    if os.environ.get("SERVICECHILD_TRACE"):
                        traceback.print_exc()
        _report(out, counts, errors)   # after every round: a killed service's rounds still count
    _report(out, counts, errors)


def _report(out: str, counts: dict, errors: list[str]) -> None:
    with open(out + ".new", "w") as f:
        json.dump({"counts": counts, "errors": errors}, f)
    os.replace(out + ".new", out)


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "writer":
        opts = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
        writer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], opts)
    elif role == "service":
        opts = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
        service(sys.argv[2], float(sys.argv[3]), sys.argv[4], opts)
    else:
        raise SystemExit(f"unknown role {role!r}")
