"""The table's current schema, and how a write may evolve it, as writers, readers and the
commit's schema-conflict resolution all need it.

Compatible evolution (Hudi's default): new nullable columns are appended, columns missing from
a batch are written as nulls, ``int -> long``, ``float -> double`` and ``int/long -> double``
widen. Anything else (a type change, a non-nullable new column) is rejected up front, so a bad
batch never leaves half a commit behind.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from ..config import META_FIELDS, TableConfig
from ..errors import HudiError, SchemaError
from ..schema import avro_to_arrow_schema
from ..timeline import Timeline

log = logging.getLogger(__name__)


def latest_avro_schema(config: TableConfig, timeline: Timeline) -> str | None:
    """The Avro schema of the newest commit that recorded one, else the create schema."""
    for inst in reversed(timeline.write_instants()):
        try:
            avro = timeline.metadata(inst).schema
        except HudiError as exc:
            log.warning("cannot read the schema of %s: %s", inst, exc)
            continue
        if avro:
            return avro
    return config.create_schema


def latest_data_schema(config: TableConfig, timeline: Timeline) -> pa.Schema | None:
    """The data columns (no meta fields) of the table, or ``None`` before the first commit."""
    avro = latest_avro_schema(config, timeline)
    return avro_to_arrow_schema(avro) if avro else None


_WIDENINGS = {
    (pa.int8(), pa.int16()), (pa.int8(), pa.int32()), (pa.int8(), pa.int64()),
    (pa.int16(), pa.int32()), (pa.int16(), pa.int64()), (pa.int32(), pa.int64()),
    (pa.float32(), pa.float64()), (pa.int32(), pa.float64()), (pa.int64(), pa.float64()),
    (pa.int32(), pa.float32()), (pa.int64(), pa.float32()),
}


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Hudi stores for ``t`` (what Spark would write)."""
    if pa.types.is_large_string(t) or t == getattr(pa, "string_view", lambda: None)():
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC") if t.tz else pa.timestamp("us")
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_dictionary(t):
        return normalize_type(t.value_type)
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(pa.field("element", normalize_type(t.value_type), True))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize_type(f.type), True) for f in t])
    if pa.types.is_map(t):
        return pa.map_(normalize_type(t.key_type), normalize_type(t.item_type))
    if pa.types.is_null(t):
        return pa.string()
    return t


def evolve(table_schema: pa.Schema | None, batch_schema: pa.Schema) -> pa.Schema:
    """The writer schema for this commit, or ``SchemaError`` naming the incompatible column."""
    if table_schema is None or len(table_schema) == 0:
        return batch_schema
    table_schema = pa.schema([f for f in table_schema if f.name not in META_FIELDS])
    fields = []
    for f in table_schema:
        idx = batch_schema.get_field_index(f.name)
        if idx < 0:
            fields.append(f)
            continue
        incoming = batch_schema.field(idx).type
        if incoming.equals(f.type) or _same_nested(incoming, f.type):
            fields.append(f)
        elif (incoming, f.type) in _WIDENINGS:
            fields.append(f)  # a narrower incoming type is written as the table's type
        elif (f.type, incoming) in _WIDENINGS:
            fields.append(pa.field(f.name, incoming, True))  # promote the column
        else:
            raise SchemaError(f"column {f.name!r} has type {incoming} in the data but {f.type} "
                              f"in the table; only compatible changes (new nullable columns, "
                              f"int->long, float->double) are allowed")
    known = set(table_schema.names)
    fields += [f for f in batch_schema if f.name not in known]
    return pa.schema(fields)


def _same_nested(a: pa.DataType, b: pa.DataType) -> bool:
    try:
        return normalize_type(a).equals(normalize_type(b))
    except (TypeError, ValueError):
        return False
