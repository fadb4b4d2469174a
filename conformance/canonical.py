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


def canonical_rows(table: pa.Table | list[dict]) -> list[dict]:
    rows = table.to_pylist() if isinstance(table, pa.Table) else table
    rows = [{k: _canon(v) for k, v in row.items()} for row in rows]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def sort_expected(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
