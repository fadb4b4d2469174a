"""Scan side of the engine API: plan a query into tasks on the driver, read them anywhere."""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from ..config import TableConfig
from .planner import ScanPlanner
from ..read.scan import ScanPlan, ScanTask, read_task_batches, read_task_table as _read_table
from ..storage import Storage
from ..timeline import Timeline


def plan_scan(table: Any, columns: Sequence[str] | None = None, filters: Any = None, as_of: Any = None,
              read_optimized: bool = False, incremental: tuple[Any, Any] | None = None, *,
              storage_options: Mapping[str, Any] | None = None,
              options: Mapping[str, Any] | None = None) -> ScanPlan:
    """Plan a query into picklable tasks, one per file slice.

    ``table``: an open ``hudi_format.Table`` (planned against its loaded timeline) or a path /
    URL (opened now, with ``storage_options`` and reader ``options``). The other arguments are
    those of ``Table.read``; ``incremental=(start, end)`` plans ``Table.read_incremental``
    instead. Every task of the plan sees the same commits, whenever and wherever it runs."""
    if isinstance(table, (str, os.PathLike)):
        storage = Storage(table, dict(storage_options) if storage_options is not None else None)
        config = TableConfig.load(storage)
        planner = ScanPlanner(storage, config, Timeline.load(storage, config), options)
        return planner.plan(columns, filters, as_of, read_optimized, incremental)
    plan: ScanPlan = table.plan_scan(columns, filters, as_of, read_optimized, incremental)
    return plan


def _storage(task: ScanTask, storage_options: Mapping[str, Any] | None) -> Storage:
    return Storage(task.table_uri, dict(storage_options) if storage_options is not None else None)


def read_task(task: ScanTask, storage_options: Mapping[str, Any] | None = None,
              batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one task as Arrow batches of ``task.schema`` (a slice without log files is
    streamed; one with log files is merged whole). ``storage_options``: fsspec options (they
    are not part of the task, so credentials need not travel with it)."""
    return read_task_batches(_storage(task, storage_options), task, batch_size)


def read_task_table(task: ScanTask, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """The rows of one task as one Arrow table."""
    return _read_table(_storage(task, storage_options), task)
