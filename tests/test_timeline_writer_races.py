"""Timeline files under crashes and races: create-if-absent (local, memory, S3) keeps one winner and whole content."""

from __future__ import annotations

import os
import threading

import pytest

from hudi_format.config import TableConfig
from hudi_format.errors import StorageError, TimelineError
from hudi_format.storage import Storage
from hudi_format.table_init import create_table
from hudi_format.timeline import Timeline, parse_file_name
from hudi_format.timeline.clock import LOCK_FILE, InstantClock
from hudi_format.timeline.writer import TimelineWriter, commit_metadata
from test_timeline_writer import _names, _table


@pytest.mark.parametrize("version", [6, 8])
def test_existing_completed_file_is_never_overwritten(tmp_path, version):
    storage, cfg = _table(tmp_path, version)
    writer = TimelineWriter(storage, cfg)
    ts = "20240101000000000"
    infl = writer.transition_to_inflight(writer.create_requested("commit", ts))
    # a completed file left by a crashed writer (or written by another one)
    name = f"{ts}.commit" if version < 8 else f"{ts}_20240101000000005.commit"
    debris = b"not written by us"
    storage.create_if_absent(f"{cfg.timeline_dir}/{name}", debris)
    with pytest.raises(TimelineError, match="already"):
        writer.complete(infl, commit_metadata([], operation_type="UPSERT"))
    assert storage.read_bytes(f"{cfg.timeline_dir}/{name}") == debris
    assert len([n for n in _names(storage, cfg) if parse_file_name(n, version).is_completed]) == 1


def test_create_if_absent_keeps_existing_content(tmp_path):
    storage = Storage(tmp_path)
    assert storage.create_if_absent("a/x.commit", b"first") is True
    assert storage.create_if_absent("a/x.commit", b"second") is False
    assert (tmp_path / "a" / "x.commit").read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path / "a")) == ["x.commit"]  # no temp file left


def test_create_if_absent_never_exposes_partial_content(tmp_path, monkeypatch):
    storage = Storage(tmp_path)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed while publishing")

    monkeypatch.setattr(os, "link", crash)
    with pytest.raises(KeyboardInterrupt):
        storage.create_if_absent("x.commit", b"payload")
    assert not (tmp_path / "x.commit").exists()   # nothing half written under the final name
    assert os.listdir(tmp_path) == []             # the temp file was cleaned up


def test_create_if_absent_race_has_one_winner(tmp_path):
    storage = Storage(tmp_path)
    barrier = threading.Barrier(16)
    wins = []

    def run(i):
        barrier.wait()
        if storage.create_if_absent("race.commit", f"writer {i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert (tmp_path / "race.commit").read_bytes() == f"writer {wins[0]}".encode()


def test_create_if_absent_memory_filesystem():
    storage = Storage("memory://timeline-writer-test/t")
    try:
        assert storage.create_if_absent("a/b", b"1") is True
        assert storage.create_if_absent("a/b", b"2") is False
        assert storage.read_bytes("a/b") == b"1"
        assert [f.name for f in storage.list("a")] == ["b"]
        storage.rename("a/b", "a/c")
        with pytest.raises(StorageError):
            storage.rename("a/missing", "a/d")
        assert [f.name for f in storage.list("a")] == ["c"]
    finally:
        storage.fs.rm("/timeline-writer-test", recursive=True)


def test_rename_does_not_overwrite(tmp_path):
    storage = Storage(tmp_path)
    storage.write_bytes("a", b"a")
    storage.write_bytes("b", b"b")
    with pytest.raises(StorageError, match="exists"):
        storage.rename("a", "b")
    assert (tmp_path / "b").read_bytes() == b"b" and (tmp_path / "a").exists()
    storage.rename("a", "b", overwrite=True)
    assert (tmp_path / "b").read_bytes() == b"a" and not (tmp_path / "a").exists()


def test_concurrent_completion_of_one_instant(tmp_path):
    storage, cfg = _table(tmp_path, 8)
    writer = TimelineWriter(storage, cfg)
    infl = writer.transition_to_inflight(writer.create_requested("commit", "20240101000000000"))
    barrier = threading.Barrier(4)
    results, errors = [], []

    def run():
        w = TimelineWriter(storage, cfg)
        barrier.wait()
        try:
            results.append(w.complete(infl, commit_metadata([], operation_type="UPSERT")))
        except TimelineError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 1 and len(errors) == 3
    assert [n for n in _names(storage, cfg) if "_" in n] == [results[0].file_name]


def test_delete_instant_files(tmp_path):
    storage, cfg = _table(tmp_path, 6)
    writer = TimelineWriter(storage, cfg)
    pending = writer.transition_to_inflight(writer.create_requested("commit", "20240101000000000"))
    done = writer.complete(writer.transition_to_inflight(writer.create_requested("commit", "20240101000000001")), {})
    assert writer.delete_instant_files(pending) == [".hoodie/20240101000000000.inflight",
                                                   ".hoodie/20240101000000000.commit.requested"]
    with pytest.raises(TimelineError, match="completed"):
        writer.delete_instant_files(done)
    assert _names(storage, cfg) == ["20240101000000001.commit", "20240101000000001.commit.requested",
                                    "20240101000000001.inflight"]


def test_hudi_rs_reads_written_timeline(tmp_path):
    hudi = pytest.importorskip("hudi")
    storage, cfg = _table(tmp_path, 8)
    writer = TimelineWriter(storage, cfg)
    done = [writer.complete(writer.transition_to_inflight(writer.create_requested("commit")),
                            commit_metadata([], operation_type="INSERT")) for _ in range(2)]
    table = hudi.HudiTableBuilder.from_base_uri(storage.url).build()
    commits = table.get_timeline().get_completed_commits()
    assert [c.timestamp for c in commits] == [d.timestamp for d in done]


# -- S3 (a real S3 API on loopback) ---------------------------------------------------------------

@pytest.fixture(scope="module")
def s3_options(moto_s3):
    return moto_s3("timeline-writer")


def test_create_if_absent_on_s3_uses_a_conditional_put(s3_options):
    storage = Storage("s3://timeline-writer/cia", s3_options)
    assert storage.create_if_absent(".hoodie/x.commit", b"first") is True
    assert storage.create_if_absent(".hoodie/x.commit", b"second") is False
    # lose the race after the existence check: the conditional PUT must still refuse
    storage.fs.exists = lambda *a, **k: False
    try:
        assert storage.create_if_absent(".hoodie/x.commit", b"third") is False
    finally:
        del storage.fs.exists
    storage.fs.invalidate_cache()
    assert storage.read_bytes(".hoodie/x.commit") == b"first"


def test_timeline_on_s3(s3_options):
    storage = Storage("s3://timeline-writer/table", s3_options)
    cfg = create_table(storage, table_name="t", record_key_fields="id", table_version=8)
    writer = TimelineWriter(storage, cfg, InstantClock(storage, cfg, max_skew_ms=5))
    done = writer.complete(writer.transition_to_inflight(writer.create_requested("commit")),
                           commit_metadata([], operation_type="INSERT"))
    storage.fs.invalidate_cache()
    loaded = Timeline.load(storage, TableConfig.load(storage))
    assert [(i.timestamp, i.completion_time) for i in loaded.instants] == \
        [(done.timestamp, done.completion_time)]
    assert not storage.exists(LOCK_FILE)  # the lock file is gone once released
