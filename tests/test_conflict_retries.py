"""``hoodie.write.num.retries.on.conflict.failures``: a write that loses a conflict to another
writer runs again on the table as the winner left it, as Hudi's Spark writer retries; the
retried write's rows are all in the table, beside the winner's, with nothing of the lost
attempt left; without retries (Hudi's default) the write fails as before."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.writer.client import WriteClient
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows

RETRIES = "hoodie.write.num.retries.on.conflict.failures"
OPTS = {"hoodie.parquet.small.file.limit": "0"}


def _racing(monkeypatch, path: str, losses: int):
    """A write function whose first ``losses`` attempts each pause before committing while
    another writer upserts over the same file groups (``ts`` 1, 2, ...), so they conflict;
    returns it and the number of attempts it made."""
    real_commit = WriteClient._commit
    attempts = []
    mine = threading.local()

    def commit(self, *a, **k):
        if getattr(mine, "racing", False):
            attempts.append(1)
            if len(attempts) <= losses:
                t = threading.Thread(target=hudi.write, args=(path, make_rows(range(0, 5), ts=len(attempts))),
                                     kwargs={"options": OPTS})
                t.start()
                t.join()     # the winner commits first, over the same file groups
        return real_commit(self, *a, **k)

    monkeypatch.setattr(WriteClient, "_commit", commit)

    def write(data, **kw):
        mine.racing = True
        try:
            return hudi.write(path, data, **kw)
        finally:
            mine.racing = False
    return write, attempts


def _table(tmp_path) -> str:
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(0, 20), ts=0), record_key="id", ordering_field="ts",
               partition_by="p", options=OPTS)
    return path


@pytest.mark.parametrize("as_reader", [False, True])
def test_a_write_that_lost_a_conflict_runs_again_and_lands_beside_the_winner(tmp_path, monkeypatch, as_reader):
    path = _table(tmp_path)
    write, attempts = _racing(monkeypatch, path, losses=2)
    mine = make_rows(range(3, 8), ts=9, seed=2)
    data = pa.RecordBatchReader.from_batches(mine.schema, mine.to_batches()) if as_reader else mine
    done = write(data, operation="upsert", options={**OPTS, RETRIES: "2"})
    assert len(attempts) == 3   # lost twice, then committed
    model = Model(event_time=True)
    model.apply("insert", make_rows(range(0, 20), ts=0), 0)
    model.apply("upsert", make_rows(range(0, 5), ts=1), 1)
    model.apply("upsert", make_rows(range(0, 5), ts=2), 2)
    model.apply("upsert", mine, 3)
    table = hudi.open_table(path)
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    assert done.timestamp == table.timeline.write_instants()[-1].timestamp
    assert table.timeline.pending == []   # the lost attempts left nothing behind


def test_without_retries_or_once_they_run_out_the_write_fails_and_leaves_no_trace(tmp_path, monkeypatch):
    path = _table(tmp_path)
    write, attempts = _racing(monkeypatch, path, losses=2)
    with pytest.raises(hudi.ConcurrentWriteError):
        write(make_rows(range(3, 8), ts=9), operation="upsert", options={**OPTS, RETRIES: "1"})
    assert len(attempts) == 2
    write, attempts = _racing(monkeypatch, path, losses=1)
    with pytest.raises(hudi.ConcurrentWriteError):   # Hudi's default: no retry
        write(make_rows(range(3, 8), ts=9), operation="upsert", options=OPTS)
    assert len(attempts) == 1
    table = hudi.open_table(path)
    ts = {r["id"]: r["ts"] for r in table.read(columns=["id", "ts"]).to_pylist()}
    assert ts["k00003"] == 2 and ts["k00007"] == 0   # the winners' writes, none of ours
    assert table.timeline.pending == []


def test_a_one_shot_stream_written_as_it_comes_is_not_retried(tmp_path):
    from hudi_format.write_api import _read_once
    rows = make_rows(range(3, 8), ts=9)
    assert _read_once(pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches()))
    assert _read_once(iter(rows.to_batches()))
    assert not _read_once(rows) and not _read_once(rows.to_batches())


def test_the_option_is_checked(tmp_path):
    with pytest.raises(hudi.InvalidOptionError, match="retries.on.conflict"):
        hudi.write(str(tmp_path / "t"), make_rows(range(3), ts=0), record_key="id", ordering_field="ts",
                   options={RETRIES: "-1"})
