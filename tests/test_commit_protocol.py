"""The one commit path of writes and table services (issue 11, defects 2-4).

- A write racing a clustering: whatever the order and the instant times, one of them fails
  cleanly and no acknowledged write is lost.
- A service killed right after its metadata-table deltacommit: the retried service and the next
  write succeed, and the metadata table lists exactly what storage holds.
- A post-commit service that fails never fails the write whose commit is durable; concurrent
  inline cleans are serialised instead of colliding.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.services import clustering
from hudi_format.storage import Storage
from hudi_format.timeline.clock import InstantClock
from test_metadata_writer import committed_files, mdt_files
from preloaded import run_script
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows

KW = dict(record_key="id", ordering_field="ts", partition_by="p")
ONE_PARTITION = ("a",)


# -- defect 2: a write racing a clustering ------------------------------------------------------
def _pause(monkeypatch, owner, name, reached: threading.Event, go: threading.Event, when=lambda *a, **k: True):
    real = getattr(owner, name)

    def paused(*a, **k):
        if when(*a, **k):
            reached.set()
            assert go.wait(60), "the test never released the paused step"
        return real(*a, **k)
    monkeypatch.setattr(owner, name, paused)


def _is_write(self, *a, **k) -> bool:
    return threading.current_thread().name == "writer"


def _is_clustering(self, *a, **k) -> bool:
    return threading.current_thread().name == "clusterer"


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("order", ["writer_first", "clustering_first"])
def test_write_racing_an_earlier_clustering_loses_nothing(tmp_path, monkeypatch, ttype, order):
    """Writer plans; a clustering with an EARLIER instant time writes its plan and rewrites the
    file group; then the two commit in either order. One fails cleanly; the other's rows stay.
    (A clustering leaves out the file groups of writes whose markers it sees; here it plans as
    one that listed the markers before the writer made them.)"""
    from hudi_format.writer.client import WriteClient
    monkeypatch.setattr(clustering, "in_flight_file_groups", lambda ts: set())

    path = str(tmp_path / "t")
    first = make_rows(range(0, 10), ts=1, partitions=ONE_PARTITION)
    hudi.write(path, first, operation="insert", table_type=ttype, **KW)
    st = Storage(path)
    cfg = TableConfig.load(st)
    cluster_time = InstantClock(st, cfg).new_instant_time()   # earlier than the writer's

    w_ready, w_go = threading.Event(), threading.Event()
    c_ready, c_go = threading.Event(), threading.Event()
    _pause(monkeypatch, WriteClient, "_commit", w_ready, w_go, _is_write)
    try:
        from hudi_format import transaction
        _pause(monkeypatch, transaction.Transaction, "commit", c_ready, c_go, _is_clustering)
    except ImportError:   # before the one commit path: the services' completion
        from hudi_format.metadata import writer as mdt
        _pause(monkeypatch, mdt, "complete_with_metadata", c_ready, c_go, lambda *a, **k: True)
    errors: dict[str, BaseException] = {}
    update = make_rows(range(0, 3), ts=5, seed=7, partitions=ONE_PARTITION)

    def write():
        try:
            hudi.write(path, update, operation="upsert", **KW)
        except Exception as exc:  # noqa: BLE001
            errors["writer"] = exc

    def cluster():
        try:
            inst = clustering.schedule_clustering(st, TableConfig.load(st), instant_time=cluster_time)
            assert inst is not None and inst.timestamp < writer_instant()
            clustering.run_clustering(st, TableConfig.load(st), inst)
        except Exception as exc:  # noqa: BLE001
            errors["clustering"] = exc

    def writer_instant() -> str:
        tl = hudi.open_table(path).timeline
        return max(i.timestamp for i in tl.pending if i.action in ("commit", "deltacommit"))

    w = threading.Thread(target=write, name="writer")
    w.start()
    assert w_ready.wait(60)             # the writer planned and wrote its files
    c = threading.Thread(target=cluster, name="clusterer")
    c.start()
    assert c_ready.wait(60)             # the clustering planned (earlier time) and rewrote the group
    first_go, first_thread, second_go, second_thread = (
        (w_go, w, c_go, c) if order == "writer_first" else (c_go, c, w_go, w))
    first_go.set()
    first_thread.join(60)
    second_go.set()
    second_thread.join(60)
    assert not w.is_alive() and not c.is_alive()

    assert len(errors) == 1, errors     # exactly one of them failed ...
    (loser, exc), = errors.items()
    assert isinstance(exc, hudi.HudiError), repr(exc)   # ... cleanly, with a HudiError
    model = Model(event_time=True)
    model.apply("insert", first, 0)
    if loser == "clustering":
        model.apply("upsert", update, 1)
    table = hudi.open_table(path)
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    assert [i for i in table.timeline.pending if i.action in ("commit", "deltacommit")] == []
    # and the table goes on: the next write and the next clustering work
    more = make_rows(range(2, 6), ts=9, seed=3, partitions=ONE_PARTITION)
    hudi.write(path, more, operation="upsert", **KW)
    model.apply("upsert", more, 2)
    hudi.open_table(path).cluster()
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)


# -- defect 3: a service killed after its metadata-table deltacommit ------------------------------
SERVICE_CHILD = Path(__file__).parent / "support" / "servicefaultchild.py"


def _setup_for(path: str, service: str) -> Model:
    ttype = "MERGE_ON_READ" if service == "compact" else "COPY_ON_WRITE"
    opts = {"hoodie.parquet.small.file.limit": "0", "hoodie.clean.automatic": "false"}
    model = Model(event_time=True)
    for i in range(4):
        rows = make_rows(range(i * 3, i * 3 + 6), ts=i, seed=i)
        hudi.write(path, rows, operation="upsert", table_type=ttype, options=opts, **KW)
        model.apply("upsert", rows, i)
    return model


@pytest.mark.parametrize("service", ["compact", "cluster", "clean"])
def test_service_killed_after_its_metadata_commit_recovers(tmp_path, service):
    path = str(tmp_path / "t")
    model = _setup_for(path, service)
    before = data_rows(hudi.open_table(path).read())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = run_script(SERVICE_CHILD, [path, service], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert data_rows(hudi.open_table(path).read()) == before == model_rows(model.rows)

    # the retried service completes ...
    from servicefaultchild import SERVICE_OPTIONS
    table = hudi.open_table(path)
    kind = {"compact": "commit", "cluster": "replacecommit", "clean": "clean"}[service]
    done = table.cluster() if service == "cluster" else getattr(table, service)(options=SERVICE_OPTIONS.get(service))
    assert done is not None and done.action in (kind, "clustering")
    # ... and so does the next write, with the metadata table equal to storage
    rows = make_rows(range(20, 26), ts=10, seed=5)
    inst = hudi.write(path, rows, operation="upsert", **KW)
    assert not getattr(inst, "service_errors", ())
    model.apply("upsert", rows, 9)
    table = hudi.open_table(path)
    assert table.timeline.pending == []
    assert mdt_files(path) == {p: f for p, f in committed_files(path).items() if f}
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


# -- defect 4: post-commit services never fail a durable write ------------------------------------
def test_failing_inline_service_does_not_fail_the_write(tmp_path, monkeypatch, caplog):
    from hudi_format.services import cleaning

    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(0, 5), ts=1), operation="insert", **KW)

    def broken_clean(*a, **k):
        raise hudi.HudiError("the cleaner broke")
    monkeypatch.setattr(cleaning, "clean", broken_clean)
    rows = make_rows(range(3, 8), ts=2, seed=1)
    with caplog.at_level(logging.WARNING):
        inst = hudi.write(path, rows, operation="upsert", **KW)
        inst2 = hudi.open_table(path).write(make_rows(range(8, 9), ts=3), operation="insert")
    for done in (inst, inst2):
        assert done.is_completed and done.action == "commit"      # still an Instant
        assert [type(e).__name__ for e in done.service_errors] == ["HudiError"]
        assert "the cleaner broke" in str(done.service_errors[0])
    assert "the cleaner broke" in caplog.text
    tl = hudi.open_table(path).timeline
    assert {inst.timestamp, inst2.timestamp} <= {i.timestamp for i in tl.write_instants()}
    # a clean write reports no service errors
    monkeypatch.undo()
    assert hudi.write(path, make_rows(range(9, 10), ts=4), operation="insert", **KW).service_errors == ()


CONCURRENT_CHILD = Path(__file__).parent / "support" / "concurrentchild.py"


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_concurrent_writers_with_inline_clean(tmp_path, ttype):
    """Four processes upsert their own partitions (no write conflicts) with an aggressive inline
    cleaner, so that their cleans run at once: every write commits and reports no service
    error (before, cleans collided on one clean instant or on the metadata table)."""
    from concurrentchild import batch

    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": 1}
    initial = make_rows(range(0, 40), ts=0)
    hudi.write(path, initial, table_type=ttype, options=opts, **KW)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = []
    for p in range(4):
        out = tmp_path / f"out{p}.json"
        args = [sys.executable, str(CONCURRENT_CHILD), path, str(p), "5", str(out), "null", json.dumps(opts), "disjoint"]
        procs.append((subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True), out))
    results = []
    for proc, out in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results += json.loads(out.read_text())
    ok = [r for r in results if r["ok"]]
    assert len(ok) == len(results) == 4 * 5, [r for r in results if not r["ok"]]
    assert [r for r in ok if r.get("service_errors")] == []
    model = Model(event_time=True)
    model.apply("insert", initial, 0)
    for r in sorted(ok, key=lambda r: (r["round"], r["proc"])):
        model.apply("upsert", batch(r["proc"], r["round"], True), 1)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert mdt_files(path) == {p: f for p, f in committed_files(path).items() if f}


def test_abort_keeps_a_log_file_another_writer_won(tmp_path):
    """A v6 writer creates the marker of the next log version before creating the file; when
    another writer took that version first, the loser's abort must not delete the winner's
    committed file (it did: acknowledged rows vanished under concurrent MOR v6 upserts)."""
    from hudi_format.transaction import Transaction
    from hudi_format.transaction.markers import create_marker

    path = str(tmp_path / "t")
    model = Model(False)
    hudi.write(path, make_rows(range(6), ts=1), operation="insert", record_key="id", ordering_field="ts",
               partition_by="p", table_type="MERGE_ON_READ", table_version=6)
    model.apply("insert", make_rows(range(6), ts=1), 0)
    hudi.write(path, make_rows(range(3), ts=2, seed=1), operation="upsert")
    model.apply("upsert", make_rows(range(3), ts=2, seed=1), 1)
    storage = Storage(path)
    logs = [f.path for f in storage.walk_files("", skip_dirs=(".hoodie",)) if ".log." in f.name]
    assert logs, "the upsert wrote log files"
    loser = Transaction.begin(storage, TableConfig.load(storage), "deltacommit")
    for rel in logs:   # the loser's markers name the winner's files
        create_marker(storage, loser.instant_time, rel, "APPEND")
    loser.abort()
    assert all(storage.exists(rel) for rel in logs)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


def _mor_table_with_logs(path: str, version: int) -> Model:
    """A MERGE_ON_READ table of 6 rows, 3 of them updated into log files; its model."""
    model = Model(version >= 8)
    first = make_rows(range(6), ts=1)
    hudi.write(path, first, operation="insert", record_key="id", ordering_field="ts", partition_by="p",
               table_type="MERGE_ON_READ", table_version=version)
    model.apply("insert", first, 0)
    update = make_rows(range(3), ts=2, seed=1)
    hudi.write(path, update, operation="upsert")
    model.apply("upsert", update, 1)
    return model


def _written_buckets(job, rows):
    """Plan ``job`` over ``rows`` (opening its instant) and write every bucket in this process."""
    from hudi_format import engine
    return [engine.write_bucket(b, rows.take(job.rows_of(b)[0]), deletes=rows.take(job.rows_of(b)[1]))
            for b in engine.plan_write(job, rows)]


def test_v6_write_racing_a_compaction_plan_conflicts(tmp_path):
    """Table version 6: a writer that began before a compaction was planned names its log file
    after the old slice; committing it would leave the compaction unable to complete, forever
    (seen as a compaction failing every round under concurrent writers). The write conflicts,
    the compaction completes, and the table holds every acknowledged row (both readers)."""
    from hudi_format import engine
    from hudi_format.errors import ConcurrentWriteError
    from hudi_format.services import compaction

    path = str(tmp_path / "t")
    model = _mor_table_with_logs(path, 6)
    late = make_rows(range(3), ts=3, seed=2)
    job = engine.begin_write(path, "upsert", schema=late.schema)   # loads the table: no compaction yet
    storage = Storage(path)
    assert compaction.schedule_compaction(storage, TableConfig.load(storage)) is not None
    try:
        results = _written_buckets(job, late)   # its instant is later than the compaction's
        with pytest.raises(ConcurrentWriteError, match="compaction"):
            engine.commit(job, results)
    finally:
        engine.abort(job)
    hudi.open_table(path).compact()
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


@pytest.mark.parametrize("planned", ["before the write began", "after the write began"])
def test_v8_write_and_a_compaction_planned_before_its_instant_both_commit(tmp_path, planned):
    """Table version 8 places a log file in a slice by its deltacommit's completion time: a
    write whose instant is later than a compaction's, which completes after the compaction
    was planned, lands in the compaction's new slice whichever finishes first. As Hudi's
    conflict strategy (a compaction older than the write is no conflict), the write commits
    over the compaction that completed meanwhile, and both readers show its rows after it.
    (It used to fail: every deltacommit over a file group an async compaction finished.)"""
    from hudi_format import engine
    from hudi_format.services import compaction

    path = str(tmp_path / "t")
    model = _mor_table_with_logs(path, 8)
    late = make_rows(range(4), ts=3, seed=2)
    storage = Storage(path)
    if planned == "before the write began":
        planned_at = compaction.schedule_compaction(storage, TableConfig.load(storage))
        job = engine.begin_write(path, "upsert", schema=late.schema)
    else:
        job = engine.begin_write(path, "upsert", schema=late.schema)
        planned_at = compaction.schedule_compaction(storage, TableConfig.load(storage))
    assert planned_at is not None
    try:
        results = _written_buckets(job, late)   # its instant is later than the compaction's
        assert compaction.run_compaction(storage, TableConfig.load(storage)) is not None   # completes first
        engine.commit(job, results)
    except BaseException:
        engine.abort(job)
        raise
    model.apply("upsert", late, 2)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    hudi.open_table(path).compact()
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
