"""Optimistic concurrency: four processes upsert overlapping and disjoint keys at once. Every
write that reported success is in the table, every conflicting one raised ConcurrentWriteError,
and the final rows equal the model built from the successful writes alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pyarrow as pa  # noqa: F401

import hudi_format as hudi
from concurrentchild import batch
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows

pytestmark = pytest.mark.slow

CHILD = Path(__file__).parent / "support" / "concurrentchild.py"
PROCS, ROUNDS = 4, 3


def _run(url: str, tmp_path: Path, storage_options=None) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = []
    for p in range(PROCS):
        out = tmp_path / f"out{p}.json"
        args = [sys.executable, str(CHILD), url, str(p), str(ROUNDS), str(out)]
        if storage_options:
            args.append(json.dumps(storage_options))
        procs.append((subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True), out))
    results = []
    for proc, out in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results += json.loads(out.read_text())
    return results


def _check(url: str, results: list[dict], initial: pa.Table, storage_options=None) -> None:
    ok = [r for r in results if r["ok"]]
    failed = [r for r in results if not r["ok"]]
    assert ok, "no write succeeded"
    assert all("conflicts with" in r["error"] or "clustering" in r["error"] for r in failed)
    model = Model(event_time=True)
    model.apply("insert", initial, 0)
    # Event-time ordering: the highest ordering value of the successful writes wins, whatever
    # the commit order.
    for r in sorted(ok, key=lambda r: (r["round"], r["proc"])):
        model.apply("upsert", batch(r["proc"], r["round"]), 1)
    table = hudi.open_table(url, storage_options=storage_options)
    assert data_rows(table.read()) == model_rows(model.rows)
    committed = {i.timestamp for i in table.timeline.write_instants()}
    assert {r["instant"] for r in ok} <= committed
    return table


def test_four_local_writers(tmp_path):
    path = str(tmp_path / "t")
    initial = make_rows(range(0, 40), ts=0)
    hudi.write(path, initial, record_key="id", ordering_field="ts", partition_by="p",
               table_type="MERGE_ON_READ")
    results = _run(path, tmp_path)
    _check(path, results, initial)
    assert data_rows(hudi_rs_read(path)) == data_rows(hudi.open_table(path).read())
    assert len(results) == PROCS * ROUNDS


def test_four_writers_on_s3(tmp_path, moto_s3):
    opts = moto_s3("occ")
    url = "s3://occ/t"
    initial = make_rows(range(0, 40), ts=0)
    hudi.write(url, initial, record_key="id", ordering_field="ts", partition_by="p",
               storage_options=opts)
    results = _run(url, tmp_path, opts)
    _check(url, results, initial, opts)


def test_conflicts_actually_happen_and_inserts_never_conflict(tmp_path, monkeypatch):
    """Writer b plans against the table, then writer a commits over the same file groups before
    b finishes: b fails and leaves no trace; a writer that only inserts new file groups
    commits even though it started before a finished."""
    import threading

    from hudi_format.writer.client import WriteClient

    path = str(tmp_path / "t")
    opts = {"hoodie.parquet.small.file.limit": "0"}
    hudi.write(path, make_rows(range(0, 20), ts=0), record_key="id", ordering_field="ts",
               partition_by="p", options=opts)
    planned, go = threading.Barrier(3), threading.Event()
    real_commit = WriteClient._commit
    waiting = threading.local()

    def held_commit(self, *a, **k):
        # b and c have written their files; a commits before they check for conflicts.
        if getattr(waiting, "hold", False):
            waiting.hold = False
            planned.wait()
            go.wait()
        return real_commit(self, *a, **k)

    monkeypatch.setattr(WriteClient, "_commit", held_commit)
    errors = {}

    def run(name, rows, op):
        waiting.hold = True
        try:
            hudi.write(path, rows, operation=op, options=opts)
        except Exception as exc:  # noqa: BLE001
            errors[name] = exc

    b = threading.Thread(target=run, args=("b", make_rows(range(3, 8), ts=2, seed=2), "upsert"))
    c = threading.Thread(target=run, args=("c", make_rows(range(500, 505), ts=3, seed=3), "insert"))
    b.start(), c.start()
    planned.wait()   # b and c have written their files and are about to commit
    hudi.write(path, make_rows(range(0, 5), ts=1, seed=1), options=opts)   # a commits first
    go.set()
    b.join(), c.join()
    assert isinstance(errors.get("b"), hudi.ConcurrentWriteError), errors
    assert "c" not in errors, errors
    table = hudi.open_table(path)
    ts = {r["id"]: r["ts"] for r in table.read(columns=["id", "ts"]).to_pylist()}
    assert all(ts[f"k{i:05d}"] == 3 for i in range(500, 505))
    assert ts["k00003"] == 1 and ts["k00007"] == 0   # b's write left no trace
    assert table.timeline.pending == []
