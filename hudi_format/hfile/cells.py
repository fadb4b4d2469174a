"""KeyValue cells of an HFile data block, decoded into Arrow arrays in bulk.

A data block is a run of cells, each ``int klen | int vlen | key | value`` (+ tags, + MVCC
vlong); the key is ``short rlen | row | byte flen | family | qualifier | long ts | byte type``.
A cell's start depends on every length before it, so a plain parser walks the block cell by
cell -- in Python, ~1 µs a cell, which made the record index slower than reading every key.

Hudi writes every cell with an empty family and qualifier, the latest timestamp and the Put
type, so each key ends with the same 9 bytes (``7fff..ff 04``). :func:`decode_cells` splits
the block at that marker with Arrow (C++), which gives every key's end, then finds each cell's
header inside its piece column-wise: a header lies ``vlen + mvcc`` bytes after the previous
key's end, and its ``rlen`` field must match the distance to the key's end; the few distinct
value lengths are tried in rounds. The result is then *verified* against the cell format
column-wise (every ``klen``, ``vlen``, ``rlen``, family length and MVCC byte, and each cell
starting exactly where the previous one ends), which is precisely what the sequential parser
would have read. Anything else -- other cell layouts, tags, a marker inside a value, damage --
falls back to the sequential parser, which names the damage.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptFileError
from .blocks import LATEST_TIMESTAMP, TYPE_PUT, decode_vint

__all__ = ["decode_cells", "decode_many", "decode_cells_sequential", "KEY_SUFFIX"]

KEY_SUFFIX = struct.pack(">qB", LATEST_TIMESTAMP, TYPE_PUT)  # ts + type closing Hudi's keys
_KV = struct.Struct(">ii")
JOIN_BYTES = 8 << 20  # blocks decoded together in one pass (HFile blocks are ~1 MiB)
_MAX_ROUNDS = 64  # distinct value lengths tried before giving up on the column-wise path
_I64 = pa.int64()

_arange_cache: list[pa.Array] = [pa.array([], _I64)]


def _arange(n: int) -> pa.Array:
    """``0..n-1`` as int64 (a cached array, sliced)."""
    cached = _arange_cache[0]
    if len(cached) < n:
        size = max(n, 2 * len(cached), 1 << 16)
        cached = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, _I64), size)), 1)
        _arange_cache[0] = cached
    return cached.slice(0, n)


def _binary(payload) -> pa.Array:
    buf = pa.py_buffer(payload)
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, buf.size)), buf])


_U64 = pa.uint64()


def _byte_at(u8: pa.Array, pos: pa.Array) -> pa.Array:
    """Bytes at ``pos`` (clamped into the buffer: callers verify what they read)."""
    pos = pc.min_element_wise(pc.max_element_wise(pos, 0), max(len(u8) - 1, 0))
    return pc.take(u8, pos)


def _packed(data: pa.Buffer, starts: pa.Array, lo: int, hi: int, type_: pa.DataType) -> pa.Array | None:
    """Bytes ``[start + lo, start + hi)`` of every span starting at the non-decreasing
    ``starts`` (each running to the next start, the last to the end of ``data``), viewed as
    one fixed-width little-endian integer each; ``None`` when a span is too short."""
    n = len(starts)
    offsets = pa.concat_arrays([starts.cast(pa.int32()), pa.array([data.size], pa.int32())])
    spans = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], data])
    cut = pc.binary_slice(spans, lo, hi)
    if cut.offset or cut.buffers()[2] is None or cut.buffers()[2].size < n * (hi - lo) \
            or pc.min(pc.binary_length(cut)).as_py() != hi - lo:
        return None
    return pa.Array.from_buffers(type_, n, [None, cut.buffers()[2]])


def _u64(v: int) -> pa.Scalar:
    return pa.scalar(v, _U64)


def _swap16(v: pa.Array) -> pa.Array:
    """Big-endian 2-byte values read little-endian, as int64."""
    v = v.cast(_I64)
    return pc.bit_wise_or(pc.shift_left(pc.bit_wise_and(v, 0xFF), 8), pc.shift_right(v, 8))


def _be32_as_le(x: pa.Array) -> pa.Array:
    """The little-endian reading (uint64) of ``x`` (0 <= x < 65536) stored as 4 big-endian bytes."""
    x = x.cast(_U64)
    return pc.bit_wise_or(pc.shift_left(pc.bit_wise_and(x, _u64(0xFF)), _u64(24)),
                          pc.shift_left(pc.shift_right(x, _u64(8)), _u64(16)))


def _spans(data: pa.Buffer, starts: pa.Array, ends: pa.Array, starts2: pa.Array,
           ends2: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Two binary arrays sliced out of ``data``: ``[starts, ends)`` and ``[starts2, ends2)``.

    The four bounds interleave into one increasing offsets buffer (row, gap, value, gap, ...)
    whose even elements are then gathered: no per-cell Python."""
    n = len(starts)
    stacked = pa.concat_arrays([starts.cast(_I64), ends.cast(_I64), starts2.cast(_I64), ends2.cast(_I64)])
    k = _arange(4 * n)
    perm = pc.add(pc.multiply(pc.bit_wise_and(k, 3), n), pc.shift_right(k, 2))
    offsets = pc.take(stacked, perm).cast(pa.int32())
    spans = pa.Array.from_buffers(pa.binary(), 4 * n - 1, [None, offsets.buffers()[1], data])
    four = pc.multiply(_arange(n), 4)
    return pc.take(spans, four), pc.take(spans, pc.add(four, 2))


def _decode_columnwise(payload, mvcc: bool) -> tuple[pa.Array, pa.Array] | None:
    """Rows and values, or ``None`` when the block is not in Hudi's cell layout."""
    m = 1 if mvcc else 0
    pieces = pc.split_pattern(_binary(payload), KEY_SUFFIX).flatten()
    n = len(pieces) - 1  # cells: each key ends at one marker
    if n < 1 or pieces.offset:
        return None
    data = pieces.buffers()[2]
    size = data.size
    offs = pa.Array.from_buffers(pa.int32(), n + 2, [None, pieces.buffers()[1]]).cast(_I64)
    if offs[0].as_py() != 0 or offs[n + 1].as_py() != size:
        return None
    lo, hi = offs.slice(0, n), offs.slice(1, n)  # piece j: [lo_j, hi_j); key j ends at hi_j
    # The header of cell j sits ``w_j + m`` into piece j, w_j being the previous value's length
    # (w_0 = -m: the first header opens the block); try the value lengths met so far in rounds.
    w = pa.concat_arrays([pa.array([-m], _I64), pa.nulls(n - 1, _I64)])
    first_vlen = struct.unpack_from(">i", payload, 4)[0] if len(payload) >= 8 else -1
    todo, tried = {first_vlen}, set()
    while todo and w.null_count:
        if len(tried) >= _MAX_ROUNDS:
            return None
        guess = todo.pop()
        tried.add(guess)
        cand = pc.min_element_wise(pc.max_element_wise(pc.add(lo, guess + m), 0), size)
        rlen = _packed(data, cand, 8, 10, pa.uint16())
        vlen = _packed(data, cand, 4, 8, pa.uint32())
        if rlen is None or vlen is None:
            return None
        new = pc.and_(pc.is_null(w), pc.equal(_swap16(rlen), pc.subtract(hi, pc.add(cand, 11))))
        w = pc.if_else(new, pa.scalar(guess, _I64), w)
        for raw in pc.unique(pc.filter(vlen, new)).to_pylist():
            value_len = int.from_bytes(raw.to_bytes(4, "little"), "big", signed=True)
            if value_len not in tried:
                todo.add(value_len)
    if w.null_count or (n > 1 and pc.min(w.slice(1)).as_py() < 0):
        return None
    header = pc.add(lo, pc.add(w, m))
    # verify every header against what a sequential parser reads there
    klen = pc.add(pc.subtract(hi, header), 1)  # the key ends at the marker
    vlen = pa.concat_arrays([w.slice(1), pa.array([size - hi[n - 1].as_py() - m], _I64)])
    if pc.min(vlen).as_py() < 0 or pc.max(vlen).as_py() >= 1 << 16 or pc.max(klen).as_py() >= 1 << 16 \
            or pc.min(klen).as_py() < 12:
        return None
    # (each rlen was checked against its key's length -- empty family and qualifier -- when
    # its header was found)
    lens = _packed(data, header, 0, 8, _U64)
    if lens is None:
        return None
    expect = pc.bit_wise_or(_be32_as_le(klen), pc.shift_left(_be32_as_le(vlen), _u64(32)))
    u8 = pa.Array.from_buffers(pa.uint8(), size, [None, data])
    checks = [pc.equal(lens, expect),  # klen, vlen
              pc.equal(_byte_at(u8, pc.subtract(hi, 1)), 0)]  # family length
    if m:
        checks.append(pc.equal(_byte_at(u8, pc.add(hi, vlen)), 0))  # MVCC version 0, one byte
    for check in checks:
        if not pc.all(check).as_py():
            return None
    return _spans(data, pc.add(header, 10), pc.subtract(hi, 1), hi, pc.add(hi, vlen))


def decode_cells_sequential(payload, mvcc: bool, tags: bool, where: str) -> tuple[list[bytes], list[bytes]]:
    """Rows and values cell by cell (any cell layout); damage raises naming ``where``."""
    rows, values = [], []
    pos, end = 0, len(payload)
    unpack = _KV.unpack_from
    try:
        while pos < end:
            klen, vlen = unpack(payload, pos)
            kstart = pos + 8
            vstart = kstart + klen
            pos = vstart + vlen
            if klen < 2 or vlen < 0 or pos > end:
                raise ValueError(f"cell at byte {kstart - 8} overruns the block")
            rlen = (payload[kstart] << 8) | payload[kstart + 1]
            if rlen + 2 > klen:
                raise ValueError(f"cell at byte {kstart - 8} has a row longer than its key")
            rows.append(bytes(payload[kstart + 2:kstart + 2 + rlen]))
            values.append(bytes(payload[vstart:pos]))
            if tags:
                (tlen,) = struct.unpack_from(">H", payload, pos)
                pos += 2 + tlen
            if mvcc:
                if payload[pos] < 0x80:  # the usual single-byte vlong (0 for Hudi)
                    pos += 1
                else:
                    _, pos = decode_vint(payload, pos)
        if pos != end:
            raise ValueError("last cell overruns the block")
    except (struct.error, IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: {exc}") from exc
    return rows, values


def decode_cells(payload, mvcc: bool, tags: bool, where: str) -> tuple[pa.Array, pa.Array]:
    """``(rows, values)`` of a data block as binary arrays, in file order."""
    if not payload:
        empty = pa.array([], pa.binary())
        return empty, empty
    if not tags and len(payload) < (1 << 31) - 1:
        got = _decode_columnwise(payload, mvcc)
        if got is not None:
            return got
    rows, values = decode_cells_sequential(payload, mvcc, tags, where)
    return pa.array(rows, pa.binary()), pa.array(values, pa.binary())


def decode_many(payloads: list, mvcc: bool, tags: bool, wheres: list[str]) -> tuple[pa.Array, pa.Array]:
    """``(rows, values)`` of several data blocks, in order. Cells never straddle blocks, so
    runs of blocks are decoded joined (up to :data:`JOIN_BYTES`: bigger arrays fall out of the
    CPU caches between kernels), in one column-wise pass each; block by block when a run does
    not take the fast path (so that damage is reported in the right block)."""
    rows: list[pa.Array] = []
    values: list[pa.Array] = []
    i = 0
    while i < len(payloads):
        j, size = i, 0
        while j < len(payloads) and (j == i or size + len(payloads[j]) <= JOIN_BYTES):
            size += len(payloads[j])
            j += 1
        got = _decode_columnwise(b"".join(payloads[i:j]), mvcc) if j - i > 1 and not tags else None
        parts = [got] if got is not None else [decode_cells(p, mvcc, tags, w)
                                               for p, w in zip(payloads[i:j], wheres[i:j])]
        rows += [r for r, _ in parts]
        values += [v for _, v in parts]
        i = j
    if not rows:
        empty = pa.array([], pa.binary())
        return empty, empty
    return pa.concat_arrays(rows), pa.concat_arrays(values)
