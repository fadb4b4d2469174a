"""Child process for the concurrency test: several rounds of upserts; report each outcome.

usage: python concurrentchild.py <table url> <proc> <rounds> <out.json> [storage options json] [write options json] [disjoint]
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import hudi_format as hudi  # noqa: E402
from writemodel import make_rows  # noqa: E402

def batch(proc: int, r: int, disjoint: bool = False):
    if disjoint:   # each writer updates its own keys in its own partition: no conflicts
        return make_rows(range(5000 + proc * 100, 5000 + proc * 100 + 8), ts=(r + 1) * 10 + proc,
                         partitions=(f"w{proc}",), seed=r)
    shared = range(0, 40, 3 + proc)                  # overlaps the other writers' keys
    own = range(1000 + proc * 100 + r * 10, 1000 + proc * 100 + r * 10 + 5)  # new, disjoint
    ts = (r + 1) * 10 + proc                          # unique per (round, writer)
    return make_rows(list(shared) + list(own), ts=ts, seed=ts)


if __name__ == "__main__":
    url, proc, rounds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    storage_options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    disjoint = len(sys.argv) > 7 and sys.argv[7] == "disjoint"
    results = []
    for r in range(rounds):
        rows = batch(proc, r, disjoint)
        try:
            inst = hudi.write(url, rows, operation="upsert", storage_options=storage_options,
                              options=options)
            results.append({"ok": True, "instant": inst.timestamp, "proc": proc, "round": r,
                            "service_errors": [repr(e) for e in getattr(inst, "service_errors", ())]})
        except hudi.ConcurrentWriteError as exc:
            results.append({"ok": False, "error": str(exc), "proc": proc, "round": r})
    with open(out, "w") as f:
        json.dump(results, f, default=str)
    # Done and flushed: skip interpreter teardown (native thread pools can abort it rarely).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
