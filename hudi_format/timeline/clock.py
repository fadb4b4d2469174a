"""Instant times: unique, strictly increasing ``yyyyMMddHHmmssSSS`` strings for one table.

Hudi orders its timeline by these strings, so two writers must never produce the same time and
a time issued later must never sort before one issued earlier. Hudi 1.x gets there with its
skew-adjusting time generator (``hoodie.time.generator.type=WAIT_TO_ADJUST_SKEW``): under a
table-wide lock it reads the clock, then sleeps for the maximum expected clock skew between
writers (``hoodie.time.generator.max_expected_clock_skew_ms``, 200 ms by default) before handing
the time out, so every other clock has passed it by the time anyone can ask for the next one.

``InstantClock`` does the same, with its own lock:

- an in-process ``threading.Lock`` per table, shared by every clock of that table, and
- a cross-process lock under ``.hoodie/.locks/``: ``flock`` on a lock file on the local
  filesystem (released by the kernel if the holder dies); elsewhere a lock file made with
  ``Storage.create_if_absent`` and deleted on release (a lock older than ``stale_lock_s`` is
  taken to be left by a crashed writer and broken, which is best effort).

While holding the lock it also remembers the last time it issued (in the lock file, or next to
it) and never issues a time that is not greater, waiting out a clock that stepped back a little
and raising ``TimelineError`` if it stepped back by more than ``MAX_BACKWARDS_WAIT_S``.

A commit needs two completion times in a row: the metadata table's deltacommit's, then its
data instant's (Hudi completes the metadata table first). Inside :meth:`InstantClock.sharing`
the first is issued with ``hold(keep=True)``, which keeps the lock, and the second continues
that hold: both times strictly increasing, one lock round (on object stores four requests: the
lock, the last time read and written, the release). The block releases whatever it kept, also
when it fails; a crash while kept leaves a lock file that is broken once stale, as any other.

It does not coordinate with Java writers, which use their own lock provider.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterator

from ..config import TableConfig
from ..errors import StorageError, TimelineError
from ..storage import Storage

try:  # POSIX advisory locks for local tables
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

log = logging.getLogger(__name__)

#: Hudi's option for the skew bound, and its default (Hudi infers 1 ms with its in-process lock)
MAX_SKEW_KEY = "hoodie.time.generator.max_expected_clock_skew_ms"
DEFAULT_MAX_SKEW_MS = 200
#: default skew bound for tables on the local filesystem, whose writers share one clock
LOCAL_MAX_SKEW_MS = 1
#: how long to wait for a clock that stepped back behind the last issued time
MAX_BACKWARDS_WAIT_S = 5.0

LOCK_DIR = ".hoodie/.locks"
LOCK_FILE = f"{LOCK_DIR}/hudi_format.instant_time.lock"
LAST_FILE = f"{LOCK_DIR}/hudi_format.instant_time.last"

_REGISTRY_LOCK = threading.Lock()
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_LAST_ISSUED: dict[str, str] = {}


def _forget_thread_locks() -> None:
    # a forked child must not inherit a lock some parent thread held at fork time
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    _THREAD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_thread_locks)


def _thread_lock(key: str) -> threading.Lock:
    with _REGISTRY_LOCK:
        lock = _THREAD_LOCKS.get(key)
        if lock is None:
            lock = _THREAD_LOCKS[key] = threading.Lock()
        return lock


def format_epoch_millis(ms: int, timezone: str = "LOCAL") -> str:
    """``yyyyMMddHHmmssSSS`` of epoch milliseconds in the timeline timezone (``LOCAL``/``UTC``)."""
    secs, millis = divmod(int(ms), 1000)
    if timezone.upper() == "UTC":
        dt = _dt.datetime.fromtimestamp(secs, _dt.timezone.utc)
    else:
        dt = _dt.datetime.fromtimestamp(secs)
    return dt.strftime("%Y%m%d%H%M%S") + f"{millis:03d}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class InstantClock:
    """Issues instant and completion times for one table (see the module docstring).

    ``timezone`` defaults to the table's ``hoodie.table.timeline.timezone`` (``LOCAL`` when
    absent); ``max_skew_ms`` to 1 ms for local tables (one machine, one clock) and to Hudi's
    200 ms elsewhere.
    """

    def __init__(self, storage: Storage, table_config: TableConfig | None = None,
                 timezone: str | None = None, max_skew_ms: int | None = None, *,
                 lock_timeout_s: float = 120.0, stale_lock_s: float = 60.0):
        self.storage = storage
        if timezone is None:
            timezone = table_config.timeline_timezone if table_config is not None else "LOCAL"
        timezone = timezone.upper()
        if timezone not in ("LOCAL", "UTC"):
            raise TimelineError(f"timeline timezone must be LOCAL or UTC, got {timezone!r}")
        self.timezone = timezone
        if max_skew_ms is None:
            max_skew_ms = LOCAL_MAX_SKEW_MS if storage.is_local else DEFAULT_MAX_SKEW_MS
        if max_skew_ms < 0:
            raise TimelineError(f"{MAX_SKEW_KEY} must not be negative, got {max_skew_ms}")
        self.max_skew_ms = int(max_skew_ms)
        self.lock_timeout_s = float(lock_timeout_s)
        self.stale_lock_s = float(stale_lock_s)
        self._use_flock = storage.is_local and fcntl is not None
        self._key = os.path.realpath(storage.full(LOCK_FILE)) if storage.is_local \
            else storage.uri(LOCK_FILE)
        self._sharing: int | None = None   # thread inside sharing()
        self._kept: _Held | None = None     # a hold(keep=True) waiting for its continuation

    def __repr__(self) -> str:
        return f"InstantClock({self.storage.url!r}, timezone={self.timezone}, max_skew_ms={self.max_skew_ms})"

    # -- public ------------------------------------------------------------------------------
    def new_instant_time(self) -> str:
        """A new request time, greater than every time this table's clocks issued before."""
        with self.hold() as generate:
            return generate()

    def completion_time(self) -> str:
        """A completion time for a v8+ completed instant file (same rules as instant times)."""
        with self.hold() as generate:
            return generate()

    @contextlib.contextmanager
    def hold(self, *, keep: bool = False) -> Iterator[Callable[[], str]]:
        """Hold the table's time lock; yields ``generate()`` issuing new times under it.

        Writers that must act before anyone else can issue a time (Hudi writes a completed
        instant file while still holding the lock that produced its completion time) do their
        work inside the ``with`` block.

        ``keep``: inside :meth:`sharing` (same thread), the lock stays held after the block and
        the next ``hold`` of this thread continues it: a metadata-table deltacommit and its
        data instant complete under one hold (two strictly increasing times, one lock round).
        """
        me = threading.get_ident()
        kept = self._kept
        if kept is not None and kept.thread == me:
            self._kept = None
            held = kept
        else:
            held = _Held(self)
        ok = False
        try:
            yield held.generate
            ok = True
        finally:
            if ok and keep and self._sharing == me:
                self._kept = held
            else:
                held.release()

    @contextlib.contextmanager
    def sharing(self) -> Iterator[None]:
        """A block in which a ``hold(keep=True)`` of this thread is continued by its next
        ``hold`` instead of being released; whatever is still held is released at its end
        (also when the block fails), so the lock never outlives it."""
        me = threading.get_ident()
        if self._sharing == me:
            yield
            return
        if self._sharing is not None:   # another thread shares this clock: no continuation
            yield
            return
        self._sharing = me
        try:
            yield
        finally:
            self._sharing = None
            kept, self._kept = self._kept, None
            if kept is not None:
                kept.release()

    # -- time --------------------------------------------------------------------------------
    def _next_after(self, last: str) -> str:
        deadline = time.monotonic() + MAX_BACKWARDS_WAIT_S
        while True:
            issued = format_epoch_millis(_now_ms(), self.timezone)
            if len(issued) != len(last) or issued > last:
                break
            if time.monotonic() > deadline:
                raise TimelineError(
                    f"the clock ({issued}) is behind the last instant time issued for "
                    f"{self.storage.url} ({last}) by more than {MAX_BACKWARDS_WAIT_S}s; fix the "
                    f"clock (or delete {self.storage.uri(LOCK_FILE)} if that time is bogus)")
            time.sleep(0.001)
        if self.max_skew_ms:
            # wait until every clock within the skew bound has passed `issued` (TrueTime)
            time.sleep(self.max_skew_ms / 1000.0)
        return issued

    # -- cross-process lock ------------------------------------------------------------------
    def _process_lock(self):
        return self._flock() if self._use_flock else self._file_lock()

    @contextlib.contextmanager
    def _flock(self):
        path = self.storage.full(LOCK_FILE)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimelineError(f"timed out after {self.lock_timeout_s}s waiting for "
                                            f"the instant time lock {path}") from None
                    time.sleep(0.0005)

            def read_last() -> str:
                return os.pread(fd, 64, 0).decode("ascii", "replace").strip()

            def write_last(value: str) -> None:
                data = value.encode("ascii")
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))

            try:
                yield read_last, write_last
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _file_lock(self):
        owner = uuid.uuid4().hex
        token = json.dumps({"owner": owner, "host": socket.gethostname(), "pid": os.getpid(),
                            "acquired_ms": _now_ms()}).encode()
        deadline = time.monotonic() + self.lock_timeout_s
        pause = 0.002
        while not self.storage.create_if_absent(LOCK_FILE, token):
            self._break_if_stale()
            if time.monotonic() > deadline:
                raise TimelineError(f"timed out after {self.lock_timeout_s}s waiting for the "
                                    f"instant time lock {self.storage.uri(LOCK_FILE)}")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

        def read_last() -> str:
            try:
                return self.storage.read_bytes(LAST_FILE).decode("ascii", "replace").strip()
            except StorageError:
                return ""

        def write_last(value: str) -> None:
            self.storage.write_bytes(LAST_FILE, value.encode("ascii"))

        held_from = time.monotonic()
        try:
            yield read_last, write_last
        finally:
            try:
                # only a lock held past the stale age can have been broken and taken by another
                # process: a shorter hold releases without reading the owner back (a round trip)
                if time.monotonic() - held_from < self.stale_lock_s / 2 or self._lock_owner() == owner:
                    self.storage.delete(LOCK_FILE)
            except StorageError as exc:  # pragma: no cover - storage failure on release
                log.warning("could not release instant time lock %s: %s",
                            self.storage.uri(LOCK_FILE), exc)

    def _lock_owner(self) -> str | None:
        try:
            return json.loads(self.storage.read_bytes(LOCK_FILE)).get("owner")
        except (StorageError, ValueError, AttributeError):
            return None

    def _break_if_stale(self) -> None:
        try:
            info = json.loads(self.storage.read_bytes(LOCK_FILE))
            age = (_now_ms() - int(info["acquired_ms"])) / 1000.0
        except StorageError:
            return  # released meanwhile
        except (ValueError, KeyError, TypeError):
            age = float("inf")  # unreadable: left half-written by a crashed writer
        if age > self.stale_lock_s:
            log.warning("breaking stale instant time lock %s (%.0fs old)",
                        self.storage.uri(LOCK_FILE), age)
            self.storage.delete(LOCK_FILE)


class _Held:
    """One hold of a clock's locks (thread and process) and the times issued under it."""

    def __init__(self, clock: InstantClock):
        self.clock = clock
        self.thread = threading.get_ident()
        self._tlock = _thread_lock(clock._key)
        if not self._tlock.acquire(timeout=clock.lock_timeout_s):
            raise TimelineError(f"timed out after {clock.lock_timeout_s}s waiting for the instant "
                                f"time lock of {clock.storage.url} (held in this process)")
        self._stack = contextlib.ExitStack()
        try:
            read_last, self._write_last = self._stack.enter_context(clock._process_lock())
            self.start = max(read_last() or "", _LAST_ISSUED.get(clock._key, ""))
        except BaseException:
            self._stack.close()
            self._tlock.release()
            raise
        self.last = self.start

    def generate(self) -> str:
        self.last = self.clock._next_after(self.last)
        return self.last

    def release(self) -> None:
        try:
            if self.last != self.start:
                _LAST_ISSUED[self.clock._key] = self.last
                self._write_last(self.last)
        finally:
            try:
                self._stack.close()
            finally:
                self._tlock.release()
