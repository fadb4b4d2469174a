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
groups, HFile base files, ``UnBoundedCompactionStrategy``), and archival of the MDT timeline.

The transaction layer reaches this through :mod:`hudi_format.metadata.commit` (the metadata
hook of every data commit).
"""

from __future__ import annotations

import logging
import posixpath
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..errors import HudiError
from ..hfile import HFileReader, HFileWriter
from ..log import BlockType, HeaderKey, read_log_file
from ..log.encode import HFILE_LOG_BLOCK_SIZE, encode_block, encode_delete_block
from ..log.writer import write_log_file
from ..storage import FileInfo, Storage
from ..table_init import write_partition_metadata
from ..timeline import Instant, State, Timeline
from ..timeline.clock import InstantClock
from ..timeline.writer import TimelineWriter, commit_metadata
from ..view import FileSlice, FileSystemView
from ..view.file_names import BaseFileName, parse_base_file_name, parse_log_file_name
from . import init as I
from . import keys as K
from . import payloads as P
from .data_files import DataFiles
from .options import (_META_COLUMNS_INDEXED, _RECORD_INDEX_SKIPPED_OPS, _WRITE_ACTIONS,  # noqa: F401
                      DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, MDT_OPTIONS, MetadataTableError,
                      mdt_option)

if TYPE_CHECKING:
    from .reader import MetadataTable

log = logging.getLogger(__name__)

__all__ = [
    "MDT_OPTIONS", "mdt_option", "MetadataTableError", "MetadataWriter", "Delta",
    "is_metadata_table", "metadata_enabled",
]


def is_metadata_table(storage: Storage, config: TableConfig) -> bool:
    return storage.url.rstrip("/").endswith(K.METADATA_TABLE_DIR) or \
        config.get("hoodie.table.keygenerator.type") == "HOODIE_TABLE_METADATA" or \
        config.get("hoodie.table.keygenerator.class") == I.METADATA_KEYGEN_CLASS


def metadata_enabled(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None) -> bool:
    return bool(mdt_option(options, "hoodie.metadata.enable")) and not is_metadata_table(storage, config)


@attrs.define
class Delta:
    """What one metadata partition gets in one deltacommit: records by key, deleted keys."""

    upserts: dict = attrs.field(factory=dict)   # key -> encoded value (bytes)
    deletes: set = attrs.field(factory=set)     # keys (record index)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


def _records_delta(records: Iterable[dict]) -> Delta:
    merged: dict[str, dict] = {}
    for rec in records:
        merged[rec["key"]] = P.merge(merged.get(rec["key"]), rec)
    return Delta({k: P.encode_value(r) for k, r in merged.items()})


# -- the writer --------------------------------------------------------------------------------------
class MetadataWriter:
    """Writes the metadata table of the data table at ``storage`` (config ``config``).

    ``clock`` is the data table's instant clock (the MDT's completion times come from it, as
    Hudi builds the MDT meta client with the data table's time generator); ``inflight`` is the
    data instant being completed, whose files bootstrapping must not list.
    """

    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                 clock: InstantClock | None = None, inflight: str | None = None):
        self.storage = storage
        self.config = config
        self.options = dict(options or {})
        self.md = I.metadata_storage(storage)
        self.clock = clock or InstantClock(storage, config)
        self.inflight_instant = inflight
        self._md_config: TableConfig | None = None

    # -- state -------------------------------------------------------------------------------
    @property
    def md_config(self) -> TableConfig:
        if self._md_config is None:
            self._md_config = TableConfig.load(self.md)
        return self._md_config

    def data_timeline(self) -> Timeline:
        return Timeline.load(self.storage, self.config)

    def md_timeline(self) -> Timeline:
        return Timeline.load(self.md, self.md_config)

    def _md_writer(self) -> TimelineWriter:
        return TimelineWriter(self.md, self.md_config, clock=self.clock)

    def exists(self) -> bool:
        return I.metadata_table_exists(self.storage)

    def latest_slices(self, partition: str) -> list[FileSlice]:
        """Latest slice of each file group of a metadata partition (completed MDT instants), by id."""
        from ..read.snapshot import ReadState
        state = ReadState(self.md_config, self.md_timeline())
        view = FileSystemView(self.md, self.md_config)
        slices = state.file_slices(view, lambda p: p == partition)
        return sorted(slices, key=lambda s: s.file_id)

    def staleness(self) -> str | None:
        from .reader import MetadataTable
        return MetadataTable(self.storage, self.config, self.data_timeline()).staleness()

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
        for key, value in records.items():
            groups[K.file_group_index(key, n)].append((key.encode("utf-8"), value))
        stats, written = [], []
        try:
            for i in sorted(groups):
                items = sorted(groups[i])
                fid = file_ids[i]
                name = BaseFileName(fid, f"{i}-0-{i}", instant, ".hfile").name
                rel = posixpath.join(partition, name)
                written.append(rel)
                size = write_base_hfile(self.md, rel, items)
                stats.append(_stat(fid, rel, partition, num_writes=len(items), num_inserts=len(items),
                                   size=size))
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
        inflight = writer.transition_to_inflight(writer.create_requested("deltacommit", instant))
        stats, written = [], []
        task = 0
        try:
            for partition in sorted(deltas):
                delta = deltas[partition]
                if not delta or partition not in self.config.metadata_partitions:
                    continue
                slices = self.latest_slices(partition)
                if not slices:
                    raise MetadataTableError(f"metadata partition {partition} has no file groups")
                n = len(slices)
                ups: dict[int, list] = defaultdict(list)
                dels: dict[int, list] = defaultdict(list)
                for key, value in delta.upserts.items():
                    ups[K.file_group_index(key, n)].append((key.encode("utf-8"), value))
                for key in delta.deletes:
                    dels[K.file_group_index(key, n)].append(key)
                for i in sorted(set(ups) | set(dels)):
                    s = slices[i]
                    blocks = []
                    if ups.get(i):
                        blocks.append(hfile_data_block(sorted(ups[i]), instant))
                    if dels.get(i):
                        keys = sorted(dels[i])
                        blocks.append(encode_delete_block(pa.table({
                            "record_key": pa.array(keys, pa.string()),
                            "partition_path": pa.array([partition] * len(keys), pa.string()),
                            "ordering_value": pa.array([0] * len(keys), pa.int32())}),
                            instant, avro_schema=P.SCHEMA_JSON))
                    task += 1
                    log_instant = instant if self.md_config.version >= 8 else s.base_instant
                    results = write_log_file(self.md, partition, s.file_id, log_instant, blocks,
                                             f"{task}-1-{task}")
                    written.extend(r.path for r in results)
                    last = results[-1]
                    nu, nd = len(ups.get(i, ())), len(dels.get(i, ()))
                    size = sum(r.size for r in results)
                    st = _stat(s.file_id, last.path, partition, prev=s.base_instant, num_writes=nu,
                               num_updates=nu, num_deletes=nd, size=size)
                    st.update({"logVersion": last.version, "logOffset": 0,
                               "baseFile": s.base_file_name or "",
                               "logFiles": [posixpath.basename(r.path) for r in results]})
                    stats.append(st)
            meta = commit_metadata(stats, operation_type=operation,
                                   extra_metadata={"schema": P.DATA_SCHEMA_JSON})
            return writer.complete(inflight, meta)
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

    def commit_deltas(self, instant: str, metadata: Mapping[str, Any]) -> dict[str, Delta]:
        """The MDT records of a data commit (``HoodieCommitMetadata`` as a dict)."""
        stats_by_part = {p: list(s or ()) for p, s in (metadata.get("partitionToWriteStats") or {}).items()}
        op = metadata.get("operationType") or ""
        replaced = {p: list(f or ()) for p, f in (metadata.get("partitionToReplaceFileIds") or {}).items()}
        files = DataFiles(self)
        ext = self.config.base_file_extension
        out: dict[str, Delta] = {}

        # files
        # (a dropped partition stays listed, its files too, until the cleaner deletes them)
        recs = [P.partition_list_record(stats_by_part)]
        written: list[tuple[str, str, dict]] = []   # (partition, path, stat)
        for part, stats in stats_by_part.items():
            sizes: dict[str, int] = {}
            for st in stats:
                path = st.get("path")
                if not path:
                    continue
                names = [posixpath.basename(path)]
                names += [n for n in (st.get("logFiles") or ()) if n not in names]
                for name in names:
                    rel = posixpath.join(part, name) if part else name
                    size = int(st.get("fileSizeInBytes") or 0) if name == posixpath.basename(path) \
                        else self._size(rel)
                    sizes[name] = max(size, sizes.get(name, 0))
                    written.append((part, rel, st))
                for cdc, size in (st.get("cdcStats") or {}).items():
                    sizes[posixpath.basename(cdc)] = int(size)
            recs.append(P.files_record(part, sizes))
        out[K.FILES] = _records_delta(recs)

        if self._enabled(K.COLUMN_STATS):
            recs = []
            for part, rel, _ in written:
                recs += files.base_file_stats(part, rel) if rel.endswith(ext) else files.log_file_stats(part, rel)
            out[K.COLUMN_STATS] = _records_delta(recs)
        if self._enabled(K.BLOOM_FILTERS):
            recs = []
            for part, rel, st in written:
                if rel.endswith(ext) and "logFiles" not in st:
                    rec = files.bloom_record(part, rel, instant)
                    if rec is not None:
                        recs.append(rec)
            out[K.BLOOM_FILTERS] = _records_delta(recs)
        if self._enabled(K.RECORD_INDEX) and op not in _RECORD_INDEX_SKIPPED_OPS:
            out[K.RECORD_INDEX] = self._record_index_delta(instant, written, replaced, files)
        return out

    def _size(self, rel: str) -> int:
        try:
            return self.storage.size(rel)
        except (HudiError, OSError):
            return 0

    def _record_index_delta(self, instant: str, written, replaced: Mapping[str, list], files: DataFiles) -> Delta:
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

        seen = set()
        for part, rel, st in written:
            if rel in seen:
                continue
            seen.add(rel)
            fid = st.get("fileId")
            if rel.endswith(ext):
                new_keys = files.base_keys(rel)
                prev = st.get("prevCommit")
                old = old_base(part, fid, prev) if prev not in (None, "null") else None
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
        for part, fids in replaced.items():
            wanted = set(fids)
            for f in listing(part):
                parsed = parse_base_file_name(f.name) if not f.name.startswith(".") else parse_log_file_name(f.name)
                if parsed is None or parsed.file_id not in wanted:
                    continue
                if f.name.startswith("."):
                    ups, _ = files.log_keys(f.path)
                    gone.update(ups.to_pylist())
                elif f.name.endswith(ext):
                    gone.update(files.base_keys(f.path).to_pylist())
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
        out = {K.FILES: _records_delta(recs)}
        out.update(self._tombstones(deleted_files, instant))
        return out

    def _tombstones(self, deleted_files: list[tuple[str, str]], instant: str) -> dict[str, Delta]:
        out = {}
        ext = self.config.base_file_extension
        if self._enabled(K.BLOOM_FILTERS):
            out[K.BLOOM_FILTERS] = _records_delta(
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
            out[K.COLUMN_STATS] = _records_delta(
                P.column_stats_record(p, n, c, deleted=True) for p, n in deleted_files for c in cols)
        return out

    # -- rollback -----------------------------------------------------------------------------------
    def _compaction_instants(self, md_tl: Timeline) -> list[Instant]:
        return [i for i in md_tl.instants if i.is_completed and i.action == "commit"]

    def _files_written_by(self, target: Instant) -> list[str]:
        """MDT files an MDT instant wrote: its commit metadata, else names carrying it (v8) or
        log blocks of it (v6)."""
        out: list[str] = []
        if target.is_completed and target.action in ("deltacommit", "commit"):
            try:
                meta = self.md_timeline().raw_metadata(target)
                for part, stats in (meta.get("partitionToWriteStats") or {}).items():
                    for st in stats or ():
                        for name in [posixpath.basename(st.get("path") or "")] + list(st.get("logFiles") or ()):
                            if name:
                                rel = posixpath.join(part, name)
                                if rel not in out:
                                    out.append(rel)
                return out
            except HudiError:
                pass
        for f in self.md.walk_files("", skip_dirs=(".hoodie",)):
            name = posixpath.basename(f.path)
            bf = parse_base_file_name(name)
            if bf is not None and bf.instant_time == target.timestamp:
                out.append(f.path)
                continue
            lf = parse_log_file_name(name)
            if lf is None:
                continue
            if self.md_config.version >= 8:
                if lf.instant_time == target.timestamp:
                    out.append(f.path)
            elif any(b.instant_time == target.timestamp for b in read_log_file(self.md, f.path)):
                out.append(f.path)
        return out

    def _rollback_files(self, target: Instant) -> list[str]:
        deleted = []
        for rel in self._files_written_by(target):
            if self.md.exists(rel):
                self.md.delete(rel)
                deleted.append(rel)
        return deleted

    def rollback(self, target_ts: str, rollback_ts: str, deleted_data_files: Mapping[str, list[str]],
                 added_log_files: Mapping[str, Mapping[str, int]] | None = None) -> None:
        """Apply a data rollback (at ``rollback_ts``) of ``target_ts`` to the MDT.

        The MDT deltacommit of the target (if any) is rolled back by an MDT rollback instant at
        ``rollback_ts``. Files the data rollback touched are recorded by a deltacommit at
        ``rollback_ts`` instead when nothing of the target reached the MDT, or -- v6, whose
        rollbacks append command blocks in new log files -- before the MDT rollback, which then
        takes ``rollback_ts + "006"`` (as Hudi's v6 writer does).
        """
        md_tl = self.md_timeline()
        targets = [i for i in md_tl.instants if i.timestamp == target_ts and i.action == "deltacommit"]
        done = {i.timestamp for i in md_tl.instants if i.is_completed}
        added = {p: dict(f) for p, f in (added_log_files or {}).items() if f}
        if rollback_ts in done and not targets:
            return   # applied already (a resumed data rollback)

        def files_deltacommit() -> None:
            files = [(p, posixpath.basename(f)) for p, fs in deleted_data_files.items() for f in fs]
            parts = set(deleted_data_files) | set(added)
            recs = [P.files_record(p, {posixpath.basename(n): z for n, z in added.get(p, {}).items()},
                                   [n for q, n in files if q == p]) for p in parts]
            deltas = {K.FILES: _records_delta(recs)}
            deltas.update(self._tombstones(files, rollback_ts))
            self.commit(rollback_ts, deltas)

        if not targets:
            # nothing of the target reached the MDT: record what the rollback changed, so that
            # the data rollback has its deltacommit
            files_deltacommit()
            return
        if added and rollback_ts not in done:
            files_deltacommit()
        if added:
            rollback_ts = rollback_ts + "006"
        target = targets[0]
        compactions = self._compaction_instants(md_tl)
        if target.is_completed and compactions:
            last = max(compactions, key=lambda i: i.completion_time or i.timestamp)
            if (target.completion_time or target.timestamp) <= (last.completion_time or last.timestamp):
                log.warning("data rollback of %s reaches behind the metadata table's compaction %s; "
                            "dropping the metadata table of %s", target_ts, last.timestamp, self.storage.url)
                self.drop()
                return
        writer = self._md_writer()
        plan = {"instantToRollback": {"commitTime": target.timestamp, "action": target.action},
                "RollbackRequests": [], "version": 1}
        files = self._files_written_by(target)
        by_group: dict[tuple[str, str], list[str]] = defaultdict(list)
        for rel in files:
            part, name = posixpath.split(rel)
            parsed = parse_base_file_name(name) or parse_log_file_name(name)
            by_group[(part, parsed.file_id if parsed else "")].append(rel)
        plan["RollbackRequests"] = [{"partitionPath": p, "fileId": f, "latestBaseInstant": None,
                                     "filesToBeDeleted": paths, "logBlocksToBeDeleted": None}
                                    for (p, f), paths in sorted(by_group.items())]
        requested = writer.create_requested("rollback", rollback_ts, plan=plan)
        inflight = writer.transition_to_inflight(requested)
        from ..services.rollback import execute_plan
        if target.is_completed:
            done_name = md_tl.files_of(target).get(State.COMPLETED)
            if done_name:
                self.md.delete(f"{md_tl.timeline_dir}/{done_name}")
        metadata = execute_plan(self.md, self.md_config, plan, rollback_ts)
        writer.complete(inflight, metadata)
        for name in md_tl.files_of(target).values():
            rel = f"{md_tl.timeline_dir}/{name}"
            if self.md.exists(rel):
                self.md.delete(rel)

    # -- compaction of the metadata table ------------------------------------------------------------
    def _valid(self, md_inst: Instant, data_tl: Timeline) -> bool:
        ts = md_inst.timestamp
        if ts.startswith(I.SOLO_COMMIT_TIMESTAMP_V6) or len(ts) != 17:
            return True
        data = [i for i in data_tl.instants if i.timestamp == ts]
        if not data:
            start = data_tl.start   # older instants were archived: completed
            return start is not None and ts < start
        return all(i.is_completed for i in data)

    def compact_if_due(self) -> Instant | None:
        md_tl = self.md_timeline()
        for pending in [i for i in md_tl.instants if i.action == "compaction" and not i.is_completed]:
            # left by a crash: its base files are invisible; remove them and plan afresh
            self._rollback_files(pending)
            TimelineWriter(self.md, self.md_config).delete_instant_files(pending)
            md_tl = self.md_timeline()
        compactions = self._compaction_instants(md_tl)
        # after the last compaction: by completion time (v8; a deltacommit requested before a
        # compaction and completed after it is on top of it), by instant time (v6)
        when = (lambda i: i.completion_time or i.timestamp) if self.md_config.version >= 8 \
            else (lambda i: i.timestamp)
        last = max((when(c) for c in compactions), default=None)
        if any(i.action == "deltacommit" and not i.is_completed for i in md_tl.instants):
            return None
        deltas = [i for i in md_tl.instants if i.action == "deltacommit"
                  and (last is None or when(i) > last)]
        due = int(mdt_option(self.options, "hoodie.metadata.compact.max.delta.commits"))
        if len([i for i in deltas if not i.timestamp.startswith(I.SOLO_COMMIT_TIMESTAMP_V6)]) < due:
            return None
        data_tl = self.data_timeline()
        if not all(self._valid(i, data_tl) for i in deltas):
            return None
        return self.compact(md_tl, deltas)

    def compact(self, md_tl: Timeline | None = None, deltas: list[Instant] | None = None) -> Instant | None:
        """Compact every file group of every metadata partition into new base HFiles."""
        md_tl = md_tl or self.md_timeline()
        if self.md_config.version >= 8:
            instant = self.clock.new_instant_time()
        else:
            latest = max(i.timestamp for i in md_tl.instants if i.action == "deltacommit" and i.is_completed)
            instant = latest + "001"
            if any(i.timestamp == instant for i in md_tl.instants):
                return None
        ops, slices = [], []
        for partition in sorted(self.config.metadata_partitions):
            for s in self.latest_slices(partition):
                if not s.log_files:
                    continue
                slices.append(s)
                ops.append({"baseInstantTime": s.base_instant,
                            "deltaFilePaths": [posixpath.basename(p) for p in s.log_files],
                            "dataFilePath": s.base_file_name, "fileId": s.file_id,
                            "partitionPath": partition,
                            "metrics": {"TOTAL_LOG_FILES": float(len(s.log_files)),
                                        "TOTAL_IO_READ_MB": float((s.base_file_size + sum(s.log_file_sizes)) // (1 << 20)),
                                        "TOTAL_LOG_FILES_SIZE": float(sum(s.log_file_sizes)),
                                        "TOTAL_IO_WRITE_MB": float(s.base_file_size // (1 << 20)),
                                        "TOTAL_IO_MB": float((2 * s.base_file_size + sum(s.log_file_sizes)) // (1 << 20))},
                            "bootstrapFilePath": None})
        if not ops:
            return None
        from ..services.common import compaction_plan_schema, encode_with_schema
        plan = {"operations": ops, "extraMetadata": {}, "version": 2, "strategy": None,
                "preserveHoodieMetadata": False}
        if self.md_config.version >= 8:
            plan["missingSchedulePartitions"] = []
        writer = self._md_writer()
        requested = writer.create_requested(
            "compaction", instant, plan=encode_with_schema(compaction_plan_schema(self.md_config.version), plan))
        inflight = writer.transition_to_inflight(requested)
        stats, written = [], []
        # the blocks readers count, by the readers' own rule: compacting changes nothing they see
        from .reader import MetadataTable
        reader = MetadataTable(self.storage, self.config, self.data_timeline())
        reader.__dict__.update(mdt_config=self.md_config, mdt_timeline=md_tl)
        try:
            for task, s in enumerate(slices):
                merged, blocks = self._merge_slice(s, reader)
                items = sorted((k.encode("utf-8"), P.encode_value(r)) for k, r in merged.items())
                name = BaseFileName(s.file_id, f"{task}-0-{task}", instant, ".hfile").name
                rel = posixpath.join(s.partition_path, name)
                written.append(rel)
                size = write_base_hfile(self.md, rel, items)
                st = _stat(s.file_id, rel, s.partition_path, num_writes=len(items), size=size)
                st.update({"totalLogFilesCompacted": len(s.log_files),
                           "totalLogSizeCompacted": int(sum(s.log_file_sizes)),
                           "totalLogBlocks": blocks, "totalLogRecords": len(items)})
                stats.append(st)
            meta = commit_metadata(stats, operation_type="COMPACT", compacted=True,
                                   extra_metadata={"schema": P.DATA_SCHEMA_JSON})
            done = writer.complete(inflight, meta)
        except BaseException:
            self._discard(writer, inflight, written)
            raise
        log.info("compacted the metadata table of %s at %s (%d file groups)",
                 self.storage.url, instant, len(stats))
        return done

    def _merge_slice(self, s: FileSlice, reader: "MetadataTable") -> tuple[dict[str, dict], int]:
        """The records of one slice as a compacted base file keeps them, and the number of log
        blocks folded in. Read whole or not at all: a corrupt block raises
        :class:`MetadataTableError` (the compaction fails), never bakes a stale state in."""
        merged: dict[str, dict | None] = {}
        if s.base_file:
            r = HFileReader(self.md, s.base_file)
            schema = (r.file_info.get(b"schema") or b"").decode("utf-8") or None
            for k, v in r.items():
                key = k.decode("utf-8")
                merged[key] = P.decode_value(v, key, schema)
        nblocks = 0
        for block in reader.log_blocks(s.log_files):
            nblocks += 1
            if block.block_type == BlockType.HFILE_DATA:
                r = HFileReader.from_bytes(block.content(), block.describe())
                schema = block.schema_json
                for k, v in r.items():
                    key = k.decode("utf-8")
                    merged[key] = P.merge(merged.get(key), P.decode_value(v, key, schema))
            elif block.block_type == BlockType.DELETE:
                dk = block.deleted_keys()
                for key in dk.column("record_key").to_pylist() if dk.num_rows else ():
                    merged[key] = None
            else:
                raise MetadataTableError(f"{block.describe()}: a {block.block_type.name} block, but the "
                                         "metadata table only holds HFile data and delete blocks")
        out = {}
        for key, rec in merged.items():
            if rec is None:
                continue
            c = P.compacted(rec)
            if c is not None:
                out[key] = c
        return out, nblocks

    # -- cleaning of the metadata table ---------------------------------------------------------------
    def clean_if_due(self) -> Instant | None:
        retained = mdt_option(self.options, "hoodie.metadata.cleaner.commits.retained")
        if retained is None:
            data_retained = int(self.options.get("hoodie.cleaner.commits.retained", 10))
            retained = max(DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, int(data_retained * 1.2))
        from ..services.cleaning import clean
        return clean(self.md, self.md_config, {"hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
                                               "hoodie.cleaner.commits.retained": int(retained)})

    def archive_if_due(self) -> list[Instant]:
        """Archive the MDT's timeline as Hudi does (``archiveCommitsWith(min + 1, max + 1)`` of
        the data table's ``hoodie.keep.min/max.commits``); only instants before its latest
        compaction go, whose records live in base files."""
        md_tl = self.md_timeline()
        if not self._compaction_instants(md_tl):
            return []
        lo = int(self.options.get("hoodie.keep.min.commits", 20)) + 1
        hi = int(self.options.get("hoodie.keep.max.commits", 30)) + 1
        from ..services.archival import archive
        return archive(self.md, self.md_config, {
            "hoodie.keep.min.commits": lo, "hoodie.keep.max.commits": hi,
            "hoodie.cleaner.commits.retained": max(1, lo - 1),
            "hoodie.compact.inline.max.delta.commits":
                int(mdt_option(self.options, "hoodie.metadata.compact.max.delta.commits"))},
            data_timeline=self.data_timeline())

    def services(self) -> None:
        """The MDT's own table services, run before a new deltacommit (as Hudi 1.x's
        ``performTableServices``): cleaning, then compaction when due. The deltacommit about to
        be written is never in the compaction, so rolling back the latest data commit only
        ever undoes a deltacommit. A failure is logged, never raised (the data commit goes on)."""
        if not self.exists() or K.FILES not in self.config.metadata_partitions:
            return
        try:
            self.clean_if_due()
            self.compact_if_due()
            self.archive_if_due()
        except Exception as exc:  # noqa: BLE001
            log.warning("metadata table services of %s failed: %s", self.storage.url, exc)


# -- encoding helpers ------------------------------------------------------------------------------
def hfile_data_block(items: list[tuple[bytes, bytes]], instant: str) -> bytes:
    """An ``HFILE_DATA`` log block of sorted ``(key, value)`` cells (HFileUtils' layout)."""
    w = HFileWriter(None, block_size=HFILE_LOG_BLOCK_SIZE, compression="GZ")
    for k, v in items:
        w.append(k, v)
    w.add_file_info("schema", P.SCHEMA_JSON)
    content = w.close()
    return encode_block(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant,
                                               HeaderKey.SCHEMA: P.SCHEMA_JSON}, content)


def write_base_hfile(storage: Storage, rel: str, items: list[tuple[bytes, bytes]]) -> int:
    """A base HFile of the metadata table (``HoodieAvroHFileWriter``): the cells, the schema,
    a bloom filter of the keys and the min/max keys; returns its size."""
    from ..bloom import new_bloom_filter
    bloom = new_bloom_filter(60000, 0.000000001, "DYNAMIC_V0", 100000)
    if items:
        bloom.add_all(pa.array([k for k, _ in items], pa.binary()))
    w = HFileWriter(storage, rel, compression="GZ")
    for k, v in items:
        w.append(k, v)
    w.add_file_info("schema", P.SCHEMA_JSON)
    w.add_file_info("bloomFilterTypeCode", "DYNAMIC_V0")
    if items:
        w.add_file_info("minRecordKey", items[0][0])
        w.add_file_info("maxRecordKey", items[-1][0])
    w.add_meta_block("bloomFilter", bloom.serialize())
    w.close()
    return storage.size(rel)


def _stat(fid: str, path: str, partition: str, *, prev: str | None = None, num_writes: int = 0,
          num_inserts: int = 0, num_updates: int = 0, num_deletes: int = 0, size: int = 0) -> dict:
    return {"fileId": fid, "path": path, "prevCommit": prev if prev else "null",
            "numWrites": num_writes, "numDeletes": num_deletes, "numUpdateWrites": num_updates,
            "numInserts": num_inserts, "totalWriteBytes": size, "totalWriteErrors": 0,
            "partitionPath": partition, "fileSizeInBytes": size}
