"""A process-wide LRU of what immutable files hold, whose entries leave file by file.

Two caches keep what committed files hold across operations: the small data files an object
store serves in one GET (:mod:`.storage`) and the parsed openings of HFiles (:mod:`.hfile`).
Keys start ``(protocol, full path, ...)``, and a file this process writes, renames or deletes
must leave at once. Scanning every key for it made each file change cost a pass over the whole
cache (9 ms a write with 50,000 opened files cached, a long-lived writer's metadata table), and
weighing the cache after each insert another; so the keys are indexed by file and the weight is
kept as a running total.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class FileCache(Generic[V]):
    """LRU of ``key -> value`` (keys are tuples starting ``(protocol, path)``), bounded by the sum
    of ``weigh(value)``; thread-safe."""

    def __init__(self, weigh: Callable[[V], int]):
        self._weigh = weigh
        self._lru: OrderedDict[tuple, V] = OrderedDict()
        self._keys_of: dict[tuple[Hashable, Hashable], set[tuple]] = {}
        self._weight = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def weight(self) -> int:
        return self._weight

    def get(self, key: tuple) -> V | None:
        with self._lock:
            value = self._lru.get(key)
            if value is not None:
                self._lru.move_to_end(key)
            return value

    def put(self, key: tuple, value: V, limit: int) -> None:
        """Keep ``value`` as the most recent entry, then drop the least recent ones while the
        weight is over ``limit`` (all of them, the new one too, when it alone is over)."""
        with self._lock:
            self._pop(key)
            self._lru[key] = value
            self._keys_of.setdefault(key[:2], set()).add(key)
            self._weight += self._weigh(value)
            while self._weight > limit and self._lru:
                self._pop(next(iter(self._lru)))

    def drop_file(self, protocol: str, path: str) -> None:
        """Forget every entry of the file at ``path`` (whatever the rest of its key)."""
        if not self._keys_of:     # nothing cached: no lock taken on every file change
            return
        with self._lock:
            for key in list(self._keys_of.get((protocol, path), ())):
                self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._lru.clear()
            self._keys_of.clear()
            self._weight = 0

    def _pop(self, key: tuple) -> None:
        if key not in self._lru:
            return
        self._weight -= self._weigh(self._lru.pop(key))
        keys = self._keys_of[key[:2]]
        keys.discard(key)
        if not keys:
            del self._keys_of[key[:2]]
