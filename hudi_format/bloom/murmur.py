"""Hudi's bloom-filter hashing: Hadoop's MurmurHash 2 with chained seeds, scalar and column-wise.

A key's bit positions (Hudi ``HashFunction.hash``) are ``nb_hash`` chained rounds: round ``i``
hashes the key's UTF-8 bytes with the previous round's hash as seed (0 first) and keeps
``abs(h % vector_size)``. Tail bytes are sign-extended (Java bytes), which matters for
non-ASCII keys.

Hashing is the hot path of writes (30 rounds per key with Hudi's defaults), so
:func:`round_magnitudes` runs it column-wise with Arrow compute on uint32 arrays: keys are
grouped by byte length, their 4-byte words are extracted and mixed once (the word mix does not
depend on the seed), and each round then costs a few array operations per word. Two things keep
those operations at memory speed:

- Arrow's array-array integer ``bit_wise_xor`` is a scalar loop, ~10x slower than its SIMD
  ``multiply``; the xor of two uint32 arrays is instead taken on their buffers viewed as
  boolean bitmaps (``pc.xor`` works a machine word at a time), zero-copy both ways.
- ``abs`` of the signed hash is Arrow's wrapping ``abs`` on an int32 view (``abs(INT_MIN)``
  wraps to ``2**31`` as uint32, as Python's ``abs`` gives), and the ``% vector_size`` of all
  rounds is one ``modulo`` over their concatenation.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["murmur_hash", "hash_positions", "hash_positions_all", "round_magnitudes",
           "as_binary", "modulo"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_U32 = pa.uint32()
_M_S = pa.scalar(_M, _U32)
_S13 = pa.scalar(13, _U32)
_S15 = pa.scalar(15, _U32)
_S24 = pa.scalar(24, _U32)


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
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
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


def _u32_view(fixed: pa.Array, width: int) -> pa.Array:
    """Reinterpret a binary array whose values are all ``width`` (1 or 4) bytes as uint8/uint32."""
    n = len(fixed)
    _, offsets, data = fixed.buffers()[:3]
    wide = pa.types.is_large_binary(fixed.type)
    start = struct.unpack_from("<q" if wide else "<i", offsets, (8 if wide else 4) * fixed.offset)[0]
    buf = data.slice(start, n * width)
    if buf.address % width:
        buf = pa.py_buffer(buf.to_pybytes())
    arr = pa.Array.from_buffers(pa.uint32() if width == 4 else pa.uint8(), n, [None, buf])
    return arr if width == 4 else arr.cast(_U32)


def _bits(a: pa.Array) -> pa.Array:
    """A null-free uint32 array's buffer seen as a boolean array of 32 bits per value."""
    return pa.Array.from_buffers(pa.bool_(), 32 * len(a), [None, a.buffers()[1]], offset=32 * a.offset)


def _xor(a: pa.Array, b: pa.Array) -> pa.Array:
    """``a ^ b`` for null-free uint32 arrays, a machine word at a time (see module doc)."""
    out = pc.xor(_bits(a), _bits(b))
    return pa.Array.from_buffers(_U32, len(a), [None, out.buffers()[1]], offset=out.offset // 32)


def _words(group: pa.Array, length: int) -> tuple[list[pa.Array], pa.Array | None]:
    """Mixed 4-byte words (``k *= m; k ^= k >>> 24; k *= m``) and the sign-extended tail."""
    n4, left = length >> 2, length & 3
    words = []
    for j in range(n4):
        k = pc.multiply(_u32_view(pc.binary_slice(group, 4 * j, 4 * j + 4), 4), _M_S)
        words.append(pc.multiply(_xor(k, pc.shift_right(k, _S24)), _M_S))
    tail = None
    for p in range(left):  # data[len - left + p], sign-extended, shifted into place
        off = length - left + p
        b = _u32_view(pc.binary_slice(group, off, off + 1), 1)
        b = pc.add(pc.bit_wise_xor(b, pa.scalar(0x80, _U32)), pa.scalar(0xFFFFFF80, _U32))  # sign-extend
        shift = 8 * (left - 1 - p)
        if shift:
            b = pc.shift_left(b, pa.scalar(shift, _U32))
        tail = b if tail is None else _xor(tail, b)
    return words, tail


def _group_magnitudes(group: pa.Array, length: int, nb_hash: int) -> list[pa.Array]:
    """``abs(int32 hash)`` of every round for keys of one byte ``length`` (uint32 arrays)."""
    words, tail = _words(group, length)
    len_s = pa.scalar(length, _U32)
    h = pa.repeat(len_s, len(group))             # first round: seed 0 ^ length
    out = []
    for r in range(nb_hash):
        if r:
            h = pc.bit_wise_xor(h, len_s)        # the previous hash is the seed
        for k in words:
            h = _xor(pc.multiply(h, _M_S), k)
        if tail is not None:
            h = pc.multiply(_xor(h, tail), _M_S)
        h = _xor(h, pc.shift_right(h, _S13))
        h = pc.multiply(h, _M_S)
        h = _xor(h, pc.shift_right(h, _S15))
        out.append(pc.abs(h.view(pa.int32())).view(_U32))   # wrapping abs: INT_MIN -> 2**31
    return out


def round_magnitudes(keys: pa.Array, nb_hash: int) -> tuple[list[pa.Array], pa.Array | None]:
    """(``abs(h)`` of each round for every key, permutation) for a binary array of keys.

    Keys of equal byte length are hashed together, so the arrays are in the order of
    ``keys.take(permutation)`` (``None``: the keys' own order). Positions are these values
    modulo the vector size.
    """
    lengths = pc.binary_length(keys)
    lmin, lmax = pc.min_max(lengths).values()
    if lmin.as_py() == 0:
        raise ValueError("bloom filter key length must be > 0")
    if lmin == lmax:
        return _group_magnitudes(keys, lmin.as_py(), nb_hash), None
    order = pc.sort_indices(lengths)
    sorted_keys = keys.take(order)
    ree = pc.run_end_encode(lengths.take(order))
    cols: list[list[pa.Array]] = [[] for _ in range(nb_hash)]
    start = 0
    for end, length in zip(ree.run_ends.to_pylist(), ree.values.to_pylist()):
        group = sorted_keys.slice(start, end - start)
        for i, arr in enumerate(_group_magnitudes(group, length, nb_hash)):
            cols[i].append(arr)
        start = end
    return [pa.concat_arrays(c) if len(c) != 1 else c[0] for c in cols], order


def modulo(a: pa.Array, m: pa.Scalar) -> pa.Array:
    """``a % m`` (pyarrow < 21 has no ``modulo``)."""
    if hasattr(pc, "modulo"):
        return pc.modulo(a, m)
    return pc.subtract(a, pc.multiply(pc.divide(a, m), m))


def hash_positions_all(keys, nb_hash: int, max_value: int) -> list[pa.Array]:
    """Bit positions of many keys: ``nb_hash`` uint32 arrays, each aligned with ``keys``.

    Column ``i`` holds round ``i`` of :func:`hash_positions` for every key.
    """
    keys = as_binary(keys)
    n = len(keys)
    if n == 0:
        return [pa.array([], _U32) for _ in range(nb_hash)]
    mags, order = round_magnitudes(keys, nb_hash)
    pos = modulo(pa.concat_arrays(mags), pa.scalar(max_value, _U32))
    cols = [pos.slice(i * n, n) for i in range(nb_hash)]
    if order is None:
        return cols
    inverse = pc.sort_indices(order)   # back to the caller's key order
    return [c.take(inverse) for c in cols]
