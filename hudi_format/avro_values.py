"""Decoded Avro values <-> Arrow columns, for log blocks and the metadata table.

Log blocks are decoded with logical types switched off (raw ints/bytes, no Python ``Decimal``
or ``datetime`` per value) and turned into logical Arrow types column-wise afterwards (see
:class:`AvroArrowConverter`); writers go the other way, turning logical Arrow columns into the
storage types Avro encodes (decimals as big-endian two's complement, timestamps as longs).
The schemas themselves are mapped in :mod:`hudi_format.schema`.
"""

from __future__ import annotations

import copy
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .chunks import one_array
from .errors import SchemaError, UnsupportedFeatureError
from .schema import avro_to_arrow_schema, null_split, parse_avro_schema, top_record

__all__ = ["avro_records_to_arrow", "AvroArrowConverter", "align_to_avro_schema", "arrow_to_avro_storage",
           "arrow_to_avro_records", "restore_logical", "decimal_to_twos_complement"]


# -- decoded Avro values -> Arrow ------------------------------------------------------------
def _strip_logical_types(s: Any) -> Any:
    if isinstance(s, list):
        return [_strip_logical_types(b) for b in s]
    if isinstance(s, dict):
        out = {k: v for k, v in s.items() if k != "logicalType"}
        if "type" in out and not isinstance(out["type"], str):
            out["type"] = _strip_logical_types(out["type"])
        if isinstance(s.get("fields"), list):
            out["fields"] = [dict(f, type=_strip_logical_types(f.get("type"))) if isinstance(f, dict)
                             else f for f in s["fields"]]
        for key in ("items", "values"):
            if key in out:
                out[key] = _strip_logical_types(out[key])
        return out
    return s


def _decimal_from_twos_complement(arr: pa.Array, dtype: pa.DataType) -> pa.Array:
    """Big-endian two's-complement unscaled values (Avro decimal) -> decimal128/256.

    Done with Arrow compute: reverse to little-endian, sign-extend to the decimal's width,
    then reinterpret the fixed-width bytes as decimals.
    """
    width = 16 if pa.types.is_decimal128(dtype) else 32
    if len(arr) == 0:
        return pa.array([], dtype)
    if not pa.types.is_binary(arr.type):
        arr = arr.cast(pa.binary())
    lengths = pc.binary_length(arr)
    longest = pc.max(lengths).as_py()
    if longest is not None and longest > width:
        raise SchemaError(f"decimal value of {longest} bytes does not fit {dtype}")
    negative = pc.greater_equal(pc.binary_slice(arr, 0, 1), pa.scalar(b"\x80", pa.binary()))
    pad = pc.binary_repeat(pc.if_else(negative, pa.scalar(b"\xff", pa.binary()),
                                      pa.scalar(b"\x00", pa.binary())),
                           pc.subtract(pa.scalar(width, pa.int32()), lengths))
    little_endian = pc.binary_join_element_wise(pc.binary_reverse(arr), pad, b"")
    return little_endian.cast(pa.binary(width)).view(dtype)


def restore_logical(arr: pa.Array, logical: pa.DataType) -> pa.Array:
    """Turn an array of Avro storage values into its logical Arrow type."""
    if arr.type == logical:
        return arr
    if pa.types.is_decimal(logical):
        return _decimal_from_twos_complement(arr, logical)
    if pa.types.is_struct(logical):
        children = [restore_logical(arr.field(i), logical.field(i).type) for i in range(logical.num_fields)]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(logical), mask=mask)
    if pa.types.is_map(logical):
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, restore_logical(arr.items, logical.item_type),
                                       type=logical, mask=mask)
    if pa.types.is_list(logical):
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, restore_logical(arr.values, logical.value_type),
                                        type=logical, mask=mask)
    return arr.cast(logical)  # ints -> timestamp/date/time


class AvroArrowConverter:
    """Everything needed to turn Avro-encoded records of one schema into Arrow, built once.

    ``raw_schema`` is the Avro schema with logical types removed, for decoders (fastavro) that
    should hand back plain ints/bytes; :meth:`raw_to_arrow` builds the Arrow table from such
    rows; :meth:`to_arrow` accepts rows with decoded logical values (Decimal, datetime, ...).
    """

    def __init__(self, avro_schema: str | dict):
        self.avro_schema = parse_avro_schema(avro_schema)
        logical, storage = top_record(self.avro_schema)
        self.arrow_schema = pa.schema(list(logical))
        self.storage_schema = pa.schema(list(storage))
        self.raw_schema = _strip_logical_types(copy.deepcopy(self.avro_schema))
        self._general_union = _has_multi_union(self.avro_schema)

    def _check_unions(self) -> None:
        if self._general_union:
            raise UnsupportedFeatureError(
                "records whose Avro schema has a union of several non-null types are not supported yet")

    def raw_to_arrow(self, rows: list[dict]) -> pa.Table:
        """Rows decoded against :attr:`raw_schema` -> table of :attr:`arrow_schema`."""
        self._check_unions()
        try:
            table = pa.Table.from_pylist(rows, schema=self.storage_schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise SchemaError(f"Avro records do not match their schema: {exc}") from exc
        return self.storage_to_arrow(table)

    def storage_to_arrow(self, table: pa.Table) -> pa.Table:
        """A table of :attr:`storage_schema` (raw Avro values) -> table of :attr:`arrow_schema`."""
        if self.storage_schema.equals(self.arrow_schema):
            return table
        cols = []
        for field, col in zip(self.arrow_schema, table.columns):
            chunk = one_array(col)
            cols.append(restore_logical(chunk, field.type))
        return pa.Table.from_arrays(cols, schema=self.arrow_schema)

    def to_arrow(self, records: list[dict]) -> pa.Table:
        """Rows with logical values as fastavro decodes them by default -> Arrow table."""
        self._check_unions()
        uuid_free = [_normalise_value(r) for r in records] if _needs_normalising(self.avro_schema) \
            else records
        try:
            return pa.Table.from_pylist(uuid_free, schema=self.arrow_schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise SchemaError(f"Avro records do not match their schema: {exc}") from exc


def _has_multi_union(s: Any) -> bool:
    if isinstance(s, list):
        if len(null_split(s)[0]) > 1:
            return True
        return any(_has_multi_union(b) for b in s)
    if isinstance(s, dict):
        if isinstance(s.get("fields"), list):
            if any(isinstance(f, dict) and _has_multi_union(f.get("type")) for f in s["fields"]):
                return True
        return any(_has_multi_union(s[k]) for k in ("type", "items", "values")
                   if k in s and not isinstance(s[k], str))
    return False


def _needs_normalising(s: Any) -> bool:
    """Whether the schema uses the ``uuid`` logical type anywhere."""
    if isinstance(s, list):
        return any(_needs_normalising(b) for b in s)
    if isinstance(s, dict):
        if s.get("logicalType") == "uuid":
            return True
        if any(_needs_normalising(f.get("type")) for f in s.get("fields") or [] if isinstance(f, dict)):
            return True
        return any(_needs_normalising(s[k]) for k in ("type", "items", "values")
                   if k in s and not isinstance(s[k], str))
    return False


def _normalise_value(v: Any) -> Any:
    """fastavro decodes the ``uuid`` logical type to ``uuid.UUID``; Arrow wants the string."""
    if isinstance(v, dict):
        return {k: _normalise_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_normalise_value(x) for x in v]
    if type(v).__name__ == "UUID":
        return str(v)
    return v


def avro_records_to_arrow(records: list[dict], avro_schema: str | dict) -> pa.Table:
    """Records decoded by an Avro reader (Decimal, datetime, date, bytes, ...) -> Arrow table.

    The table has :func:`avro_to_arrow_schema` of ``avro_schema``.
    """
    return AvroArrowConverter(avro_schema).to_arrow(records)


# -- Arrow -> Avro records (for writers) -------------------------------------------------------


def _big_endian_unscaled(arr: pa.Array) -> tuple[pa.Array, int]:
    """decimal128/256 -> (binary array of the full-width big-endian two's complement, width)."""
    width = 16 if pa.types.is_decimal128(arr.type) else 32
    return pc.binary_reverse(arr.view(pa.binary(width)).cast(pa.binary())), width


def decimal_to_twos_complement(arr: pa.Array, storage: pa.DataType) -> pa.Array:
    """decimal128/256 -> Avro decimal bytes: big-endian two's complement of the unscaled value.

    A ``fixed(N)`` decimal is sign-extended to exactly N bytes (Avro's ``toFixed``); a ``bytes``
    decimal gets the minimal two's complement (Java's ``BigInteger.toByteArray``), so both match
    what Avro Java writes byte for byte.
    """
    if len(arr) == 0:
        return pa.array([], storage)
    full, width = _big_endian_unscaled(arr)
    if pa.types.is_fixed_size_binary(storage):
        size = storage.byte_width
        if size >= width:
            return full.cast(storage) if size == width else _sign_extend(full, size - width, storage)
        head = pc.binary_slice(full, 0, width - size)
        tail = pc.binary_slice(full, width - size, width)
        negative = pc.greater_equal(pc.binary_slice(tail, 0, 1), pa.scalar(b"\x80", pa.binary()))
        expected = pc.if_else(negative, pa.scalar(b"\xff" * (width - size), pa.binary()),
                              pa.scalar(b"\x00" * (width - size), pa.binary()))
        if pc.all(pc.equal(head, expected)).as_py() not in (True, None):
            raise SchemaError(f"a decimal value does not fit the Avro fixed({size}) it is written to")
        return tail.cast(storage)
    # minimal length: drop a leading byte while it only repeats the sign of the next one
    out = full
    zero, ff, high = (pa.scalar(b"\x00", pa.binary()), pa.scalar(b"\xff", pa.binary()),
                      pa.scalar(b"\x80", pa.binary()))
    for _ in range(width - 1):
        first, second = pc.binary_slice(out, 0, 1), pc.binary_slice(out, 1, 2)
        second_negative = pc.greater_equal(second, high)
        droppable = pc.and_(pc.greater(pc.binary_length(out), 1), pc.or_(
            pc.and_(pc.equal(first, zero), pc.invert(second_negative)),
            pc.and_(pc.equal(first, ff), second_negative)))
        if not pc.any(droppable).as_py():
            break
        out = pc.if_else(droppable, pc.binary_slice(out, 1, width), out)
    return out.cast(storage) if storage != pa.binary() else out


def _sign_extend(full: pa.Array, extra: int, storage: pa.DataType) -> pa.Array:
    negative = pc.greater_equal(pc.binary_slice(full, 0, 1), pa.scalar(b"\x80", pa.binary()))
    pad = pc.if_else(negative, pa.scalar(b"\xff" * extra, pa.binary()),
                     pa.scalar(b"\x00" * extra, pa.binary()))
    return pc.binary_join_element_wise(pad, full, b"").cast(storage)


def _to_storage(arr: pa.Array, logical: pa.DataType, storage: pa.DataType) -> pa.Array:
    """An array of ``logical`` type -> the Avro storage form (inverse of :func:`_restore`)."""
    if logical.equals(storage):
        return arr
    if pa.types.is_decimal(logical):
        return decimal_to_twos_complement(arr, storage)
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(logical):
        children = [_to_storage(arr.field(i), logical.field(i).type, storage.field(i).type)
                    for i in range(logical.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(storage), mask=mask)
    if pa.types.is_map(logical):
        items = _to_storage(arr.items, logical.item_type, storage.item_type)
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=storage, mask=mask)
    if pa.types.is_list(logical):
        values = _to_storage(arr.values, logical.value_type, storage.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=storage, mask=mask)
    return arr.cast(storage)  # timestamp/date/time -> their int storage


def _align_for_avro(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the columns of ``schema`` in its order, cast to its types."""
    extra = [n for n in table.column_names if schema.get_field_index(n) < 0]
    if extra:
        raise SchemaError(f"columns {extra} are not in the Avro schema "
                          f"(fields: {schema.names})")
    columns = []
    for field in schema:
        idx = table.schema.get_field_index(field.name)
        if idx < 0:
            if not field.nullable:
                raise SchemaError(f"required column {field.name!r} is missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        col = table.column(idx)
        if not col.type.equals(field.type):
            try:
                col = col.cast(field.type)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise SchemaError(f"column {field.name!r} of type {col.type} cannot be written "
                                  f"as {field.type}: {exc}") from exc
        if not field.nullable and col.null_count:
            raise SchemaError(f"column {field.name!r} has nulls but the Avro schema requires a value")
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def align_to_avro_schema(table: pa.Table, avro_schema: str | dict) -> pa.Table:
    """``table`` with exactly the fields of ``avro_schema``, in order, as logical Arrow types.

    Columns are cast to :func:`avro_to_arrow_schema` of the schema and missing nullable ones
    become null; a column the schema lacks, a missing required column or a null in a required
    column raises :class:`SchemaError`.
    """
    return _align_for_avro(table, avro_to_arrow_schema(avro_schema))


def arrow_to_avro_storage(table: pa.Table, avro_schema: str | dict) -> pa.Table:
    """``table`` aligned to ``avro_schema`` with every value in its Avro storage form.

    Columns come in the schema's field order, cast to the logical Arrow types
    (:func:`avro_to_arrow_schema`), missing nullable columns become null; then timestamps,
    dates and times turn into their ints, decimals into two's-complement bytes (``fixed``
    sign-extended, ``bytes`` minimal, as Avro Java writes them). Columns the schema lacks raise
    :class:`SchemaError`.
    """
    conv = AvroArrowConverter(avro_schema)
    conv._check_unions()
    aligned = _align_for_avro(table, conv.arrow_schema)
    if conv.storage_schema.equals(conv.arrow_schema):
        return aligned
    cols = []
    for lf, sf, col in zip(conv.arrow_schema, conv.storage_schema, aligned.columns):
        if col.num_chunks > 1:  # many small chunks cost far more than one copy
            try:
                col = pa.chunked_array([col.combine_chunks()])
            except (pa.ArrowException, OverflowError):  # over 2 GiB in one array: keep chunks
                pass
        chunks = [_to_storage(c, lf.type, sf.type) for c in col.chunks]
        cols.append(pa.chunked_array(chunks, type=sf.type))
    return pa.Table.from_arrays(cols, schema=conv.storage_schema)


def arrow_to_avro_records(table: pa.Table, avro_schema: str | dict) -> list[dict]:
    """Rows of ``table`` as the dicts an Avro writer (fastavro) takes for ``avro_schema``.

    Values are in Avro storage form (see :func:`arrow_to_avro_storage`): ints for timestamps,
    dates and times, bytes for decimals, dicts for maps and records. fastavro writes them
    unchanged under the schema with or without its logical types.
    """
    return arrow_to_avro_storage(table, avro_schema).to_pylist(maps_as_pydicts="strict")
