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
import posixpath
from collections import defaultdict
from typing import Any, Iterable, Mapping, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..errors import HudiError, InvalidOptionError
from ..log.encode import encode_delete_block
from ..log.writer import write_log_file
from ..storage import FileInfo, Storage
from ..table_init import write_partition_metadata
from ..timeline import Instant, Timeline
from ..timeline.clock import InstantClock
from ..timeline.writer import TimelineWriter, commit_metadata
from ..timeline.write_stat import WriteStat
from ..view import FileSlice, FileSystemView
from ..view.file_names import BaseFileName, parse_base_file_name, parse_log_file_name
from . import init as I
from . import keys as K
from . import payloads as P
from .key_changes import KeyChanges
from .data_files import DataFiles
from .payloads import Delta, records_delta
from .reader import MetadataTable
from ..options import option
from .hfiles import cells_by_file_group, hfile_data_block, hfile_data_block_of, write_base_hfile  # noqa: F401
from .compaction import MetadataCompaction
from .rollback import MetadataRollback
from .options import (_META_COLUMNS_INDEXED, _RECORD_INDEX_SKIPPED_OPS, _WRITE_ACTIONS,  # noqa: F401
                      DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, MetadataTableError)


log = logging.getLogger(__name__)

__all__ = [
    "MetadataTableError", "MetadataWriter", "MetadataTableServices", "DataTableSnapshot", "Delta",
    "is_metadata_table", "metadata_enabled",
]


def _file_groups(keys: list[str], n: int) -> list[int]:
    """The file group of each key among ``n`` (Hudi's key hash), hashed column-wise: one Java
    string hash per key in Python cost seconds for a record index of millions of keys."""
    if n == 1 or not keys:
        return [0] * len(keys)
    return K.file_group_indexes(pa.array(keys, pa.string()), n).to_pylist()


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

    def _write_log(self, partition: str, file_id: str, log_instant: str, blocks: list, token: str) -> list:
        """A deltacommit's log file(s) of one file group. v8+: named by this new instant, so
        version 1 unless a leftover has it (then the next free one, by listing)."""
        if self.md_config.version >= 8:
            try:
                return write_log_file(self.md, partition, file_id, log_instant, blocks, token, version=1)
            except InvalidOptionError:
                pass
        return write_log_file(self.md, partition, file_id, log_instant, blocks, token)

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
        from .reader import MetadataTable
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

    def bulk_commit(self, instant: str, partition: str, file_ids: list[str], records: Mapping[str, bytes]) -> Instant:
        """The initial deltacommit of a partition: one base HFile per file group with records."""
        writer = self._md_writer()
        inflight = writer.transition_to_inflight(writer.create_requested("deltacommit", instant))
        groups: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
        n = len(file_ids)
        for key, i in zip(records, _file_groups(list(records), n)):
            groups[i].append((key.encode("utf-8"), records[key]))
        stats, written = [], []
        try:
            for i in sorted(groups):
                items = sorted(groups[i])
                fid = file_ids[i]
                name = BaseFileName(fid, f"{i}-0-{i}", instant, ".hfile").name
                rel = posixpath.join(partition, name)
                written.append(rel)
                size = write_base_hfile(self.md, rel, items, partition)
                stats.append(WriteStat(file_id=fid, path=rel, partition_path=partition, num_writes=len(items),
                                       num_inserts=len(items), total_write_bytes=size))
            meta = commit_metadata(stats, operation_type="BULK_INSERT_PREPPED",
                                   extra_metadata={"schema": P.DATA_SCHEMA_JSON})
            return writer.complete(inflight, meta)
        except BaseException:
            self._discard(writer, inflight, written)
            raise

    # -- deltacommits ----------------------------------------------------------------------------
    def commit(self, instant: str, deltas: Mapping[str, Delta], operation: str = "UPSERT_PREPPED") -> Instant | None:
        """One deltacommit on the MDT at ``instant`` with these partitions' deltas."""
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
            for partition in sorted(deltas):
                delta = deltas[partition]
                if not delta or partition not in self.config.metadata_partitions:
                    continue
                slices = self.latest_slices(partition, md_tl)
                if not slices:
                    raise MetadataTableError(f"metadata partition {partition} has no file groups")
                n = len(slices)
                ups = cells_by_file_group(delta.upserts, n)
                dels: dict[int, list] = defaultdict(list)
                del_keys = list(delta.deletes)
                for key, i in zip(del_keys, _file_groups(del_keys, n)):
                    dels[i].append(key)
                for i in sorted(set(ups) | set(dels)):
                    s = slices[i]
                    blocks = []
                    if i in ups:
                        blocks.append(hfile_data_block_of(*ups[i], instant, partition))
                    if dels.get(i):
                        keys = sorted(dels[i])
                        blocks.append(encode_delete_block(pa.table({
                            "record_key": pa.array(keys, pa.string()),
                            "partition_path": pa.array([partition] * len(keys), pa.string()),
                            "ordering_value": pa.array([0] * len(keys), pa.int32())}),
                            instant, avro_schema=P.SCHEMA_JSON))
                    task += 1
                    log_instant = instant if self.md_config.version >= 8 else s.base_instant
                    results = self._write_log(partition, s.file_id, log_instant, blocks, f"{task}-1-{task}")
                    written.extend(r.path for r in results)
                    last = results[-1]
                    nu, nd = len(ups[i][0]) if i in ups else 0, len(dels.get(i, ()))
                    size = sum(r.size for r in results)
                    stats.append(WriteStat(
                        file_id=s.file_id, path=last.path, partition_path=partition,
                        prev_commit=s.base_instant, num_writes=nu, num_update_writes=nu, num_deletes=nd,
                        total_write_bytes=size, log_version=last.version, base_file=s.base_file_name or "",
                        log_files=[posixpath.basename(r.path) for r in results]))
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
                      record_keys: Mapping[str, KeyChanges] | None = None) -> dict[str, Delta]:
        """The MDT records of a data commit (``HoodieCommitMetadata`` as a dict).
        ``record_keys``: record index changes of written files by write stat path, as their
        write handles reported them (:mod:`.key_changes`); other files are read back."""
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
            out[K.RECORD_INDEX] = self._record_index_delta(instant, written, replaced, files, record_keys or {})
        return out

    def _size(self, rel: str) -> int:
        try:
            return self.storage.size(rel)
        except (HudiError, OSError):
            return 0

    def _record_index_delta(self, instant: str, written, replaced: Mapping[str, list], files: DataFiles,
                            given: Mapping[str, KeyChanges]) -> Delta:
        ext = self.config.base_file_extension
        located: dict[str, tuple[str, str]] = {}
        gone: set[str] = set()
        listing_cache: dict[str, list[FileInfo]] = {}

        def listing(part: str) -> list[FileInfo]:
            if part not in listing_cache:
                listing_cache[part] = [f for f in self.storage.list(part) if not f.is_dir]
            return listing_cache[part]

        def old_base(part: str, fid: str, prev: str) -> str | None:
            for f in listing(part):
                bf = parse_base_file_name(f.name)
                if bf is not None and bf.file_id == fid and bf.instant_time == prev and f.name.endswith(ext):
                    return f.path
            return None

        seen, applied = set(), set()
        for part, rel, st in written:
            if rel in seen:
                continue
            seen.add(rel)
            fid = st.file_id or ""
            changes = given.get(st.path or "")
            if changes is not None:   # the handle's changes cover every file of its stat
                if st.path not in applied:
                    applied.add(st.path)
                    located.update(dict.fromkeys(changes.upserted.to_pylist(), (part, fid)))
                    gone.update(changes.removed.to_pylist())
                continue
            if rel.endswith(ext):
                new_keys = files.base_keys(rel)
                prev = st.prev_commit
                old = old_base(part, fid, prev) if prev is not None else None
                if old is not None:
                    old_keys = files.base_keys(old)
                    inserted = pc.filter(new_keys, pc.invert(pc.is_in(new_keys, value_set=old_keys)))
                    removed = pc.filter(old_keys, pc.invert(pc.is_in(old_keys, value_set=new_keys)))
                    gone.update(removed.to_pylist())
                    new_keys = inserted
                for k in new_keys.to_pylist():
                    located[k] = (part, fid)
            else:
                ups, dels = files.log_keys(rel)
                for k in ups.to_pylist():
                    located[k] = (part, fid)
                gone.update(dels.to_pylist())
        from_replaced: set[str] = set()
        for part, fids in replaced.items():
            wanted = set(fids)
            for f in listing(part):
                parsed = parse_base_file_name(f.name) if not f.name.startswith(".") else parse_log_file_name(f.name)
                if parsed is None or parsed.file_id not in wanted:
                    continue
                if f.name.startswith("."):
                    ups, _ = files.log_keys(f.path)
                    from_replaced.update(ups.to_pylist())
                elif f.name.endswith(ext):
                    from_replaced.update(files.base_keys(f.path).to_pylist())
        gone |= self._still_in(from_replaced - located.keys(), replaced)
        tz = self.config.timeline_timezone
        millis = P.instant_millis(instant, tz)
        cache: dict[tuple[str, str], bytes] = {}
        ups_out = {}
        for k, loc in located.items():
            v = cache.get(loc)
            if v is None:
                v = cache[loc] = P.encode_record_index_value(loc[0], loc[1], millis)
            ups_out[k] = v
        return Delta(ups_out, {k for k in gone if k not in located})

    def _still_in(self, keys: set[str], replaced: Mapping[str, list]) -> set[str]:
        """Of ``keys`` (read from every file of the replaced file groups, older versions
        included), those the record index still places in one of those groups. A key that has
        moved to another partition since (a global index) lives on there: its entry stays."""
        if not keys:
            return keys
        try:
            found = MetadataTable(self.storage, self.config, self.data_timeline()).record_index(
                pa.array(sorted(keys), pa.string()))
        except HudiError as exc:
            log.warning("record index of %s unreadable (%s): dropping every key of the replaced "
                        "file groups", self.storage.url, exc)
            return keys
        groups = {(p, f) for p, fids in replaced.items() for f in fids}
        return {k for k, p, f in zip(*(found.column(c).to_pylist() for c in ("key", "partition", "file_id")))
                if ("" if p == "." else p, f) in groups}

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
