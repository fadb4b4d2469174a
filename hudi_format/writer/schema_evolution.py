"""Reconcile an incoming batch's schema with the table's, before anything is written: the
batch's columns as Hudi stores them, and the batch cast to the writer schema (the evolution
rule itself, ``evolve``, lives in ``read.table_schema``: the commit applies it again when
another writer evolved the table meanwhile)."""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from ..config import META_FIELDS
from ..errors import SchemaError
from ..options import option
from ..read.merge import IS_DELETED
from ..read.table_schema import evolve, normalize_type

__all__ = ["check_missing_columns", "conform", "evolve", "incoming_schema", "normalize_type"]

def incoming_schema(data: pa.Table) -> pa.Schema:
    """The batch's data schema, normalised, without meta fields (they are ours to fill)."""
    return pa.schema([pa.field(f.name, normalize_type(f.type), True)
                      for f in data.schema if f.name not in META_FIELDS])


def check_missing_columns(table_schema: pa.Schema, batch_schema: pa.Schema, options: Mapping[str, Any]) -> None:
    """Hudi fails a write whose batch lacks columns the table has (an upsert would blank them in
    every record it touches), unless ``hoodie.write.set.null.for.missing.columns`` asks for
    nulls. ``_hoodie_is_deleted`` is an instruction, not data: a batch without it deletes nothing."""
    missing = [f.name for f in table_schema if f.name not in META_FIELDS and f.name != IS_DELETED
               and batch_schema.get_field_index(f.name) < 0]
    if missing and not option(options, "hoodie.write.set.null.for.missing.columns"):
        raise SchemaError(f"the data lacks column(s) {', '.join(map(repr, missing))} of the table; a write "
                          f"would set them to null in every record it writes: add them, or set "
                          f"hoodie.write.set.null.for.missing.columns=true")


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
