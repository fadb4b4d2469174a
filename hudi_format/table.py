"""``Table``: the public face of one Hudi table (config, timeline, schema and queries)."""

from __future__ import annotations

import logging
import os
import posixpath
from functools import cached_property
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import META_FIELDS, TableConfig
from .errors import CorruptFileError, HudiError, InvalidOptionError, SchemaError
from .options import READ_SCOPES, WRITE_SCOPES, default, option, validate
from .read.align import align_table
from .read.bounds import normalize_instant
from .read.filters import Filter, PartitionPruner, apply_filters, check_columns, parse_filters
from .read.merge import MergeSpec, merge_file_slice, read_base_file, record_keys
from .read.snapshot import ReadState
from .read.table_schema import latest_data_schema
from .storage import Storage
from .timeline import Instant, Timeline
from .view import FileSlice, FileSystemView

log = logging.getLogger(__name__)

_META_SCHEMA = pa.schema([pa.field(name, pa.string()) for name in META_FIELDS])


class Table:
    """A Hudi table at one location. The timeline is loaded once, at open, as hudi-rs does:
    reads are pinned to the commits that existed then; call ``refresh()`` to see newer ones."""

    def __init__(self, storage: Storage, config: TableConfig | None = None,
                 options: dict[str, Any] | None = None):
        self.storage = storage
        self.config = config if config is not None else TableConfig.load(storage)
        self.options = validate(options, READ_SCOPES, what="read")
        self.refresh()

    def refresh(self) -> "Table":
        self.timeline = Timeline.load(self.storage, self.config)
        self._metadata = None
        self._view = FileSystemView(self.storage, self.config, lister=self._metadata_listing)
        self.__dict__.pop("_schema", None)
        return self

    # -- metadata table ----------------------------------------------------------------------
    @property
    def metadata_table(self):
        """The metadata table (``.hoodie/metadata``) as of the loaded timeline, or ``None``
        when the table declares none or ``hoodie.metadata.enable`` is false for this reader."""
        from .metadata.reader import MetadataTable
        if not option(self.options, "hoodie.metadata.enable") or not self.config.metadata_partitions:
            return None
        if self._metadata is None:
            self._metadata = MetadataTable(self.storage, self.config, self.timeline)
        return self._metadata

    def _usable_metadata(self, partition: str):
        """The metadata table when ``partition`` is declared and it is not behind the data."""
        mdt = self.metadata_table
        if mdt is None or not mdt.has_partition(partition):
            return None
        try:
            reason = mdt.staleness()
        except HudiError as exc:
            reason = str(exc)
        if reason is not None:
            log.warning("not using the metadata table of %s: %s", self.storage.url, reason)
            return None
        return mdt

    def _metadata_listing(self):
        """Partition listing from the metadata table's ``files`` partition (``None``: list storage)."""
        from .metadata.keys import FILES
        mdt = self._usable_metadata(FILES)
        if mdt is None:
            return None
        try:
            return mdt.files_listing()
        except HudiError as exc:
            log.warning("cannot list %s from its metadata table (%s); listing storage",
                        self.storage.url, exc)
            return None

    def _prune_by_stats(self, slices: list[FileSlice], filters: list[Filter]) -> list[FileSlice]:
        from .metadata.keys import COLUMN_STATS
        if not filters or not slices:
            return slices
        mdt = self._usable_metadata(COLUMN_STATS)
        if mdt is None:
            return slices
        try:
            return mdt.prune_slices(slices, filters, self.schema())
        except HudiError as exc:
            log.warning("column stats of %s unusable (%s); not skipping files", self.storage.url, exc)
            return slices

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
        return self._schema

    @cached_property
    def _schema(self) -> pa.Schema:
        data = self._data_schema()
        data = pa.schema([f for f in data if f.name not in META_FIELDS])
        if self.config.populate_meta_fields:
            return pa.schema(list(_META_SCHEMA) + list(data))
        return data

    def _data_schema(self) -> pa.Schema:
        schema = latest_data_schema(self.config, self.timeline)
        if schema is not None:
            return schema
        state = ReadState(self.config, self.timeline)
        for s in state.file_slices(self._view):
            if s.base_file:
                with self.storage.open(s.base_file) as f:
                    try:
                        return pq.ParquetFile(f).schema_arrow
                    except (pa.ArrowException, OSError, ValueError) as exc:
                        raise CorruptFileError(f"cannot read the schema of base file "
                                               f"{self.storage.uri(s.base_file)}: {exc}") from exc
        return pa.schema([])

    # -- planning ----------------------------------------------------------------------------
    def _instant(self, value, what: str) -> str | None:
        return normalize_instant(value, self.config.timeline_timezone, what)

    def _prepare(self, columns, filters) -> tuple[list[str], list[Filter]]:
        schema = self.schema()
        parsed = parse_filters(filters)
        check_columns(parsed, schema)
        if columns is None:
            cols = list(schema.names)
        else:
            if isinstance(columns, str):
                raise InvalidOptionError("columns must be a list of column names, not a string")
            try:
                cols = list(columns)
            except TypeError:
                raise InvalidOptionError(f"columns must be a list of column names, got {columns!r}") from None
            odd = [c for c in cols if not isinstance(c, str)]
            if odd:
                raise InvalidOptionError(f"columns must be column names (strings), got {odd}")
            missing = [c for c in cols if schema.get_field_index(c) < 0]
            if missing:
                raise SchemaError(f"unknown column(s) {missing}; the table has {', '.join(schema.names)}")
        return cols, parsed

    def _slices(self, state: ReadState, filters: list[Filter], read_optimized: bool) -> list[FileSlice]:
        if read_optimized and self.table_type != "MERGE_ON_READ":
            read_optimized = False
        pruner = PartitionPruner(self.config, self.schema(), filters)
        slices = state.file_slices(self._view, pruner.matches if pruner.active else None, read_optimized)
        return self._prune_by_stats(slices, filters)

    def file_slices(self, as_of=None, filters=None, read_optimized: bool = False) -> list[FileSlice]:
        """The latest file slice of every live file group, as of ``as_of``."""
        _, parsed = self._prepare(None, filters)
        state = ReadState(self.config, self.timeline, self._instant(as_of, "as_of"))
        return self._slices(state, parsed, read_optimized)

    # -- reading -----------------------------------------------------------------------------
    def _read_schema(self, columns: list[str], filters: list[Filter], with_logs: bool) -> pa.Schema:
        schema = self.schema()
        need = set(columns) | {f.column for f in filters}
        if with_logs:
            need |= set(MergeSpec.from_config(self.config).needed_columns())
            if self.config.populate_meta_fields:
                need.add("_hoodie_commit_time")
        return pa.schema([f for f in schema if f.name in need])

    def _read_slice(self, s: FileSlice, state: ReadState, columns: list[str], filters: list[Filter]) -> pa.Table:
        spec = MergeSpec.from_config(self.config)
        if s.log_files:
            schema = self._read_schema(columns, filters, True)
            table = merge_file_slice(self.storage, s, schema, spec, state.visible)
        elif s.base_file:
            schema = self._read_schema(columns, filters, False)
            table = align_table(read_base_file(self.storage, s.base_file, schema.names), schema,
                                self.storage.uri(s.base_file))
        else:
            return self._read_schema(columns, filters, False).empty_table()
        table = apply_filters(table, filters, table.schema)
        return table.select(columns)

    def scan(self, columns: Sequence[str] | None = None, filters=None, as_of=None,
             read_optimized: bool = False, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the snapshot one file slice at a time (memory bounded by the largest slice)."""
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                       or batch_size < 0):
            raise InvalidOptionError(f"batch_size must be a positive number of rows, got {batch_size!r}")
        cols, parsed = self._prepare(columns, filters)
        state = ReadState(self.config, self.timeline, self._instant(as_of, "as_of"))
        for s in self._slices(state, parsed, read_optimized):
            if s.log_files or not s.base_file:
                yield from self._read_slice(s, state, cols, parsed).to_batches(batch_size)
                continue
            yield from self._scan_base_file(s.base_file, cols, parsed, batch_size)

    def _scan_base_file(self, path: str, cols: list[str], parsed, batch_size: int | None
                        ) -> Iterator[pa.RecordBatch]:
        """One base file in batches; a truncated or corrupt file is a CorruptFileError naming
        it (at open or at the batch where the damage is), not Arrow's nameless ArrowInvalid."""
        schema = self._read_schema(cols, parsed, False)
        where = self.storage.uri(path)
        with self.storage.open(path) as f:
            try:
                pf = pq.ParquetFile(f)
                present = [c for c in schema.names if c in pf.schema_arrow.names]
                batches = pf.iter_batches(batch_size=batch_size or 65536, columns=present)
            except (pa.ArrowException, OSError, ValueError) as exc:   # ValueError: a garbled name
                raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                except (pa.ArrowException, OSError, ValueError) as exc:
                    raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc
                t = align_table(pa.Table.from_batches([batch]), schema, where)
                t = apply_filters(t, parsed, schema).select(cols)
                yield from t.to_batches()

    def read(self, columns: Sequence[str] | None = None, filters=None, as_of=None,
             read_optimized: bool = False) -> pa.Table:
        """Snapshot (or time-travel, or read-optimized) query as one Arrow table."""
        cols, parsed = self._prepare(columns, filters)
        state = ReadState(self.config, self.timeline, self._instant(as_of, "as_of"))
        pieces = [self._read_slice(s, state, cols, parsed)
                  for s in self._slices(state, parsed, read_optimized)]
        return _concat(pieces, self.schema(), cols)

    def read_incremental(self, start=None, end=None, columns: Sequence[str] | None = None,
                         filters=None) -> pa.Table:
        """Records written by commits in ``(start, end]``, each at its latest state in range."""
        cols, parsed = self._prepare(columns, filters)
        start_ts = self._instant(start, "start") or "0"
        end_ts = self._instant(end, "end")
        state = ReadState(self.config, self.timeline, end_ts)
        bound = state.bound
        in_range = [i for i in state.instants if bound(i) > start_ts]
        if state.active_start and start_ts < state.active_start:
            in_range += [i for i in state.archived_instants.values() if bound(i) > start_ts]
        if not in_range:
            return _concat([], self.schema(), cols)
        commit_times = sorted({i.timestamp for i in in_range})
        touched = self._touched_file_ids(in_range)
        read_cols = list(dict.fromkeys(cols + (["_hoodie_commit_time"] if self.config.populate_meta_fields else [])))
        pieces = []
        for s in self._slices(state, parsed, False):
            if touched is not None and s.file_id not in touched:
                continue
            t = self._read_slice(s, state, read_cols, parsed)
            if self.config.populate_meta_fields:
                t = t.filter(pc.is_in(t.column("_hoodie_commit_time"),
                                              value_set=pa.array(commit_times, pa.string())))
            pieces.append(t.select(cols))
        return _concat(pieces, self.schema(), cols)

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
        cols, _ = self._prepare(columns, None)
        if not wanted:
            return _concat([], self.schema(), cols)
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
        return _concat(pieces, self.schema(), cols)

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

    def _touched_file_ids(self, instants) -> set[str] | None:
        out: set[str] = set()
        for inst in instants:
            try:
                meta = self.timeline.metadata(inst) if self.timeline.get(inst.timestamp) else \
                    self.timeline.archived().metadata(inst)
            except HudiError:
                return None
            for stats in meta.partition_to_write_stats.values():
                out.update(st.file_id for st in stats if st.file_id)
        return out


def _concat(pieces: list[pa.Table], schema: pa.Schema, columns: list[str]) -> pa.Table:
    target = pa.schema([schema.field(c) for c in columns])
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
    from .writer.options import check_against_table
    opts = validate(options, WRITE_SCOPES)
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
    from .writer.options import check_against_table, check_write_arguments

    check_write_arguments(record_key=record_key, ordering_field=ordering_field, partition_by=partition_by,
                          table_type=table_type, table_version=table_version, table_name=table_name,
                          operation=operation)
    opts = validate(options, WRITE_SCOPES)
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


def new_table_config(storage: Storage, opts: Mapping[str, Any], *, record_key=None, ordering_field=None,
                     partition_by=None, table_type: str | None = "COPY_ON_WRITE", table_version=None,
                     table_name: str | None = None) -> TableConfig:
    """The config of a table the first write creates, from the arguments and Hudi's options
    (the options win over ``table_type``); nothing is written yet."""
    from .table_init import table_properties

    keys = _as_list(record_key or opts.get("hoodie.datasource.write.recordkey.field")
                    or opts.get("hoodie.table.recordkey.fields"))
    requested_version = table_version or opts.get("hoodie.write.table.version") or opts.get("hoodie.table.version")
    if not keys:
        raise InvalidOptionError("creating a table needs record_key (or option "
                                 "hoodie.datasource.write.recordkey.field)")
    version = int(requested_version or default("hoodie.write.table.version"))
    ttype = (opts.get("hoodie.datasource.write.table.type") or opts.get("hoodie.table.type")
             or table_type or "COPY_ON_WRITE").upper()
    ttype = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(ttype, ttype)
    if ttype not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        raise InvalidOptionError(f"table_type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    parts = _as_list(partition_by or opts.get("hoodie.datasource.write.partitionpath.field")
                     or opts.get("hoodie.table.partition.fields"))
    ordering = _as_list(ordering_field or opts.get("hoodie.datasource.write.precombine.field")
                        or opts.get("hoodie.table.ordering.fields") or opts.get("hoodie.table.precombine.field"))
    keygen_class = opts.get("hoodie.datasource.write.keygenerator.class") or opts.get("hoodie.table.keygenerator.class")
    keygen_type = opts.get("hoodie.datasource.write.keygenerator.type") or opts.get("hoodie.table.keygenerator.type")
    if not keygen_class and not keygen_type:
        keygen_type = ("NON_PARTITION" if not parts else
                       "COMPLEX" if len(keys) > 1 or len(parts) > 1 else "SIMPLE")
    name = table_name or opts.get("hoodie.table.name") or posixpath.basename(storage.root.rstrip("/")) or "hudi_table"
    extra = {k: str(v) for k, v in opts.items() if k.startswith("hoodie.keygen.timebased.")}
    if opts.get("hoodie.record.merge.mode"):
        extra["hoodie.record.merge.mode"] = opts["hoodie.record.merge.mode"]
    if opts.get("hoodie.table.timeline.timezone"):
        extra["hoodie.table.timeline.timezone"] = opts["hoodie.table.timeline.timezone"]
    props = table_properties(
        table_name=name, table_type=ttype, record_key_fields=keys, partition_fields=parts,
        ordering_fields=ordering, keygen_type=keygen_type, keygen_class=keygen_class,
        hive_style=option(opts, "hoodie.datasource.write.hive_style_partitioning"),
        url_encode=option(opts, "hoodie.datasource.write.partitionpath.urlencode"),
        populate_meta_fields=option(opts, "hoodie.populate.meta.fields"),
        table_version=version, database=opts.get("hoodie.database.name"), extra=extra or None)
    return TableConfig(props, storage.uri(".hoodie/hoodie.properties"))
