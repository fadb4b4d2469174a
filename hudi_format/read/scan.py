"""Scan tasks: one file slice of a planned query, read anywhere.

A query is planned once (:mod:`hudi_format.engine.planner`) into :class:`ScanTask` values that
carry everything a reader needs (the slice, the columns to read and return, the filters, the
merge spec, which instants are visible, the incremental range): no timeline, no metadata
table, no open file. So ``Table.read`` and an engine's workers in other processes run the same
code on the same tasks and see the same commits.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Sequence

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptFileError
from ..storage import Storage
from ..view import FileSlice
from .align import align_table
from .filters import Filter, apply_filters
from .merge import MergeSpec, merge_file_slice
from .parquet import open_base_file, read_base_file
from .snapshot import Visibility

COMMIT_TIME = "_hoodie_commit_time"


@attrs.frozen
class ScanTask:
    """One file slice of a query (picklable; paths relative to ``table_uri``)."""

    table_uri: str
    file_slice: FileSlice
    columns: tuple[str, ...]             # the columns returned, in order
    filters: tuple[Filter, ...]          # ANDed; rows failing them are dropped
    read_schema: pa.Schema               # what is read: columns, filter columns, merge columns
    merge: MergeSpec
    visibility: Visibility               # which instants' log blocks count
    as_of: str | None = None             # the instant the query is pinned to (for reference)
    read_optimized: bool = False
    commit_times: frozenset[str] | None = None   # incremental: keep rows of these commits only

    @property
    def size(self) -> int:
        """Bytes of the slice's files (for packing tasks into an engine's partitions)."""
        return self.file_slice.total_size

    @property
    def schema(self) -> pa.Schema:
        """The schema of the batches this task yields."""
        return pa.schema([self.read_schema.field(c) for c in self.columns])


@attrs.frozen
class ScanPlan:
    """A planned query: its tasks and the schema every task's batches have."""

    tasks: tuple[ScanTask, ...]
    schema: pa.Schema
    table_uri: str
    as_of: str | None = None

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[ScanTask]:
        return iter(self.tasks)


def _finish(task: ScanTask, table: pa.Table) -> pa.Table:
    table = apply_filters(table, list(task.filters), table.schema)
    if task.commit_times is not None and COMMIT_TIME in table.column_names:
        table = table.filter(pc.is_in(table.column(COMMIT_TIME),
                                      value_set=pa.array(sorted(task.commit_times), pa.string())))
    return table.select(list(task.columns))


def read_task_table(storage: Storage, task: ScanTask, *, use_threads: bool = True) -> pa.Table:
    """The task's rows as one table: the base file, merged with the visible log blocks
    (``use_threads``: decode the base file's columns on Arrow's thread pool)."""
    s = task.file_slice
    if s.log_files:
        table = merge_file_slice(storage, s, task.read_schema, task.merge, task.visibility, use_threads=use_threads)
    elif s.base_file:
        table = align_table(read_base_file(storage, s.base_file, task.read_schema.names, s.base_file_size,
                                           use_threads=use_threads),
                            task.read_schema, storage.uri(s.base_file))
    else:
        return task.schema.empty_table()
    return _finish(task, table)


def read_task_tables(storage: Storage, tasks: Sequence[ScanTask]) -> list[pa.Table]:
    """Each task's table, in task order, the slices read on a thread each (up to one per core):
    Parquet decoding, Avro block framing and the merge's Arrow kernels release the GIL.

    The largest slices start first, so no core is left with a big one at the end. With at
    least two slices per thread the threads are busy enough: a slice's columns are then not
    also spread over Arrow's pool, whose extra threads only cost switches on a busy machine."""
    workers = min(len(tasks), os.cpu_count() or 1)
    if workers <= 1:
        return [read_task_table(storage, t) for t in tasks]
    use_threads = len(tasks) < 2 * workers
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i].size)
    out: list[pa.Table] = [pa.table({})] * len(tasks)

    def run(i: int) -> None:
        out[i] = read_task_table(storage, tasks[i], use_threads=use_threads)
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(run, order):
            pass
    return out


def read_task_batches(storage: Storage, task: ScanTask, batch_size: int | None = None
                      ) -> Iterator[pa.RecordBatch]:
    """The task's rows in batches; a slice without log files is streamed from its base file,
    so memory stays bounded by a batch, not by the file."""
    s = task.file_slice
    if s.log_files or not s.base_file:
        yield from read_task_table(storage, task).to_batches(batch_size)
        return
    schema = task.read_schema
    where = storage.uri(s.base_file)
    with open_base_file(storage, s.base_file, s.base_file_size) as reader:
        batches = reader.iter_batches(batch_size or 65536, schema.names)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (pa.ArrowException, OSError, ValueError) as exc:   # ValueError: a garbled name
                raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc
            t = _finish(task, align_table(pa.Table.from_batches([batch]), schema, where))
            yield from t.to_batches()
