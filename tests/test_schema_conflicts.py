"""Schema evolution in combination: a write, or a table service, that loaded the table before
another writer evolved its schema and commits after it never takes the new columns away (the
case Hudi's ``SimpleSchemaConflictResolutionStrategy`` resolves); two writers adding different
columns keep both; changes that cannot combine, or that a later-requested commit already hid,
fail the later commit and leave nothing. Checked with our reader and hudi-rs."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format import engine
from hudi_format.transaction.commit import Transaction
from writemodel import hudi_rs_read, make_rows

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
       "hoodie.parquet.small.file.limit": "0",
       "hoodie.write.set.null.for.missing.columns": "true"}   # writes of the old columns after an evolution
KW = dict(record_key="id", ordering_field="ts", partition_by="p")


def _wide(keys, ts, column="extra", values=None):
    d = make_rows(keys, ts=ts)
    return d.append_column(column, values if values is not None else pa.array([f"{column}{k}" for k in keys]))


def _started(path, data, op="insert"):
    """A write that loaded the table, opened its instant and wrote its files: commit it later."""
    job = engine.begin_write(path, op, schema=data.schema, options=OCC)
    results = []
    for b in engine.plan_write(job, data):
        w, d = job.rows_of(b)
        results.append(engine.write_bucket(b, data.take(w), deletes=data.take(d)))
    return job, results


def _commit(started):
    try:
        return engine.commit(*started)
    except Exception as exc:  # noqa: BLE001
        return exc


def _columns_of(path, *columns):
    """{id: (columns...)} from our reader, checked equal to hudi-rs's."""
    table = hudi.open_table(path)
    ours = {r["id"]: tuple(r[c] for c in columns) for r in table.read(columns=["id", *columns]).to_pylist()}
    rs = hudi_rs_read(path)
    theirs = {r["id"]: tuple(r[c] for c in columns) for r in rs.select(["id", *columns]).to_pylist()}
    assert ours == theirs
    assert table.timeline.pending == []
    return ours


def _extra_of(path):
    return {k: v[0] for k, v in _columns_of(path, "extra").items()}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("requested_first", ["plain", "evolving"])
def test_a_writer_that_did_not_evolve_keeps_the_schema_a_concurrent_writer_evolved(tmp_path, table_type, version,
                                                                                   requested_first):
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(20), ts=0), table_type=table_type, table_version=version, options=OCC, **KW)
    plain = lambda: _started(path, make_rows(range(500, 505), ts=3))   # noqa: E731
    evolving = lambda: _started(path, _wide(range(600, 603), 4))        # noqa: E731
    if requested_first == "plain":
        p, e = plain(), evolving()
    else:
        e, p = evolving(), plain()
    assert not isinstance(_commit(e), Exception)
    assert not isinstance(_commit(p), Exception)     # loaded the table before the evolution: commits after it
    extra = _extra_of(path)
    assert extra["k00600"] == "extra600" and extra["k00500"] is None and len(extra) == 28
    # later writes of the old columns keep the new one and its values
    hudi.write(path, make_rows(range(600, 601), ts=9), options=OCC)
    hudi.write(path, make_rows(range(601, 602), ts=9), options=OCC)
    extra = _extra_of(path)
    assert extra["k00602"] == "extra602" and extra["k00600"] is None


@pytest.mark.parametrize("version", [6, 8])
def test_two_writers_adding_different_columns_both_keep_theirs(tmp_path, version):
    """Hudi fails the second of two writers that evolve the schema differently; compatible
    changes combine here instead, so no write has to be retried and no column is lost."""
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(20), ts=0), table_version=version, table_type="MERGE_ON_READ",
               options=OCC, **KW)
    first, second = _started(path, _wide(range(500, 505), 3, "other")), _started(path, _wide(range(600, 603), 4))
    assert not isinstance(_commit(first), Exception)
    assert not isinstance(_commit(second), Exception)
    rows = _columns_of(path, "extra", "other")
    assert rows["k00600"] == ("extra600", None) and rows["k00500"] == (None, "other500") and len(rows) == 28


@pytest.mark.parametrize("version", [6, 8])
def test_an_evolving_write_completing_after_a_later_requested_one_fails_and_leaves_nothing(tmp_path, version):
    """Readers (hudi-rs, Hudi's schema resolver) take the schema of the latest-requested commit:
    a write requested earlier, completing later, cannot make its changes the table's."""
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(20), ts=0), table_version=version, options=OCC, **KW)
    first, second = _started(path, _wide(range(500, 505), 3, "other")), _started(path, _wide(range(600, 603), 4))
    assert not isinstance(_commit(second), Exception)
    err = _commit(first)
    assert isinstance(err, hudi.ConcurrentWriteError) and "requested after this write" in str(err), err
    assert "other" not in hudi.open_table(path).schema().names
    assert len(_extra_of(path)) == 23
    hudi.write(path, _wide(range(500, 505), 5, "other"), options=OCC)    # the retry commits
    assert _columns_of(path, "extra", "other")["k00500"] == (None, "other500")


@pytest.mark.parametrize("version", [6, 8])
def test_two_writers_giving_a_new_column_incompatible_types_the_second_fails_and_leaves_nothing(tmp_path, version):
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(20), ts=0), table_version=version, options=OCC, **KW)
    first = _started(path, _wide(range(600, 603), 4))
    second = _started(path, _wide(range(500, 505), 3, values=pa.array(range(5), pa.int64())))
    assert not isinstance(_commit(first), Exception)
    err = _commit(second)
    assert isinstance(err, hudi.ConcurrentWriteError) and "extra" in str(err), err
    assert hudi.open_table(path).schema().field("extra").type == pa.string()
    assert len(_extra_of(path)) == 23


def _held(monkeypatch, actions):
    """Make the next commit of an instant of ``actions`` wait (after its work, before its
    lock) until ``go`` is set; ``reached`` is set when it waits."""
    reached, go = threading.Event(), threading.Event()
    real = Transaction.commit

    def commit(self, *a, **k):
        if self.inflight.action in actions and not reached.is_set():
            reached.set()
            assert go.wait(60)
        return real(self, *a, **k)

    monkeypatch.setattr(Transaction, "commit", commit)
    return reached, go


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["result"] = fn()
        except Exception as exc:  # noqa: BLE001
            out["error"] = exc
    t = threading.Thread(target=run)
    t.start()
    return t, out


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("service", ["clustering", "compaction"])
def test_a_service_committing_after_an_evolution_keeps_the_new_columns(tmp_path, monkeypatch, version, service):
    path = str(tmp_path / "t")
    table_type = "MERGE_ON_READ" if service == "compaction" else "COPY_ON_WRITE"
    hudi.write(path, make_rows(range(20), ts=0), table_type=table_type, table_version=version, options=OCC, **KW)
    hudi.write(path, make_rows(range(10), ts=1), options=OCC)     # logs to compact; small files to cluster
    actions = ("compaction",) if service == "compaction" else ("replacecommit", "clustering")
    reached, go = _held(monkeypatch, actions)
    table = hudi.open_table(path)
    run = (lambda: table.compact(options={**OCC, "hoodie.compact.inline.max.delta.commits": "1"})) if service == "compaction" else \
        (lambda: table.cluster(options={**OCC, "hoodie.clustering.plan.strategy.small.file.limit": "300000000"}))
    t, out = _in_thread(run)
    while t.is_alive() and not reached.wait(0.05):
        pass
    assert reached.is_set(), out
    monkeypatch.undo()
    hudi.write(path, _wide(range(600, 603), 4), operation="insert", options=OCC)   # new file groups
    go.set()
    t.join()
    assert "error" not in out and out["result"] is not None, out
    extra = _extra_of(path)
    assert extra["k00600"] == "extra600" and len(extra) == 23
