"""Column-wise Avro binary codec for the flat records Hudi writes into Avro data blocks.

Decoding a block record by record into Python dicts costs microseconds per row; here every
field is decoded for all records at once with Arrow compute. A cursor array holds each
record's current byte position; decoding a field reads the bytes at all cursors (``take`` on
the content viewed as ``uint8``), assembles varints one byte position at a time (at most 10
steps, whatever the row count), gathers strings, bytes and floats by building a binary array
whose offsets interleave each value's start and end and keeping every other element, and
moves the cursors on. Encoding runs the other way: each field becomes one binary array of its
per-row Avro bytes (varints packed into little-endian words and trimmed to their length the
same way) and ``binary_join_element_wise`` concatenates the fields of each row.

Supported: top-level records whose fields are ``boolean``, ``int``, ``long``, ``float``,
``double``, ``string``, ``bytes``, ``fixed`` or ``enum`` (logical types ride on these), each
optionally in a union with ``null``. Anything else (nested records, arrays, maps, general
unions) makes :func:`plan_for` return None and the callers use fastavro. Both directions
produce exactly what fastavro (and Avro Java) write and read, byte for byte.

The one sequential step is the block framing: each record is prefixed by its length, so where
record i+1 starts is known only after record i's length is read. That walk is one
``unpack_from`` per record (:func:`frame_records`); everything per field is columnar.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Sequence

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..byte_ranges import gather
from ..chunks import one_array
from ..errors import LogFormatError, SchemaError
from ..schema import fullname, parse_avro_schema

__all__ = ["FieldPlan", "ColumnDecoder", "row_offsets", "plan_for", "frame_records", "decode_columns", "encode_rows", "frame_rows", "binary_data"]

_INT = struct.Struct(">i")
_PRIMITIVE = frozenset({"boolean", "int", "long", "float", "double", "string", "bytes"})
_FLOAT_SIZE = {"float": 4, "double": 8}
_U64 = pa.uint64()
_I64 = pa.int64()


def _u(value: int) -> pa.Scalar:
    """A uint64 scalar: an untyped int would turn uint64 arithmetic into (overflowing) int64."""
    return pa.scalar(value, _U64)


@attrs.frozen
class FieldPlan:
    """How one top-level field is laid out: its Avro kind, where null sits in its union."""

    name: str
    kind: str                      # boolean/int/long/float/double/string/bytes/fixed/enum
    null_index: int | None = None  # branch index of "null" in a [null, T] union, None if required
    size: int = 0                  # fixed size
    symbols: tuple[str, ...] = ()  # enum symbols
    branch: int | None = None      # the value's branch index where the union has more than two

    @property
    def value_index(self) -> int:
        if self.branch is not None:
            return self.branch
        return 1 - self.null_index if self.null_index is not None else 0


def _kind_of(t: Any, ns: str | None, named: dict) -> tuple[str, int, tuple] | None:
    """(kind, size, symbols) of a non-union field type, or None when not columnar."""
    if isinstance(t, str):
        if t in _PRIMITIVE:
            return t, 0, ()
        for key in (fullname(t, ns), t):
            if key in named:
                return named[key]
        return None
    if not isinstance(t, dict):
        return None
    kind = t.get("type")
    if isinstance(kind, str) and kind in _PRIMITIVE:
        return kind, 0, ()
    if kind in ("fixed", "enum"):
        name = t.get("name")
        if not isinstance(name, str):
            return None
        if kind == "fixed":
            size = t.get("size")
            if not isinstance(size, int) or size < 0:
                return None
            out: tuple[str, int, tuple] = ("fixed", size, ())
        else:
            symbols = t.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                return None
            out = ("enum", 0, tuple(symbols))
        full = fullname(name, t.get("namespace", ns))
        named[full] = out
        named.setdefault(name, out)
        return out
    if isinstance(kind, (dict, list)):
        return _kind_of(kind, ns, named) if isinstance(kind, dict) else None
    return None


def _plan(schema: Any) -> tuple[FieldPlan, ...] | None:
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    name = schema.get("name")
    if not isinstance(name, str):
        return None
    ns = fullname(name, schema.get("namespace")).rpartition(".")[0] or None
    named: dict = {}
    plans = []
    for f in schema.get("fields") or []:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            return None
        t, null_index = f.get("type"), None
        if isinstance(t, dict) and isinstance(t.get("type"), list):
            t = t["type"]
        if isinstance(t, list):
            nulls = [i for i, b in enumerate(t) if b == "null" or (isinstance(b, dict) and b.get("type") == "null")]
            if len(t) != 2 or len(nulls) != 1:
                return None
            null_index = nulls[0]
            t = t[1 - null_index]
        kind = _kind_of(t, ns, named)
        if kind is None:
            return None
        plans.append(FieldPlan(f["name"], kind[0], null_index, kind[1], kind[2]))
    return tuple(plans)


@lru_cache(maxsize=64)
def _plan_cached(schema_json: str) -> tuple[FieldPlan, ...] | None:
    return _plan(parse_avro_schema(schema_json))


def plan_for(avro_schema: str | dict) -> tuple[FieldPlan, ...] | None:
    """The field plans of a flat record schema, or None when it needs the general decoder."""
    if isinstance(avro_schema, str):
        return _plan_cached(avro_schema)
    return _plan(parse_avro_schema(avro_schema))


# -- decoding --------------------------------------------------------------------------------
def frame_records(content: bytes, where: str) -> tuple[pa.Array, pa.Array]:
    """(start, end) byte offsets of each record of an Avro data block's content (int64 arrays).

    Content: int version, int record count (version >= 2), then per record an int length and
    the record. The lengths form a chain -- where a record starts is known only once the one
    before it is measured -- so this walk is the per-record step the format forces: one
    ``unpack_from`` per record in a comprehension; every check happens on the arrays after.
    """
    n = len(content)
    if n < 4:
        raise LogFormatError(f"{where}: content too short for an Avro data block")
    (version,) = _INT.unpack_from(content, 0)
    if version < 2:  # HoodieAvroDataBlockVersion 1: no record count, records up to the end
        return _frame_uncounted(content, where)
    if n < 8:
        raise LogFormatError(f"{where}: content too short for its record count")
    (count,) = _INT.unpack_from(content, 4)
    if count < 0:
        raise LogFormatError(f"{where}: negative record count {count}")
    if count > (n - 8) // 4:
        raise LogFormatError(f"{where}: content ends before its {count} records")
    unpack = _INT.unpack_from
    pos = 8
    try:  # ends[i]: where record i ends and record i+1's length starts
        ends = [(pos := pos + 4 + unpack(content, pos)[0]) for _ in range(count)]
    except struct.error:
        ends = []
    if len(ends) != count:
        raise LogFormatError(f"{where}: content ends before its {count} records")
    if count == 0:
        empty = pa.array([], _I64)
        return empty, empty
    end = pa.array(ends, _I64)
    start = pa.concat_arrays([pa.array([12], _I64), pc.add(end.slice(0, count - 1), 4)])
    if pc.min(pc.subtract(end, start)).as_py() < 0 or ends[-1] > n:
        bad = pc.index(pc.and_(pc.greater_equal(end, start), pc.less_equal(end, n)), False).as_py()
        raise LogFormatError(f"{where}: record {bad} has an impossible length")
    return start, end


def _frame_uncounted(content: bytes, where: str) -> tuple[pa.Array, pa.Array]:
    n, pos = len(content), 4
    starts: list[int] = []
    while pos < n:
        if pos + 4 > n:
            raise LogFormatError(f"{where}: content ends inside the length of record {len(starts)}")
        (length,) = _INT.unpack_from(content, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise LogFormatError(f"{where}: record {len(starts)} has impossible length {length}")
        starts.append(pos)
        pos += length
    start = pa.array(starts, _I64)
    end = pa.concat_arrays([pc.subtract(start.slice(1), 4), pa.array([n], _I64)]) if starts else start
    return start, end


class ColumnDecoder:
    """Reads one field of every record at once, at per-record cursors over a block's content."""

    def __init__(self, content: bytes, where: str):
        self.where = where
        self.size = len(content)
        if self.size >= 1 << 31:
            raise self.fail("content over 2 GiB")
        # one zero byte past the end: finished varints read it and stay finished
        self.data = pa.py_buffer(content + b"\x00")
        self.bytes = pa.Array.from_buffers(pa.uint8(), self.size + 1, [None, self.data])
        self.sentinel = pa.scalar(self.size, _I64)

    def fail(self, what: str) -> LogFormatError:
        return LogFormatError(f"{self.where}: {what}")

    def varint(self, pos: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(unsigned value as uint64, cursor after it) of the varints at ``pos``."""
        b = pc.take(self.bytes, pos)
        after = pc.add(pos, 1)
        if pc.max(b).as_py() < 128:  # all one byte (short strings, small ints, union tags)
            return b.cast(_U64), after
        value = pc.bit_wise_and(b.cast(_U64), _u(0x7F))
        cont = pc.greater_equal(b, 128)
        step = 1
        while True:
            if step == 10:
                raise self.fail("a varint runs over 10 bytes")
            b = pc.take(self.bytes, pc.if_else(cont, pc.add(pos, step), self.sentinel))
            part = pc.shift_left(pc.bit_wise_and(b.cast(_U64), _u(0x7F)), _u(7 * step))
            value = pc.bit_wise_or(value, part)
            after = pc.add(after, cont.cast(_I64))
            step += 1
            if pc.max(b).as_py() < 128:
                return value, after
            cont = pc.greater_equal(b, 128)

    def long(self, pos: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Zig-zag decoded Avro ``long``s."""
        raw, after = self.varint(pos)
        sign = pc.subtract(_u(0), pc.bit_wise_and(raw, _u(1)))
        return pc.bit_wise_xor(pc.shift_right(raw, _u(1)), sign).view(_I64), after

    def lengths(self, pos: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Byte lengths of strings/bytes (zig-zag longs that must not be negative)."""
        raw, after = self.varint(pos)
        if pc.max(pc.bit_wise_and(raw, _u(1))).as_py():
            raise self.fail("a string or bytes length is negative")
        return pc.shift_right(raw, _u(1)).cast(_I64), after

    def gather(self, starts: pa.Array, ends: pa.Array, limit: pa.Array, dtype: pa.DataType) -> pa.Array:
        """The byte ranges ``[start, end)`` as a binary array, once each is seen to stay within
        its record (so the ranges ascend and never overlap, as :func:`_gather` needs)."""
        if pc.max(pc.subtract(ends, limit)).as_py() > 0:
            raise self.fail("a value runs past the end of its record")
        return gather(self.data, starts, ends, dtype)

    def field(self, plan: FieldPlan, pos: pa.Array, limit: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(values, cursors after them) of a required field of ``plan.kind``."""
        kind = plan.kind
        if kind in ("string", "bytes"):
            lengths, start = self.lengths(pos)
            end = pc.add(start, lengths)
            return self.gather(start, end, limit, pa.string() if kind == "string" else pa.binary()), end
        if kind in ("int", "long"):
            values, after = self.long(pos)
            if kind == "int":
                lo, hi = pc.min_max(values).values()
                if lo.as_py() < -(1 << 31) or hi.as_py() >= 1 << 31:
                    raise self.fail(f"field {plan.name!r}: an int value is out of range")
                values = values.cast(pa.int32())
            return values, after
        if kind in ("float", "double", "fixed"):
            size = plan.size if kind == "fixed" else _FLOAT_SIZE[kind]
            end = pc.add(pos, size)
            raw = self.gather(pos, end, limit, pa.binary()).cast(pa.binary(size))
            if kind != "fixed":
                raw = raw.view(pa.float32() if kind == "float" else pa.float64())
            return raw, end
        if kind == "boolean":
            b = pc.take(self.bytes, pos)
            if pc.max(b).as_py() > 1:
                raise self.fail(f"field {plan.name!r}: a boolean byte is neither 0 nor 1")
            return b.cast(pa.bool_()), pc.add(pos, 1)
        if kind == "enum":
            index, after = self.long(pos)
            lo, hi = pc.min_max(index).values()
            if lo.as_py() < 0 or hi.as_py() >= len(plan.symbols):
                raise self.fail(f"field {plan.name!r}: an enum index is out of range")
            return pc.take(pa.array(plan.symbols, pa.string()), index), after
        raise AssertionError(kind)

    def nullable(self, plan: FieldPlan, pos: pa.Array, limit: pa.Array,
                 dtype: pa.DataType) -> tuple[pa.Array, pa.Array]:
        """A field in a union with null: branch index first, the value only where not null."""
        branch = pc.take(self.bytes, pos)
        value_tag, null_tag = 2 * plan.value_index, 2 * plan.null_index  # type: ignore[operator]
        lo, hi = (v.as_py() for v in pc.min_max(branch).values())
        pos = pc.add(pos, 1)
        if lo == hi == value_tag:
            return self.field(plan, pos, limit)
        if lo == hi == null_tag:
            return pa.nulls(len(pos), dtype), pos
        present = pc.equal(branch, value_tag)
        n_present = pc.sum(present).as_py()
        if n_present + pc.sum(pc.equal(branch, null_tag)).as_py() != len(pos):
            raise self.fail(f"field {plan.name!r}: a union branch index is neither null nor value")
        if plan.kind in _VARINT_KINDS:
            return self.masked(plan, pos, limit, present, len(pos) - n_present)
        sub = pc.filter(pos, present)
        values, after = self.field(plan, sub, pc.filter(limit, present))
        moved = pc.replace_with_mask(pa.repeat(pa.scalar(0, _I64), len(pos)), present,  # type: ignore[arg-type]
                                     pc.subtract(after, sub))
        rank = pc.subtract(pc.cumulative_sum(present.cast(_I64)), 1)
        index = pc.if_else(present, rank, pa.scalar(None, _I64))
        return pc.take(values, index), pc.add(pos, moved)


    def masked(self, plan: FieldPlan, pos: pa.Array, limit: pa.Array, present: pa.Array,
               n_absent: int) -> tuple[pa.Array, pa.Array]:
        """A varint-led field where some rows are null, decoded for all rows at once: null rows
        read the zero byte past the end (a 0 that moves nothing) and get the null bitmap."""
        at = pc.if_else(present, pos, self.sentinel)
        if plan.kind in ("string", "bytes"):
            lengths, start = self.lengths(at)
            start = pc.if_else(present, start, pos)  # empty range [pos, pos): offsets ascend
            end = pc.add(start, lengths)
            values = self.gather(start, end, limit, pa.string() if plan.kind == "string" else pa.binary())
            return _with_nulls(values, present, n_absent), end
        values, after = self.field(plan, at, limit)
        return _with_nulls(values, present, n_absent), pc.if_else(present, after, pos)


_VARINT_KINDS = frozenset({"int", "long", "enum", "string", "bytes"})


def _with_nulls(values: pa.Array, present: pa.Array, n_absent: int) -> pa.Array:
    """``values`` with ``present``'s bits as validity bitmap (both fresh, offset 0, no nulls)."""
    if values.offset or present.offset or values.null_count or present.null_count:
        return pc.if_else(present, values, pa.scalar(None, values.type))
    buffers = values.buffers()
    return pa.Array.from_buffers(values.type, len(values), [present.buffers()[1]] + buffers[1:],
                                 null_count=n_absent)


def decode_columns(content: bytes, plans: Sequence[FieldPlan], storage: pa.Schema, where: str,
                   frames: tuple[pa.Array, pa.Array] | None = None) -> pa.Table:
    """Records of an Avro data block's content as a table of ``storage`` (Avro storage types);
    ``frames``: :func:`frame_records` of the content, when the caller framed it already."""
    pos, limit = frames if frames is not None else frame_records(content, where)
    if len(pos) == 0:
        return storage.empty_table()
    dec = ColumnDecoder(content, where)
    columns = []
    try:
        for plan, field in zip(plans, storage):
            if plan.null_index is None:
                values, pos = dec.field(plan, pos, limit)
            else:
                values, pos = dec.nullable(plan, pos, limit, field.type)
            columns.append(values)
        if not pc.all(pc.equal(pos, limit)).as_py():
            bad = pc.index(pc.equal(pos, limit), False).as_py()
            raise dec.fail(f"record {bad} does not match its length")
    except pa.ArrowInvalid as exc:  # invalid UTF-8 in a string
        raise dec.fail(f"records cannot be decoded: {exc}") from exc
    except IndexError as exc:  # a cursor past the content
        raise dec.fail(f"records cannot be decoded: {exc}") from exc
    return pa.Table.from_arrays(columns, schema=storage)


# -- encoding --------------------------------------------------------------------------------
_VARINT_LIMITS = [pa.scalar(1 << (7 * k), _U64) for k in range(1, 10)]


def _varints(values: pa.Array) -> pa.Array:
    """Unsigned values -> binary array of their Avro varint bytes (nulls stay null)."""
    n = len(values)
    z = pc.fill_null(values, pa.scalar(0, values.type)) if values.null_count else values
    top = pc.max(z).as_py() or 0
    width = 1
    while width < 10 and top >= 1 << (7 * width):
        width += 1
    if width == 1:  # every value is one byte: the value itself
        return _with_validity(z.cast(pa.uint8()).view(pa.binary(1)).cast(pa.binary()), values)
    words = []
    lengths = pa.repeat(pa.scalar(1, _I64), n)  # type: ignore[arg-type]
    for k in range(1, width):
        lengths = pc.add(lengths, pc.greater_equal(z, _VARINT_LIMITS[k - 1]).cast(_I64))
    for w0 in range(0, width, 8):  # bytes 0-7 in one word, 8-9 in a second
        word = None
        for k in range(w0, min(width, w0 + 8)):
            group = pc.bit_wise_and(pc.shift_right(z, _u(7 * k)), _u(0x7F))
            if k + 1 < width:
                group = pc.bit_wise_or(group, pc.multiply(
                    pc.greater_equal(z, _VARINT_LIMITS[k]).cast(_U64), _u(0x80)))
            group = pc.shift_left(group, _u(8 * (k - w0)))
            word = group if word is None else pc.bit_wise_or(word, group)
        words.append(word)
    if len(words) == 1:
        data, stride = words[0].buffers()[1], 8
    else:  # interleave the two words per row: row-major 16 bytes
        data, stride = _interleave_u64(words[0], words[1]), 16
    starts = row_offsets(n, stride)
    out = gather(data, starts, pc.add(starts, lengths), pa.binary())
    return _with_validity(out, values)


def row_offsets(n: int, stride: int) -> pa.Array:
    """0, stride, 2 * stride, ... (n values)."""
    ones = pa.repeat(pa.scalar(stride, _I64), n)  # type: ignore[arg-type]
    return pc.subtract(pc.cumulative_sum(ones), stride)


def _interleave_u64(a: pa.Array, b: pa.Array) -> pa.Buffer:
    n = len(a)
    idx = pc.add(pc.shift_right(row_offsets(2 * n, 1), 1),
                 pc.multiply(pc.bit_wise_and(row_offsets(2 * n, 1), 1), n))
    return pc.take(pa.concat_arrays([a, b]), idx).buffers()[1]


def _with_validity(out: pa.Array, like: pa.Array) -> pa.Array:
    if not like.null_count:
        return out
    return pc.if_else(pc.is_valid(like), out, pa.scalar(None, out.type))


def _zigzag(values: pa.Array) -> pa.Array:
    v = values.cast(_I64)
    # (v << 1) ^ (v >> 63); Arrow leaves a signed int64 unshifted by 63, so the sign mask is built
    sign = pc.negate(pc.less(v, 0).cast(_I64))
    return pc.bit_wise_xor(pc.shift_left(v, 1), sign).view(_U64)


def _field_parts(plan: FieldPlan, col: pa.Array) -> list:
    """Per-row Avro bytes of one field's values, as binary arrays to concatenate (null where
    the value is null)."""
    kind = plan.kind
    if kind in ("int", "long"):
        return [_varints(_zigzag(col))]
    if kind in ("string", "bytes"):
        raw = col.cast(pa.binary())
        return [_varints(_zigzag(pc.binary_length(raw))), raw]
    if kind == "float":
        return [col.cast(pa.float32()).view(pa.binary(4)).cast(pa.binary())]
    if kind == "double":
        return [col.cast(pa.float64()).view(pa.binary(8)).cast(pa.binary())]
    if kind == "fixed":
        if plan.size and not pc.all(pc.equal(pc.binary_length(col), plan.size)).as_py():
            raise SchemaError(f"field {plan.name!r}: a value is not {plan.size} bytes long")
        return [col.cast(pa.binary())]
    if kind == "boolean":
        return [pc.if_else(col, pa.scalar(b"\x01", pa.binary()), pa.scalar(b"\x00", pa.binary()))]
    if kind == "enum":
        index = pc.index_in(col, value_set=pa.array(plan.symbols, pa.string()))
        if index.null_count != col.null_count:
            raise SchemaError(f"field {plan.name!r}: a value is not one of the enum's symbols")
        return [_varints(_zigzag(index))]
    raise AssertionError(kind)


_EMPTY = pa.scalar(b"", pa.binary())


def encode_rows(storage: pa.Table, plans: Sequence[FieldPlan], framed: bool = False) -> pa.Array:
    """Each row of ``storage`` (Avro storage types, schema order) as its Avro record bytes; with
    ``framed``, each preceded by its length as a big-endian int32 (the data block layout).

    All fields' parts go into one ``binary_join_element_wise``, so every byte is copied once.
    """
    n = storage.num_rows
    if n == 0:
        return pa.array([], pa.binary())
    parts: list = []
    for plan, col in zip(plans, storage.columns):
        arr = one_array(col)
        if plan.null_index is None:
            if arr.null_count:
                raise SchemaError(f"column {plan.name!r} has nulls but the Avro schema requires a value")
            parts += _field_parts(plan, arr)
            continue
        value_tag = pa.scalar(bytes([2 * plan.value_index]), pa.binary())
        null_tag = pa.scalar(bytes([2 * plan.null_index]), pa.binary())
        if arr.null_count == n:
            parts.append(null_tag)
        elif arr.null_count == 0:
            parts += [value_tag] + _field_parts(plan, arr)
        else:
            parts.append(pc.if_else(pc.is_valid(arr), value_tag, null_tag))
            parts += [pc.fill_null(p, _EMPTY) for p in _field_parts(plan, arr)]
    arrays = [p for p in parts if isinstance(p, pa.Array)]
    if framed:
        length = sum(len(p.as_py()) for p in parts if not isinstance(p, pa.Array))
        for p in arrays:
            length = pc.add(length, pc.binary_length(p))
        parts.insert(0, _be_int32(length if arrays else pa.repeat(pa.scalar(length, pa.int32()), n)))
    if not any(isinstance(p, pa.Array) for p in parts):
        return pa.repeat(pa.scalar(b"".join(p.as_py() for p in parts), pa.binary()), n)  # type: ignore[return-value]
    try:
        return pc.binary_join_element_wise(*parts, _EMPTY)
    except (pa.ArrowCapacityError, pa.ArrowInvalid) as exc:  # offsets past 2 GiB
        raise LogFormatError(f"{n} records of {sum(p.nbytes for p in arrays)} bytes do not fit one "
                             f"Avro data block (Java reads at most 2 GiB): {exc}") from exc


def _be_int32(values: pa.Array) -> pa.Array:
    """int32 values -> their 4 big-endian bytes, as a binary array."""
    return pc.binary_reverse(values.cast(pa.int32()).view(pa.binary(4)).cast(pa.binary()))


def frame_rows(records: pa.Array) -> pa.Array:
    """Each record preceded by its length as a big-endian int32."""
    return pc.binary_join_element_wise(_be_int32(pc.binary_length(records)), records, _EMPTY)


def binary_data(arr: pa.Array) -> bytes:
    """The concatenated values of a binary array without nulls."""
    if len(arr) == 0:
        return b""
    offsets = pa.Array.from_buffers(pa.int32(), len(arr) + 1, [None, arr.buffers()[1]], offset=arr.offset)
    lo, hi = offsets[0].as_py(), offsets[len(arr)].as_py()
    return arr.buffers()[2][lo:hi].to_pybytes()
