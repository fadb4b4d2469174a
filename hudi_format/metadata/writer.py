"""Writing the metadata table in the same transaction as each data-table instant.

Apache Hudi keeps the metadata table (MDT) in step with the data table by writing, for every
data-table instant that changes files, a deltacommit with the *same instant time* on the MDT,
completed *before* the data instant completes (``HoodieBackedTableMetadataWriter``). Readers then
only trust MDT log blocks whose instant is completed on the data timeline, so a crash between
the two commits leaves nothing visible; the data rollback that follows rolls the MDT
deltacommit back too.

What each data action writes (``HoodieTableMetadataUtil.convertMetadataTo*Records``):

==================  =========================================================================
data action         metadata records
==================  =========================================================================
commit/deltacommit  ``files``: the partitions touched (``__all_partitions__``) and every file
replacecommit       written with its size; ``column_stats``: min/max/null/value counts of the
compaction          indexed columns of every file written; ``bloom_filters``: the bloom filter
logcompaction       of every base file written; ``record_index``: the new location of every
clustering          inserted or moved key and deletes of keys gone (not for compaction)
clean               ``files``: the deleted files (and dropped partitions); tombstones of their
                    column stats and bloom filters
rollback            the MDT deltacommit of the rolled-back instant is rolled back (its files
                    deleted, an MDT rollback instant at the data rollback's time); a data
                    instant already compacted into MDT base files drops the MDT, which the
                    next write bootstraps again
restore             the MDT is dropped (and bootstrapped again by the next write)
==================  =========================================================================

Table services of the MDT itself run before each new deltacommit (Hudi 1.x's
``performTableServices``), so the latest deltacommit is never compacted yet and rolling back the
latest data commit only undoes a deltacommit: cleaning with ``KEEP_LATEST_COMMITS``
(``max(20, 1.2 * hoodie.cleaner.commits.retained)`` commits, as
``HoodieMetadataWriteUtils.createMetadataWriteConfig``), compaction once
``hoodie.metadata.compact.max.delta.commits`` deltacommits followed the last one (all file
groups, HFile base files, ``UnBoundedCompactionStrategy``, :mod:`.compaction`), and archival of
the MDT timeline. Cleaning, archival and the plan execution of rollbacks are the data table's
services, run on the MDT: the services layer hands them in, this layer
never imports them (:class:`MetadataTableServices`). Rollbacks are in :mod:`.rollback`, the HFile encodings in :mod:`.hfiles`.

The transaction layer reaches this through :mod:`hudi_format.metadata.commit` (the metadata
hook of every data commit).
"""

from __future__ import annotations

import logging
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..errors import HudiError
from ..log.encode import encode_delete_block
from ..log.writer import write_log_file
from ..storage import Storage
from ..table_init import write_partition_metadata
from ..timeline import Instant, Timeline
from ..timeline.clock import InstantClock
from ..timeline.writer import TimelineWriter, commit_metadata
from ..timeline.write_stat import WriteStat
from ..view import FileSlice, FileSystemView
from ..view.file_names import BaseFileName, parse_log_file_name
from . import init as I
from . import keys as K
from . import payloads as P
from .key_changes import KeyChanges
from .record_index_delta import record_index_delta
from .record_index_update import RecordIndexGroup, RecordIndexTarget, RecordIndexUpdate, write_changes, write_group
from .data_files import DataFiles
from .payloads import Delta, records_delta
from .reader import MetadataTable
from ..options import option
from .hfiles import (cells_by_file_group, hfile_data_block, hfile_data_block_of, write_base_hfile,  # noqa: F401
                     write_base_hfile_of)
from .compaction import MetadataCompaction
from .rollback import MetadataRollback
from .options import (_META_COLUMNS_INDEXED, _RECORD_INDEX_SKIPPED_OPS, _WRITE_ACTIONS,  # noqa: F401
                      DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, MetadataTableError)


log = logging.getLogger(__name__)

__all__ = [
    "MetadataTableError", "MetadataWriter", "MetadataTableServices", "DataTableSnapshot", "Delta",
    "is_metadata_table", "metadata_enabled",
]


def _paths(stats: Iterable[WriteStat]) -> list[str]:
    """The files of metadata write stats (a rolled-over log file: each of them)."""
    return [posixpath.join(st.partition_path or "", n) for st in stats for n in (st.log_files or ())]


def is_metadata_table(storage: Storage, config: TableConfig) -> bool:
    return storage.url.rstrip("/").endswith(K.METADATA_TABLE_DIR) or \
        config.get("hoodie.table.keygenerator.type") == "HOODIE_TABLE_METADATA" or \
        config.get("hoodie.table.keygenerator.class") == I.METADATA_KEYGEN_CLASS


def metadata_enabled(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None) -> bool:
    return bool(option(options, "hoodie.metadata.enable")) and not is_metadata_table(storage, config)


class DataTableSnapshot(Protocol):
    """What the metadata writer needs of the operation's snapshot of the data table
    (``hudi_format.transaction.TableSnapshot`` is one): the timeline it loaded, so the writer
    does not list it again. Declared here because the transaction layer sits above."""

    @property
    def timeline(self) -> Timeline: ...


class MetadataTableServices(Protocol):
    """What the MDT needs from the table services layer above this one.

    The MDT is a Hudi table of its own: it is cleaned and archived, and its deltacommits rolled
    back, by the same services as the data table (Hudi's metadata writer drives them through a
    write client of its own). Those services commit through the transaction layer, which calls
    this one, so the metadata writer never imports them: the services layer hands them in
    (``hudi_format.services.metadata_table``) through the transaction layer's metadata hook.
    """

    def run(self, writer: "MetadataWriter") -> None:
        """Clean, compact and archive the MDT when due, before ``writer`` adds a deltacommit
        (under the data table's lock). Never raises: the data commit goes on."""

    def execute_rollback_plan(self, storage: Storage, config: TableConfig, plan: Mapping[str, Any],
                              rollback_time: str) -> dict:
        """Carry out a rollback plan on the table at ``storage`` (idempotent); return its
        ``HoodieRollbackMetadata``."""


# -- the writer --------------------------------------------------------------------------------------
class MetadataWriter(MetadataRollback, MetadataCompaction):
    """Writes the metadata table of the data table at ``storage`` (config ``config``).

    ``clock`` is the data table's instant clock (the MDT's completion times come from it, as
    Hudi builds the MDT meta client with the data table's time generator); ``inflight`` is the
    data instant being completed, whose files bootstrapping must not list; ``services`` are the
    MDT's own table services (cleaning, archival, rollback plans), given by the services layer:
    without them the MDT is never cleaned nor archived and cannot roll back a deltacommit.
    """

    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                 clock: InstantClock | None = None, inflight: str | None = None,
                 services: MetadataTableServices | None = None, *, snapshot: DataTableSnapshot | None = None):
        self.storage = storage
        # the data table as the operation loaded it (the commit: listed under its lock);
        # None: its timeline is loaded on first use
        self._data_timeline = snapshot.timeline if snapshot is not None else None
        self.services = services
        self.config = config
        self.options = dict(options or {})
        self.md = I.metadata_storage(storage)
        self.clock = clock or InstantClock(storage, config)
        self.inflight_instant = inflight
        self._md_config: TableConfig | None = None
        self._md_tl: Timeline | None = None

    # -- state -------------------------------------------------------------------------------
    @property
    def md_config(self) -> TableConfig:
        if self._md_config is None:
            self._md_config = TableConfig.load(self.md)
        return self._md_config

    def data_timeline(self) -> Timeline:
        """The data table's timeline: the snapshot's (listed under the lock) or loaded once."""
        if self._data_timeline is None:
            self._data_timeline = Timeline.load(self.storage, self.config)
        return self._data_timeline

    def md_timeline(self) -> Timeline:
        """The MDT's timeline, listed once: it is written only under the data table's lock,
        which the writer holds, so the listing stays current until this process changes it."""
        self._md_tl = Timeline.current(self.md, self.md_config, self._md_tl)
        return self._md_tl

    def _md_writer(self) -> TimelineWriter:
        return TimelineWriter(self.md, self.md_config, clock=self.clock)

    def exists(self) -> bool:
        """Whether the MDT is there: its config, once read, says so without another request
        (``drop`` and ``ensure`` forget it); else by reading it (one GET, not a HEAD and then
        the GET the next step makes)."""
        if self._md_config is not None:
            return True
        try:
            _ = self.md_config
            return True
        except HudiError:
            return I.metadata_table_exists(self.storage)

    # -- the MDT's own table services (given by the services layer) ------------------------------
    def run_table_services(self) -> None:
        """Clean, compact and archive the MDT when due, before a new deltacommit."""
        if self.services is None:
            log.debug("no table services given for the metadata table of %s", self.storage.url)
            return
        self.services.run(self)

    def execute_rollback_plan(self, plan: Mapping[str, Any], rollback_time: str) -> dict:
        """Carry out an MDT rollback plan with the services layer's rollback executor."""
        if self.services is None:
            raise MetadataTableError(f"cannot roll back metadata instant {plan['instantToRollback']['commitTime']} "
                                     f"of {self.storage.url}: no table services were given to the "
                                     "metadata writer (hudi_format.services installs them)")
        return self.services.execute_rollback_plan(self.md, self.md_config, plan, rollback_time)

    def latest_slices(self, partition: str, md_timeline: Timeline | None = None) -> list[FileSlice]:
        """Latest slice of each file group of a metadata partition (completed MDT instants), by id.
        ``md_timeline``: the MDT timeline the caller just listed (not listed again)."""
        from ..read.snapshot import ReadState
        state = ReadState(self.md_config, md_timeline if md_timeline is not None else self.md_timeline())
        view = FileSystemView(self.md, self.md_config)
        slices = state.file_slices(view, partitions=[partition])   # lists that folder alone
        return sorted(slices, key=lambda s: s.file_id)

    def staleness(self) -> str | None:
        return MetadataTable(self.storage, self.config, self.data_timeline(),
                             mdt_timeline=self.md_timeline(), mdt_config=self.md_config).staleness()

    # -- preparing the metadata table ---------------------------------------------------------
    def ensure(self) -> bool:
        """Create/bootstrap the metadata table (and drop a stale one first); False when it
        cannot be bootstrapped now (pending data instants), leaving the table without one."""
        wanted = I.enabled_partitions(self.options)
        if self.exists() and K.FILES in self.config.metadata_partitions:
            reason = self.staleness()
            if reason is not None:
                log.warning("metadata table of %s is out of date (%s); building it again",
                            self.storage.url, reason)
                self.drop()
        elif self.exists():
            self.drop()   # a leftover without a files partition: start again
        missing = [p for p in wanted if p not in self.config.metadata_partitions]
        if not missing:
            return True
        if K.FILES in missing and self.exists():
            self.drop()
        try:
            I.create_metadata_table(self.storage, self.config)
            self._md_config = None
            I.initialize_partitions(self, missing)
        except MetadataTableError as exc:
            log.warning("%s", exc)
            return K.FILES in self.config.metadata_partitions
        return True

    def drop(self) -> None:
        self.config = I.delete_metadata_table(self.storage, self.config)
        self._md_config = None

    def clear_partition(self, partition: str) -> None:
        try:
            for f in list(self.md.walk_files(partition)):
                self.md.delete(f.path)
        except (HudiError, OSError, FileNotFoundError):
            pass

    def create_file_groups(self, partition: str, file_ids: list[str], instant: str) -> None:
        """Each file group's first log file: an empty delete block (``initializeFileGroups``)."""
        write_partition_metadata(self.md, partition, instant, 1)
        empty = pa.table({"record_key": pa.array([], pa.string()),
                          "partition_path": pa.array([], pa.string())})
        block = encode_delete_block(empty, instant)
        for fid in file_ids:
            write_log_file(self.md, partition, fid, instant, [block], I.INIT_WRITE_TOKEN, version=1)

    def bulk_commit(self, instant: str, partition: str, file_ids: list[str],
                    cells: Mapping[int, tuple[pa.Array, pa.Array]]) -> Instant:
        """The initial deltacommit of a partition: one base HFile per file group with records
        (``cells``: each file group's keys, binary and sorted, and values, as ``cells_of``)."""
        writer = self._md_writer()
        inflight = writer.transition_to_inflight(writer.create_requested("deltacommit", instant))
        written: list[str] = []

        def one(i: int) -> WriteStat:
            keys, values = cells[i]
            fid = file_ids[i]
            rel = posixpath.join(partition, BaseFileName(fid, f"{i}-0-{i}", instant, ".hfile").name)
            written.append(rel)
            size = write_base_hfile_of(self.md, rel, keys, values, partition)
            return WriteStat(file_id=fid, path=rel, partition_path=partition, num_writes=len(keys),
                             num_inserts=len(keys), total_write_bytes=size)

        try:
            # file groups on threads: gzip and the bloom filter release the GIL
            with ThreadPoolExecutor(max(1, min(len(cells), os.cpu_count() or 1))) as pool:
                stats = list(pool.map(one, sorted(cells)))
            meta = commit_metadata(stats, operation_type="BULK_INSERT_PREPPED",
                                   extra_metadata={"schema": P.DATA_SCHEMA_JSON})
            return writer.complete(inflight, meta)
        except BaseException:
            self._discard(writer, inflight, written)
            raise

    # -- deltacommits ----------------------------------------------------------------------------
    def commit(self, instant: str, deltas: Mapping[str, Delta], operation: str = "UPSERT_PREPPED",
               update: RecordIndexUpdate | None = None) -> Instant | None:
        """One deltacommit on the MDT at ``instant`` with these partitions' deltas. ``update``:
        an engine's record index changes, which it writes itself (:mod:`.record_index_update`);
        the ``record_index`` delta then holds only keys of replaced file groups to delete."""
        md_tl = self.md_timeline()
        same = [i for i in md_tl.instants if i.timestamp == instant]
        taken = [i for i in same if i.action != "deltacommit"]
        if taken:   # never another action's instant to roll back or remove as a leftover of ours
            raise MetadataTableError(f"the metadata table of {self.storage.url} has a {taken[0].action} at "
                                     f"{instant}, the time of this data instant; its deltacommit cannot be written")
        if any(i.is_completed for i in same):
            if self.data_timeline().is_completed(instant):
                raise MetadataTableError(f"the metadata table of {self.storage.url} already has a "
                                         f"completed instant {instant}")
            # A run of this data instant died after its MDT deltacommit (readers ignore that
            # deltacommit while the data instant is pending): roll it back, then apply again,
            # as Hudi does for a re-attempted commit.
            log.warning("metadata table of %s: rolling back deltacommit %s of an unfinished data "
                        "instant before applying it again", self.storage.url, instant)
            self.rollback(instant, self.clock.new_instant_time(), {})
            if not self.exists() or K.FILES not in self.config.metadata_partitions:
                return None   # dropped (it reached behind a compaction); the next write rebuilds it
            md_tl = self.md_timeline()
            same = [i for i in md_tl.instants if i.timestamp == instant]
        for i in same:   # a pending leftover of a failed attempt
            self._rollback_files(i)
            TimelineWriter(self.md, self.md_config).delete_instant_files(i)
        writer = self._md_writer()
        # md_tl was listed just now, under the data table's lock: it has no completed `instant`
        inflight = writer.transition_to_inflight(writer.create_requested("deltacommit", instant, known_new=True),
                                                 known_requested=True)
        stats, written = [], []
        task = 0
        try:
            for partition in sorted(set(deltas) | ({K.RECORD_INDEX} if update is not None else set())):
                delta = deltas.get(partition) or Delta()
                engine_writes = partition == K.RECORD_INDEX and update is not None
                if not (delta or engine_writes) or partition not in self.config.metadata_partitions:
                    continue
                slices = self.latest_slices(partition, md_tl)
                if not slices:
                    raise MetadataTableError(f"metadata partition {partition} has no file groups")
                target = RecordIndexTarget(
                    self.md.url, instant, P.instant_millis(instant, self.config.timeline_timezone),
                    self.md_config.version,
                    tuple(RecordIndexGroup(s.file_id, s.base_instant, s.base_file_name or "") for s in slices),
                    partition)
                if engine_writes:
                    assert update is not None
                    engine_stats = self._engine_writes(update, target, delta, inflight)
                    written.extend(_paths(engine_stats))
                    stats.extend(engine_stats)
                    continue
                task += 1
                if delta.changes is not None:   # the record index, as an engine's workers write it
                    group_stats = write_changes(self.md, target, delta.changes, f"{task}-1-{task}")
                else:
                    ups = cells_by_file_group(delta.upserts, len(slices))
                    group_stats = [write_group(self.md, target, i, ups[i], None, f"{task}-1-{task}") for i in sorted(ups)]
                for st in group_stats:
                    written.extend(_paths([st]))
                    stats.append(st)
            meta = commit_metadata(stats, operation_type=operation,
                                   extra_metadata={"schema": P.DATA_SCHEMA_JSON})
            # md_tl (listed above, under the data table's lock) has no completed `instant`;
            # this writer created the inflight file under the data table's lock just now.
            # keep_clock: the data instant completes next under the same time lock hold (when
            # its transaction shares the clock), its completion time after this one
            return writer.complete(inflight, meta, known_pending=True, known_inflight=True, keep_clock=True)
        except BaseException:
            self._discard(writer, inflight, written)
            raise

    def _engine_writes(self, update: RecordIndexUpdate, target: RecordIndexTarget, delta: Delta,
                       inflight: Instant) -> list[WriteStat]:
        """The engine's record index log files of this deltacommit, and only those: its task
        attempts that failed or were discarded may have left others (named by this instant),
        which go, as Hudi's finalize-write removes files of attempts no write status reports.
        On failure every file of this instant in the partition goes."""
        changes = delta.changes
        deleted = pa.array([], pa.string()) if changes is None else pc.unique(
            changes.filter(changes.column("deleted")).column("key").combine_chunks())
        try:
            stats = update.write(target, deleted)
        except BaseException:
            self._sweep(target.partition, inflight.timestamp, set())
            raise
        self._sweep(target.partition, inflight.timestamp, set(_paths(stats)))
        return stats

    def _sweep(self, partition: str, instant: str, keep: set[str]) -> None:
        if self.md_config.version < 8:   # v6 names log files by their slice: none to tell apart
            return
        for f in self.md.list(partition):
            lf = parse_log_file_name(f.name)
            rel = posixpath.join(partition, f.name)
            if lf is not None and lf.instant_time == instant and rel not in keep:
                log.info("removing %s, written by a discarded attempt of %s", self.md.uri(rel), instant)
                self.md.delete(rel)

    def _discard(self, writer: TimelineWriter, inflight: Instant, written: Iterable[str]) -> None:
        for rel in written:
            try:
                self.md.delete(rel)
            except Exception:  # noqa: BLE001 - best effort; rollback finds the rest
                log.warning("could not remove %s", self.md.uri(rel))
        try:
            writer.delete_instant_files(inflight)
        except Exception:  # noqa: BLE001
            log.warning("could not remove the pending metadata instant %s", inflight.timestamp)

    # -- converting data-table metadata ------------------------------------------------------------
    def _enabled(self, partition: str) -> bool:
        return partition in self.config.metadata_partitions

    def commit_deltas(self, instant: str, metadata: Mapping[str, Any],
                      record_keys: Mapping[str, KeyChanges] | RecordIndexUpdate | None = None) -> dict[str, Delta]:
        """The MDT records of a data commit (``HoodieCommitMetadata`` as a dict).
        ``record_keys``: record index changes of written files by write stat path, as their
        write handles reported them (:mod:`.key_changes`; other files are read back), or an
        engine's :class:`RecordIndexUpdate` holding those of every written file (the
        ``record_index`` delta then has only the keys of replaced file groups, to delete)."""
        stats_by_part = {p: [WriteStat.from_dict(st, p) for st in (s or ())]
                         for p, s in (metadata.get("partitionToWriteStats") or {}).items()}
        op = metadata.get("operationType") or ""
        replaced = {p: list(f or ()) for p, f in (metadata.get("partitionToReplaceFileIds") or {}).items()}
        files = DataFiles(self)
        ext = self.config.base_file_extension
        out: dict[str, Delta] = {}

        # files
        # (a dropped partition stays listed, its files too, until the cleaner deletes them)
        recs = [P.partition_list_record(stats_by_part)]
        written: list[tuple[str, str, WriteStat]] = []   # (partition, path, stat)
        for part, stats in stats_by_part.items():
            sizes: dict[str, int] = {}
            for st in stats:
                path = st.path
                if not path:
                    continue
                names = [posixpath.basename(path)]
                names += [n for n in st.log_files if n not in names]
                for name in names:
                    rel = posixpath.join(part, name) if part else name
                    size = st.file_size_in_bytes if name == posixpath.basename(path) else self._size(rel)
                    sizes[name] = max(size, sizes.get(name, 0))
                    written.append((part, rel, st))
                for cdc, size in (st.cdc_stats or {}).items():
                    sizes[posixpath.basename(cdc)] = int(size)
            recs.append(P.files_record(part, sizes))
        out[K.FILES] = records_delta(recs)

        if self._enabled(K.COLUMN_STATS):
            recs = []
            for part, rel, _ in written:
                recs += files.base_file_stats(part, rel) if rel.endswith(ext) else files.log_file_stats(part, rel)
            out[K.COLUMN_STATS] = records_delta(recs)
        if self._enabled(K.BLOOM_FILTERS):
            recs = []
            for part, rel, st in written:
                if rel.endswith(ext) and not st.delta:
                    rec = files.bloom_record(part, rel, instant)
                    if rec is not None:
                        recs.append(rec)
            out[K.BLOOM_FILTERS] = records_delta(recs)
        if self._enabled(K.RECORD_INDEX) and op not in _RECORD_INDEX_SKIPPED_OPS:
            held = record_keys is not None and not isinstance(record_keys, Mapping)
            out[K.RECORD_INDEX] = Delta(changes=record_index_delta(
                self, [] if held else written, replaced, files,
                {} if held or record_keys is None else record_keys))   # type: ignore[arg-type]
        return out

    def _size(self, rel: str) -> int:
        try:
            return self.storage.size(rel)
        except (HudiError, OSError):
            return 0

    def clean_deltas(self, instant: str, clean_metadata: Mapping[str, Any]) -> dict[str, Delta]:
        recs, dropped = [], []
        deleted_files: list[tuple[str, str]] = []
        for part, pm in (clean_metadata.get("partitionMetadata") or {}).items():
            names = [posixpath.basename(p) for p in (pm.get("deletePathPatterns") or ())]
            names += [posixpath.basename(p) for p in (pm.get("successDeleteFiles") or ())
                      if posixpath.basename(p) not in names]
            recs.append(P.files_record(part, {}, names))
            deleted_files += [(part, n) for n in names]
            if pm.get("isPartitionDeleted"):
                dropped.append(part)
        if dropped:
            recs.append(P.partition_list_record(dropped, deleted=True))
        out = {K.FILES: records_delta(recs)}
        out.update(self._tombstones(deleted_files, instant))
        return out

    def _tombstones(self, deleted_files: list[tuple[str, str]], instant: str) -> dict[str, Delta]:
        out = {}
        ext = self.config.base_file_extension
        if self._enabled(K.BLOOM_FILTERS):
            out[K.BLOOM_FILTERS] = records_delta(
                P.bloom_filter_record(p, n, instant, "", b"", deleted=True)
                for p, n in deleted_files if n.endswith(ext))
        if self._enabled(K.COLUMN_STATS):
            from ..read.table_schema import latest_data_schema
            schema = latest_data_schema(self.config, self.data_timeline())
            cols = []
            if schema is not None:
                full = pa.schema([pa.field(n, pa.string()) for n in _META_COLUMNS_INDEXED
                                  if self.config.populate_meta_fields] + list(schema))
                cols = [c for c, _ in DataFiles(self).indexed_columns(full)]
            out[K.COLUMN_STATS] = records_delta(
                P.column_stats_record(p, n, c, deleted=True) for p, n in deleted_files for c in cols)
        return out
