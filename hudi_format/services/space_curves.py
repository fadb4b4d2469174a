"""Space-filling curves for multi-column layout: Z-order and Hilbert, as Hudi computes them.

Clustering with ``hoodie.layout.optimize.strategy=z-order|hilbert`` (and the default ``direct``
curve build method) orders the records of a clustering group by their position on a curve
through the sort columns. Hudi's Spark path is ``SpaceCurveSortingHelper
.orderDataFrameByMappingValues``:

- Z-order (``createZCurveSortedRDD``): every sort column value becomes 8 bytes
  (``mapColumnValueTo8Bytes``: ``BinaryUtil.longTo8Byte``/``intTo8Byte``/``doubleTo8Byte``/
  ``utf8To8Byte``/``paddingTo8Byte``), the bytes of all columns are bit-interleaved
  (``BinaryUtil.interleaving``) and rows are sorted by the result as unsigned bytes.
- Hilbert (``createHilbertSortedRDD``): every value becomes a ``long``
  (``mapColumnValueToLong``), the point's index on a 63-bit Hilbert curve is computed
  (``org.davidmoten.hilbert.HilbertCurve.index``, John Skilling's algorithm) and padded to 63
  bytes (``HilbertCurveUtils.indexBytes``); rows are sorted by those bytes.
- One sort column: no curve, a plain (linear) sort by that column.
- The columns enter the curve in the iteration order of the ``HashMap<Integer, StructField>``
  Hudi builds from their schema positions (meta fields included), not in the order the user
  listed them; :func:`hudi_column_order` reproduces that.

The scalar functions below are line-by-line equivalents of those Java functions and serve as
the reference; :func:`zorder_keys`/:func:`hilbert_keys` compute the same values for whole Arrow
columns with Arrow compute (no Python loop over rows), as lists of ``uint64`` words whose
lexicographic order is the curve order.

Type mapping follows Spark's types of the Avro schema: Avro ``int`` (Arrow int8/16/32) is
Spark's ``IntegerType``, ``long`` is ``LongType``, dates and timestamps become epoch
milliseconds (dates at UTC midnight; Spark uses the JVM time zone), decimals their
``longValue`` (truncated), booleans ``0/1`` (Z-order) or ``0/Long.MAX_VALUE`` (Hilbert). Nulls
map to the type's maximum as in Hudi (``""``/``[0]`` for strings/binary, ``false`` for booleans).
"""

from __future__ import annotations

import math
import struct
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array
from ..errors import InvalidOptionError

U64 = pa.uint64()
MASK64 = (1 << 64) - 1
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
DOUBLE_MAX = 1.7976931348623157e308
FLOAT_MAX = 3.4028234663852886e38
HILBERT_BITS = 63          # HilbertCurve.bits(63) in SpaceCurveSortingHelper
HILBERT_PAD = 63           # HilbertCurveUtils.indexBytes(curve, longs, 63)

LINEAR, ZORDER, HILBERT = "linear", "z-order", "hilbert"
STRATEGIES = (LINEAR, ZORDER, HILBERT)


def resolve_strategy(value: str | None) -> str:
    """``hoodie.layout.optimize.strategy``: linear | z-order | hilbert (Hudi also takes
    ``zorder`` and the enum names)."""
    text = (value or LINEAR).strip().lower().replace("_", "-")
    text = {"zorder": ZORDER, "z": ZORDER}.get(text, text)
    if text not in STRATEGIES:
        raise InvalidOptionError(f"option hoodie.layout.optimize.strategy must be one of "
                                 f"{list(STRATEGIES)}, got {value!r}")
    return text


# -- scalar reference: org.apache.hudi.common.util.BinaryUtil ---------------------------------


def padding_to_8(a: bytes) -> bytes:
    """``BinaryUtil.paddingTo8Byte``: first 8 bytes, or left-padded with zero bytes."""
    a = bytes(a)
    if len(a) >= 8:
        return a[:8]
    return b"\x00" * (8 - len(a)) + a


def long_to_8(a: int) -> bytes:
    """``BinaryUtil.longTo8Byte``: the long with its sign bit flipped, big-endian."""
    return ((a & MASK64) ^ (1 << 63)).to_bytes(8, "big")


def int_to_8(a: int) -> bytes:
    """``BinaryUtil.intTo8Byte``: the int with its sign bit flipped, 4 bytes, padded to 8."""
    return padding_to_8(((a & 0xFFFFFFFF) ^ (1 << 31)).to_bytes(4, "big"))


def byte_to_8(a: int) -> bytes:
    """``BinaryUtil.byteTo8Byte``: the raw byte, padded to 8 (negative bytes sort high)."""
    return padding_to_8(bytes([a & 0xFF]))


def double_to_8(a: float) -> bytes:
    """``BinaryUtil.doubleTo8Byte``: raw IEEE bits; positives flip the sign bit, negatives
    invert every bit, zeros and NaN stay as they are."""
    raw = bytearray(struct.pack(">d", a))
    if a > 0:
        raw[0] ^= 0x80
    elif a < 0:
        raw = bytearray(b ^ 0xFF for b in raw)
    return bytes(raw)


def utf8_to_8(s: str) -> bytes:
    """``BinaryUtil.utf8To8Byte``."""
    return padding_to_8(s.encode("utf-8"))


def bytes_to_long(b: bytes) -> int:
    """``BinaryUtil.convertBytesToLong`` (a signed 64-bit value)."""
    v = int.from_bytes(padding_to_8(b), "big")
    return v - (1 << 64) if v >= 1 << 63 else v


def interleaving(buffers: Sequence[bytes], size: int = 8) -> bytes:
    """``BinaryUtil.interleaving``: bit 0 (MSB) of every buffer, then bit 1 of every buffer..."""
    n = len(buffers)
    out = bytearray(size * n)
    pos = 0
    for bit in range(size * 8):
        byte_i, bit_i = divmod(bit, 8)
        for buf in buffers:
            if buf[byte_i] & (0x80 >> bit_i):
                out[pos // 8] |= 0x80 >> (pos % 8)
            pos += 1
    return bytes(out)


# -- scalar reference: org.davidmoten.hilbert.HilbertCurve ------------------------------------


def _transposed_index(bits: int, point: Sequence[int]) -> list[int]:
    """``HilbertCurve.transposedIndex`` (Skilling's AxestoTranspose) on 64-bit longs."""
    m = 1 << (bits - 1)
    x = [v & MASK64 for v in point]
    n = len(x)
    q = m
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = 0
    q = m
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    return [v ^ t for v in x]


def hilbert_index(point: Sequence[int], bits: int = HILBERT_BITS) -> int:
    """``HilbertCurve.bits(bits).dimensions(len(point)).index(point)`` as a Python int."""
    if len(point) < 2:
        raise InvalidOptionError("a Hilbert curve needs at least 2 dimensions")
    x = _transposed_index(bits, point)
    out = 0
    for b in range(bits - 1, -1, -1):           # toIndex: mask from 1 << (bits - 1) down
        for v in x:
            out = (out << 1) | ((v >> b) & 1)
    return out


def _java_big_integer_bytes(v: int) -> bytes:
    """``BigInteger.toByteArray`` of a non-negative value (two's complement, minimal)."""
    return v.to_bytes(v.bit_length() // 8 + 1, "big")


def padding_to_n(a: bytes, n: int) -> bytes:
    """``HilbertCurveUtils.paddingToNByte``: first ``n`` bytes, or left-padded with zeros."""
    return a[:n] if len(a) >= n else b"\x00" * (n - len(a)) + a


def hilbert_index_bytes(point: Sequence[int], bits: int = HILBERT_BITS,
                        padding: int = HILBERT_PAD) -> bytes:
    """``HilbertCurveUtils.indexBytes(HilbertCurve.bits(bits)..., point, padding)``."""
    return padding_to_n(_java_big_integer_bytes(hilbert_index(point, bits)), padding)


# -- which columns, in which order ------------------------------------------------------------


def java_int_hashmap_order(keys: Sequence[int]) -> list[int]:
    """Iteration order of a ``java.util.HashMap<Integer, ?>`` filled with ``keys`` in order."""
    keys = list(dict.fromkeys(keys))
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2

    def bucket(k: int) -> int:
        h = k & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)
    return sorted(keys, key=bucket)  # stable: a bucket keeps insertion order


def hudi_column_order(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    """The order in which Hudi feeds ``columns`` into the curve (see the module docstring)."""
    idx = [schema.get_field_index(c) for c in columns]
    by_index = dict(zip(idx, columns))
    return [by_index[i] for i in java_int_hashmap_order(idx)]


# -- vectorised: Arrow columns to uint64 words ------------------------------------------------


def _u64(value: int) -> pa.Scalar:
    return pa.scalar(value & MASK64, U64)


def _reinterpret(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """Bit-cast a null-free fixed-width array (e.g. int64/float64 -> uint64)."""
    if arr.offset:
        arr = pa.concat_arrays([arr])  # view needs offset 0
    return arr.view(typ)


def _bswap64(x: pa.Array) -> pa.Array:
    out = None
    for k in range(8):
        part = pc.shift_left(pc.bit_wise_and(pc.shift_right(x, _u64(8 * k)), _u64(0xFF)), _u64(56 - 8 * k))
        out = part if out is None else pc.bit_wise_or(out, part)
    return out


def _bytes_to_u64(arr: pa.Array, null_value: bytes) -> pa.Array:
    """``paddingTo8Byte`` of each value as a big-endian unsigned 64-bit number."""
    b = pc.cast(arr, pa.large_binary()) if pa.types.is_large_string(arr.type) or \
        pa.types.is_large_binary(arr.type) else pc.cast(arr, pa.binary())
    b = pc.fill_null(b, pa.scalar(null_value, b.type))
    head = pc.binary_slice(b, 0, 8)
    length = pc.cast(pc.binary_length(head), pa.int64())
    padded = pc.binary_slice(pc.binary_join_element_wise(head, pa.scalar(b"\x00" * 8, head.type), b""), 0, 8)
    fixed = pc.cast(pc.cast(padded, pa.binary()), pa.binary(8))
    value = _bswap64(_reinterpret(fixed, U64))             # right-padded, big-endian
    shift = pc.cast(pc.multiply(pc.subtract(8, length), 8), U64)
    shifted = pc.shift_right(value, pc.min_element_wise(shift, _u64(56)))
    return pc.if_else(pc.equal(length, 0), _u64(0), shifted)


def _floor_div(x: pa.Array, d: int) -> pa.Array:
    if d == 1:
        return x
    q = pc.divide(x, d)                                     # integer division truncates
    fix = pc.and_(pc.less(x, 0), pc.not_equal(pc.multiply(q, d), x))
    return pc.if_else(fix, pc.subtract(q, 1), q)


def _epoch_millis(arr: pa.Array) -> pa.Array:
    """Dates and timestamps as epoch milliseconds (int64), nulls kept."""
    t = arr.type
    if pa.types.is_date32(t):
        return pc.multiply(pc.cast(arr, pa.int32()).cast(pa.int64()), 86_400_000)
    if pa.types.is_date64(t):
        return pc.cast(arr, pa.int64())
    unit = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
    raw = pc.cast(arr, pa.int64())
    return pc.multiply(raw, 1000) if t.unit == "s" else _floor_div(raw, unit)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        if pa.types.is_signed_integer(t) and t.bit_width <= 32:
            return "int"
        return "long"
    if pa.types.is_floating(t):
        return "float" if t.bit_width <= 32 else "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_decimal(t):
        return "decimal"
    raise InvalidOptionError(f"cannot order by a column of type {t} on a space curve; Hudi "
                             "supports numbers, strings, binary, dates, timestamps, decimals, booleans")


def _signed_long(arr: pa.Array, kind: str) -> pa.Array:
    """int64 values of integer-like kinds (no nulls handled here)."""
    if kind == "time":
        return _epoch_millis(arr)
    if kind == "decimal":
        return pc.cast(arr, pa.int64(), safe=False)         # BigDecimal.longValue truncates
    if pa.types.is_unsigned_integer(arr.type) and arr.type.bit_width == 64:
        return _reinterpret(arr, pa.int64())
    return pc.cast(arr, pa.int64())


def zorder_word(col) -> pa.Array:
    """``mapColumnValueTo8Bytes`` of every value, as big-endian uint64."""
    arr = one_array(col)
    kind = _kind(arr.type)
    if kind in ("string", "binary"):
        return _bytes_to_u64(arr, b"" if kind == "string" else b"\x00")
    if kind == "bool":
        v = pc.cast(pc.fill_null(arr, False), pa.int64())
        return pc.cast(pc.add(v, 1 << 31), U64)            # intTo8Byte(0 | 1)
    if kind == "int":
        v = pc.fill_null(pc.cast(arr, pa.int64()), INT_MAX)
        return pc.cast(pc.add(v, 1 << 31), U64)            # (a ^ 0x80000000) as 4 bytes
    if kind in ("float", "double"):
        d = pc.fill_null(pc.cast(arr, pa.float64()), FLOAT_MAX if kind == "float" else DOUBLE_MAX)
        raw = _reinterpret(d, U64)
        pos = pc.fill_null(pc.greater(d, 0.0), False)
        neg = pc.fill_null(pc.less(d, 0.0), False)
        return pc.if_else(pos, pc.bit_wise_xor(raw, _u64(1 << 63)),
                          pc.if_else(neg, pc.bit_wise_not(raw), raw))
    v = pc.fill_null(_signed_long(arr, kind), LONG_MAX)
    return pc.bit_wise_xor(_reinterpret(v, U64), _u64(1 << 63))


def hilbert_word(col) -> pa.Array:
    """``mapColumnValueToLong`` of every value, as the long's 64 bits (uint64)."""
    arr = one_array(col)
    kind = _kind(arr.type)
    nulls = pc.is_null(arr)
    if kind in ("string", "binary"):
        v = _bytes_to_u64(arr, b"")
    elif kind == "bool":
        v = pc.if_else(pc.fill_null(arr, False), _u64(LONG_MAX), _u64(0))
        return v                                            # null is false, not Long.MAX_VALUE
    elif kind in ("float", "double"):
        d = pc.fill_null(pc.cast(arr, pa.float64()), 0.0)
        raw = _reinterpret(d, U64)
        v = pc.if_else(pc.is_nan(d), _u64(0x7FF8000000000000), raw)  # doubleToLongBits
    else:
        v = _reinterpret(pc.fill_null(_signed_long(arr, kind), 0), U64)
    return pc.if_else(nulls, _u64(LONG_MAX), v)


def interleave_words(words: Sequence[pa.Array], bits: int) -> list[pa.Array]:
    """Interleave the low ``bits`` bits of each uint64 column, MSB first, column by column;
    the ``bits * len(words)``-bit result is returned as left-aligned uint64 words."""
    n = len(words)
    total = bits * n
    out: list[pa.Array | None] = [None] * math.ceil(total / 64)
    pos = 0
    for b in range(bits - 1, -1, -1):
        for w in words:
            word, dest = divmod(pos, 64)
            bit = pc.bit_wise_and(pc.shift_right(w, _u64(b)), _u64(1))
            part = pc.shift_left(bit, _u64(63 - dest))
            out[word] = part if out[word] is None else pc.bit_wise_or(out[word], part)
            pos += 1
    return out


def zorder_keys(columns: Sequence) -> list[pa.Array]:
    """Z-order keys: ``BinaryUtil.interleaving`` of the columns' 8-byte values, as uint64 words
    (word ``i`` is bytes ``8i..8i+7`` of Hudi's key)."""
    return interleave_words([zorder_word(c) for c in columns], 64)


def _where(mask: pa.Array, a: pa.Array, b: pa.Array) -> pa.Array:
    return pc.if_else(mask, a, b)


def hilbert_keys(columns: Sequence, bits: int = HILBERT_BITS) -> list[pa.Array]:
    """Hilbert keys: ``HilbertCurve.index`` of the columns' long values (Skilling's algorithm
    run on whole columns), as left-aligned uint64 words of the ``bits * n``-bit index."""
    x = [hilbert_word(c) for c in columns]
    n = len(x)
    if n < 2:
        raise InvalidOptionError("a Hilbert curve needs at least 2 columns")
    zero = _u64(0)
    q = 1 << (bits - 1)
    while q > 1:
        p = _u64(q - 1)
        qs = _u64(q)
        for i in range(n):
            has = pc.not_equal(pc.bit_wise_and(x[i], qs), zero)
            if i == 0:
                x[0] = _where(has, pc.bit_wise_xor(x[0], p), x[0])
                continue
            t = pc.bit_wise_and(pc.bit_wise_xor(x[0], x[i]), p)
            x0_swapped = pc.bit_wise_xor(x[0], t)
            x[i] = _where(has, x[i], pc.bit_wise_xor(x[i], t))
            x[0] = _where(has, pc.bit_wise_xor(x[0], p), x0_swapped)
        q >>= 1
    for i in range(1, n):
        x[i] = pc.bit_wise_xor(x[i], x[i - 1])
    t = None
    q = 1 << (bits - 1)
    while q > 1:
        flip = pc.if_else(pc.not_equal(pc.bit_wise_and(x[n - 1], _u64(q)), zero), _u64(q - 1), zero)
        t = flip if t is None else pc.bit_wise_xor(t, flip)
        q >>= 1
    if t is not None:
        x = [pc.bit_wise_xor(v, t) for v in x]
    return interleave_words(x, bits)


def curve_keys(table: pa.Table, columns: Sequence[str], strategy: str) -> list[pa.Array]:
    """The curve key words of every row of ``table`` (columns in Hudi's order)."""
    ordered = hudi_column_order(table.schema, columns)
    cols = [table.column(c) for c in ordered]
    if strategy == ZORDER:
        return zorder_keys(cols)
    if strategy == HILBERT:
        return hilbert_keys(cols)
    raise InvalidOptionError(f"not a space curve strategy: {strategy!r}")


def words_to_bytes(words: Sequence[pa.Array], row: int, nbytes: int | None = None) -> bytes:
    """Row ``row`` of key words as bytes (for comparing with Hudi's byte keys)."""
    raw = b"".join(int(w[row].as_py()).to_bytes(8, "big") for w in words)
    return raw if nbytes is None else raw[:nbytes]


def sort_indices(table: pa.Table, columns: Sequence[str], strategy: str = LINEAR) -> pa.Array:
    """Row order of ``table`` sorted by ``columns``: linearly (ascending, nulls first, as
    Spark's ``sort``) or along a space curve. One column is always a linear sort."""
    columns = list(columns)
    missing = [c for c in columns if table.schema.get_field_index(c) < 0]
    if missing:
        raise InvalidOptionError(f"cannot sort by unknown column(s) {missing}; the table has "
                                 f"{', '.join(table.column_names)}")
    if not columns or table.num_rows == 0:
        return pa.array(range(table.num_rows), pa.int64())
    if strategy == LINEAR or len(columns) == 1:
        from ..read.merge import _sort_indices_nulls_first
        return _sort_indices_nulls_first(table.select(columns), [(c, "ascending") for c in columns])
    words = curve_keys(table, columns, strategy)
    keys = pa.table({f"w{i}": w for i, w in enumerate(words)})
    return pc.sort_indices(keys, sort_keys=[(f"w{i}", "ascending") for i in range(len(words))])
