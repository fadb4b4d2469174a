"""The instant clock: unique, ordered instant and completion times across threads and processes, under one lock."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import random
import re
import threading
import time

import pytest

from hudi_format.errors import TimelineError
from hudi_format.storage import Storage
from hudi_format.table_init import create_table
from hudi_format.timeline import clock as clock_mod
from hudi_format.timeline.clock import LOCK_FILE, InstantClock, format_epoch_millis
from hudi_format.timeline.writer import TimelineWriter
from test_timeline_writer import _table


def _issue_times(url: str, n: int, counter, queue, skew: int) -> None:
    clock = InstantClock(Storage(url), timezone="UTC", max_skew_ms=skew)
    out = []
    for _ in range(n):
        with clock.hold() as generate:
            t = generate()
            with counter.get_lock():
                counter.value += 1
                seq = counter.value
        out.append((seq, t))
    queue.put((os.getpid(), out))


def test_instant_times_unique_and_ordered_across_processes(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    counter, queue = ctx.Value("l", 0), ctx.Queue()
    procs = [ctx.Process(target=_issue_times, args=(str(tmp_path), 50, counter, queue, 1))
             for _ in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    everything = [item for _, out in results for item in out]
    times = [t for _, t in everything]
    assert len(times) == 200 and len(set(times)) == 200             # unique
    for _, out in results:                                          # increasing per process
        ts = [t for _, t in out]
        assert ts == sorted(ts) and len(set(ts)) == len(ts)
    by_issue = [t for _, t in sorted(everything)]
    assert by_issue == sorted(times)                                # time order == issue order
    assert all(re.fullmatch(r"\d{17}", t) for t in times)


@pytest.mark.parametrize("url", ["local", "memory://clock-test/t"])
def test_instant_times_unique_across_threads(tmp_path, url):
    storage = Storage(tmp_path if url == "local" else url)
    per_thread: dict[int, list[str]] = {}

    def run(i):
        clock = InstantClock(storage, max_skew_ms=0)
        per_thread[i] = [clock.new_instant_time() for _ in range(30)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = [t for ts in per_thread.values() for t in ts]
    assert len(set(times)) == len(times) == 180
    assert all(ts == sorted(ts) for ts in per_thread.values())
    if url != "local":
        assert not storage.exists(LOCK_FILE)   # the file lock is released
        storage.fs.rm("/clock-test", recursive=True)


def test_clock_waits_out_the_skew(tmp_path):
    clock = InstantClock(Storage(tmp_path), timezone="UTC", max_skew_ms=40)
    start = time.monotonic()
    a, b = clock.new_instant_time(), clock.completion_time()
    assert time.monotonic() - start >= 0.08
    fmt = "%Y%m%d%H%M%S%f"
    da, db = dt.datetime.strptime(a + "000", fmt), dt.datetime.strptime(b + "000", fmt)
    assert db - da >= dt.timedelta(milliseconds=40)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    assert abs(now - db) < dt.timedelta(seconds=30)     # UTC wall clock


def test_timezone_from_table_config(tmp_path):
    storage = Storage(tmp_path)
    cfg = create_table(storage, table_name="t", record_key_fields="id",
                       extra={"hoodie.table.timeline.timezone": "UTC"})
    assert InstantClock(storage, cfg).timezone == "UTC"
    assert InstantClock(storage).timezone == "LOCAL"
    assert format_epoch_millis(0, "UTC") == "19700101000000000"
    assert format_epoch_millis(1_700_000_000_123, "UTC") == "20231114221320123"
    with pytest.raises(TimelineError):
        InstantClock(storage, timezone="CET")


def test_clock_never_goes_back(tmp_path, monkeypatch):
    clock = InstantClock(Storage(tmp_path), timezone="UTC", max_skew_ms=0)
    first = clock.new_instant_time()
    monkeypatch.setattr(clock_mod, "MAX_BACKWARDS_WAIT_S", 0.05)
    # the wall clock steps back by a minute: never issue a smaller time, say why
    monkeypatch.setattr(clock_mod, "_now_ms", lambda: int(time.time() * 1000) - 60_000)
    with pytest.raises(TimelineError, match="behind the last instant time"):
        clock.new_instant_time()
    # ...and a brief step back is waited out
    calls = iter(range(100))
    base = int(dt.datetime.strptime(first, "%Y%m%d%H%M%S%f").replace(tzinfo=dt.timezone.utc).timestamp()) * 1000
    base += int(first[-3:])
    monkeypatch.setattr(clock_mod, "_now_ms", lambda: base - 2 + next(calls))
    assert clock.new_instant_time() == format_epoch_millis(base + 1, "UTC")


def test_last_issued_time_is_shared_through_the_lock_file(tmp_path, monkeypatch):
    storage = Storage(tmp_path)
    InstantClock(storage, max_skew_ms=0).new_instant_time()
    (tmp_path / LOCK_FILE).write_text("29990101000000000")    # issued by a clock far ahead
    monkeypatch.setattr(clock_mod, "MAX_BACKWARDS_WAIT_S", 0.05)
    monkeypatch.setattr(clock_mod, "_LAST_ISSUED", {})
    with pytest.raises(TimelineError, match="29990101000000000"):
        InstantClock(storage, max_skew_ms=0).new_instant_time()


def test_file_lock_stale_and_busy(monkeypatch):
    storage = Storage("memory://clock-lock-test/t")
    try:
        old = json.dumps({"owner": "dead", "acquired_ms": int(time.time() * 1000) - 600_000})
        storage.write_bytes(LOCK_FILE, old.encode())
        clock = InstantClock(storage, max_skew_ms=0, stale_lock_s=60)
        assert re.fullmatch(r"\d{17}", clock.new_instant_time())   # stale lock broken
        assert not storage.exists(LOCK_FILE)
        fresh = json.dumps({"owner": "alive", "acquired_ms": int(time.time() * 1000)})
        storage.write_bytes(LOCK_FILE, fresh.encode())
        busy = InstantClock(storage, max_skew_ms=0, lock_timeout_s=0.2, stale_lock_s=60)
        with pytest.raises(TimelineError, match="timed out"):
            busy.new_instant_time()
        assert storage.read_bytes(LOCK_FILE) == fresh.encode()     # someone else's lock kept
    finally:
        storage.fs.rm("/clock-lock-test", recursive=True)


def test_completion_time_written_under_the_lock(tmp_path):
    """Completion order equals completion-time order between concurrent completers."""
    storage, cfg = _table(tmp_path, 8)
    writer = TimelineWriter(storage, cfg, InstantClock(storage, cfg, max_skew_ms=0))
    pending = [writer.transition_to_inflight(writer.create_requested("commit")) for _ in range(12)]
    order, lock = [], threading.Lock()
    original = storage.create_if_absent

    def recording(rel, data):
        ok = original(rel, data)
        if ok and "_" in rel.rsplit("/", 1)[-1]:
            with lock:
                order.append(rel.rsplit("/", 1)[-1])
        return ok

    storage.create_if_absent = recording
    threads = [threading.Thread(target=writer.complete, args=(p, {})) for p in pending]
    random.shuffle(threads)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    completions = [n.split("_")[1].split(".")[0] for n in order]
    assert len(completions) == 12 and completions == sorted(completions)
    assert len(set(completions)) == 12


def test_clock_sharing_continues_a_kept_hold():
    """A metadata-table deltacommit and its data instant complete under one hold: inside
    ``sharing``, ``hold(keep=True)`` keeps the lock (nobody else gets a time meanwhile), the
    next hold continues it with a greater time, and the lock is released after it."""
    storage = Storage("memory://clock-share/t")
    clock = InstantClock(storage, max_skew_ms=0)
    other: list[str] = []
    with clock.sharing():
        with clock.hold(keep=True) as generate:
            first = generate()
        assert storage.exists(LOCK_FILE)                     # still held
        waiter = threading.Thread(target=lambda: other.append(InstantClock(storage, max_skew_ms=0).new_instant_time()))
        waiter.start()
        waiter.join(timeout=0.3)
        assert waiter.is_alive() and not other               # blocked on the kept hold
        with clock.hold() as generate:
            second = generate()
        assert not storage.exists(LOCK_FILE)                 # released by the continuation
    waiter.join(timeout=30)
    assert first < second < other[0]
    # without sharing, keep changes nothing; a failing sharing block releases what it kept
    with clock.hold(keep=True) as generate:
        generate()
    assert not storage.exists(LOCK_FILE)
    with pytest.raises(RuntimeError):
        with clock.sharing():
            with clock.hold(keep=True) as generate:
                generate()
            raise RuntimeError("the data commit failed")
    assert not storage.exists(LOCK_FILE)
    assert clock.new_instant_time() > other[0]
    storage.fs.rm("/clock-share", recursive=True)
