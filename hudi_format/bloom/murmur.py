"""Hudi's bloom-filter hashing: Hadoop's MurmurHash 2 with chained seeds, scalar and column-wise.

A key's bit positions (Hudi ``HashFunction.hash``) are ``nb_hash`` chained rounds: round ``i``
hashes the key's UTF-8 bytes with the previous round's hash as seed (0 first) and keeps
``abs(h % vector_size)``. Tail bytes are sign-extended (Java bytes), which matters for
non-ASCII keys.

Hashing is the hot path of writes (30 rounds per key with Hudi's defaults: 30 million bit
positions for a million keys), so :func:`iter_positions` runs it with NumPy ``uint32``
arithmetic (which wraps as Java's ``int`` does) over blocks of keys of one byte length: a
block is a ``(keys, length)`` byte matrix (a zero-copy view of the Arrow data buffer when all
keys have the same length), its 4-byte words are mixed once (the word mix does not depend on
the seed), and each round then costs a few in-place operations on arrays small enough to stay
in the CPU cache. ``abs`` of the signed hash is NumPy's wrapping ``abs`` on an int32 view
(``abs(INT_MIN)`` wraps to ``2**31`` as uint32, as Python's ``abs`` gives).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..chunks import one_array

__all__ = ["murmur_hash", "hash_positions", "hash_positions_all", "iter_positions", "as_binary"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_M32 = np.uint32(_M)
_BLOCK = 1 << 16      # keys hashed together: a round's arrays (256 KiB each) stay in the L2 cache,
                      # and a thread holds the GIL between ~12 NumPy calls per round, not 4x as
                      # many (16 Ki-key blocks: two threads hashing two files were no faster than one)


# -- scalar hashing -----------------------------------------------------------------------------
def _sext8(b: int) -> int:
    """A Java byte widened to int (sign-extended), as uint32."""
    return b | 0xFFFFFF00 if b & 0x80 else b


def murmur_hash(data: bytes, seed: int = -1) -> int:
    """Hudi's (Hadoop's) MurmurHash 2 of ``data``; returns the Java ``int`` (signed 32-bit).

    Tail bytes are sign-extended before the xor, as in the Java code; this matters for
    non-ASCII UTF-8 keys.
    """
    n = len(data)
    h = (seed ^ n) & _MASK
    n4 = n >> 2
    for k in struct.unpack_from(f"<{n4}I", data) if n4 else ():
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    left = n & 3
    if left:
        if left >= 3:
            h ^= (_sext8(data[n - 3]) << 16) & _MASK
        if left >= 2:
            h ^= (_sext8(data[n - 2]) << 8) & _MASK
        h ^= _sext8(data[n - 1])
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def hash_positions(data: bytes, nb_hash: int, max_value: int) -> list[int]:
    """Bit positions of one key (Hudi ``HashFunction.hash``): chained seeds, ``abs(h % max)``."""
    if not data:
        raise ValueError("bloom filter key length must be > 0")
    out, h = [], 0
    for _ in range(nb_hash):
        h = murmur_hash(data, h)
        out.append(abs(h) % max_value)   # == Java Math.abs(h % max) for truncated division
    return out


# -- column-wise hashing ------------------------------------------------------------------------
def as_binary(keys) -> pa.Array:
    """Keys as one binary Arrow array (UTF-8 bytes); rejects nulls and empty keys like Hudi."""
    keys = one_array(keys)
    if not isinstance(keys, pa.Array):
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be an iterable of strings, not a single string")
        keys = pa.array(list(keys), pa.string())
    t = keys.type
    if pa.types.is_dictionary(t):
        keys, t = keys.dictionary_decode(), t.value_type
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        keys = keys.cast(pa.large_binary())
    elif pa.types.is_string(t) or pa.types.is_binary(t) or str(t) in ("string_view", "binary_view"):
        keys = keys.cast(pa.binary())
    else:
        raise TypeError(f"bloom filter keys must be strings, got Arrow type {t}")
    if keys.null_count:
        raise ValueError("bloom filter keys cannot be null")
    return keys


def _offsets_and_data(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The value offsets (``len + 1``) and data bytes of a binary or large_binary array."""
    n = len(keys)
    wide = pa.types.is_large_binary(keys.type)
    _, off_buf, data_buf = keys.buffers()[:3]
    dtype = np.int64 if wide else np.int32
    offsets = np.frombuffer(off_buf, dtype, n + 1, keys.offset * dtype().itemsize)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


def _blocks(keys: pa.Array, block: int) -> Iterator[tuple[slice | np.ndarray, np.ndarray]]:
    """(which keys, ``(n, length)`` uint8 byte matrix) for blocks of keys of equal length."""
    n = len(keys)
    offsets, data = _offsets_and_data(keys)
    lengths = np.diff(offsets)
    lmin, lmax = int(lengths.min()), int(lengths.max())
    if lmin == 0:
        raise ValueError("bloom filter key length must be > 0")
    if lmin == lmax:            # equal lengths: the data buffer is the matrix
        start = int(offsets[0])
        matrix = data[start:start + n * lmin].reshape(n, lmin)
        for s in range(0, n, block):
            yield slice(s, min(n, s + block)), matrix[s:s + block]
        return
    # keys of one length made adjacent by Arrow's ``take`` (one pass over the bytes): each
    # length's run of the taken data buffer is then its matrix, a view -- gathering every
    # byte through a ``(keys, length)`` index matrix instead cost 3/4 as much as the hashing
    order = np.argsort(lengths.astype(np.uint16) if lmax < 1 << 16 else lengths, kind="stable")
    sorted_len = lengths[order]
    s_offsets, s_data = _offsets_and_data(keys.take(pa.array(order)))
    cuts = [0, *(np.flatnonzero(sorted_len[1:] != sorted_len[:-1]) + 1).tolist(), n]
    for g0, g1 in zip(cuts, cuts[1:]):
        length, start = int(sorted_len[g0]), int(s_offsets[g0])
        matrix = s_data[start:start + (g1 - g0) * length].reshape(g1 - g0, length)
        for s in range(g0, g1, block):
            yield order[s:min(g1, s + block)], matrix[s - g0:s - g0 + block]


def _hash_block(matrix: np.ndarray, nb_hash: int, vector_size: int, out: np.ndarray,
                shift: np.ndarray | None = None) -> None:
    """``out[r, i]``: round ``r``'s bit position of key ``i`` (row ``i`` of ``matrix``), plus
    ``shift[i]`` when given."""
    n, length = matrix.shape
    n4, left = length >> 2, length & 3
    words = []
    for j in range(n4):                   # k *= m; k ^= k >>> 24; k *= m
        # word j of every row as a strided little-endian view: no copy of the matrix
        k = matrix[:, 4 * j:4 * j + 4].view("<u4")[:, 0] * _M32
        k ^= k >> np.uint32(24)
        k *= _M32
        words.append(k)
    tail = None
    for p in range(left):                 # data[len - left + p], sign-extended, shifted into place
        b = matrix[:, length - left + p].view(np.int8).astype(np.int32).view(np.uint32)
        b <<= np.uint32(8 * (left - 1 - p))
        tail = b if tail is None else tail ^ b
    size = np.uint32(vector_size)
    h = np.full(n, length, np.uint32)     # first round: seed 0 ^ length
    tmp = np.empty(n, np.uint32)
    quot = np.empty(n, np.uint32)
    for r in range(nb_hash):
        if r:
            h ^= np.uint32(length)        # the previous hash is the seed
        for k in words:
            h *= _M32
            h ^= k
        if tail is not None:
            h ^= tail
            h *= _M32
        np.right_shift(h, np.uint32(13), out=tmp)
        h ^= tmp
        h *= _M32
        np.right_shift(h, np.uint32(15), out=tmp)
        h ^= tmp
        np.abs(h.view(np.int32), out=tmp.view(np.int32))   # wrapping: INT_MIN -> 2**31
        # tmp % size, as tmp - (tmp // size) * size: NumPy divides by a scalar with
        # libdivide's multiply-and-shift, ~20x faster than its ``remainder``
        np.floor_divide(tmp, size, out=quot)
        quot *= size
        tmp -= quot
        if shift is None:
            out[r] = tmp
        else:
            np.add(tmp, shift, out=out[r])


_FREE: list[np.ndarray] = []        # position buffers no generator holds, for the next ones
_FREE_LOCK = threading.Lock()
_FREE_MAX = 2   # buffers kept between calls (<= 30 MB held): two write threads hash at once


def _take_buffer(size: int) -> np.ndarray:
    with _FREE_LOCK:
        for i, buf in enumerate(_FREE):
            if buf.size >= size:
                return _FREE.pop(i)
    return np.empty(size, np.intp)


def _give_back(buf: np.ndarray) -> None:
    with _FREE_LOCK:
        if len(_FREE) < _FREE_MAX:
            _FREE.append(buf)


def iter_positions(keys: pa.Array, nb_hash: int, vector_size: int, block: int = _BLOCK,
                   shift: np.ndarray | None = None) -> Iterator[tuple[slice | np.ndarray, np.ndarray]]:
    """Bit positions of a binary array of keys (:func:`as_binary`), block by block:
    ``(which keys, positions)`` with ``positions[r, i]`` (``intp``, ready to index with) round
    ``r`` of the ``i``-th key the first item selects (a slice, or an index array when key
    lengths differ), plus that key's entry of ``shift`` (int64, one per key) when given.

    ``positions`` is only valid until the next block is asked for: the blocks are written into
    one buffer, which goes back to a small shared pool for the next call (15 MB for 30 rounds
    of 65,536 keys). A fresh buffer per block cost a page fault per 4 KiB written: 3/4 of a
    bloom filter's time (0.064 s for 122,880 keys against 0.017 s with the pages kept)."""
    if not len(keys):
        return
    buf = _take_buffer(nb_hash * min(block, len(keys)))
    try:
        for which, matrix in _blocks(keys, block):
            out = buf[:nb_hash * len(matrix)].reshape(nb_hash, len(matrix))
            _hash_block(matrix, nb_hash, vector_size, out, None if shift is None else shift[which])
            yield which, out
    finally:
        _give_back(buf)


def hash_positions_all(keys, nb_hash: int, max_value: int) -> list[pa.Array]:
    """Bit positions of many keys: ``nb_hash`` uint32 arrays, each aligned with ``keys``.

    Column ``i`` holds round ``i`` of :func:`hash_positions` for every key.
    """
    keys = as_binary(keys)
    out = np.empty((nb_hash, len(keys)), np.uint32)
    for which, pos in iter_positions(keys, nb_hash, max_value):
        out[:, which] = pos
    return [pa.array(out[r]) for r in range(nb_hash)]
