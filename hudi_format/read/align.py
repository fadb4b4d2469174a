"""Line up batches from files written at different schema versions with the table schema.

Base files written before a column was added lack it; log blocks carry their writer's schema.
Readers must still hand out one schema, so every piece is cast to the table's Arrow schema,
with nulls for columns a file does not have.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaError


def align_table(table: pa.Table, schema: pa.Schema, source: str = "") -> pa.Table:
    """Return ``table`` with exactly ``schema``'s fields in order (missing ones null)."""
    if table.schema.equals(schema, check_metadata=False):
        return table
    n = table.num_rows
    names = set(table.column_names)
    cols = []
    for field in schema:
        if field.name in names:
            col = table.column(field.name)
            if not col.type.equals(field.type):
                col = _cast(col, field.type, field.name, source)
            cols.append(col)
        else:
            cols.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _cast(col: pa.ChunkedArray, target: pa.DataType, name: str, source: str) -> pa.ChunkedArray:
    try:
        return pc.cast(col, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if pa.types.is_struct(target) or pa.types.is_list(target) or pa.types.is_map(target):
            try:
                return pc.cast(col, target, safe=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        where = f" in {source}" if source else ""
        raise SchemaError(f"column {name!r}{where} has type {col.type}, which cannot be "
                          f"read as the table's type {target}: {exc}") from exc
