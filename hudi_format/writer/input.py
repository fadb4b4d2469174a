"""A write's input data: turned into one Arrow table and checked before anything is planned.

Bad input must fail here, naming the column, and not half way through a commit: data Arrow
cannot hold, duplicate column names (which column would be written?), and batches that lack
the fields Hudi derives each record's key, partition and ordering from. Those fields are never
filled with nulls: a missing partition column would put every key in the default partition (a
duplicate of the stored key) and a missing ordering column would silently lose the update.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from ..config import TableConfig
from ..errors import InvalidOptionError, SchemaError

# Operations that carry whole records (and so their ordering value); Hudi's delete builds its
# delete records from keys alone with the default ordering value, delete_partition reads only
# the partition columns.
_RECORD_OPERATIONS = ("insert", "upsert", "bulk_insert", "insert_overwrite", "insert_overwrite_table")


def to_arrow(data: Any) -> pa.Table:
    """Accept anything ``pyarrow.table()`` does, record batches and their readers, and a list of
    row dicts (as ``pa.Table.from_pylist``)."""
    if isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        table = data.read_all()
    elif isinstance(data, (list, tuple)) and data and all(isinstance(r, dict) for r in data):
        try:
            table = pa.Table.from_pylist(list(data))
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise SchemaError(f"the list of records cannot be turned into an Arrow table: {exc}") from None
    else:
        try:
            table = pa.table(data)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise InvalidOptionError(f"cannot turn {type(data).__name__} into an Arrow table "
                                     f"(pass a pyarrow Table, RecordBatch, pandas/polars frame, "
                                     f"dict of columns or list of row dicts): {exc}") from None
    dups = sorted(n for n, c in Counter(table.column_names).items() if c > 1)
    if dups:
        raise SchemaError(f"the data has duplicate column name(s) {dups}; each column must be named once")
    return table


def required_fields(config: TableConfig, operation: str) -> list[tuple[str, str]]:
    """``(field, role)`` pairs the data of ``operation`` must carry for this table."""
    needed: list[tuple[str, str]] = []
    if operation != "delete_partition":
        needed += [(f, "record key") for f in config.record_key_fields]
    if config.keygen_type not in ("NON_PARTITION", "GLOBAL_DELETE"):
        needed += [(f, "partition") for f in config.partition_fields]
    if operation in _RECORD_OPERATIONS:
        needed += [(f, "ordering (precombine)") for f in config.ordering_fields]
    return needed


def check_fields(table: pa.Table, config: TableConfig, operation: str) -> None:
    """``SchemaError`` naming the key, partition or ordering field the data lacks."""
    names = set(table.column_names)
    missing = [(f, role) for f, role in required_fields(config, operation)
               if f.split(".")[0] not in names]
    if missing:
        what = ", ".join(f"{role} field {f!r}" for f, role in missing)
        raise SchemaError(f"the data of this {operation} lacks the table's {what} "
                          f"(columns: {', '.join(table.column_names) or 'none'}); Hudi needs them in "
                          f"every record and they are never filled with nulls")


def read_input(data: Any, operation: str, config: TableConfig) -> pa.Table:
    """The write's data as one Arrow table, checked against the table's key fields."""
    table = to_arrow(data)
    check_fields(table, config, operation)
    return table
