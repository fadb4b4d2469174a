"""``hudi_format`` as a Spark 4 Python data source.

Reading: ``spark.read.format("hudi_format").option(...).load(path)``. The reader is planned on
the driver: the table is opened once, the query (snapshot, time travel, read-optimized or
incremental) is pinned to the commits that existed then, and its file slices become Spark input
partitions (one per slice; small slices are packed together up to ``maxPartitionBytes``). Each
task reads its slices through the core (base file + log merge) and hands Spark Arrow batches.

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
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, Filter, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan,
                                    LessThanOrEqual, Not)
from pyspark.sql.types import StructType

from .arrow import spark_arrow_schema, spark_schema, to_spark_arrow

NAME = "hudi_format"
QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF = "as.of.instant"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
MAX_PARTITION_BYTES = "maxPartitionBytes"
STORAGE_OPTIONS = "storage_options"
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
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


def _table_options(options) -> dict:
    """Reader options the core takes (``hoodie.metadata.enable``)."""
    value = options.get("hoodie.metadata.enable")
    return {"hoodie.metadata.enable": value} if value is not None else {}


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


class SliceGroup(InputPartition):
    """File slices read by one Spark task (paths relative to the table); for an incremental
    query, the instants whose records it keeps."""

    def __init__(self, slices: list, commit_times: list[str] | None = None):
        super().__init__(len(slices))
        self.slices = slices
        self.commit_times = commit_times

    def __repr__(self) -> str:
        return f"SliceGroup({len(self.slices)} slices)"


class HudiReader(DataSourceReader):
    """Planned on the driver from the table as loaded there; pickled to the executors."""

    def __init__(self, options: dict, schema: StructType, table):
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
        self.max_bytes = int(lower.get(MAX_PARTITION_BYTES.lower(), DEFAULT_MAX_PARTITION_BYTES))
        self.query = (lower.get(QUERY_TYPE) or "snapshot").strip().lower()
        if self.query not in ("snapshot", "read_optimized", "incremental"):
            raise ValueError(f"option {QUERY_TYPE} must be snapshot, read_optimized or incremental, "
                             f"got {self.query!r}")
        self.with_meta = table.config.populate_meta_fields
        # Pin the query to the timeline as loaded now, so that every task reads the same commits
        # even if a writer completes another one while the job runs.
        from hudi_format.read.snapshot import ReadState
        latest = ReadState(table.config, table.timeline).latest
        pinned = ReadState(table.config, table.timeline).bound(latest) if latest is not None else None
        if self.query == "incremental":
            begin = lower.get(BEGIN)
            if begin is None:
                raise ValueError(f"an incremental query needs option {BEGIN}")
            self.start = table._instant(begin, BEGIN) or "0"
            self.as_of = table._instant(lower.get(END), END) or pinned
        else:
            self.as_of = table._instant(lower.get(AS_OF), AS_OF) or pinned

    # -- filter push-down ---------------------------------------------------------------------
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        import hudi_format as hudi
        arrow = hudi.open_table(self.path, self.storage_options, self.table_options).schema()
        for f in filters:
            core = _to_core_filter(f, arrow)
            if core is None:
                yield f
            else:
                self.filters.append(core)

    # -- planning -----------------------------------------------------------------------------
    def partitions(self) -> list[InputPartition]:
        from hudi_format.read.filters import parse_filters
        table = self._table()
        state = self._state(table)
        parsed = parse_filters(self.filters)
        commit_times = None
        if self.query == "incremental":
            slices, commit_times = self._incremental_slices(table, state, parsed)
        else:
            slices = table._slices(state, parsed, self.query == "read_optimized")
        # Spark pickled this reader before calling partitions(): what tasks need goes in them.
        return [SliceGroup(group, commit_times) for group in _pack(slices, self.max_bytes)]

    def _table(self):
        import hudi_format as hudi
        return hudi.open_table(self.path, self.storage_options, self.table_options)

    def _state(self, table):
        from hudi_format.read.snapshot import ReadState
        return ReadState(table.config, table.timeline, self.as_of)

    def _incremental_slices(self, table, state, parsed) -> tuple[list, list[str]]:
        """As ``Table.read_incremental``: the slices of file groups touched in (start, end];
        each task keeps the rows whose commit time is in range."""
        bound = state.bound
        in_range = [i for i in state.instants if bound(i) > self.start]
        if state.active_start and self.start < state.active_start:
            in_range += [i for i in state.archived_instants.values() if bound(i) > self.start]
        if not in_range:
            return [], []
        touched = table._touched_file_ids(in_range)
        return ([s for s in table._slices(state, parsed, False) if touched is None or s.file_id in touched],
                sorted({i.timestamp for i in in_range}))

    # -- reading (on the executors) -----------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from hudi_format.read.filters import parse_filters
        slices = getattr(partition, "slices", None)
        if not slices:
            return iter(())
        table = self._table()
        state = self._state(table)
        parsed = parse_filters(self.filters)
        target = spark_arrow_schema(self.schema)
        incremental = self.query == "incremental"
        read_cols = list(self.columns)
        if incremental and self.with_meta and "_hoodie_commit_time" not in read_cols:
            read_cols.append("_hoodie_commit_time")
        commit_times = pa.array(partition.commit_times or [], pa.string())

        def batches():
            for s in slices:
                t = table._read_slice(s, state, read_cols, parsed)
                if incremental and self.with_meta:
                    t = t.filter(pc.is_in(t.column("_hoodie_commit_time"), value_set=commit_times))
                if not t.num_rows:
                    continue
                yield from to_spark_arrow(t.select(self.columns), target).to_batches(_BATCH_ROWS)
        return batches()


def _pack(slices: list, max_bytes: int) -> list[list]:
    """One group per slice, except that slices smaller than ``max_bytes`` share a group up to
    that size (largest first, first fit)."""
    groups: list[list] = []
    sizes: list[int] = []
    for s in sorted(slices, key=lambda s: (-s.total_size, s.partition_path, s.file_id)):
        size = max(s.total_size, 1)
        for i, used in enumerate(sizes):
            if used + size <= max_bytes:
                groups[i].append(s)
                sizes[i] += size
                break
        else:
            groups.append([s])
            sizes.append(size)
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
