"""Byte ranges of one buffer as an Arrow binary array, without a Python loop or a copy per range.

The column-wise decoders (Avro log blocks, HFile cells) locate every value of a block as a
``[start, end)`` range of the block's bytes; :func:`gather` turns ascending, non-overlapping
ranges into one compact array. A binary array whose offsets run ``start0, end0, start1, end1,
...`` holds each range at an even position and the gap to the next at an odd one; filtering
every other element keeps the ranges. The interleaved offsets come from packing each
``(start, end)`` into one int64 whose little-endian bytes are the two int32 offsets side by
side (2.8x faster than interleaving them with a ``take``: 2.7 against 7.5 ms for 150k ranges).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["gather"]

_I64 = pa.int64()


def gather(data: pa.Buffer, starts: pa.Array, ends: pa.Array, dtype: pa.DataType = pa.binary()) -> pa.Array:
    """The ranges ``[starts, ends)`` of ``data`` (ascending, non-overlapping, under 2 GiB; any
    integer arrays) as one array of ``dtype`` (binary, or string when they hold UTF-8)."""
    n = len(starts)
    if n == 0:
        return pa.array([], dtype)
    pairs = pc.bit_wise_or(starts.cast(_I64), pc.shift_left(ends.cast(_I64), 32))
    interleaved = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pairs.buffers()[1], data])
    keep = pa.Array.from_buffers(pa.bool_(), 2 * n - 1, [None, pa.py_buffer(b"\x55" * ((2 * n + 6) // 8))])
    out = pc.filter(interleaved, keep)
    return out.cast(dtype) if dtype != pa.binary() else out
