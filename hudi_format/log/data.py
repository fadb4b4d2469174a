"""Content of Avro and Parquet data blocks -> Arrow, and alignment to a base-file schema.

Avro data block content (``HoodieAvroDataBlock``): int block version, int record count
(versions >= 2), then per record an int length and the record in Avro binary encoding under
the writer schema from the block's SCHEMA header. Parquet data block content is a complete
Parquet file. CDC blocks use the Avro layout.
"""

from __future__ import annotations

import io
import struct
from functools import lru_cache
from typing import TYPE_CHECKING

import fastavro
import pyarrow as pa

from ..errors import HudiError, LogFormatError, SchemaError
from ..schema import AvroArrowConverter

if TYPE_CHECKING:  # pragma: no cover
    from .block import LogBlock

_INT = struct.Struct(">i")


@lru_cache(maxsize=64)
def _compiled(schema_json: str):
    """Converter + fastavro-parsed raw schema, shared by all blocks with the same schema."""
    conv = AvroArrowConverter(schema_json)
    parsed = fastavro.parse_schema(conv.raw_schema, _ignore_default_error=True)
    return conv, parsed


def _decode_avro_rows(content: bytes, parsed, where: str) -> list[dict]:
    n = len(content)
    if n < 4:
        raise LogFormatError(f"{where}: content too short for an Avro data block")
    (version,) = _INT.unpack_from(content, 0)
    pos, count = 4, None
    if version >= 2:  # HoodieAvroDataBlockVersion: record count from version 2 on
        if n < 8:
            raise LogFormatError(f"{where}: content too short for its record count")
        (count,) = _INT.unpack_from(content, 4)
        pos = 8
        if count < 0:
            raise LogFormatError(f"{where}: negative record count {count}")
    fo = io.BytesIO(content)
    rows: list[dict] = []
    read = fastavro.schemaless_reader
    while (len(rows) < count) if count is not None else (pos < n):
        if pos + 4 > n:
            raise LogFormatError(f"{where}: content ends after {len(rows)} of {count} records")
        (length,) = _INT.unpack_from(content, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise LogFormatError(f"{where}: record {len(rows)} has impossible length {length}")
        fo.seek(pos)
        try:
            rows.append(read(fo, parsed, None))
        except Exception as exc:  # fastavro raises many kinds on damaged bytes
            raise LogFormatError(f"{where}: record {len(rows)} cannot be decoded: {exc}") from exc
        if fo.tell() != pos + length:
            raise LogFormatError(f"{where}: record {len(rows) - 1} does not match its length")
        pos += length
    return rows


def decode_avro_block(block: "LogBlock") -> pa.Table:
    where = block.describe()
    schema_json = block.schema_json
    if not schema_json:
        raise LogFormatError(f"{where} has no SCHEMA header")
    try:
        conv, parsed = _compiled(schema_json)
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    except Exception as exc:
        raise SchemaError(f"{where}: writer schema is not valid Avro: {exc}") from exc
    rows = _decode_avro_rows(block.content(), parsed, where)
    try:
        return conv.raw_to_arrow(rows)
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def decode_parquet_block(block: "LogBlock") -> pa.Table:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(block.content()))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise LogFormatError(f"{block.describe()}: content is not a readable Parquet file: {exc}") from exc
    return table.replace_schema_metadata(None)


def align_to_schema(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``table`` with exactly ``schema``'s fields, in order: cast, or null when absent."""
    columns = []
    for field in schema:
        idx = table.schema.get_field_index(field.name)
        if idx < 0:
            if not field.nullable:
                raise SchemaError(f"{where}: required column {field.name!r} is missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        col = table.column(idx)
        if str(col.type) != str(field.type) or col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise SchemaError(f"{where}: column {field.name!r} of type {col.type} "
                                  f"cannot be read as {field.type}: {exc}") from exc
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)
