"""Reconcile an incoming batch's schema with the table's, before anything is written: the
batch's columns as Hudi stores them, and the batch cast to the writer schema (the evolution
rule itself, ``evolve``, lives in ``read.table_schema``: the commit applies it again when
another writer evolved the table meanwhile)."""

from __future__ import annotations

import pyarrow as pa

from ..config import META_FIELDS
from ..errors import SchemaError
from ..read.table_schema import evolve, normalize_type

__all__ = ["conform", "evolve", "incoming_schema", "normalize_type"]

def incoming_schema(data: pa.Table) -> pa.Schema:
    """The batch's data schema, normalised, without meta fields (they are ours to fill)."""
    return pa.schema([pa.field(f.name, normalize_type(f.type), True)
                      for f in data.schema if f.name not in META_FIELDS])


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast ``data`` to the writer schema (missing columns null)."""
    cols = []
    names = set(data.column_names)
    for f in schema:
        if f.name in names:
            col = data.column(f.name)
            if not col.type.equals(f.type):
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(f"column {f.name!r} cannot be written as {f.type}: {exc}") from None
            cols.append(col)
        else:
            cols.append(pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)
