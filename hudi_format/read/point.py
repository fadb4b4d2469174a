"""Point reads: the rows of given record keys from the file slices an index named.

``Table.lookup`` knows, from the record index (or bloom filters), which file slices hold the
keys; this module reads just those rows. A slice with only a base file is read row group by
row group, and only the row groups whose key column's statistics can hold one of the keys
(Parquet min/max; keys written sorted, as bulk inserts and clustering leave them, prune well);
a slice with log files is merged as a scan would merge it. The key column is
``_hoodie_record_key``, or the record key field itself where that field is the key as it is
(one string field, the simple key generator): a lookup asking for the key field then reads one
string column fewer. The slices are read on
threads: Parquet decoding and the Arrow kernels release the GIL.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorruptFileError
from ..membership import is_in
from ..storage import Storage
from .align import align_table
from .merge import MergeSpec, record_keys
from .parquet import open_base_file
from .scan import ScanTask, read_task_table

__all__ = ["read_keys"]


def _row_groups_holding(meta: pq.FileMetaData, column: int, keys: pa.Array) -> list[int]:
    """Row groups whose min/max of string column ``column`` may hold one of ``keys`` (sorted
    or not); a row group without statistics may hold any."""
    out = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or not isinstance(stats.min, str) \
                or not isinstance(stats.max, str):
            out.append(i)
            continue
        inside = pc.and_(pc.greater_equal(keys, stats.min), pc.less_equal(keys, stats.max))
        if pc.any(inside).as_py():
            out.append(i)
    return out


def _base_rows(storage: Storage, task: ScanTask, keys: pa.Array, key_column: str) -> pa.Table:
    """The base file's rows of the row groups that may hold ``keys`` (not yet filtered). Opened
    as the scan opens it (a local file memory-mapped, so the slices decode in parallel without
    the GIL) and, when every row group may hold a key, read as the scan reads it."""
    s = task.file_slice
    path = s.base_file or ""
    where = storage.uri(path)
    with open_base_file(storage, path, s.base_file_size) as reader:
        try:
            pf = reader.pf
            names = pf.schema_arrow.names
            present = [c for c in task.read_schema.names if c in names]
            meta = pf.metadata
            paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
            column = paths.index(key_column) if key_column in paths else -1
            groups = (_row_groups_holding(meta, column, keys) if column >= 0
                      else list(range(meta.num_row_groups)))
            if len(groups) == meta.num_row_groups:
                table = reader.read(present)
            elif groups:
                table = pf.read_row_groups(groups, columns=present)
            else:
                table = pf.schema_arrow.empty_table().select(present)
        except (pa.ArrowException, OSError, ValueError) as exc:   # ValueError: a garbled footer string
            raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc
    return align_table(table, task.read_schema, where)


def _read_one(storage: Storage, task: ScanTask, keys: pa.Array, spec: MergeSpec,
              key_column: str | None) -> pa.Table:
    s = task.file_slice
    found = None
    if key_column is not None and not task.filters and s.base_file and not s.log_files:
        table = _base_rows(storage, task, keys, key_column)
        if key_column in table.column_names:
            found = table.column(key_column)
    else:
        table = read_task_table(storage, task)
    if table.num_rows:
        if found is None:
            found = record_keys(table, spec)
        table = table.filter(is_in(pc.cast(found, pa.string()), keys))
    return table.select(list(task.columns))


def read_keys(storage: Storage, tasks: Sequence[ScanTask], keys: Sequence[pa.Array],
              spec: MergeSpec, key_column: str | None = "_hoodie_record_key") -> list[pa.Table]:
    """Per task, the rows of its slice whose record key is among its ``keys`` (strings); each
    task must return the key columns (``key_column``, or the key fields). ``key_column``: the
    column holding every row's record key as is (``None``: none does; keys are recomputed)."""
    workers = min(len(tasks), os.cpu_count() or 1)
    if workers <= 1:
        return [_read_one(storage, t, k, spec, key_column) for t, k in zip(tasks, keys)]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda tk: _read_one(storage, tk[0], tk[1], spec, key_column), zip(tasks, keys)))
