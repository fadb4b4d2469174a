"""Java collection behaviour that Hudi's bytes depend on: ``String.hashCode`` and the iteration
order of a ``java.util.HashMap``.

Hudi serializes maps (commit metadata's ``partitionToWriteStats``, ``hoodie.properties``) in the
order Java iterates them, so writing byte-compatible files needs that order. It lives at the
bottom of the package because both the timeline writer and table creation (a lower layer than
the timeline) use it.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["java_string_hash", "hashmap_spread", "java_hashmap_order"]


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def hashmap_spread(h: int) -> int:
    """``HashMap.hash``: the high bits folded into the low ones that pick the bucket."""
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` (default capacity) filled with ``keys`` in order.

    Buckets are visited in index order; keys sharing a bucket keep their insertion order (a
    resize splits buckets without reordering them). Tree bins (8+ keys in one bucket) are not
    modelled.
    """
    keys = list(dict.fromkeys(keys))
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2
    return sorted(keys, key=lambda k: hashmap_spread(java_string_hash(k)) & (n - 1))  # stable
