"""Table locks for optimistic concurrency control, behind one small interface.

Providers, chosen by ``hoodie.write.lock.provider`` (Hudi's class names are accepted):
- in-process (``InProcessLockProvider``): writers in one Python process;
- file system (``FileSystemBasedLockProvider``): a lock file created with create-if-absent
  (exclusive create locally, a conditional PUT on S3) holding owner and expiry; the holder
  renews the expiry while it works, and a lock whose holder died (expired, or a dead pid on this
  host) is broken;
- any other value is imported as ``package.module.Class`` (or ``package.module:Class``) and
  built as ``Class(storage, options)``; it needs ``acquire(timeout_s)`` and ``release()``.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import socket
import threading
import time
import uuid
from typing import Any, Callable, Mapping, Protocol

from ..errors import InvalidOptionError, LockError
from ..options import option
from ..storage import Storage
from .heartbeat import pid_alive

_INPROCESS = {"inprocess", "org.apache.hudi.client.transaction.lock.inprocesslockprovider"}
_FILESYSTEM = {"filesystem", "org.apache.hudi.client.transaction.lock.filesystembasedlockprovider"}
DEFAULT_LOCK_PATH = ".hoodie/.lock"


class LockProvider(Protocol):
    def acquire(self, timeout_s: float) -> None: ...
    def release(self) -> None: ...


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class InProcessLockProvider:
    """One lock per table location, shared by every writer of this process."""

    def __init__(self, storage: Storage, options: Mapping[str, Any] | None = None):
        with _LOCKS_GUARD:
            self._lock = _LOCKS.setdefault(storage.url.rstrip("/"), threading.Lock())

    def acquire(self, timeout_s: float) -> None:
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            raise LockError(f"timed out after {timeout_s:.1f}s waiting for the in-process table lock")

    def release(self) -> None:
        self._lock.release()


class FileSystemLockProvider:
    """A lock file with owner and expiry, renewed by the holder while it holds the lock."""

    def __init__(self, storage: Storage, options: Mapping[str, Any] | None = None):
        opts = dict(options or {})
        self.storage = storage
        folder = str(option(opts, "hoodie.write.lock.filesystem.path") or DEFAULT_LOCK_PATH).rstrip("/")
        self.path = f"{folder}/table.lock" if not folder.endswith(".lock") or "/" not in folder \
            else folder
        expire_min = float(option(opts, "hoodie.write.lock.filesystem.expire"))
        # Hudi's 0 means "never expires"; a crashed holder would then block the table for good,
        # so we renew a short lease instead and treat a lease not renewed in time as abandoned.
        self.lease_ms = int(expire_min * 60_000) if expire_min > 0 else 60_000
        self.retry_s = 0.02
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()

    def _body(self) -> bytes:
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "expires_ms": int(time.time() * 1000) + self.lease_ms}).encode()

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.storage.read_bytes(self.path).decode() or "{}")
        except Exception:  # noqa: BLE001 - gone or being written: treat as held, retry
            return None

    def _stale(self, holder: dict) -> bool:
        if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) \
                and not pid_alive(holder["pid"]):
            return True
        return int(holder.get("expires_ms", 0)) < int(time.time() * 1000)

    def acquire(self, timeout_s: float) -> None:
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            if self.storage.create_if_absent(self.path, self._body()):
                self._acquired = time.monotonic()
                self._start_renewing()
                return
            holder = self._holder()
            if holder is not None and self._stale(holder):
                # Break an abandoned lock; create-if-absent decides who takes it next.
                if self._holder() == holder:
                    self.storage.delete(self.path)
                continue
            if time.monotonic() >= deadline:
                who = holder.get("owner") if holder else "unknown"
                raise LockError(f"timed out after {timeout_s:.1f}s waiting for the table lock "
                                f"{self.storage.uri(self.path)} held by {who}")
            time.sleep(self.retry_s * (1 + random.random()))

    def _start_renewing(self) -> None:
        self._stop.clear()

        def renew():
            while not self._stop.wait(self.lease_ms / 3000):
                holder = self._holder()
                if holder and holder.get("owner") == self.owner:
                    self.storage.write_bytes(self.path, self._body())

        self._renewer = threading.Thread(target=renew, daemon=True, name="hudi-lock-renewer")
        self._renewer.start()

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        # a lock held for less than half its lease (renewed meanwhile) cannot have been broken
        # as stale by another process: released without reading it back (a round trip)
        acquired = getattr(self, "_acquired", None)
        if acquired is not None and time.monotonic() - acquired < self.lease_ms / 2000:
            self.storage.delete(self.path)
            return
        holder = self._holder()
        if holder is not None and holder.get("owner") == self.owner:
            self.storage.delete(self.path)


def lock_provider_class(options: Mapping[str, Any] | None) -> Callable[..., LockProvider]:
    """The class ``hoodie.write.lock.provider`` names (Hudi's two names for ours, or a Python
    class ``module.Class``); ``InvalidOptionError`` when it cannot be loaded. A write checks
    it before anything is written: its commit takes the lock only at the end."""
    name = str(option(dict(options or {}), "hoodie.write.lock.provider")).strip()
    key = name.lower()
    if key in _INPROCESS:
        return InProcessLockProvider
    if key in _FILESYSTEM:
        return FileSystemLockProvider
    module, _, cls = name.replace(":", ".").rpartition(".")
    try:
        provider: Callable[..., LockProvider] = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InvalidOptionError(f"hoodie.write.lock.provider: cannot load {name!r}: {exc}") from None
    return provider


def lock_provider(storage: Storage, options: Mapping[str, Any] | None) -> LockProvider:
    opts = dict(options or {})
    return lock_provider_class(opts)(storage, opts)


_HELD = threading.local()   # table url -> how deep this thread holds its lock


class TableLock:
    """``with TableLock(storage, options):`` — the lock, with Hudi's wait/retry options.

    Reentrant within one thread: a commit inside a rollback that already holds the lock (or a
    service scheduled under it) must not wait for itself.
    """

    def __init__(self, storage: Storage, options: Mapping[str, Any] | None = None):
        opts = dict(options or {})
        self.key = storage.url.rstrip("/")
        self.provider = lock_provider(storage, opts)
        # Hudi waits wait_time_ms between num_retries attempts; we poll faster within the same
        # overall budget.
        wait_ms = float(option(opts, "hoodie.write.lock.wait_time_ms"))
        retries = option(opts, "hoodie.write.lock.num_retries")
        self.timeout_s = max(1.0, wait_ms * max(1, retries) / 1000)

    @staticmethod
    def _depths() -> dict[str, int]:
        if not hasattr(_HELD, "depth"):
            _HELD.depth = {}
        return _HELD.depth

    def __enter__(self) -> "TableLock":
        depths = self._depths()
        if depths.get(self.key, 0) == 0:
            self.provider.acquire(self.timeout_s)
        depths[self.key] = depths.get(self.key, 0) + 1
        return self

    def __exit__(self, *exc) -> None:
        depths = self._depths()
        depths[self.key] -= 1
        if depths[self.key] == 0:
            del depths[self.key]
            self.provider.release()


def holds_lock(storage: Storage) -> bool:
    """Whether this thread holds the table lock of ``storage``."""
    return TableLock._depths().get(storage.url.rstrip("/"), 0) > 0
