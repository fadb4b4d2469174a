"""Reading the metadata table: a merged, key-addressable view of each of its partitions.

The metadata table lives at ``<base>/.hoodie/metadata``; it is a MOR table with its own
``hoodie.properties`` and timeline whose base files are HFiles and whose log files carry HFile
data blocks (and delete blocks). Each partition (``files``, ``column_stats``, ...) is a set of
file groups; a key lives in exactly one of them. A value is the base HFile's record folded with
the log blocks' records in log order (:func:`.records.combine`), as of the data table:

* file slices come from the metadata table's own timeline (completed instants only);
* a log block counts only when its instant is *valid* (``getValidInstantTimestamps``): completed
  on the data timeline, or a completed metadata deltacommit whose data instant is not pending,
  or an initialization instant (``00000000000000...``), or one a data rollback/restore undid, or
  a metadata rollback/restore -- or older than the metadata table's active timeline (archived,
  so completed) with no pending data instant. Metadata-table compaction selects blocks with the
  same rule (:meth:`MetadataTable.log_blocks`), so compacting never changes what readers see.

Whether it is up to date with the data table (and may serve listings): :mod:`.sync`.
"""

from __future__ import annotations

import logging
import struct
from functools import cached_property
from typing import Callable, Iterable, Iterator, TypeVar

import pyarrow as pa

from ..bloom import BloomFilter
from ..config import TableConfig
from ..errors import HudiError
from ..hfile import HFileReader
from ..log import BlockType
from ..storage import FileInfo, Storage
from ..timeline import Timeline
from ..view import FileSlice, FileSystemView
from . import keys as K
from .options import MetadataTableError
from .records import (BloomFilterEntry, ColumnStats, bloom_filter_of, column_stats_of, combine,
                      decode_entries, files_of)
from .sync import SOLO_COMMIT_TIMESTAMP, SYNCED_ACTIONS, ahead_of, unsynced

log = logging.getLogger(__name__)

__all__ = ["MetadataTable", "SYNCED_ACTIONS", "SOLO_COMMIT_TIMESTAMP"]


T = TypeVar("T")
Select = Callable[[HFileReader], Iterable[tuple[bytes, bytes]]]


class MetadataTable:
    """The metadata table of the data table at ``storage`` (``config``, ``timeline``).

    ``timeline`` is the data table's timeline the reads are pinned to (loaded when omitted).
    Everything is read lazily and cached: one object answers for one state of both timelines.
    """

    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline | None = None,
                 *, mdt_timeline: Timeline | None = None, mdt_config: TableConfig | None = None):
        self.storage = storage
        if mdt_timeline is not None:   # the caller's listing (load once)
            self.__dict__["mdt_timeline"] = mdt_timeline
        if mdt_config is not None:     # the caller read it: the table exists (no HEAD)
            self.__dict__["mdt_config"] = mdt_config
            self.__dict__["exists"] = True
        self.config = config
        self._timeline = timeline
        self.mdt_storage = storage.sub(K.METADATA_TABLE_DIR)
        self._slices: dict[str, list[FileSlice]] = {}
        # parsed immutable files, reused for the life of this object (one operation)
        self._log_blocks: dict[tuple[str, ...], list] = {}
        self._hfiles: dict[object, HFileReader] = {}
        self._failure: str | None = None  # why a read failed: the table is then not used
        self._read_whole = False          # read_failure found every partition readable
        self._record_index_read: pa.Table | None = None   # held by read_failure for the next reader

    def __repr__(self) -> str:
        return f"MetadataTable({self.mdt_storage.url!r})"

    # -- state -------------------------------------------------------------------------------
    @property
    def timeline(self) -> Timeline:
        if self._timeline is None:
            self._timeline = Timeline.load(self.storage, self.config)
        return self._timeline

    @cached_property
    def exists(self) -> bool:
        return self.mdt_storage.exists(".hoodie/hoodie.properties")

    @cached_property
    def mdt_config(self) -> TableConfig:
        return TableConfig.load(self.mdt_storage)

    @cached_property
    def mdt_timeline(self) -> Timeline:
        return Timeline.load(self.mdt_storage, self.mdt_config)

    @property
    def enabled_partitions(self) -> list[str]:
        """Metadata partitions the data table declares complete (``hoodie.table.metadata.partitions``)."""
        return list(self.config.metadata_partitions)

    def has_partition(self, partition: str) -> bool:
        return partition in self.enabled_partitions and self.exists

    @cached_property
    def valid_instants(self) -> frozenset[str]:
        """Instants whose metadata log blocks count (``getValidInstantTimestamps``)."""
        data = self.timeline
        pending = {i.timestamp for i in data.instants if not i.is_completed}
        valid = {i.timestamp for i in data.instants if i.is_completed}
        mdt = self.mdt_timeline
        for inst in mdt.instants:
            if not inst.is_completed:
                continue
            if inst.action == "deltacommit" and inst.timestamp not in pending:
                valid.add(inst.timestamp)
            elif inst.action in ("rollback", "restore"):
                valid.add(inst.timestamp)
        earliest = min(valid) if valid else SOLO_COMMIT_TIMESTAMP
        try:
            valid |= {ts for ts in data.rolled_back_instants() if ts > earliest}
        except HudiError as exc:  # an unreadable rollback plan only narrows what counts
            log.warning("cannot read the rollbacks of %s: %s", self.storage.url, exc)
        return frozenset(valid)

    @cached_property
    def _data_pending(self) -> frozenset[str]:
        return frozenset(i.timestamp for i in self.timeline.instants if not i.is_completed)

    def _block_visible(self, instant_time: str) -> bool:
        """Does a block of ``instant_time`` count? A valid instant's does; so does one from
        before the metadata table's active timeline (its deltacommit was archived, so it
        completed -- Hudi's ``containsOrBeforeTimelineStarts``) unless its data instant is
        pending. Dropping such a block would resurrect what it deleted (a clean's files)."""
        if instant_time in self.valid_instants:
            return True
        start = self.mdt_timeline.start
        return start is not None and instant_time < start and instant_time not in self._data_pending

    def ahead_of_timeline(self) -> bool:
        """Whether the metadata table holds commits the data timeline it is pinned to does not
        (see :func:`.sync.ahead_of`): entries keyed by record (the record index) then describe
        a newer table than that snapshot."""
        return ahead_of(self.timeline, self.mdt_timeline)

    def staleness(self) -> str | None:
        """Why the metadata table cannot serve the ``files`` listing (``None``: it can)."""
        if self._failure is not None:
            return self._failure
        if "_staleness" not in self.__dict__:
            self.__dict__["_staleness"] = self._find_staleness()
        return self.__dict__["_staleness"]

    def _find_staleness(self) -> str | None:
        if K.FILES not in self.enabled_partitions:
            return "the table does not declare the files partition in hoodie.table.metadata.partitions"
        if not self.exists:
            return f"{self.mdt_storage.url} has no hoodie.properties"
        try:
            return unsynced(self.timeline, self.mdt_timeline)
        except HudiError as exc:
            return f"its timeline cannot be read: {exc}"

    def read_failure(self) -> str | None:
        """Why the metadata table cannot be read whole (``None``: every declared partition
        reads without damage). Reads each partition fully: a deep check, for ``validate``."""
        if self._failure is None and not self._read_whole and self.exists:
            for partition in self.enabled_partitions:
                try:
                    if partition == K.RECORD_INDEX:   # millions of entries: column-wise
                        # held for the next caller (validate checks them next), not beyond
                        self._record_index_read = self.record_index_entries()
                    else:
                        self.read(partition)
                except HudiError:
                    break
            else:
                self._read_whole = True
        return self._failure

    # -- file slices of the metadata table ----------------------------------------------------
    @cached_property
    def _view(self) -> FileSystemView:
        return FileSystemView(self.mdt_storage, self.mdt_config)

    def file_slices(self, partition: str) -> list[FileSlice]:
        """Latest slice of each file group of a metadata partition, by file id."""
        if partition not in self._slices:
            from ..read.snapshot import ReadState
            state = ReadState(self.mdt_config, self.mdt_timeline)
            slices = state.file_slices(self._view, partitions=[partition])   # that folder alone
            self._slices[partition] = sorted(slices, key=lambda s: s.file_id)
        return self._slices[partition]

    # -- reading -------------------------------------------------------------------------------
    def log_blocks(self, log_files: Iterable[str]) -> list:
        """Data and delete blocks of valid instants, in log order, minus rolled-back ones.

        Unlike a data slice, a metadata slice must be read whole: a skipped block would leave
        an older listing or index entry in force, so a corrupt block raises instead."""
        from ..read.merge import collect_log_blocks

        def corrupt(path: str, block: object) -> None:
            raise MetadataTableError(f"corrupt log block in {self.mdt_storage.uri(path)} at "
                                     f"offset {getattr(block, 'offset', '?')}: {getattr(block, 'reason', '')}")

        files = tuple(log_files)
        if files not in self._log_blocks:
            self._log_blocks[files] = collect_log_blocks(self.mdt_storage, files,
                                                         self._block_visible, corrupt)
        return list(self._log_blocks[files])

    def hfile_reader(self, rel_path: str, size: int = 0) -> HFileReader:
        """The (cached) reader of a base HFile of the metadata table; ``size``: as listed (a
        committed base HFile of known size is opened from the process-wide cache of opened
        HFiles when another table opened it before)."""
        if rel_path not in self._hfiles:
            self._hfiles[rel_path] = HFileReader(self.mdt_storage, rel_path, verify_checksums=False,
                                                 size=size, immutable=bool(size))
        return self._hfiles[rel_path]

    def block_reader(self, block) -> HFileReader:
        """The (cached) reader of the HFile inside an ``HFILE_DATA`` log block, what opening it
        parses kept process-wide (a written log block never changes; this process's own
        changes to the file drop it). On a local disk it is read in ranges as a base HFile is
        (a lookup of a few keys reads the index and the blocks holding them, not all of a
        record index's 14 MB block); on an object store in one request, as many ranges would
        each cost a round trip."""
        key = (block.describe(), id(block))
        if key not in self._hfiles:
            where = f"the HFile in {block.describe()}"
            cache_key = self.mdt_storage.immutable_key(block.path, block.content_length) + (
                block.content_offset, block.instant_time or "")
            if self.mdt_storage.is_local:
                reader = HFileReader(None, where, verify_checksums=False, cache_key=cache_key,
                                     _read=block.read_content, _size=block.content_length)
            else:
                reader = HFileReader.from_bytes(block.content(), where, verify_checksums=False,
                                                cache_key=cache_key)
            self._hfiles[key] = reader
        return self._hfiles[key]

    def _read_slice(self, s: FileSlice, select: Select,
                    wanted: Callable[[str], bool]) -> dict[str, dict | None]:
        return self.read_slice_guarded(s, lambda sl: self._merge_slice(sl, select, wanted))

    def read_slice_guarded(self, s: FileSlice, read: Callable[[FileSlice], T]) -> T:
        """``read(s)`` for one metadata file slice; any damage raises
        :class:`MetadataTableError` naming the file, so callers fall back to storage."""
        where = self.mdt_storage.uri(s.base_file or (s.log_files[0] if s.log_files else s.file_id))
        try:
            return read(s)
        except MetadataTableError:
            raise
        except HudiError as exc:
            raise MetadataTableError(f"metadata file slice {s.partition_path}/{s.file_id} is "
                                     f"unreadable: {exc}") from exc
        except (ValueError, KeyError, IndexError, TypeError, EOFError, OverflowError,
                struct.error, UnicodeDecodeError) as exc:  # garbage that decoded partway
            raise MetadataTableError(f"metadata file slice {s.partition_path}/{s.file_id} "
                                     f"({where}) does not decode: {exc!r}") from exc

    def _merge_slice(self, s: FileSlice, select: Select,
                     wanted: Callable[[str], bool]) -> dict[str, dict | None]:
        out: dict[str, dict | None] = {}
        if s.base_file:
            reader = self.hfile_reader(s.base_file, s.base_file_size)
            schema = reader.avro_schema
            if reader.num_entries and not schema:
                raise HudiError(f"{self.mdt_storage.uri(s.base_file)} has no Avro schema in its file info")
            if reader.num_entries:
                for key, rec in decode_entries(select(reader), schema,
                                               self.mdt_storage.uri(s.base_file)):
                    out[key] = rec
        if s.log_files:
            for block in self.log_blocks(s.log_files):
                where = block.describe()
                if block.block_type == BlockType.DELETE:
                    for key in block.deleted_keys().column("record_key").to_pylist():
                        if key is not None and wanted(key):
                            out[key] = None
                elif block.block_type == BlockType.HFILE_DATA:
                    reader = self.block_reader(block)
                    if not reader.num_entries:
                        continue
                    schema = block.schema_json or reader.avro_schema
                    for key, rec in decode_entries(select(reader), schema, where):
                        out[key] = combine(out.get(key), rec)
                else:
                    raise MetadataTableError(f"{where}: a {block.block_type.name} block, but the "
                                             "metadata table only holds HFile data and delete blocks")
        return out

    def read(self, partition: str, keys: Iterable[str] | None = None,
             prefixes: Iterable[str] | None = None) -> dict[str, dict]:
        """Merged records of a metadata partition: all, or those with the given ``keys`` or
        key ``prefixes``; deleted keys are left out.

        Raises :class:`MetadataTableError` (naming the file) when the partition cannot be read
        whole; from then on :meth:`staleness` gives that reason, so every user of this object
        (listing, pruning, indexes) falls back to the path without the metadata table."""
        return self._guarded(lambda: self._read(partition, keys, prefixes))

    def _guarded(self, read: Callable[[], T]) -> T:
        if self._failure is not None:
            raise MetadataTableError(self._failure)
        try:
            return read()
        except HudiError as exc:
            self._failure = f"it cannot be read whole: {exc}"
            log.warning("not using the metadata table of %s: %s", self.storage.url, self._failure)
            if isinstance(exc, MetadataTableError):
                raise
            raise MetadataTableError(str(exc)) from exc

    def _read(self, partition: str, keys: Iterable[str] | None,
              prefixes: Iterable[str] | None) -> dict[str, dict]:
        if keys is not None:
            want = sorted(set(keys))
            if not want:
                return {}
            want_set = set(want)
            slices = self.file_slices(partition)
            if not slices:
                return {}
            by_slice: dict[int, list[str]] = {}
            # Writers place every key with mapRecordKeyToFileGroupIndex over the partition's
            # file groups (secondary indexes hash their key's prefix: look those up by prefix).
            groups = K.file_group_indexes(pa.array(want, pa.string()), len(slices)).to_pylist()
            for k, g in zip(want, groups):
                by_slice.setdefault(g, []).append(k)
            out: dict[str, dict] = {}
            for i, ks in by_slice.items():
                raw = [k.encode("utf-8") for k in ks]
                got = self._read_slice(slices[i], lambda r, raw=raw: r.get_many(raw).items(),
                                       want_set.__contains__)
                out.update((k, v) for k, v in got.items() if v is not None and k in want_set)
            return out
        if prefixes is not None:
            pre = sorted(set(prefixes))
            raw_pre = [p.encode("utf-8") for p in pre]

            def select(r: HFileReader) -> Iterator[tuple[bytes, bytes]]:
                for p in raw_pre:
                    yield from r.prefix(p)

            def wanted(k: str) -> bool:
                return any(k.startswith(p) for p in pre)
        else:
            def select(r: HFileReader) -> Iterable[tuple[bytes, bytes]]:
                return r.items()

            def wanted(k: str) -> bool:
                return True
        out = {}
        for s in self.file_slices(partition):
            got = self._read_slice(s, select, wanted)
            out.update((k, v) for k, v in got.items() if v is not None)
        return out

    # -- files ----------------------------------------------------------------------------------
    @cached_property
    def _files(self) -> dict[str, dict]:
        return self.read(K.FILES)

    def partition_paths(self) -> list[str]:
        """Data partitions (relative paths; ``""`` for the non-partitioned table)."""
        entries = files_of(self._files.get(K.RECORDKEY_PARTITION_LIST))
        return sorted("" if e.name == K.NON_PARTITIONED_NAME else e.name for e in entries)

    def files_listing(self) -> dict[str, list[FileInfo]]:
        """Partition -> its files (deleted ones removed), as a storage listing would give them."""
        out: dict[str, list[FileInfo]] = {}
        for partition in self.partition_paths():
            record = self._files.get(K.files_key(partition))
            infos = []
            for e in files_of(record):
                path = f"{partition}/{e.name}" if partition else e.name
                infos.append(FileInfo(path, e.size, False))
            out[partition] = infos
        return out

    # -- column stats ---------------------------------------------------------------------------
    def column_stats(self, columns: Iterable[str], partitions: Iterable[str] | None = None
                     ) -> dict[tuple[str, str], dict[str, ColumnStats]]:
        """``(partition, file name) -> {column: stats}`` for the given columns (and partitions)."""
        columns = list(dict.fromkeys(columns))
        if not columns or not self.has_partition(K.COLUMN_STATS):
            return {}
        if partitions is not None:
            partitions = list(dict.fromkeys(partitions))
            prefixes = [K.column_stats_prefix(c, p) for c in columns for p in partitions]
            known = partitions
        else:
            prefixes = [K.column_stats_prefix(c) for c in columns]
            known = self.partition_paths()
        by_id = {K.partition_index_id(p): p for p in known}
        out: dict[tuple[str, str], dict[str, ColumnStats]] = {}
        for key, rec in self.read(K.COLUMN_STATS, prefixes=prefixes).items():
            stats = column_stats_of(rec)
            if stats is None or stats.is_deleted or stats.file_name is None:
                continue
            partition = by_id.get(key[12:24])
            if partition is None:
                continue
            out.setdefault((partition, stats.file_name), {})[stats.column] = stats
        return out

    def partition_stats(self, columns: Iterable[str]) -> dict[str, dict[str, ColumnStats]]:
        """``partition -> {column: stats}`` from ``partition_stats``."""
        columns = list(dict.fromkeys(columns))
        if not columns or not self.has_partition(K.PARTITION_STATS):
            return {}
        by_id = {K.partition_index_id(p): p for p in self.partition_paths()}
        out: dict[str, dict[str, ColumnStats]] = {}
        prefixes = [K.column_index_id(c) for c in columns]
        for key, rec in self.read(K.PARTITION_STATS, prefixes=prefixes).items():
            stats = column_stats_of(rec)
            partition = by_id.get(key[12:24])
            if stats is None or stats.is_deleted or partition is None:
                continue
            out.setdefault(partition, {})[stats.column] = stats
        return out

    # -- bloom filters --------------------------------------------------------------------------
    def bloom_filter_entries(self, files: Iterable[tuple[str, str]]
                             ) -> dict[tuple[str, str], BloomFilterEntry]:
        """``(partition, base file name) -> entry`` for the files that have one."""
        if not self.has_partition(K.BLOOM_FILTERS):
            return {}
        wanted = {K.bloom_filter_key(p, f): (p, f) for p, f in files}
        out = {}
        for key, rec in self.read(K.BLOOM_FILTERS, keys=wanted).items():
            entry = bloom_filter_of(rec)
            if entry is not None and not entry.is_deleted:
                out[wanted[key]] = entry
        return out

    def bloom_filters(self, files: Iterable[tuple[str, str]]) -> dict[tuple[str, str], BloomFilter]:
        """``(partition, base file name) -> BloomFilter`` (deserialized)."""
        return {k: e.filter() for k, e in self.bloom_filter_entries(files).items()}

    # -- record index ---------------------------------------------------------------------------
    def record_index(self, record_keys: pa.Array | pa.ChunkedArray) -> pa.Table:
        """``(key, partition, file_id, instant_ms)`` of the keys the record index holds, looked up
        column-wise (:mod:`.record_index`); same failure rules as :meth:`read`."""
        from .record_index import lookup
        return self._guarded(lambda: lookup(self, record_keys))

    def record_locations(self, record_keys: Iterable[str]) -> dict[str, K.RecordIndexLocation]:
        """Record key -> where the record index says it lives (absent keys are left out)."""
        found = self.record_index(pa.array(list(record_keys), pa.string()))
        cols = ("key", "partition", "file_id", "instant_ms")
        return {k: K.RecordIndexLocation(p, f, ms) for k, p, f, ms in
                zip(*(found.column(c).to_pylist() for c in cols))}

    def record_index_entries(self) -> pa.Table:
        """Every entry of the record index, ``(key, partition, file_id, instant_ms)``: a full
        read of the partition, column-wise (:func:`.record_index.entries`); the entries
        :meth:`read_failure` read, when it read them last (given once)."""
        from .record_index import entries
        held, self._record_index_read = self._record_index_read, None
        return held if held is not None else self._guarded(lambda: entries(self))

    def all_record_locations(self) -> dict[str, K.RecordIndexLocation]:
        """Every entry of the record index (a full read of the partition)."""
        t = self.record_index_entries()
        cols = ("key", "partition", "file_id", "instant_ms")
        return {k: K.RecordIndexLocation(p, f, ms) for k, p, f, ms in zip(*(t.column(c).to_pylist() for c in cols))}

    # -- file skipping ---------------------------------------------------------------------------
    def prune_slices(self, slices: list[FileSlice], filters, schema) -> list[FileSlice]:
        """The slices whose files' column stats admit a row passing every filter.

        A slice stays unless some filter is impossible over *all* its files (base and logs:
        a merged row may take a column from any of them); files or columns without stats
        keep their slice.
        """
        from ..read.filters import stats_may_match
        from .records import stats_scalar

        usable = [f for f in filters if schema.get_field_index(f.column) >= 0]
        if not usable or not slices:
            return slices
        types = {f.column: schema.field(f.column).type for f in usable}
        stats = self.column_stats(types, {s.partition_path for s in slices})
        if not stats:
            return slices
        out = []
        for s in slices:
            names = ([s.base_file_name] if s.base_file else []) + [n.rsplit("/", 1)[-1] for n in s.log_files]
            keep = True
            for f in usable:
                ranges = []
                for name in names:
                    cs = stats.get((s.partition_path, name), {}).get(f.column)
                    if cs is None:
                        ranges = None
                        break
                    ranges.append((stats_scalar(cs, "min", types[f.column]),
                                   stats_scalar(cs, "max", types[f.column]),
                                   cs.null_count, cs.value_count))
                if ranges is not None and names and not stats_may_match(f, types[f.column], ranges):
                    keep = False
                    break
            if keep:
                out.append(s)
        return out

    # -- secondary indexes ----------------------------------------------------------------------
    def secondary_index_keys(self, index: str, values: Iterable[str | None]) -> dict[str | None, list[str]]:
        """Secondary key -> record keys holding it, from ``secondary_index_<name>`` (``index``
        with or without the prefix). Values are compared as the strings Hudi stored."""
        partition = index if index.startswith(K.SECONDARY_INDEX_PREFIX) else K.SECONDARY_INDEX_PREFIX + index
        values = list(dict.fromkeys(values))
        if not values or not self.has_partition(partition):
            return {}
        out: dict[str | None, list[str]] = {}
        prefixes = [K.secondary_index_prefix(v) for v in values]
        for key, rec in self.read(partition, prefixes=prefixes).items():
            info = rec.get("SecondaryIndexMetadata") or {}
            if info.get("isDeleted"):
                continue
            secondary, record_key = K.split_secondary_index_key(key)
            out.setdefault(secondary, []).append(record_key)
        return {k: sorted(v) for k, v in out.items()}
