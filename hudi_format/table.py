"""``Table``: the public face of one Hudi table (config, timeline, schema and queries)."""

from __future__ import annotations

import logging
import os
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .config import TableConfig
from .errors import HudiError, InvalidOptionError
from .read.align import align_table
from .read.filters import Filter
from .read.merge import MergeSpec, record_keys
from .read.planner import ScanPlanner
from .read.scan import ScanPlan, read_task_batches, read_task_table
from .read.snapshot import ReadState
from .storage import Storage
from .timeline import Instant, Timeline
from .view import FileSlice
from .writer.new_table import new_table_config

log = logging.getLogger(__name__)

class Table:
    """A Hudi table at one location. The timeline is loaded once, at open, as hudi-rs does:
    reads are pinned to the commits that existed then; call ``refresh()`` to see newer ones."""

    def __init__(self, storage: Storage, config: TableConfig | None = None,
                 options: dict[str, Any] | None = None):
        self.storage = storage
        self.config = config if config is not None else TableConfig.load(storage)
        self.options = dict(options or {})
        self.refresh()

    def refresh(self) -> "Table":
        self.timeline = Timeline.load(self.storage, self.config)
        self._planner = ScanPlanner(self.storage, self.config, self.timeline, self.options)
        self._view = self._planner.view
        return self

    # -- metadata table ----------------------------------------------------------------------
    @property
    def metadata_table(self):
        """The metadata table (``.hoodie/metadata``) as of the loaded timeline, or ``None``
        when the table declares none or ``hoodie.metadata.enable`` is false for this reader."""
        return self._planner.metadata_table

    def _usable_metadata(self, partition: str):
        """The metadata table when ``partition`` is declared and it is not behind the data."""
        return self._planner.usable_metadata(partition)

    def __repr__(self) -> str:
        return (f"Table({self.storage.url!r}, {self.table_type}, version={self.version}, "
                f"name={self.config.name!r})")

    # -- identity ----------------------------------------------------------------------------
    @property
    def table_type(self) -> str:
        return self.config.table_type

    @property
    def version(self) -> int:
        return self.config.version

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return self.storage.url

    # -- schema ------------------------------------------------------------------------------
    def schema(self) -> pa.Schema:
        """The latest table schema as Arrow, the ``_hoodie_*`` meta fields first."""
        return self._planner.schema

    # -- planning ----------------------------------------------------------------------------
    def plan_scan(self, columns: Sequence[str] | None = None, filters=None, as_of=None,
                  read_optimized: bool = False, incremental: tuple | None = None) -> ScanPlan:
        """The query as picklable scan tasks (one per file slice), pinned to the loaded
        timeline: what ``read``/``scan`` run here and what an engine runs on its workers
        (``hudi_format.engine.read_task``)."""
        return self._planner.plan(columns, filters, as_of, read_optimized, incremental)

    def file_slices(self, as_of=None, filters=None, read_optimized: bool = False) -> list[FileSlice]:
        """The latest file slice of every live file group, as of ``as_of``."""
        _, parsed = self._planner.prepare(None, filters)
        state = self._planner.state(self._planner.instant(as_of, "as_of"))
        return self._planner.slices(state, parsed, read_optimized)

    # -- reading -----------------------------------------------------------------------------
    def _read_slice(self, s: FileSlice, state: ReadState, columns: list[str], filters: list[Filter]) -> pa.Table:
        """One slice read as of ``state`` (the scan-task path, in this process)."""
        return read_task_table(self.storage, self._planner.task(s, state, columns, filters))

    def scan(self, columns: Sequence[str] | None = None, filters=None, as_of=None,
             read_optimized: bool = False, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the snapshot one file slice at a time (memory bounded by the largest slice)."""
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                       or batch_size < 0):
            raise InvalidOptionError(f"batch_size must be a positive number of rows, got {batch_size!r}")
        for task in self.plan_scan(columns, filters, as_of, read_optimized):
            yield from read_task_batches(self.storage, task, batch_size)

    def read(self, columns: Sequence[str] | None = None, filters=None, as_of=None,
             read_optimized: bool = False) -> pa.Table:
        """Snapshot (or time-travel, or read-optimized) query as one Arrow table."""
        plan = self.plan_scan(columns, filters, as_of, read_optimized)
        return _concat([read_task_table(self.storage, t) for t in plan], plan.schema)

    def read_incremental(self, start=None, end=None, columns: Sequence[str] | None = None,
                         filters=None) -> pa.Table:
        """Records written by commits in ``(start, end]``, each at its latest state in range."""
        plan = self.plan_scan(columns, filters, incremental=(start, end))
        return _concat([read_task_table(self.storage, t) for t in plan], plan.schema)

    def lookup(self, keys, columns: Sequence[str] | None = None) -> pa.Table:
        """The current rows of the given record keys (missing keys give no row), read from the
        file groups the record index (or, without one, the bloom filters) points at."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        elif isinstance(keys, (pa.Array, pa.ChunkedArray)):
            keys = keys.to_pylist()
        elif not hasattr(keys, "__iter__"):
            raise InvalidOptionError(f"keys must be a record key or a list of them, got {keys!r}")
        wanted = list(dict.fromkeys(k.decode() if isinstance(k, bytes) else str(k)
                                    for k in keys if k is not None))
        cols, _ = self._planner.prepare(columns, None)
        target = pa.schema([self.schema().field(c) for c in cols])
        if not wanted:
            return _concat([], target)
        state = ReadState(self.config, self.timeline)
        spec = MergeSpec.from_config(self.config)
        key_cols = ["_hoodie_record_key"] if self.config.populate_meta_fields else list(spec.record_key_fields)
        read_cols = list(dict.fromkeys(cols + key_cols))
        pieces = []
        for s, slice_keys in self._lookup_slices(state, wanted):
            t = self._read_slice(s, state, read_cols, [])
            if t.num_rows:
                value_set = pa.array(slice_keys, pa.string())
                t = t.filter(pc.is_in(pc.cast(record_keys(t, spec), pa.string()), value_set=value_set))
            pieces.append(t.select(cols))
        return _concat(pieces, target)

    def _lookup_slices(self, state: ReadState, keys: list[str]) -> list[tuple[FileSlice, list[str]]]:
        """Slices to read for ``keys``, each with the keys to keep from it."""
        from .metadata.keys import BLOOM_FILTERS, RECORD_INDEX
        mdt = self._usable_metadata(RECORD_INDEX)
        if mdt is not None:
            try:
                locations = mdt.record_locations(keys)
            except HudiError as exc:
                log.warning("record index of %s unusable (%s)", self.storage.url, exc)
            else:
                # The record index is global: each key is read from the one group it names.
                groups: dict[tuple[str, str], list[str]] = {}
                for key, loc in locations.items():
                    part = "" if loc.partition == "." else loc.partition
                    groups.setdefault((part, loc.file_id), []).append(key)
                if not groups:
                    return []
                partitions = {p for p, _ in groups}
                return [(s, groups[(s.partition_path, s.file_id)])
                        for s in state.file_slices(self._view, partitions.__contains__)
                        if (s.partition_path, s.file_id) in groups]
        slices = state.file_slices(self._view)
        values = pa.array(keys, pa.string())
        mdt = self._usable_metadata(BLOOM_FILTERS)
        blooms = None
        if mdt is not None:
            try:
                blooms = mdt.bloom_filters([(s.partition_path, s.base_file_name)
                                            for s in slices if s.base_file])
            except HudiError as exc:
                log.warning("bloom filters of %s unusable (%s)", self.storage.url, exc)
        if blooms is not None:
            out = []
            for s in slices:
                bloom = blooms.get((s.partition_path, s.base_file_name)) if s.base_file else None
                if s.log_files or bloom is None or pc.any(bloom.might_contain_all(values)).as_py():
                    out.append((s, keys))
            return out
        from .base_file import read_footer
        from .writer.index import candidate_slices_by_bloom
        try:
            return [(s, keys) for s in candidate_slices_by_bloom(self.storage, slices, values, read_footer)]
        except HudiError:
            return [(s, keys) for s in slices]


def _concat(pieces: list[pa.Table], target: pa.Schema) -> pa.Table:
    pieces = [p for p in pieces if p.num_rows]
    if not pieces:
        return target.empty_table()
    return pa.concat_tables([align_table(p, target) for p in pieces])


def open_table(path: str | os.PathLike, storage_options: dict[str, Any] | None = None,
               options: dict[str, Any] | None = None) -> Table:
    """Open the Hudi table at ``path`` (local path or fsspec URL such as ``s3://bucket/t``).

    ``options``: reader options, Hudi's keys (``hoodie.metadata.enable``: list files through
    the metadata table, default true)."""
    return Table(Storage(path, storage_options), options=options)


# -- writing -------------------------------------------------------------------------------------
def _write(table: "Table", data, operation: str, options) -> "Instant":
    from .transaction import WriteResult
    from .writer.client import WriteClient
    from .writer.options import check_against_table, validate_options
    opts = validate_options(options)
    check_against_table(table.config, opts, table.storage.url)
    _recover(table.storage, table.config, opts)
    instant = WriteClient(table.storage, table.config, opts).write(data, operation)
    errors = _post_commit(table.storage, table.config, opts)
    table.refresh()
    return WriteResult.of(instant, errors)


def _post_commit(storage: Storage, config: TableConfig, opts) -> tuple[Exception, ...]:
    """Inline table services after a commit; their failures are returned, never raised (the
    write is durable)."""
    from .services.inline import run_inline_services
    return run_inline_services(storage, config, opts)


def _recover(storage: Storage, config: TableConfig, opts) -> None:
    """Before writing: finish interrupted rollbacks and roll back writes whose writer died."""
    from .services.rollback import rollback_failed_writes
    rollback_failed_writes(storage, config, opts)


def _service(fn):
    def method(self, *args, **kwargs):
        out = fn(self.storage, self.config, *args, **kwargs)
        self.refresh()
        return out
    method.__doc__ = fn.__doc__
    return method


def _install_services() -> None:
    from .services import archival, cleaning, clustering, compaction, log_compaction
    from .services import rollback as rb, savepoint as sp
    from .services.common import SERVICE_OPTIONS
    from .writer.options import register_options
    for known in (SERVICE_OPTIONS, cleaning.SERVICE_OPTIONS, archival.SERVICE_OPTIONS):
        register_options(known)
    Table.compact = _service(compaction.compact)
    Table.log_compact = _service(log_compaction.log_compact)
    Table.cluster = _service(lambda storage, config, sort_by=None, options=None:
                             clustering.cluster(storage, config, sort_by=sort_by, options=options))
    Table.cluster.__doc__ = clustering.cluster.__doc__
    Table.clean = _service(cleaning.clean)
    Table.archive = _service(archival.archive)
    Table.rollback = _service(rb.rollback)
    Table.savepoint = _service(sp.savepoint)
    Table.delete_savepoint = _service(sp.delete_savepoint)
    Table.restore = _service(sp.restore)


_install_services()


Table.write = lambda self, data, operation="upsert", options=None: _write(self, data, operation, options)
Table.write.__doc__ = """Write ``data`` to this table as one commit; returns the completed instant
(its ``service_errors``: inline services that failed after the commit, logged, never raised)."""


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def write(path: str | os.PathLike, data, *, operation: str = "upsert",
          record_key: str | Sequence[str] | None = None,
          ordering_field: str | Sequence[str] | None = None,
          partition_by: str | Sequence[str] | None = None,
          table_type: str | None = None, table_version: int | None = None,
          table_name: str | None = None, options: dict[str, Any] | None = None,
          storage_options: dict[str, Any] | None = None):
    """Write ``data`` to the Hudi table at ``path``, creating the table on the first write
    (``table_type`` defaults to COPY_ON_WRITE). On an existing table every argument must agree
    with the table's properties: a differing one is refused, not ignored.

    Returns the completed instant; its ``service_errors`` lists inline table services that
    failed after the commit was durable (logged, never raised)."""
    from .transaction import WriteResult
    from .writer.client import WriteClient
    from .writer.options import check_against_table, check_write_arguments, validate_options

    check_write_arguments(record_key=record_key, ordering_field=ordering_field, partition_by=partition_by,
                          table_type=table_type, table_version=table_version, table_name=table_name,
                          operation=operation)
    opts = validate_options(options)
    storage = Storage(path, storage_options)
    requested_version = table_version or opts.get("hoodie.write.table.version") or opts.get("hoodie.table.version")
    keys = _as_list(record_key or opts.get("hoodie.datasource.write.recordkey.field")
                    or opts.get("hoodie.table.recordkey.fields"))
    if storage.exists(".hoodie/hoodie.properties"):
        config = TableConfig.load(storage)
        check_against_table(config, opts, storage.url, record_key=record_key, partition_by=partition_by,
                            ordering_field=ordering_field, table_type=table_type,
                            table_version=table_version, table_name=table_name)
        _recover(storage, config, opts)
        instant = WriteClient(storage, config, opts).write(data, operation)
        return WriteResult.of(instant, _post_commit(storage, config, opts))
    config = new_table_config(storage, opts, record_key=keys, ordering_field=ordering_field,
                              partition_by=partition_by, table_type=table_type,
                              table_version=requested_version, table_name=table_name)
    instant = WriteClient(storage, config, opts, create=True).write(data, operation)
    return WriteResult.of(instant, _post_commit(storage, TableConfig.load(storage), opts))
