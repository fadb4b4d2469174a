"""The row canonicalisation of conformance/fixtures/README.md, to compare query results."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa


def _canon(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        # pyarrow renders map entries as (key, value) tuples; the README wants [key, value].
        return [_canon(v) for v in value]
    if isinstance(value, tuple):
        return [_canon(v) for v in value]
    return value


def _plain(t: pa.DataType) -> bool:
    """Whether ``to_pylist`` of a column of type ``t`` is canonical already (no value to convert)."""
    if pa.types.is_dictionary(t):
        return _plain(t.value_type)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t))


def _table_rows(table: pa.Table) -> list[dict]:
    """``table``'s rows canonicalised column by column: values of plain columns as they are."""
    if not table.num_columns:
        return [{} for _ in range(table.num_rows)]
    columns = [col.to_pylist() if _plain(col.type) else [_canon(v) for v in col.to_pylist()]
               for col in table.columns]
    names = table.column_names
    return [dict(zip(names, values)) for values in zip(*columns)]


def canonical_rows(table: pa.Table | list[dict]) -> list[dict]:
    if isinstance(table, pa.Table):
        rows = _table_rows(table)
    else:
        rows = [{k: _canon(v) for k, v in row.items()} for row in table]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def sort_expected(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
