"""Avro <-> Arrow schemas.

Hudi describes every table, commit and log block with an Avro schema, while base files are
Parquet that pyarrow reads into Arrow. Records from log blocks are merged with base-file rows,
so both sides must land on *identical* Arrow types: this module maps Avro to exactly what
pyarrow reads from a Spark/Hudi-written Parquet file (``timestamp-micros`` ->
``timestamp[us, tz=UTC]``, decimals -> ``decimal128``, ...), and maps Arrow back to the Avro
shape Hudi itself writes into commit metadata and log block headers (``["null", T]`` unions
with ``"default": null``, decimals as ``fixed`` named ``fixed`` in a per-field namespace).

Values (decoded Avro records <-> Arrow columns) are converted in :mod:`hudi_format.avro_values`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

import pyarrow as pa

from .errors import SchemaError, UnsupportedFeatureError

__all__ = ["avro_to_arrow_schema", "arrow_to_avro_schema", "parse_avro_schema", "strip_json_comments",
           "fullname", "null_split", "top_record", "table_record_name"]

_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
_TS_UNITS = {"timestamp-millis": ("ms", "UTC"), "timestamp-micros": ("us", "UTC"),
             "timestamp-nanos": ("ns", "UTC"), "local-timestamp-millis": ("ms", None),
             "local-timestamp-micros": ("us", None), "local-timestamp-nanos": ("ns", None)}
LIST_ITEM_NAME = "element"  # what Spark and parquet's standard LIST layout call list items


# -- parsing helpers ---------------------------------------------------------------------------
# a JSON string (kept whole, escapes included), or a // or /* */ comment (dropped)
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)


def strip_json_comments(text: str) -> str:
    """Drop ``//`` and ``/* */`` comments outside JSON strings (Hudi's .avsc files carry them)."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else "", text)


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


def fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def null_split(branches: list) -> tuple[list, bool]:
    non_null = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    return non_null, len(non_null) != len(branches)


# -- Avro -> Arrow ---------------------------------------------------------------------------
class _AvroToArrow:
    """One walk over an Avro schema producing the logical Arrow type and the "storage" type.

    The storage type is what pyarrow builds from values decoded *without* logical types
    (decimal -> binary, timestamp -> int64, date -> int32); :func:`hudi_format.avro_values.restore_logical` turns storage
    arrays into logical ones. Named types are tracked so references by name resolve.
    """

    def __init__(self):
        self.named: dict[str, Any] = {}
        self._building: set[str] = set()

    def type_of(self, s: Any, ns: str | None, path: str) -> tuple[pa.DataType, pa.DataType, bool]:
        """(logical type, storage type, nullable) of Avro schema ``s``."""
        if isinstance(s, list):
            non_null, has_null = null_split(s)
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
            keys = (fullname(s, ns), s)
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
            self.named[fullname(name, s.get("namespace", ns))] = result

    def _record(self, s: dict, ns: str | None, path: str):
        name = s.get("name")
        if not isinstance(name, str):
            raise SchemaError(f"Avro record at {path!r} has no name")
        full = fullname(name, s.get("namespace", ns))
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


def top_record(avro_schema) -> tuple[pa.DataType, pa.DataType]:
    s = parse_avro_schema(avro_schema)
    if not (isinstance(s, dict) and s.get("type") == "record"):
        raise SchemaError("the top-level Avro schema must be a record")
    logical, storage, _ = _AvroToArrow().type_of(s, None, s.get("name", "record"))
    return logical, storage


def avro_to_arrow_schema(avro_schema: str | dict) -> pa.Schema:
    """The Arrow schema pyarrow would read from a Parquet file Hudi wrote with this Avro schema.

    Nullable unions become nullable fields; list items are named ``element``.
    """
    logical, _ = top_record(avro_schema)
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


_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _avro_field(f: pa.Field, ns: str) -> dict:
    if not _AVRO_NAME.fullmatch(f.name):   # Hudi's Avro schemas reject it too; hudi-rs cannot read it
        raise SchemaError(f"column {f.name!r} cannot be written: Hudi's (Avro) schemas allow field "
                          "names of letters, digits and _ only, not starting with a digit; rename it")
    t = _arrow_to_avro_type(f.type, f.name, ns)
    if f.nullable and t != "null":
        return {"name": f.name, "type": ["null", t], "default": None}
    return {"name": f.name, "type": t}


def _record_schema(fields: Iterable[pa.Field], name: str, ns: str) -> dict:
    full = f"{ns}.{name}" if ns else name
    return {"type": "record", "name": name, "namespace": ns,
            "fields": [_avro_field(f, full) for f in fields]}


def table_record_name(table_name: str) -> tuple[str, str]:
    """``(record name, namespace)`` of a table's Avro schema, as Hudi names them
    (``AvroSchemaUtils.getAvroRecordQualifiedName``): ``<name>_record`` in ``hoodie.<name>``,
    the name masked as ``HoodieAvroUtils.sanitizeName`` does where Avro's names cannot hold it
    (a first character outside ``[A-Za-z_]``, then every one outside ``[A-Za-z0-9_]``, becomes
    ``__``): a folder named ``my-table`` must not give a record name readers reject."""
    name = table_name
    if name and not re.match(r"[A-Za-z_]", name):
        name = "__" + name[1:]
    name = re.sub(r"[^A-Za-z0-9_]", "__", name)
    return f"{name}_record", f"hoodie.{name}"


def arrow_to_avro_schema(schema: pa.Schema, record_name: str, namespace: str) -> dict:
    """Avro schema for ``schema`` in the shape Hudi writes to commit metadata and log headers.

    Nullable fields become ``["null", T]`` with ``"default": null``; for a table ``t`` Hudi
    uses ``record_name="t_record"`` and ``namespace="hoodie.t"``.
    """
    if not isinstance(schema, pa.Schema):
        schema = pa.schema(schema)
    return _record_schema(list(schema), record_name, namespace)
