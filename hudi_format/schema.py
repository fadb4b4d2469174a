"""Avro <-> Arrow schemas, and decoded Avro records -> Arrow tables.

Hudi describes every table, commit and log block with an Avro schema, while base files are
Parquet that pyarrow reads into Arrow. Records from log blocks are merged with base-file rows,
so both sides must land on *identical* Arrow types: this module maps Avro to exactly what
pyarrow reads from a Spark/Hudi-written Parquet file (``timestamp-micros`` ->
``timestamp[us, tz=UTC]``, decimals -> ``decimal128``, ...), and maps Arrow back to the Avro
shape Hudi itself writes into commit metadata and log block headers (``["null", T]`` unions
with ``"default": null``, decimals as ``fixed`` named ``fixed`` in a per-field namespace).

Log blocks are decoded with logical types switched off (raw ints/bytes, no Python ``Decimal``
or ``datetime`` per value) and turned into logical Arrow types column-wise afterwards; see
:class:`AvroArrowConverter`.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from .errors import SchemaError, UnsupportedFeatureError

__all__ = ["avro_to_arrow_schema", "arrow_to_avro_schema", "avro_records_to_arrow",
           "AvroArrowConverter", "parse_avro_schema", "strip_json_comments"]

_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
_TS_UNITS = {"timestamp-millis": ("ms", "UTC"), "timestamp-micros": ("us", "UTC"),
             "timestamp-nanos": ("ns", "UTC"), "local-timestamp-millis": ("ms", None),
             "local-timestamp-micros": ("us", None), "local-timestamp-nanos": ("ns", None)}
LIST_ITEM_NAME = "element"  # what Spark and parquet's standard LIST layout call list items


# -- parsing helpers ---------------------------------------------------------------------------
def strip_json_comments(text: str) -> str:
    """Drop ``//`` and ``/* */`` comments outside JSON strings (Hudi's .avsc files carry them)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_avro_schema(avro_schema: str | dict | list) -> Any:
    """A schema given as JSON text (comments allowed) or already parsed."""
    if isinstance(avro_schema, (dict, list)):
        return avro_schema
    if not isinstance(avro_schema, str):
        raise SchemaError(f"an Avro schema must be JSON text or a dict, got {type(avro_schema).__name__}")
    try:
        return json.loads(strip_json_comments(avro_schema))
    except ValueError as exc:
        raise SchemaError(f"invalid Avro schema JSON: {exc}") from exc


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _null_split(branches: list) -> tuple[list, bool]:
    non_null = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    return non_null, len(non_null) != len(branches)


# -- Avro -> Arrow ---------------------------------------------------------------------------
class _AvroToArrow:
    """One walk over an Avro schema producing the logical Arrow type and the "storage" type.

    The storage type is what pyarrow builds from values decoded *without* logical types
    (decimal -> binary, timestamp -> int64, date -> int32); :func:`_restore` turns storage
    arrays into logical ones. Named types are tracked so references by name resolve.
    """

    def __init__(self):
        self.named: dict[str, Any] = {}
        self._building: set[str] = set()

    def type_of(self, s: Any, ns: str | None, path: str) -> tuple[pa.DataType, pa.DataType, bool]:
        """(logical type, storage type, nullable) of Avro schema ``s``."""
        if isinstance(s, list):
            non_null, has_null = _null_split(s)
            if len(non_null) == 1:
                logical, storage, inner_null = self.type_of(non_null[0], ns, path)
                return logical, storage, has_null or inner_null
            if not non_null:
                return pa.null(), pa.null(), True
            # Spark/parquet-avro store a general union as a struct of member0, member1, ...
            fields, sfields = [], []
            for i, b in enumerate(non_null):
                logical, storage, _ = self.type_of(b, ns, f"{path}.member{i}")
                fields.append(pa.field(f"member{i}", logical))
                sfields.append(pa.field(f"member{i}", storage))
            return pa.struct(fields), pa.struct(sfields), has_null
        if isinstance(s, str):
            if s in _PRIMITIVES:
                return _PRIMITIVES[s], _PRIMITIVES[s], s == "null"
            keys = (_fullname(s, ns), s)
            if any(k in self._building for k in keys):
                raise UnsupportedFeatureError(f"recursive Avro type {s!r} at {path!r} has no Arrow equivalent")
            for k in keys:
                if k in self.named:
                    return self.named[k]
            # lenient: a short name defined once under another namespace
            matches = [v for k, v in self.named.items() if k.rpartition(".")[2] == s]
            if len(matches) == 1:
                return matches[0]
            raise SchemaError(f"Avro schema at {path!r} refers to unknown type {s!r}")
        if not isinstance(s, dict) or "type" not in s:
            raise SchemaError(f"invalid Avro schema at {path!r}: {s!r}")
        t, logical_type = s["type"], s.get("logicalType")
        if isinstance(t, (list, dict)):
            return self.type_of(t, ns, path)
        if t == "record" or t == "error":
            return self._record(s, ns, path)
        if t == "enum":
            self._register(s, ns, (pa.string(), pa.string(), False))
            return pa.string(), pa.string(), False
        if t == "array":
            item_l, item_s, item_null = self.type_of(s.get("items"), ns, f"{path}[]")
            return (pa.list_(pa.field(LIST_ITEM_NAME, item_l, item_null)),
                    pa.list_(pa.field(LIST_ITEM_NAME, item_s, item_null)), False)
        if t == "map":
            val_l, val_s, val_null = self.type_of(s.get("values"), ns, f"{path}{{}}")
            return (pa.map_(pa.string(), pa.field("value", val_l, val_null)),
                    pa.map_(pa.string(), pa.field("value", val_s, val_null)), False)
        if t == "fixed":
            size = s.get("size")
            if not isinstance(size, int) or size < 0:
                raise SchemaError(f"Avro fixed type at {path!r} has no valid size")
            storage = pa.binary(size)
            logical = storage
            if logical_type == "decimal":
                logical = _decimal_type(s, path)
            result = (logical, storage, False)
            self._register(s, ns, result)
            return result
        if t not in _PRIMITIVES:
            return self.type_of(t, ns, path)  # a named type written as {"type": "Name"}
        storage = _PRIMITIVES[t]
        logical = storage
        if logical_type == "decimal" and t == "bytes":
            logical = _decimal_type(s, path)
        elif logical_type == "date" and t == "int":
            logical = pa.date32()
        elif logical_type in _TS_UNITS and t == "long":
            unit, tz = _TS_UNITS[logical_type]
            logical = pa.timestamp(unit, tz=tz)
        elif logical_type == "time-millis" and t == "int":
            logical = pa.time32("ms")
        elif logical_type == "time-micros" and t == "long":
            logical = pa.time64("us")
        # uuid (string) stays a string; unknown logical types fall back to their Avro type
        return logical, storage, t == "null"

    def _register(self, s: dict, ns: str | None, result) -> None:
        name = s.get("name")
        if isinstance(name, str):
            self.named[_fullname(name, s.get("namespace", ns))] = result

    def _record(self, s: dict, ns: str | None, path: str):
        name = s.get("name")
        if not isinstance(name, str):
            raise SchemaError(f"Avro record at {path!r} has no name")
        full = _fullname(name, s.get("namespace", ns))
        child_ns = full.rpartition(".")[0] or None
        self._building.add(full)  # a reference to ``full`` from inside is a recursion
        fields, sfields = [], []
        for f in s.get("fields") or []:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise SchemaError(f"invalid field in Avro record {full!r}: {f!r}")
            logical, storage, nullable = self.type_of(f["type"], child_ns, f"{path}.{f['name']}")
            fields.append(pa.field(f["name"], logical, nullable))
            sfields.append(pa.field(f["name"], storage, nullable))
        self._building.discard(full)
        result = (pa.struct(fields), pa.struct(sfields), False)
        self.named[full] = result
        return result


def _decimal_type(s: dict, path: str) -> pa.DataType:
    precision, scale = s.get("precision"), s.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or precision < 1 or scale < 0:
        raise SchemaError(f"Avro decimal at {path!r} has invalid precision/scale")
    if precision <= 38:
        return pa.decimal128(precision, scale)
    if precision <= 76:
        return pa.decimal256(precision, scale)
    raise SchemaError(f"Avro decimal at {path!r}: precision {precision} exceeds 76")


def _top_record(avro_schema) -> tuple[pa.DataType, pa.DataType]:
    s = parse_avro_schema(avro_schema)
    if not (isinstance(s, dict) and s.get("type") == "record"):
        raise SchemaError("the top-level Avro schema must be a record")
    logical, storage, _ = _AvroToArrow().type_of(s, None, s.get("name", "record"))
    return logical, storage


def avro_to_arrow_schema(avro_schema: str | dict) -> pa.Schema:
    """The Arrow schema pyarrow would read from a Parquet file Hudi wrote with this Avro schema.

    Nullable unions become nullable fields; list items are named ``element``.
    """
    logical, _ = _top_record(avro_schema)
    return pa.schema(list(logical))


# -- Arrow -> Avro ---------------------------------------------------------------------------
def _min_bytes_for_precision(precision: int) -> int:
    """Smallest fixed size holding any unscaled value of ``precision`` digits (as Spark sizes it)."""
    n = 1
    while 2 ** (8 * n - 1) < 10 ** precision:
        n += 1
    return n


def _arrow_to_avro_type(t: pa.DataType, name: str, ns: str) -> Any:
    """Avro type for Arrow type ``t`` of field ``name`` inside record namespace ``ns``.

    Follows Spark's naming: a nested record is named after its field in the parent record's
    namespace; a decimal is ``fixed`` named ``fixed`` in namespace ``<parent>.<field>``.
    """
    if pa.types.is_dictionary(t):
        return _arrow_to_avro_type(t.value_type, name, ns)
    if isinstance(t, pa.ExtensionType):
        return _arrow_to_avro_type(t.storage_type, name, ns)
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) \
            or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{ns}.{name}", "size": t.byte_width}
    if pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{ns}.{name}",
                "size": _min_bytes_for_precision(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        # Spark and Hudi only know micros; ms keeps its own logical type, s/ns are written as micros.
        unit = "millis" if t.unit == "ms" else "micros"
        prefix = "timestamp" if t.tz is not None else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_struct(t):
        return _record_schema(list(t), name, ns)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or getattr(pa.types, "is_list_view", lambda _: False)(t) \
            or getattr(pa.types, "is_large_list_view", lambda _: False)(t):
        vf = t.value_field
        items = _arrow_to_avro_type(vf.type, name, ns)
        return {"type": "array", "items": ["null", items] if vf.nullable else items}
    if pa.types.is_map(t):
        if _arrow_to_avro_type(t.key_type, name, ns) != "string":
            raise SchemaError(f"column {name!r}: Avro maps need string keys, got {t.key_type}")
        vf = t.item_field
        values = _arrow_to_avro_type(vf.type, name, ns)
        return {"type": "map", "values": ["null", values] if vf.nullable else values}
    raise SchemaError(f"column {name!r}: Arrow type {t} has no Avro equivalent in Hudi")


def _avro_field(f: pa.Field, ns: str) -> dict:
    t = _arrow_to_avro_type(f.type, f.name, ns)
    if f.nullable and t != "null":
        return {"name": f.name, "type": ["null", t], "default": None}
    return {"name": f.name, "type": t}


def _record_schema(fields: Iterable[pa.Field], name: str, ns: str) -> dict:
    full = f"{ns}.{name}" if ns else name
    return {"type": "record", "name": name, "namespace": ns,
            "fields": [_avro_field(f, full) for f in fields]}


def arrow_to_avro_schema(schema: pa.Schema, record_name: str, namespace: str) -> dict:
    """Avro schema for ``schema`` in the shape Hudi writes to commit metadata and log headers.

    Nullable fields become ``["null", T]`` with ``"default": null``; for a table ``t`` Hudi
    uses ``record_name="t_record"`` and ``namespace="hoodie.t"``.
    """
    if not isinstance(schema, pa.Schema):
        schema = pa.schema(schema)
    return _record_schema(list(schema), record_name, namespace)


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


def _restore(arr: pa.Array, logical: pa.DataType) -> pa.Array:
    """Turn an array of Avro storage values into its logical Arrow type."""
    if arr.type == logical:
        return arr
    if pa.types.is_decimal(logical):
        return _decimal_from_twos_complement(arr, logical)
    if pa.types.is_struct(logical):
        children = [_restore(arr.field(i), logical.field(i).type) for i in range(logical.num_fields)]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(logical), mask=mask)
    if pa.types.is_map(logical):
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, _restore(arr.items, logical.item_type),
                                       type=logical, mask=mask)
    if pa.types.is_list(logical):
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, _restore(arr.values, logical.value_type),
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
        logical, storage = _top_record(self.avro_schema)
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
        if self.storage_schema.equals(self.arrow_schema):
            return table
        cols = []
        for field, col in zip(self.arrow_schema, table.columns):
            chunk = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            cols.append(_restore(chunk, field.type))
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
        if len(_null_split(s)[0]) > 1:
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
__all__ += ["align_to_avro_schema", "arrow_to_avro_storage", "arrow_to_avro_records"]


def _big_endian_unscaled(arr: pa.Array) -> tuple[pa.Array, int]:
    """decimal128/256 -> (binary array of the full-width big-endian two's complement, width)."""
    width = 16 if pa.types.is_decimal128(arr.type) else 32
    return pc.binary_reverse(arr.view(pa.binary(width)).cast(pa.binary())), width


def _decimal_to_twos_complement(arr: pa.Array, storage: pa.DataType) -> pa.Array:
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
        if not pc.all(pc.equal(head, expected)).as_py() in (True, None):
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
        return _decimal_to_twos_complement(arr, storage)
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
