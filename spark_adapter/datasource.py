"""``hudi_format`` as a Spark 4 Python data source.

Reading: ``spark.read.format("hudi_format").option(...).load(path)``. The reader is planned on
the driver: the table is opened once, the query (snapshot, time travel, read-optimized or
incremental) is pinned to the commits that existed then, and its file slices become Spark input
partitions. Like Spark's own file sources, slices are spread over at least ``minPartitions``
tasks (``spark_adapter.register`` passes the session's default parallelism; elsewhere the
planning host's CPU count) and small ones share a task up to ``maxPartitionBytes``; a slice is
never split. Each task streams its slices through the core (base file, or base file + log merge)
and hands Spark Arrow batches.

- Filters: with ``spark.sql.python.filterPushdown.enabled`` (``spark_adapter.register`` sets
  it), comparisons and ``IN`` on top-level columns become the core's ``(column, op, value)``
  filters: they prune partitions and files and filter rows in the core. Comparisons whose
  semantics differ between Spark and Arrow (floating point NaN, timestamps given as local
  datetimes, ``NOT IN`` with nulls) are left to Spark.
- Columns: Spark's Python data source API has no column-pruning callback. Pass a schema with
  the columns you want (``spark.read.format("hudi_format").schema("uuid string, fare double")``)
  and only those are read; otherwise Spark prunes after the scan.

Writing through the Python data source API itself (no driver hook, e.g. ``INSERT INTO`` a
``USING hudi_format`` table) is in :mod:`spark_adapter.staged`; ``df.write.format("hudi_format")``
from PySpark goes through :mod:`spark_adapter.writer` (see :func:`spark_adapter.register`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from typing import Any, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, Filter, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan,
                                    LessThanOrEqual, Not)
from pyspark.sql.types import StructType

# The core is imported where it is used: Spark unpickles this module's data source in fresh
# Python workers (to create it, push filters, plan), and one that is only asked to create the
# source with a given schema need not load the whole core.
from .arrow import spark_arrow_schema, spark_schema, to_spark_arrow
from .packing import least_loaded

NAME = "hudi_format"
QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF = "as.of.instant"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
MAX_PARTITION_BYTES = "maxPartitionBytes"
MIN_PARTITIONS = "minPartitions"
STORAGE_OPTIONS = "storage_options"
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024   # Spark's spark.sql.files.openCostInBytes: below this, never split further
_BATCH_ROWS = 65536


def storage_options(options) -> dict | None:
    """``storage_options`` option: fsspec options as a JSON object."""
    raw = options.get(STORAGE_OPTIONS)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"option {STORAGE_OPTIONS} must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"option {STORAGE_OPTIONS} must be a JSON object, got {raw!r}")
    return value


_READER_KEYS = ("hoodie.metadata.enable", "hoodie.datasource.read.incr.fallback.fulltablescan.enable")


def _table_options(options) -> dict:
    """Reader options the core takes (the metadata table; the incremental query's fallback)."""
    return {k: options[k] for k in _READER_KEYS if options.get(k) is not None}


def _path(options) -> str:
    path = options.get("path")
    if not path:
        raise ValueError("hudi_format needs a table path: spark.read.format('hudi_format').load(path)")
    return path


class HudiDataSource(DataSource):
    """The ``hudi_format`` data source; options are Hudi's datasource read/write keys."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _open(self):
        import hudi_format as hudi
        return hudi.open_table(_path(self.options), storage_options(self.options),
                               _table_options(self.options))

    def schema(self) -> StructType:
        return spark_schema(self._open().schema())

    def reader(self, schema: StructType) -> "HudiReader":
        return HudiReader(dict(self.options), schema, self._open())

    def writer(self, schema: StructType, overwrite: bool):
        from .staged import StagedWriter
        return StagedWriter(dict(self.options), schema, overwrite)

    # Structured Streaming: see spark_adapter.streaming
    def streamWriter(self, schema: StructType, overwrite: bool):
        from .streaming import StagedStreamWriter
        return StagedStreamWriter(dict(self.options), schema, overwrite)

    def streamReader(self, schema: StructType):
        from .streaming import HudiStreamReader
        return HudiStreamReader(dict(self.options), schema)


class SliceGroup(InputPartition):
    """Scan tasks (``hudi_format.engine.ScanTask``: one file slice each, with the columns,
    filters and commits to read) run by one Spark task."""

    def __init__(self, tasks: list):
        super().__init__(len(tasks))
        self.tasks = tasks

    @property
    def slices(self) -> list:
        """The file slices of the tasks."""
        return [t.file_slice for t in self.tasks]

    def __repr__(self) -> str:
        return f"SliceGroup({len(self.tasks)} slices)"


class HudiReader(DataSourceReader):
    """Planned on the driver from the table as loaded there; pickled to the executors (the
    loaded table stays behind: tasks need only their scan tasks)."""

    def __init__(self, options: dict, schema: StructType, table):
        from hudi_format.read.bounds import normalize_instant
        from hudi_format.read.snapshot import ReadState
        self._loaded = table
        lower = {k.lower(): v for k, v in options.items()}
        self.path = _path(lower)
        self.storage_options = storage_options(lower)
        self.table_options = _table_options(lower)
        self.schema = schema
        self.columns = list(schema.names)
        missing = [c for c in self.columns if table.schema().get_field_index(c) < 0]
        if missing:
            raise ValueError(f"column(s) {missing} are not in the table at {self.path}; "
                             f"it has {', '.join(table.schema().names)}")
        self.filters: list[tuple] = []
        self.max_bytes = _positive(lower, MAX_PARTITION_BYTES, DEFAULT_MAX_PARTITION_BYTES)
        self.min_partitions = _positive(lower, MIN_PARTITIONS, os.cpu_count() or 1)
        self.query = (lower.get(QUERY_TYPE) or "snapshot").strip().lower()
        if self.query not in ("snapshot", "read_optimized", "incremental"):
            raise ValueError(f"option {QUERY_TYPE} must be snapshot, read_optimized or incremental, "
                             f"got {self.query!r}")
        # Pin the query to the timeline as loaded now, so that every task reads the same commits
        # even if a writer completes another one while the job runs.
        timezone = table.config.timeline_timezone
        state = ReadState(table.config, table.timeline)
        pinned = state.bound(state.latest) if state.latest is not None else None
        if self.query == "incremental":
            begin = lower.get(BEGIN)
            if begin is None:
                raise ValueError(f"an incremental query needs option {BEGIN}")
            self.start = normalize_instant(begin, timezone, BEGIN) or "0"
            self.as_of = normalize_instant(lower.get(END), timezone, END) or pinned
        else:
            self.as_of = normalize_instant(lower.get(AS_OF), timezone, AS_OF) or pinned

    # -- filter push-down ---------------------------------------------------------------------
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        arrow = self._table().schema()
        for f in filters:
            core = _to_core_filter(f, arrow)
            if core is None:
                yield f
            else:
                self.filters.append(core)

    # -- planning -----------------------------------------------------------------------------
    def partitions(self) -> list[InputPartition]:
        from hudi_format import engine
        table = self._table()
        if self.query == "incremental":
            plan = engine.plan_scan(table, self.columns, self.filters, incremental=(self.start, self.as_of))
        else:
            plan = engine.plan_scan(table, self.columns, self.filters, as_of=self.as_of,
                                    read_optimized=self.query == "read_optimized")
        # Spark pickled this reader before calling partitions(): what tasks need goes in them.
        return [SliceGroup(group) for group in _pack(list(plan.tasks), self.max_bytes, self.min_partitions)]

    def _table(self):
        """The table as loaded when the reader was made (and its query pinned); opened again
        only if this reader was unpickled."""
        if self._loaded is None:
            import hudi_format as hudi
            self._loaded = hudi.open_table(self.path, self.storage_options, self.table_options)
        return self._loaded

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_loaded"] = None
        return state

    # -- reading (on the executors) -----------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slice_group(partition, self.schema, self.storage_options)


def read_slice_group(partition: InputPartition, schema: StructType,
                     storage_options: Mapping[str, Any] | None) -> Iterator[pa.RecordBatch]:
    """The rows of one planned Spark partition (its scan tasks) as Spark's Arrow batches, for
    batch and streaming reads alike. Streamed: a slice without log files is read a batch at a
    time (bounded memory, and Spark consumes the first batch while the next is decoded)."""
    from hudi_format import engine
    tasks = getattr(partition, "tasks", None)
    if not tasks:
        return iter(())
    target = spark_arrow_schema(schema)

    def batches():
        for task in tasks:
            for batch in engine.read_task(task, storage_options, _BATCH_ROWS):
                if batch.num_rows:
                    yield from to_spark_arrow(batch, target).to_batches()
    return batches()


def _positive(options: dict, key: str, default: int) -> int:
    raw = options.get(key.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value <= 0:
        raise ValueError(f"option {key} must be a positive integer, got {raw!r}")
    return value


def _pack(tasks: list, max_bytes: int, min_partitions: int = 1) -> list[list]:
    """Scan tasks (file slices) into Spark input partitions, as Spark sizes file splits:
    a partition holds up to ``min(max_bytes, max(4 MiB, total / min_partitions))`` bytes, so a
    small table is one task and a large one keeps every core busy. Slices go largest first to
    the least-loaded partition, which balances the tasks; one that would take that partition
    past ``max_bytes`` opens a new one (a slice larger than ``max_bytes`` is alone)."""
    if not tasks:
        return []
    total = sum(max(t.size, 1) for t in tasks)
    cap = min(max_bytes, max(OPEN_COST_BYTES, -(-total // min_partitions)))
    n = min(len(tasks), max(1, -(-total // cap)))
    ordered = sorted(tasks, key=lambda t: (t.file_slice.partition_path, t.file_slice.file_id))
    task_of = least_loaded([max(t.size, 1) for t in ordered], n, cap=max_bytes)
    groups: list[list] = [[] for _ in range(max(task_of) + 1)]
    for t, i in zip(ordered, task_of):
        groups[i].append(t)
    return groups


_OPS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
        LessThanOrEqual: "<="}
# Arrow types whose comparisons (and IN) mean exactly what Spark's do, nulls included.
_SAFE = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean,
         pa.types.is_date32, pa.types.is_decimal)


def _to_core_filter(f: Filter, schema: pa.Schema) -> tuple | None:
    """The core filter for a Spark filter, or ``None`` when Spark must evaluate it."""
    negated = isinstance(f, Not) and isinstance(f.child, EqualTo)
    attr = getattr(f.child if negated else f, "attribute", None)
    if not attr or len(attr) != 1 or schema.get_field_index(attr[0]) < 0:
        return None
    column = attr[0]
    type_ = schema.field(column).type
    if not any(check(type_) for check in _SAFE):
        return None
    if type(f) in _OPS:
        value = f.value
        if value is None or not _safe_value(value):
            return None
        return (column, _OPS[type(f)], value)
    if isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
        if not values or not all(_safe_value(v) for v in values):
            return None
        return (column, "in", values)
    if negated:
        value = f.child.value
        if value is None or not _safe_value(value):
            return None
        return (column, "!=", value)
    return None


def _safe_value(value: Any) -> bool:
    return isinstance(value, (str, int, bool, decimal.Decimal, dt.date)) and \
        not isinstance(value, dt.datetime)
