"""A write's input data: turned into one Arrow table (or, for the operations that stream, a
:class:`BatchStream`) and checked before anything is planned.

Bad input must fail here, naming the column, and not half way through a commit: data Arrow
cannot hold, duplicate column names (which column would be written?), and batches that lack
the fields Hudi derives each record's key, partition and ordering from. Those fields are never
filled with nulls: a missing partition column would put every key in the default partition (a
duplicate of the stored key) and a missing ordering column would silently lose the update.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Iterator

import attrs
import pyarrow as pa

from ..config import TableConfig
from ..errors import InvalidOptionError, SchemaError

# Operations that carry whole records (and so their ordering value); Hudi's delete builds its
# delete records from keys alone with the default ordering value, delete_partition reads only
# the partition columns.
_RECORD_OPERATIONS = ("insert", "upsert", "bulk_insert", "insert_overwrite", "insert_overwrite_table")


@attrs.define
class BatchStream:
    """A write's input that arrives batch by batch: a ``RecordBatchReader``, a
    ``pyarrow.dataset`` Dataset or Scanner, or an iterator of RecordBatches (or Tables).
    ``batches`` yields RecordBatches; each is checked against ``schema`` as it is pulled, since
    only a reader promises that its batches agree."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]

    def checked(self) -> Iterator[pa.RecordBatch]:
        """The batches, ``SchemaError`` naming the first whose columns differ from ``schema``."""
        for n, batch in enumerate(self.batches, 1):
            if isinstance(batch, pa.Table):
                for b in batch.to_batches():
                    yield self._check(b, n)
            else:
                yield self._check(batch, n)

    def _check(self, batch: Any, n: int) -> pa.RecordBatch:
        if not isinstance(batch, pa.RecordBatch):
            raise SchemaError(f"item {n} of the input is a {type(batch).__name__}, not a pyarrow RecordBatch")
        if not batch.schema.equals(self.schema, check_metadata=False):
            raise SchemaError(f"batch {n} of the input has columns "
                              f"{', '.join(f'{f.name}: {f.type}' for f in batch.schema)}; the input's schema is "
                              f"{', '.join(f'{f.name}: {f.type}' for f in self.schema)}")
        return batch

    def read_all(self) -> pa.Table:
        """Every batch in one table (for the operations that need the whole input)."""
        return pa.Table.from_batches(list(self.checked()), schema=self.schema)


def as_stream(data: Any) -> BatchStream | None:
    """``data`` as a :class:`BatchStream` when it comes batch by batch (see there), else None.
    An iterator's first item is pulled to learn its schema (and pushed back)."""
    if isinstance(data, pa.RecordBatchReader):
        return BatchStream(data.schema, iter(data))
    module = type(data).__module__ or ""
    if module.startswith("pyarrow._dataset"):
        if hasattr(data, "to_reader"):          # a Scanner
            reader = data.to_reader()
            return BatchStream(reader.schema, iter(reader))
        if hasattr(data, "to_batches") and isinstance(getattr(data, "schema", None), pa.Schema):
            return BatchStream(data.schema, iter(data.to_batches()))
    if isinstance(data, Iterator):
        try:
            first = next(data)
        except StopIteration:
            raise InvalidOptionError("the input iterator yielded no record batch: nothing to learn "
                                     "its schema from") from None
        if not isinstance(first, (pa.RecordBatch, pa.Table)):
            raise InvalidOptionError(f"an iterator passed as data must yield pyarrow RecordBatches, "
                                     f"got a {type(first).__name__}")
        return BatchStream(first.schema, itertools.chain([first], data))
    return None


def to_arrow(data: Any) -> pa.Table:
    """Accept anything ``pyarrow.table()`` does, record batches, their readers and iterators,
    ``pyarrow.dataset`` Datasets, and a list of row dicts (as ``pa.Table.from_pylist``)."""
    stream = data if isinstance(data, BatchStream) else as_stream(data)
    if isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif stream is not None:
        table = stream.read_all()
    elif isinstance(data, (list, tuple)) and data and all(isinstance(r, pa.RecordBatch) for r in data):
        table = BatchStream(data[0].schema, iter(data)).read_all()
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
    check_names(table.schema)
    return table


def check_names(schema: pa.Schema) -> None:
    """``SchemaError`` for duplicate column names (which column would be written?) and for
    names that are not UTF-8 (Arrow keeps them as bytes, as a damaged Parquet file gives them;
    pyarrow then fails on every use of the name)."""
    _utf8_names(list(schema), "the data")
    dups = sorted(n for n, c in Counter(schema.names).items() if c > 1)
    if dups:
        raise SchemaError(f"the data has duplicate column name(s) {dups}; each column must be named once")


def _utf8_names(fields: list[pa.Field], where: str) -> None:
    for i, field in enumerate(fields):
        try:
            name = field.name
        except UnicodeDecodeError:
            raise SchemaError(f"column {i + 1} of {where} has a name that is not valid UTF-8") from None
        t = field.type
        if pa.types.is_struct(t):
            _utf8_names([t.field(j) for j in range(t.num_fields)], f"column {name!r}")
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            _utf8_names([t.value_field], f"column {name!r}")
        elif pa.types.is_map(t):
            _utf8_names([t.key_field, t.item_field], f"column {name!r}")


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
