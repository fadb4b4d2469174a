"""Rollback, savepoint/clean/restore, locks, and recovery from bad input: nothing committed is
ever lost, and both readers agree."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import hudi_format as hudi
from hudi_format.log import BlockType, read_log_file
from hudi_format.storage import Storage
from hudi_format.writer.locks import FileSystemLockProvider, TableLock
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows

LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]


def _kw(table_type, version, **opts):
    return dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
                table_version=version, options=opts or None)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay[0]}-v{lay[1]}")
def test_savepoint_clean_restore(tmp_path, layout):
    table_type, version = layout
    path = str(tmp_path / "t")
    # keep one commit: the cleaner would delete the savepointed slices if it ignored savepoints
    kw = _kw(table_type, version, **{"hoodie.cleaner.commits.retained": "1",
                                     "hoodie.clean.automatic": "false"})
    model = Model(version >= 8)
    writes = [make_rows(range(0, 20), ts=1), make_rows(range(10, 25), ts=2, seed=1)]
    for i, rows in enumerate(writes):
        hudi.write(path, rows, **kw)
        model.apply("upsert", rows, i)
    table = hudi.open_table(path)
    saved = table.timeline.write_instants()[-1]
    table.savepoint(saved.timestamp)
    saved_rows = model_rows(model.rows)
    for i in range(3):
        hudi.write(path, make_rows(range(i * 4, i * 4 + 8), ts=10 + i, seed=5 + i), **kw)
    if table_type == "MERGE_ON_READ":
        hudi.open_table(path).compact(options={"hoodie.compact.inline.max.delta.commits": "1"})
    cleaned = hudi.open_table(path).clean(options={"hoodie.cleaner.commits.retained": "1"})
    if table_type == "COPY_ON_WRITE":
        assert cleaned is not None  # the slices between the savepoint and now went
    # (MOR: the savepointed base file pins its whole slice, logs included: nothing to clean)
    bound = saved.completion_time if version >= 8 else saved.timestamp
    # the savepoint kept every file of its snapshot through the clean
    assert data_rows(hudi.open_table(path).read(as_of=bound)) == saved_rows
    table = hudi.open_table(path)
    table.restore(saved.timestamp)
    assert data_rows(table.read()) == saved_rows
    assert data_rows(hudi_rs_read(path)) == saved_rows
    assert [i.action for i in table.timeline.completed][-1] == "restore"
    # and the table takes writes again
    more = make_rows(range(100, 105), ts=50, seed=9)
    hudi.write(path, more, **kw)
    model.apply("upsert", more, 9)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay[0]}-v{lay[1]}")
def test_rollback_latest_commit(tmp_path, layout):
    table_type, version = layout
    path = str(tmp_path / "t")
    kw = _kw(table_type, version)
    model = Model(version >= 8)
    first = make_rows(range(0, 20), ts=1)
    hudi.write(path, first, **kw)
    model.apply("insert", first, 0)
    last = hudi.write(path, make_rows(range(10, 30), ts=2, seed=1), **kw)
    table = hudi.open_table(path)
    done = table.rollback(last.timestamp)
    meta = table.timeline.raw_metadata(done)
    assert meta["commitsRollback"] == [last.timestamp]
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    if table_type == "MERGE_ON_READ" and version == 6:
        # v6 log files carry the slice's base instant: the rollback is a command block
        blocks = [b for s in table.file_slices() for f in s.log_files
                  for b in read_log_file(table.storage, f) if b.block_type == BlockType.COMMAND]
        assert blocks and all(b.target_instant_time == last.timestamp for b in blocks)
    with pytest.raises(hudi.InvalidOptionError, match="not the latest"):
        first_ts = table.timeline.write_instants()[0].timestamp
        hudi.write(path, make_rows(range(50, 52), ts=3), **kw)
        hudi.open_table(path).rollback(first_ts)


def test_interrupted_rollback_is_finished_by_the_next_writer(tmp_path):
    from hudi_format.services.rollback import build_plan
    from hudi_format.timeline import Timeline
    from hudi_format.timeline.writer import TimelineWriter

    path = str(tmp_path / "t")
    kw = _kw("MERGE_ON_READ", 8)
    hudi.write(path, make_rows(range(0, 10), ts=1), **kw)
    last = hudi.write(path, make_rows(range(5, 15), ts=2, seed=1), **kw)
    table = hudi.open_table(path)
    # a rollback that crashed right after writing its plan
    target = next(i for i in table.timeline.instants if i.timestamp == last.timestamp)
    plan = build_plan(table.storage, table.config, table.timeline, target)
    TimelineWriter(table.storage, table.config).create_requested("rollback", plan=plan)
    hudi.write(path, make_rows(range(100, 102), ts=3), **kw)
    tl = Timeline.load(Storage(path))
    assert all(i.state.name == "COMPLETED" for i in tl.instants)
    assert last.timestamp not in {i.timestamp for i in tl.write_instants()}
    ids = set(hudi.open_table(path).read(columns=["id"]).column(0).to_pylist())
    assert ids == {f"k{i:05d}" for i in list(range(10)) + [100, 101]}


def test_lock_held_by_a_dead_process_is_broken(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(5), ts=1), **_kw("COPY_ON_WRITE", 8))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    storage = Storage(path)
    provider = FileSystemLockProvider(storage, {})
    storage.write_bytes(provider.path, json.dumps({
        "owner": "ghost", "host": socket.gethostname(), "pid": dead.pid,
        "expires_ms": int(time.time() * 1000) + 3_600_000}).encode())
    t0 = time.time()
    hudi.write(path, make_rows(range(5, 8), ts=2), **_kw("COPY_ON_WRITE", 8))
    assert time.time() - t0 < 30
    assert hudi.open_table(path).read().num_rows == 8
    assert not storage.exists(provider.path)


def test_live_lock_times_out_with_a_clear_error(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, make_rows(range(5), ts=1), **_kw("COPY_ON_WRITE", 8))
    storage = Storage(path)
    holder = FileSystemLockProvider(storage, {})
    holder.acquire(5)
    try:
        with pytest.raises(hudi.LockError, match="held by"):
            with TableLock(storage, {"hoodie.write.lock.wait_time_ms": "100",
                                     "hoodie.write.lock.num_retries": "5"}):
                pass
    finally:
        holder.release()


class RecordingLock:
    """A user-supplied lock provider (``hoodie.write.lock.provider`` = its dotted path)."""
    events: list = []

    def __init__(self, storage, options):
        self.storage = storage

    def acquire(self, timeout_s):
        RecordingLock.events.append("acquire")

    def release(self):
        RecordingLock.events.append("release")


def test_pluggable_lock_provider(tmp_path):
    path = str(tmp_path / "t")
    opts = {"hoodie.write.lock.provider": "test_transactions.RecordingLock"}
    RecordingLock.events.clear()
    hudi.write(path, make_rows(range(5), ts=1), **_kw("COPY_ON_WRITE", 8, **opts))
    assert RecordingLock.events[:2] == ["acquire", "release"]
    with pytest.raises(hudi.InvalidOptionError, match="cannot load"):
        hudi.write(path, make_rows(range(5), ts=2),
                   **_kw("COPY_ON_WRITE", 8, **{"hoodie.write.lock.provider": "no.such.Provider"}))


# -- bad input: a clear error or a recovery, and no committed row lost ------------------------
def _table_with_data(tmp_path, table_type="MERGE_ON_READ"):
    path = tmp_path / "t"
    kw = _kw(table_type, 8)
    hudi.write(str(path), make_rows(range(0, 20), ts=1), **kw)
    hudi.write(str(path), make_rows(range(5, 10), ts=2, seed=1), **kw)
    return path, kw


def test_bad_inputs_table(tmp_path):
    path, kw = _table_with_data(tmp_path)
    good = data_rows(hudi.open_table(path).read())
    timeline = path / ".hoodie" / "timeline"
    # garbage instant files and instant files with wrong names are ignored
    (timeline / "not-an-instant.commit").write_text("garbage")
    (timeline / "2024.commit").write_bytes(b"\x00\x01")
    (timeline / "20990101000000000.bogusaction").write_bytes(b"")
    assert data_rows(hudi.open_table(path).read()) == good
    # a torn log block: its rows are skipped, the intact blocks still read
    table = hudi.open_table(path)
    log = next(f for s in table.file_slices() for f in s.log_files)
    raw = (path / log).read_bytes()
    (path / log).write_bytes(raw[: len(raw) - 7])
    rows = hudi.open_table(path).read()
    assert rows.num_rows == 20  # the base rows survive; only the torn updates are gone
    (path / log).write_bytes(raw)
    # a truncated base file is a CorruptFileError naming it
    base = next(s.base_file for s in table.file_slices() if s.base_file)
    data = (path / base).read_bytes()
    (path / base).write_bytes(data[: len(data) // 3])
    with pytest.raises(hudi.CorruptFileError, match=os.path.basename(base)):
        hudi.open_table(path).read()
    (path / base).write_bytes(data)
    # a missing hoodie.properties is a clear error, and the backup is used when present
    props = path / ".hoodie" / "hoodie.properties"
    shutil.move(props, props.with_name("hoodie.properties.backup"))
    assert data_rows(hudi.open_table(path).read()) == good
    shutil.move(props.with_name("hoodie.properties.backup"), props)
    moved = props.with_name("elsewhere")
    shutil.move(props, moved)
    with pytest.raises(hudi.TableNotFoundError, match="hoodie.properties"):
        hudi.open_table(path)
    shutil.move(moved, props)
    # after all that, a write still succeeds and nothing committed is lost
    hudi.write(str(path), make_rows(range(100, 103), ts=3), **kw)
    assert len(hudi.open_table(path).read()) == 23
