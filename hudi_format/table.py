"""``Table``: the public face of one Hudi table (config, timeline, schema and queries)."""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import write_api
from .config import TableConfig
from .errors import FileMissingError, HudiError, InvalidOptionError
from .options import READ_SCOPES, validate
from .read.align import align_table
from .read.filters import Filter
from .read.point import read_keys
from .engine.planner import ScanPlanner
from .read.scan import ScanPlan, read_task_batches, read_task_table, read_task_tables
from .read.snapshot import ReadState
from .services import archival, cleaning, clustering, compaction, log_compaction
from .services import rollback as rollbacks
from .services import savepoint as savepoints
from .storage import Storage
from .timeline import Instant, Timeline
from .transaction import WriteResult, table_lock
from .view import FileSlice

if TYPE_CHECKING:
    from .metadata.reader import MetadataTable
    from .read.merge import MergeSpec
from .write_api import write
from .writer.new_table import new_table_config

__all__ = ["Table", "open_table", "write", "new_table_config"]

#: ``filters`` of the read methods: ``(column, op, value)`` tuples, ANDed
Filters = Union[Iterable[Sequence[Any]], None]
#: an instant bound: ``yyyyMMddHHmmssSSS`` (shorter prefixes too) or a ``datetime``
InstantLike = Union[str, int, dt.datetime, None]
_T = TypeVar("_T")
#: Listings a read takes at most while each attempt misses another file a failed write undid.
LISTINGS = 5

log = logging.getLogger(__name__)

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
        """Reload the timeline so reads see commits made since the table was opened."""
        self.timeline = Timeline.load(self.storage, self.config)
        return self._relist()

    def _relist(self) -> "Table":
        """Forget the file listings (and the metadata table's state), keeping the timeline: the
        same snapshot, listed again at the next read."""
        self._planner = ScanPlanner(self.storage, self.config, self.timeline, self.options)
        self._view = self._planner.view
        return self

    def _listed_again(self, run: Callable[[], _T]) -> _T:
        """``run()``, again over a fresh listing if a file it listed is gone: the listing is
        made at the first read and kept, and meanwhile a failed write may have deleted a file
        this snapshot never needed (version 6 names a log file after its slice, so the new log
        of a write in flight is listed), and each new listing may hold the next failed write's
        file, so it lists again while every attempt misses another file (at most
        :data:`LISTINGS` times). A file missing twice, or a clean's (the listing then fails
        naming that clean; see ``ScanPlanner.check_not_cleaned``), fails the read."""
        missed: list[str] = []
        while True:
            try:
                return run()
            except FileMissingError as exc:
                self._list_again(exc, missed)

    def _list_again(self, exc: FileMissingError, missed: list[str]) -> None:
        """Relist after ``exc``, or raise it when listing again cannot help (see
        :meth:`_listed_again`); ``missed``: the attempts' errors so far."""
        if str(exc) in missed or len(missed) + 1 >= LISTINGS:
            raise exc
        missed.append(str(exc))
        log.info("%s: listing again (%s)", self.storage.url, exc)
        self._relist()

    # -- metadata table ----------------------------------------------------------------------
    @property
    def metadata_table(self) -> MetadataTable | None:
        """The metadata table (``.hoodie/metadata``) as of the loaded timeline, or ``None``
        when the table declares none or ``hoodie.metadata.enable`` is false for this reader."""
        mdt: MetadataTable | None = self._planner.metadata_table
        return mdt

    def _usable_metadata(self, partition: str) -> MetadataTable | None:
        """The metadata table when ``partition`` is declared and it is not behind the data."""
        mdt: MetadataTable | None = self._planner.usable_metadata(partition)
        return mdt

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
    def plan_scan(self, columns: Sequence[str] | None = None, filters: Filters = None, as_of: InstantLike = None,
                  read_optimized: bool = False, incremental: tuple[InstantLike, InstantLike] | None = None) -> ScanPlan:
        """The query as picklable scan tasks (one per file slice), pinned to the loaded
        timeline: what ``read``/``scan`` run here and what an engine runs on its workers
        (``hudi_format.engine.read_task``)."""
        return self._planner.plan(columns, filters, as_of, read_optimized, incremental)

    def file_slices(self, as_of: InstantLike = None, filters: Filters = None,
                    read_optimized: bool = False) -> list[FileSlice]:
        """The latest file slice of every live file group, as of ``as_of`` (``FileMissingError``
        when the cleaner, a rollback or a restore has removed slices it needs, as reads do)."""
        _, parsed = self._planner.prepare(None, filters)
        state = self._planner.state(self._planner.instant(as_of, "as_of"))
        return self._planner.checked_slices(state, parsed, read_optimized)

    # -- reading -----------------------------------------------------------------------------
    def _read_slice(self, s: FileSlice, state: ReadState, columns: list[str], filters: list[Filter]) -> pa.Table:
        """One slice read as of ``state`` (the scan-task path, in this process)."""
        return read_task_table(self.storage, self._planner.task(s, state, columns, filters))

    def scan(self, columns: Sequence[str] | None = None, filters: Filters = None, as_of: InstantLike = None,
             read_optimized: bool = False, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the snapshot one file slice at a time (memory bounded by the largest slice).
        A file gone since the listing is listed again before the first batch, as ``read`` does;
        after it, the ``FileMissingError`` reaches the caller."""
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                       or batch_size < 0):
            raise InvalidOptionError(f"batch_size must be a positive number of rows, got {batch_size!r}")
        missed: list[str] = []
        while True:
            started = False
            try:
                for task in self.plan_scan(columns, filters, as_of, read_optimized):
                    for batch in read_task_batches(self.storage, task, batch_size):
                        started = True
                        yield batch
                return
            except FileMissingError as exc:
                if started:   # rows already given cannot be taken back: the caller reads again
                    raise
                self._list_again(exc, missed)   # as read() does, before the first batch only

    def read(self, columns: Sequence[str] | None = None, filters: Filters = None, as_of: InstantLike = None,
             read_optimized: bool = False) -> pa.Table:
        """Snapshot (or time-travel, or read-optimized) query as one Arrow table."""
        def run() -> pa.Table:
            plan = self.plan_scan(columns, filters, as_of, read_optimized)
            return _concat(read_task_tables(self.storage, plan.tasks), plan.schema)
        return self._listed_again(run)

    def read_incremental(self, start: InstantLike = None, end: InstantLike = None,
                         columns: Sequence[str] | None = None, filters: Filters = None) -> pa.Table:
        """Records written by commits in ``(start, end]``, each at its latest state in range."""
        def run() -> pa.Table:
            plan = self.plan_scan(columns, filters, incremental=(start, end))
            return _concat(read_task_tables(self.storage, plan.tasks), plan.schema)
        return self._listed_again(run)

    def lookup(self, keys: str | bytes | Iterable[Any] | pa.Array | pa.ChunkedArray,
               columns: Sequence[str] | None = None) -> pa.Table:
        """The current rows of the given record keys (missing keys give no row), read from the
        file groups the record index (or, without one, the bloom filters) points at."""
        wanted = _lookup_keys(keys)
        cols, _ = self._planner.prepare(columns, None)
        target = pa.schema([self.schema().field(c) for c in cols])
        if not len(wanted):
            return _concat([], target)
        def run() -> pa.Table:
            state = self._planner.state()
            spec = self._planner.merge_spec
            key_column = self._key_column(spec)
            key_cols = [key_column] if key_column is not None else list(spec.record_key_fields)
            read_cols = list(dict.fromkeys(cols + key_cols))
            found = self._lookup_slices(state, wanted)
            tasks = [self._planner.task(s, state, read_cols, []) for s, _ in found]
            tables = read_keys(self.storage, tasks, [k for _, k in found], spec, key_column)
            return _concat([t.select(cols) for t in tables], target)
        return self._listed_again(run)

    def _key_column(self, spec: MergeSpec) -> str | None:
        """The column that holds each row's record key as is: the key field itself when the key
        is one string field of the simple (or non-partitioned) key generator, whose value is the
        key (a lookup asking for that field reads one string column fewer), else
        ``_hoodie_record_key`` (``None`` in a table without meta fields: keys are recomputed)."""
        fields = spec.record_key_fields
        if len(fields) == 1 and self.config.keygen_type in ("SIMPLE", "NON_PARTITION"):
            schema = self.schema()
            i = schema.get_field_index(fields[0])
            if i >= 0 and (pa.types.is_string(schema.field(i).type) or pa.types.is_large_string(schema.field(i).type)):
                return str(fields[0])
        return "_hoodie_record_key" if self.config.populate_meta_fields else None

    def _lookup_slices(self, state: ReadState, keys: pa.Array) -> list[tuple[FileSlice, pa.Array]]:
        """Slices to read for ``keys`` (distinct strings), each with the keys to keep from it."""
        from .metadata.keys import BLOOM_FILTERS, RECORD_INDEX
        mdt = self._usable_metadata(RECORD_INDEX)
        if mdt is not None and mdt.ahead_of_timeline():
            # commits completed since this snapshot was loaded: the index describes a newer
            # table (keys clustered, moved or deleted since), so the snapshot is searched
            log.info("the record index of %s is ahead of this snapshot: looking up through the "
                     "bloom filters", self.storage.url)
            mdt = None
        if mdt is not None:
            try:
                located = mdt.record_index(keys)
            except HudiError as exc:
                log.warning("record index of %s unusable (%s)", self.storage.url, exc)
            else:
                return self._located_slices(state, located)
        slices = state.file_slices(self._view)
        self._planner.check_not_cleaned(state, slices)
        mdt = self._usable_metadata(BLOOM_FILTERS)
        blooms = None
        if mdt is not None:
            try:
                blooms = mdt.bloom_filters([(s.partition_path, s.base_file_name or "")
                                            for s in slices if s.base_file])
            except HudiError as exc:
                log.warning("bloom filters of %s unusable (%s)", self.storage.url, exc)
        if blooms is not None:
            out = []
            for s in slices:
                bloom = blooms.get((s.partition_path, s.base_file_name or "")) if s.base_file else None
                if s.log_files or bloom is None or pc.any(bloom.might_contain_all(keys)).as_py():
                    out.append((s, keys))
            return out
        from .base_file import read_footer
        from .writer.index import candidate_slices_by_bloom
        try:
            return [(s, keys) for s in candidate_slices_by_bloom(self.storage, slices, keys, read_footer)]
        except HudiError:
            return [(s, keys) for s in slices]

    def _located_slices(self, state: ReadState, located: pa.Table) -> list[tuple[FileSlice, pa.Array]]:
        """The live slices the record index names (it is global: each key is read from the one
        file group it names), each with its keys; only the partitions named are listed."""
        if not located.num_rows:
            return []
        partition = located.column("partition").combine_chunks()
        partition = pc.if_else(pc.equal(partition, "."), "", partition)  # the non-partitioned table
        located = pa.table({"key": located.column("key"), "partition": partition,
                            "file_id": located.column("file_id")})
        groups = located.group_by(["partition", "file_id"], use_threads=False).aggregate([("key", "list")])
        lists = groups.column("key_list").combine_chunks()
        by_group = {(p, f): lists[i].values for i, (p, f) in enumerate(
            zip(groups.column("partition").to_pylist(), groups.column("file_id").to_pylist()))}
        partitions = {p for p, _ in by_group}
        slices = state.file_slices(self._view, partitions.__contains__)
        self._planner.check_not_cleaned(state, slices, partitions.__contains__)
        return [(s, by_group[(s.partition_path, s.file_id)]) for s in slices
                if (s.partition_path, s.file_id) in by_group]

    # -- writing -----------------------------------------------------------------------------
    def write(self, data: Any, operation: str | None = None,
              options: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``data`` (anything ``pyarrow.table()`` accepts, or batches as they come: a
        RecordBatchReader, a ``pyarrow.dataset`` Dataset or Scanner, an iterator of batches)
        to this table as one commit. insert and bulk_insert stream such input in bounded
        memory; the other operations read it whole first.

        ``operation``: insert, upsert, bulk_insert, delete, insert_overwrite,
        insert_overwrite_table or delete_partition (default: option
        ``hoodie.datasource.write.operation``, else upsert). The same path as ``hudi_format.write``:
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
        loading the timeline stays fast. Returns the archived instants, oldest first.

        Under the table lock, as inline archival runs (and Hudi's archiver): two archivers over
        the same instants would copy files the other is deleting."""
        with table_lock(self.storage, options):
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
        savepoints.delete_savepoint(self.storage, self.config, instant)
        self.refresh()

    def restore(self, instant: str, options: Mapping[str, Any] | None = None) -> Instant:
        """Bring the table back to the savepoint ``instant``, rolling back every later commit.
        Returns the restore instant."""
        return self._refreshed(savepoints.restore(self.storage, self.config, instant, options))

    def _refreshed(self, result: _T) -> _T:
        self.refresh()
        return result


def _lookup_keys(keys: Any) -> pa.Array:
    """The distinct non-null record keys of ``Table.lookup``'s argument, as strings."""
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    elif isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    elif not isinstance(keys, pa.Array):
        if not hasattr(keys, "__iter__"):
            raise InvalidOptionError(f"keys must be a record key or a list of them, got {keys!r}")
        keys = pa.array([k.decode() if isinstance(k, bytes) else None if k is None else str(k)
                         for k in keys], pa.string())
    if not pa.types.is_string(keys.type) and not pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.string())
    return pc.unique(pc.drop_null(keys.cast(pa.string())))


def _concat(pieces: list[pa.Table], target: pa.Schema) -> pa.Table:
    pieces = [p for p in pieces if p.num_rows]
    if not pieces:
        return target.empty_table()
    return pa.concat_tables([align_table(p, target) for p in pieces])


def open_table(path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None,
               options: dict[str, Any] | None = None) -> Table:
    """Open the Hudi table at ``path`` (local path or fsspec URL such as ``s3://bucket/t``).

    ``options``: reader options, Hudi's keys (``hoodie.metadata.enable``: list files through
    the metadata table, default true)."""
    return Table(Storage(path, storage_options), options=options)
