"""``Table``: the public face of one Hudi table (config, timeline, schema and queries)."""

from __future__ import annotations

import datetime as dt
import logging
import os
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping, Sequence, TypeVar, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .base_file import read_footer
from .config import META_FIELDS, TableConfig
from .errors import CorruptFileError, HudiError, InvalidOptionError, SchemaError
from .metadata.keys import BLOOM_FILTERS, COLUMN_STATS, FILES, RECORD_INDEX
from .metadata.reader import MetadataTable
from .options import READ_SCOPES, option, validate
from .read.align import align_table
from .read.bounds import normalize_instant
from .read.filters import Filter, PartitionPruner, apply_filters, check_columns, parse_filters
from .read.merge import MergeSpec, merge_file_slice, read_base_file, record_keys
from .read.snapshot import ReadState
from .read.table_schema import latest_data_schema
from .services import archival, cleaning, clustering, compaction, log_compaction
from .services import rollback as rollbacks
from .services import savepoint as savepoints
from .storage import Storage
from .timeline import Instant, Timeline
from .transaction import WriteResult
from .view import FileSlice, FileSystemView
from . import write_api
from .write_api import new_table_config, write
from .writer.index import candidate_slices_by_bloom

__all__ = ["Table", "open_table", "write", "new_table_config"]

#: ``filters`` of the read methods: ``(column, op, value)`` tuples, ANDed
Filters = Union[Iterable[Sequence[Any]], None]
#: an instant bound: ``yyyyMMddHHmmssSSS`` (shorter prefixes too) or a ``datetime``
InstantLike = Union[str, int, dt.datetime, None]
_T = TypeVar("_T")

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
        """Reload the timeline (and drop what was derived from it): reads see the commits made
        since the table was opened. Writes and services through this object refresh it."""
        self.timeline = Timeline.load(self.storage, self.config)
        self._metadata = None
        self._view = FileSystemView(self.storage, self.config, lister=self._metadata_listing)
        self.__dict__.pop("_schema", None)
        return self

    # -- metadata table ----------------------------------------------------------------------
    @property
    def metadata_table(self) -> MetadataTable | None:
        """The metadata table (``.hoodie/metadata``) as of the loaded timeline, or ``None``
        when the table declares none or ``hoodie.metadata.enable`` is false for this reader."""
        if not option(self.options, "hoodie.metadata.enable") or not self.config.metadata_partitions:
            return None
        if self._metadata is None:
            self._metadata = MetadataTable(self.storage, self.config, self.timeline)
        return self._metadata

    def _usable_metadata(self, partition: str) -> MetadataTable | None:
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

    def _metadata_listing(self) -> Any:
        """Partition listing from the metadata table's ``files`` partition (``None``: list storage)."""
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
        """``COPY_ON_WRITE`` or ``MERGE_ON_READ``."""
        return self.config.table_type

    @property
    def version(self) -> int:
        """The table version (6, 8 or 9): it decides the timeline layout and file formats."""
        return self.config.version

    @property
    def name(self) -> str:
        """``hoodie.table.name``."""
        return self.config.name

    @property
    def path(self) -> str:
        """The table's URL (a local path is an absolute ``file`` path)."""
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
    def _instant(self, value: InstantLike, what: str) -> str | None:
        return normalize_instant(value, self.config.timeline_timezone, what)

    def _prepare(self, columns: Sequence[str] | None, filters: Filters) -> tuple[list[str], list[Filter]]:
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

    def file_slices(self, as_of: InstantLike = None, filters: Filters = None,
                    read_optimized: bool = False) -> list[FileSlice]:
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

    def scan(self, columns: Sequence[str] | None = None, filters: Filters = None, as_of: InstantLike = None,
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

    def _scan_base_file(self, path: str, cols: list[str], parsed: list[Filter], batch_size: int | None
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

    def read(self, columns: Sequence[str] | None = None, filters: Filters = None, as_of: InstantLike = None,
             read_optimized: bool = False) -> pa.Table:
        """Snapshot (or time-travel, or read-optimized) query as one Arrow table."""
        cols, parsed = self._prepare(columns, filters)
        state = ReadState(self.config, self.timeline, self._instant(as_of, "as_of"))
        pieces = [self._read_slice(s, state, cols, parsed)
                  for s in self._slices(state, parsed, read_optimized)]
        return _concat(pieces, self.schema(), cols)

    def read_incremental(self, start: InstantLike = None, end: InstantLike = None,
                         columns: Sequence[str] | None = None, filters: Filters = None) -> pa.Table:
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

    def lookup(self, keys: str | bytes | Iterable[Any] | pa.Array | pa.ChunkedArray,
               columns: Sequence[str] | None = None) -> pa.Table:
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
        try:
            return [(s, keys) for s in candidate_slices_by_bloom(self.storage, slices, values, read_footer)]
        except HudiError:
            return [(s, keys) for s in slices]

    def _touched_file_ids(self, instants: Iterable[Instant]) -> set[str] | None:
        """File groups the ``instants`` wrote (``None``: some commit metadata is unreadable, so
        every group must be read)."""
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

    # -- writing -----------------------------------------------------------------------------
    def write(self, data: Any, operation: str = "upsert",
              options: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``data`` (anything ``pyarrow.table()`` accepts) to this table as one commit.

        ``operation``: insert, upsert, bulk_insert, delete, insert_overwrite,
        insert_overwrite_table or delete_partition. The same path as ``hudi_format.write``:
        options that contradict the table are refused and writes whose writer died are rolled
        back first. Returns the completed instant; its ``service_errors`` are the inline
        services that failed after the commit was durable (logged, never raised). The table
        is refreshed, so reads see the new commit."""
        return self._refreshed(write_api.write_data(self.storage, self.config, data, operation, options))

    # -- table services ----------------------------------------------------------------------
    # Each runs on the table's storage and config and refreshes the table, so a read after a
    # service sees its result. Services commit through the same transaction as writes.
    def compact(self, options: Mapping[str, Any] | None = None) -> Instant | None:
        """Merge the log files of MERGE_ON_READ file groups into new base files, so reads stop
        paying for the merge. Pending compactions run first (oldest first), then a new one is
        scheduled and run, as Hudi's inline compaction does. Returns the last compaction
        completed, or ``None`` when there was nothing to compact."""
        return self._refreshed(compaction.compact(self.storage, self.config, options))

    def log_compact(self, options: Mapping[str, Any] | None = None) -> Instant | None:
        """Merge many small log blocks of a file slice into one log file (no new base file),
        cheaper than a compaction when updates are small. Returns the last log compaction
        completed, or ``None`` when nothing ran."""
        return self._refreshed(log_compaction.log_compact(self.storage, self.config, options))

    def cluster(self, sort_by: str | Sequence[str] | None = None,
                options: Mapping[str, Any] | None = None) -> Instant | None:
        """Rewrite small or unsorted file groups into fewer, larger ones (sorted by ``sort_by``,
        so filters on those columns prune more files). Pending clusterings run first. Returns
        the last clustering completed, or ``None`` when there was nothing to cluster."""
        return self._refreshed(clustering.cluster(self.storage, self.config, sort_by=sort_by, options=options))

    def clean(self, options: Mapping[str, Any] | None = None) -> Instant | None:
        """Delete file versions no query needs any more under the cleaner policy
        (``hoodie.cleaner.policy``; by default the last 10 commits stay readable), bounding
        storage. Returns the last clean completed, or ``None`` when there was nothing to do."""
        return self._refreshed(cleaning.clean(self.storage, self.config, options))

    def archive(self, options: Mapping[str, Any] | None = None) -> list[Instant]:
        """Move old completed instants from the active timeline into the archived one, so
        loading the timeline stays fast. Returns the archived instants, oldest first."""
        return self._refreshed(archival.archive(self.storage, self.config, options))

    def rollback(self, instant: str | Instant, options: Mapping[str, Any] | None = None) -> Instant:
        """Undo ``instant``: a pending one, or the latest completed write (its files are
        removed and readers go back to the commit before it). Returns the rollback instant."""
        return self._refreshed(rollbacks.rollback(self.storage, self.config, instant, options))

    def savepoint(self, instant: str, user: str | None = None, comment: str = "") -> Instant:
        """Keep the table restorable to the completed write ``instant``: the cleaner and
        archival keep its files. Returns the savepoint instant (named by ``instant``)."""
        return self._refreshed(savepoints.savepoint(self.storage, self.config, instant, user, comment))

    def delete_savepoint(self, instant: str) -> None:
        """Drop the savepoint ``instant``, letting the cleaner remove the files it kept."""
        self._refreshed(savepoints.delete_savepoint(self.storage, self.config, instant))

    def restore(self, instant: str, options: Mapping[str, Any] | None = None) -> Instant:
        """Bring the table back to the savepoint ``instant``, rolling back every later commit.
        Returns the restore instant."""
        return self._refreshed(savepoints.restore(self.storage, self.config, instant, options))

    def _refreshed(self, result: _T) -> _T:
        self.refresh()
        return result


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
