"""Arrow <-> Spark types, exactly.

Reading: the core returns Arrow as Hudi stores it (``timestamp[us, tz=UTC]`` for Avro
``timestamp-micros``, ``decimal128(p, s)``, ``date32``, nested structs/lists/maps, binary). Spark's
Python data source accepts Arrow batches only in the exact layout Spark would produce for the
declared ``StructType`` (``pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")``), so
:func:`to_spark_arrow` casts every batch to that layout: names of list items and map entries,
nullability flags and the ``UTC`` zone; values are never changed (a cast that would change them
raises).

Writing: Spark hands Python Arrow batches in its own layout (timestamps in the session time
zone, which is a label only: the values are UTC microseconds; ``ByteType``/``ShortType`` as int8/int16).
:func:`to_hudi_arrow` turns them into what Apache Hudi's Spark writer stores: timestamps as
``timestamp[us, tz=UTC]`` (Avro ``timestamp-micros``), ``TIMESTAMP_NTZ`` as ``timestamp[us]``
(``local-timestamp-micros``), bytes and shorts as Avro ``int`` (int32).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

__all__ = ["spark_type", "spark_schema", "spark_arrow_schema", "to_spark_arrow", "local_frame", "string_fields",
           "hudi_type", "hudi_schema", "to_hudi_arrow"]


# -- Arrow -> Spark ------------------------------------------------------------------------------
def spark_type(t: pa.DataType, path: str = "") -> T.DataType:
    """The Spark type of Arrow type ``t`` (``path`` names the column in errors)."""
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, path)
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return T.LongType()
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise TypeError(f"column {path!r}: {t} has more digits than Spark's DECIMAL(38)")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_view(t, "string_view"):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or _is_view(t, "binary_view"):
        return T.BinaryType()
    if pa.types.is_date(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return T.ArrayType(spark_type(t.value_type, path + "[]"), True)
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type, path + ".key"), spark_type(t.item_type, path + ".value"), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type(f.type, f"{path}.{f.name}"), True) for f in t])
    if pa.types.is_null(t):
        return T.NullType()
    if pa.types.is_time(t) and hasattr(T, "TimeType"):
        return T.TimeType(6)
    raise TypeError(f"column {path!r}: Arrow type {t} has no Spark equivalent")


def _is_view(t: pa.DataType, name: str) -> bool:
    factory = getattr(pa, name, None)
    return factory is not None and t == factory()


def spark_schema(schema: pa.Schema) -> T.StructType:
    """Spark ``StructType`` of an Arrow schema; every column nullable, as data sources declare."""
    return T.StructType([T.StructField(f.name, spark_type(f.type, f.name), True) for f in schema])


def spark_arrow_schema(schema: T.StructType) -> pa.Schema:
    """The exact Arrow layout Spark expects for batches of ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema, timezone="UTC")


def string_fields(*names: str) -> T.StructType:
    """A schema of nullable string columns."""
    return T.StructType([T.StructField(n, T.StringType()) for n in names])


def local_frame(spark, rows: list, schema: T.StructType):
    """A small DataFrame of ``rows`` (tuples) held on the driver: Spark plans it as a local
    relation, so a broadcast of it runs no Spark job (one built from Python rows would)."""
    arrow = spark_arrow_schema(schema)
    cols = list(zip(*rows)) if rows else [() for _ in arrow]
    table = pa.table([pa.array(list(c), type=f.type) for c, f in zip(cols, arrow)], schema=arrow)
    return spark.createDataFrame(table, schema=schema)


def _cast_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast ``arr`` to ``target`` where only the layout differs (field names, nullability, zone,
    width of offsets, dictionary encoding); values must survive unchanged."""
    if arr.type.equals(target):
        return arr
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([_cast_array(c, target) for c in arr.chunks], type=target)
    src = arr.type
    if pa.types.is_dictionary(src):
        return _cast_array(arr.dictionary_decode(), target)
    if pa.types.is_struct(target):
        children = [_cast_array(arr.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=_null_mask(arr))
    if pa.types.is_map(target):
        arr = arr if not isinstance(arr, pa.ChunkedArray) else arr.combine_chunks()
        keys = _cast_array(arr.keys, target.key_type)
        items = _cast_array(arr.items, target.item_type)
        return pa.MapArray.from_arrays(_offsets(arr), keys, items, type=target,
                                       mask=_null_mask(arr))
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and \
            (pa.types.is_list(src) or pa.types.is_large_list(src) or pa.types.is_fixed_size_list(src)):
        if pa.types.is_fixed_size_list(src):
            arr = arr.cast(pa.list_(src.value_field))
        values = _cast_array(arr.values, target.value_type)
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(_offsets(arr), values, type=target, mask=_null_mask(arr))
    return arr.cast(target, safe=True)


def _null_mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _offsets(arr) -> pa.Array:
    """Offsets of a list/map array; like ``values``/``keys``/``items`` they ignore a slice."""
    return arr.offsets


def to_spark_arrow(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """``table`` in Spark's Arrow layout ``schema`` (from :func:`spark_arrow_schema`)."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    cols = []
    for field in schema:
        col = table.column(field.name)
        cols.append(pa.chunked_array([_cast_array(c, field.type) for c in col.chunks], type=field.type)
                    if col.num_chunks else pa.chunked_array([], type=field.type))
    return pa.Table.from_arrays(cols, schema=schema)


# -- Spark -> Arrow as Hudi stores it -------------------------------------------------------------
def hudi_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Hudi's Spark writer stores for a Spark column arriving as Arrow type ``t``."""
    if pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()   # Avro has no byte/short: Hudi's Spark writer stores them as int
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC") if t.tz is not None else pa.timestamp("us")
    if pa.types.is_large_string(t) or _is_view(t, "string_view"):
        return pa.string()
    if pa.types.is_large_binary(t) or _is_view(t, "binary_view"):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", hudi_type(t.value_type), True))
    if pa.types.is_map(t):
        return pa.map_(pa.field("key", hudi_type(t.key_type), False),
                       pa.field("value", hudi_type(t.item_type), True))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, hudi_type(f.type), True) for f in t])
    if pa.types.is_dictionary(t):
        return hudi_type(t.value_type)
    return t


def hudi_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, hudi_type(f.type), True) for f in schema])


def to_hudi_arrow(data: pa.Table | pa.RecordBatch, schema: pa.Schema | None = None) -> pa.Table:
    """Spark-produced Arrow data as Hudi stores it (``schema``: :func:`hudi_schema` of its schema)."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    schema = schema if schema is not None else hudi_schema(data.schema)
    return to_spark_arrow(data, schema)
