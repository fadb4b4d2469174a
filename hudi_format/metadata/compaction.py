"""Compaction of the metadata table itself: every file group of every metadata partition into
new base HFiles (``UnBoundedCompactionStrategy``), once ``hoodie.metadata.compact.max.delta.commits``
deltacommits followed the last compaction.

It runs before each new metadata deltacommit (Hudi 1.x's ``performTableServices``), under the
data table's lock, so the deltacommit about to be written is never compacted yet. It selects
log blocks exactly as readers do (:meth:`MetadataTable.log_blocks`) and reads each slice whole
or fails: compacting never changes what a reader sees. The metadata table's cleaning, archival
and the order they all run in are the services layer's (:mod:`hudi_format.services.metadata_table`).
"""

from __future__ import annotations

import logging
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..hfile import HFileReader
from ..log import BlockType
from ..options import option
from ..timeline import Instant, Timeline
from ..timeline.plans import compaction_plan_schema, encode_with_schema
from ..timeline.writer import TimelineWriter, commit_metadata
from ..timeline.write_stat import WriteStat
from ..view import FileSlice
from ..view.file_names import BaseFileName
from . import init as I
from . import payloads as P
from . import keys as K
from .hfiles import write_base_hfile, write_base_hfile_of
from .record_index import last_of_each
from .options import MetadataTableError

if TYPE_CHECKING:
    from .reader import MetadataTable

log = logging.getLogger(__name__)

__all__ = ["MetadataCompaction"]


#: suffixes of the version-6 metadata table's own instants after its latest deltacommit, as Hudi's
COMPACTION_SUFFIX, CLEAN_SUFFIX = "001", "002"


class MetadataCompaction:
    """Mixin of :class:`~hudi_format.metadata.writer.MetadataWriter`: its compaction."""

    def compaction_instants(self, md_tl: Timeline) -> list[Instant]:
        """The completed compactions of the metadata timeline ``md_tl``."""
        return [i for i in md_tl.instants if i.is_completed and i.action == "commit"]

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
        compactions = self.compaction_instants(md_tl)
        # after the last compaction: by completion time (v8; a deltacommit requested before a
        # compaction and completed after it is on top of it), by instant time (v6)
        when = (lambda i: i.completion_time or i.timestamp) if self.md_config.version >= 8 \
            else (lambda i: i.timestamp)
        last = max((when(c) for c in compactions), default=None)
        if any(i.action == "deltacommit" and not i.is_completed for i in md_tl.instants):
            return None
        deltas = [i for i in md_tl.instants if i.action == "deltacommit"
                  and (last is None or when(i) > last)]
        due = int(option(self.options, "hoodie.metadata.compact.max.delta.commits"))
        if len([i for i in deltas if not i.timestamp.startswith(I.SOLO_COMMIT_TIMESTAMP_V6)]) < due:
            return None
        data_tl = self.data_timeline()
        if not all(self._valid(i, data_tl) for i in deltas):
            return None
        return self.compact(md_tl, deltas)

    def service_instant_time(self, md_tl: Timeline, suffix: str) -> str | None:
        """The time of an instant the metadata table makes for itself (a compaction, a clean).
        Never one from a clock of the metadata table's own: its deltacommits carry the data
        instants' times, which the data table's clock issues, and two clocks can issue the same
        millisecond. Version 6, as Hudi: the latest completed deltacommit's time with
        ``suffix`` (``None`` when there is none or the time is taken). Version 8: a time from
        the data table's clock."""
        if self.md_config.version >= 8:
            return self.clock.new_instant_time()
        deltas = [i.timestamp for i in md_tl.instants if i.action == "deltacommit" and i.is_completed]
        if not deltas:
            return None
        ts = max(deltas) + suffix
        return None if any(i.timestamp == ts for i in md_tl.instants) else ts

    def compact(self, md_tl: Timeline | None = None, deltas: list[Instant] | None = None) -> Instant | None:
        """Compact every file group of every metadata partition into new base HFiles."""
        md_tl = md_tl or self.md_timeline()
        instant = self.service_instant_time(md_tl, COMPACTION_SUFFIX)
        if instant is None:
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
        plan = {"operations": ops, "extraMetadata": {}, "version": 2, "strategy": None,
                "preserveHoodieMetadata": False}
        if self.md_config.version >= 8:
            plan["missingSchedulePartitions"] = []
        writer = self._md_writer()
        requested = writer.create_requested(
            "compaction", instant, plan=encode_with_schema(compaction_plan_schema(self.md_config.version), plan))
        inflight = writer.transition_to_inflight(requested)
        written: list[str] = []
        # the blocks readers count, by the readers' own rule: compacting changes nothing they see
        from .reader import MetadataTable
        reader = MetadataTable(self.storage, self.config, self.data_timeline())
        reader.__dict__.update(mdt_config=self.md_config, mdt_timeline=md_tl)

        def one(task: int, s: FileSlice) -> WriteStat:
            name = BaseFileName(s.file_id, f"{task}-0-{task}", instant, ".hfile").name
            rel = posixpath.join(s.partition_path, name)
            cells = _record_index_cells(s, reader) if s.partition_path == K.RECORD_INDEX else None
            written.append(rel)
            if cells is None:
                merged, blocks = self._merge_slice(s, reader)
                items = sorted((k.encode("utf-8"), P.encode_value(r)) for k, r in merged.items())
                n, size = len(items), write_base_hfile(self.md, rel, items, s.partition_path)
            else:
                keys, values, blocks = cells
                n, size = len(keys), write_base_hfile_of(self.md, rel, keys, values, s.partition_path)
            return WriteStat(file_id=s.file_id, path=rel, partition_path=s.partition_path,
                             num_writes=n, total_write_bytes=size,
                             total_log_files_compacted=len(s.log_files),
                             total_log_size_compacted=int(sum(s.log_file_sizes)),
                             total_log_blocks=blocks, total_log_records=n)

        try:
            # file groups on threads: gzip, the bloom filter and Arrow's sorting release the GIL
            with ThreadPoolExecutor(max(1, min(len(slices), os.cpu_count() or 1))) as pool:
                stats = list(pool.map(one, range(len(slices)), slices))
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


def _record_index_cells(s: FileSlice, reader: "MetadataTable") -> tuple[pa.Array, pa.Array, int] | None:
    """A ``record_index`` slice compacted column-wise: ``(keys, values, log blocks)``, the
    cells a compacted base file keeps, in key order. The index's merge is "the last entry of
    a key wins, a delete removes it", and its values are written with our schema, so the
    cells are moved as bytes, never decoded (through the record-by-record merge, Avro decoding
    and encoding each entry cost ~50 us: 78 s for a million-entry index). ``None`` when a
    source was written with another schema (its values are re-encoded, record by record)."""
    keys: list[pa.Array] = []
    values: list[pa.Array] = []
    if s.base_file:
        base = reader.hfile_reader(s.base_file, s.base_file_size)
        if base.num_entries:
            if base.avro_schema not in (None, P.SCHEMA_JSON):
                return None
            k, v = base.arrays()
            keys.append(k)
            values.append(v)
    blocks = reader.log_blocks(s.log_files)
    for block in blocks:
        if block.block_type == BlockType.HFILE_DATA:
            if block.schema_json not in (None, P.SCHEMA_JSON):
                return None
            k, v = reader.block_reader(block).arrays()
        elif block.block_type == BlockType.DELETE:
            k = block.deleted_keys().column("record_key").combine_chunks().cast(pa.binary())
            k = k.filter(pc.is_valid(k))
            v = pa.nulls(len(k), pa.binary())
        else:
            raise MetadataTableError(f"{block.describe()}: a {block.block_type.name} block, but the "
                                     "metadata table only holds HFile data and delete blocks")
        keys.append(k)
        values.append(v)
    k = pa.concat_arrays(keys) if keys else pa.array([], pa.binary())
    if not len(k):   # a file group no key hashed to yet: its first log's empty delete block
        return k, k, len(blocks)
    v = pa.concat_arrays(values)
    last = last_of_each(k)                          # each key's last entry, in key order
    last = last.filter(pc.is_valid(v.take(last)))   # a delete last: gone
    return k.take(last), v.take(last), len(blocks)
