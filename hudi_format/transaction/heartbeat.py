"""Heartbeats of in-flight writers, so an abandoned write can be told from a slow one.

A writer keeps ``.hoodie/.heartbeat/<instant>`` fresh while its instant is pending (Hudi's
layout; Hudi reads the file's modification time). We also record host and pid in it, so that on
the same machine a writer that died is recognised at once instead of after the timeout.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

from ..options import default
from ..storage import Storage

HEARTBEAT_DIR = ".hoodie/.heartbeat"
DEFAULT_INTERVAL_MS: int = default("hoodie.client.heartbeat.interval_in_ms")
DEFAULT_TOLERABLE_MISSES: int = default("hoodie.client.heartbeat.tolerable.misses")


def heartbeat_path(instant: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Heartbeat:
    """Refreshes the heartbeat file of one instant from a daemon thread until stopped."""

    def __init__(self, storage: Storage, instant: str, interval_ms: int = DEFAULT_INTERVAL_MS):
        self.storage = storage
        self.instant = instant
        self.interval_ms = max(10, int(interval_ms))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self) -> None:
        body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "ts_ms": _now_ms()})
        self.storage.write_bytes(heartbeat_path(self.instant), body.encode())

    def start(self) -> "Heartbeat":
        self._beat()
        self._thread = threading.Thread(target=self._run, name=f"hudi-heartbeat-{self.instant}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_ms / 1000):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - a missed beat only makes the write look stale
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.storage.delete(heartbeat_path(self.instant))


def last_heartbeat(storage: Storage, instant: str) -> tuple[int | None, dict]:
    """(milliseconds of the last beat, its content) — ``None`` when there is no heartbeat."""
    rel = heartbeat_path(instant)
    try:
        raw = storage.read_bytes(rel)
    except Exception:  # noqa: BLE001 - missing or unreadable: no live writer
        return None, {}
    try:
        body = json.loads(raw.decode() or "{}")
    except (ValueError, UnicodeDecodeError):
        body = {}
    if isinstance(body, dict) and isinstance(body.get("ts_ms"), int):
        return body["ts_ms"], body
    try:  # written by Hudi (empty file): its modification time is the beat
        info = storage.fs.info(storage.full(rel))
        mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
        if hasattr(mtime, "timestamp"):
            mtime = mtime.timestamp()
        return int(float(mtime) * 1000), {}
    except Exception:  # noqa: BLE001
        return None, {}


def heartbeat_expired(storage: Storage, instant: str, interval_ms: int = DEFAULT_INTERVAL_MS,
                      tolerable_misses: int = DEFAULT_TOLERABLE_MISSES) -> bool:
    """True when no live writer holds ``instant``: no heartbeat, a stale one, or (same host) a
    dead writer process."""
    ts, body = last_heartbeat(storage, instant)
    if ts is None:
        return True
    if body.get("host") == socket.gethostname() and isinstance(body.get("pid"), int) \
            and not pid_alive(body["pid"]):
        return True
    return _now_ms() - ts > interval_ms * max(1, tolerable_misses)
