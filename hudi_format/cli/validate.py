"""``hudi-format validate``: check a table's invariants and report every problem found.

Checks, in order (each problem names the file at fault):

1. ``hoodie.properties`` parses, has the keys readers need and its checksum matches the name.
2. Every timeline file is an instant file; every completed instant's metadata (and every
   non-empty plan) decodes, Avro payloads against Hudi's own schemas (``hudi_format/avro``),
   v6 commit metadata as JSON; the archived timeline loads.
3. Data files have Hudi names, belong to instants the timeline knows, and every partition
   folder has its ``.hoodie_partition_metadata``.
4. Every file of the latest file slices exists and is readable (Parquet footers, log blocks
   without corruption); the files the latest write committed exist.
5. The metadata table, when there is one, is not behind the data and lists the same files; it
   passes checks 1 to 4 itself.
6. The snapshot has no duplicate record keys (a warning: Apache Hudi's own inserts make them).
7. The record index, when the metadata table keeps one, holds every snapshot key at a file group
   that has it (Hudi's metadata-table validator, record-index content): a key it lacks or
   misplaces is tagged as an insert, a duplicate in waiting. Keys it holds beyond the snapshot
   are a warning (a soft delete that may lose to the stored record keeps its key).

Errors break readers or lose data; warnings are oddities Hudi tolerates (a stray file, a
corrupt block a failed writer left behind, duplicate keys from inserts); ``--strict`` fails on them too.
"""

from __future__ import annotations

import io
import json
import posixpath
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import HudiError
from .key_compare import record_index_mismatch

ERROR, WARNING = "error", "warning"

_COMPLETED_SCHEMA = {
    "commit": "HoodieCommitMetadata", "deltacommit": "HoodieCommitMetadata",
    "replacecommit": "HoodieReplaceCommitMetadata", "clean": "HoodieCleanMetadata",
    "rollback": "HoodieRollbackMetadata", "savepoint": "HoodieSavepointMetadata",
    "restore": "HoodieRestoreMetadata", "indexing": "HoodieIndexCommitMetadata",
}
_REQUESTED_SCHEMA = {
    "compaction": "HoodieCompactionPlan", "logcompaction": "HoodieCompactionPlan",
    "replacecommit": "HoodieRequestedReplaceMetadata", "clustering": "HoodieRequestedReplaceMetadata",
    "clean": "HoodieCleanerPlan", "rollback": "HoodieRollbackPlan", "restore": "HoodieRestorePlan",
    "indexing": "HoodieIndexPlan",
}
_JSON_COMMITS = ("commit", "deltacommit", "replacecommit")
_PARTITION_METADATA = (".hoodie_partition_metadata", ".hoodie_partition_metadata.parquet",
                       ".hoodie_partition_metadata.orc")
REQUIRED_PROPERTIES = ("hoodie.table.name", "hoodie.table.type", "hoodie.table.version")


@dataclass
class Problem:
    severity: str
    check: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.severity}: [{self.check}] {where}{self.message}"

    def to_json(self) -> dict:
        return asdict(self)


class _Checker:
    def __init__(self, path: str, storage_options: dict | None, check_data: bool,
                 progress: Callable[[Iterable, str, int | None], Iterable] | None):
        self.path = path
        self.storage_options = storage_options
        self.check_data = check_data
        self.progress = progress or (lambda it, desc, total=None: it)
        self.problems: list[Problem] = []

    def add(self, severity: str, check: str, path: str, message: str) -> None:
        self.problems.append(Problem(severity, check, path, message))

    def guarded(self, check: str, fn: Callable, *args):
        """Run one check; whatever it trips over is reported as a problem and the next check
        still runs (a validator that stops at the first broken file hides the others)."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - a damaged table can make anything raise
            self.add(ERROR, check, "", f"the check stopped on {type(exc).__name__}: {exc}")
            return None

    # -- 1 -------------------------------------------------------------------------------------
    def properties(self):
        from ..config import PROPS_PATH, TableConfig
        from ..storage import Storage
        storage = Storage(self.path, self.storage_options)
        try:
            config = TableConfig.load(storage)
        except HudiError as exc:
            self.add(ERROR, "properties", PROPS_PATH, str(exc))
            return None, storage
        for key in REQUIRED_PROPERTIES:
            if key not in config:
                self.add(ERROR, "properties", PROPS_PATH, f"required key {key} is missing")
        if config.version >= 8 and "hoodie.timeline.layout.version" not in config:
            self.add(ERROR, "properties", PROPS_PATH, "a v8+ table without hoodie.timeline.layout.version")
        if "hoodie.table.checksum" not in config:
            self.add(WARNING, "properties", PROPS_PATH, "no hoodie.table.checksum")
        if not config.record_key_fields and config.populate_meta_fields:
            self.add(WARNING, "properties", PROPS_PATH, "no hoodie.table.recordkey.fields")
        if config.version >= 8 and "hoodie.record.merge.mode" not in config:
            self.add(WARNING, "properties", PROPS_PATH, "a v8+ table without hoodie.record.merge.mode")
        return config, storage

    # -- 2 -------------------------------------------------------------------------------------
    def _decode_avro(self, data: bytes, schema_name: str | None, rel: str) -> None:
        from ..timeline.avro_schemas import parsed_schema
        try:
            reader = fastavro.reader(io.BytesIO(data))
            writer_name = (reader.writer_schema or {}).get("name", "").rsplit(".", 1)[-1]
            records = list(reader)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds
            self.add(ERROR, "timeline", rel, f"Avro payload does not decode: {exc}")
            return
        if not records:
            self.add(ERROR, "timeline", rel, "Avro payload holds no record")
            return
        if schema_name is None:
            return
        if writer_name and writer_name != schema_name:
            self.add(ERROR, "timeline", rel, f"payload is a {writer_name}, expected {schema_name}")
            return
        try:
            list(fastavro.reader(io.BytesIO(data), reader_schema=parsed_schema(schema_name)))
        except Exception as exc:  # noqa: BLE001
            self.add(ERROR, "timeline", rel, f"payload is not readable with Hudi's {schema_name} schema: {exc}")

    def _check_payload(self, rel: str, data: bytes, action: str, state: str, version: int) -> None:
        if data[:4] == b"Obj\x01":
            schema = (_COMPLETED_SCHEMA.get(action) if state == "completed" else
                      _REQUESTED_SCHEMA.get(action) if state == "requested" else None)
            self._decode_avro(data, schema, rel)
            return
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self.add(ERROR, "timeline", rel, f"neither Avro nor JSON: {exc}")
            return
        if not isinstance(value, dict):
            self.add(ERROR, "timeline", rel, "JSON metadata is not an object")
            return
        if state == "completed":
            if action not in _JSON_COMMITS:
                self.add(ERROR, "timeline", rel, f"completed {action} metadata must be Avro, found JSON")
            elif version >= 8:
                self.add(ERROR, "timeline", rel, "v8+ commit metadata must be Avro, found JSON")
            elif not isinstance(value.get("partitionToWriteStats"), dict):
                self.add(ERROR, "timeline", rel, "commit metadata has no partitionToWriteStats object")

    def timeline(self, config, storage):
        from ..errors import TimelineError
        from ..timeline.instant import parse_file_name
        from ..transaction import is_metadata_storage
        tdir = config.timeline_dir
        instants = {}
        try:
            entries = storage.list(tdir)
        except HudiError as exc:
            self.add(ERROR, "timeline", tdir, f"cannot list the timeline: {exc}")
            return instants
        # a version-6 metadata table names its services and initialisations after an instant
        # and a 3-digit suffix (Hudi's ``createCompactionTimestamp`` and the like), which may
        # itself be suffixed (a compaction right after an initialisation)
        lengths = (14, 17, 20, 23) if is_metadata_storage(storage) else (14, 17)
        for info in self.progress(entries, "timeline", len(entries)):
            name = info.name
            if info.is_dir or name.startswith(("hoodie.properties", ".")):
                continue
            rel = f"{tdir}/{name}"
            try:
                inst = parse_file_name(name, config.version)
            except TimelineError as exc:
                self.add(WARNING, "timeline", rel, f"not an instant file: {exc}")
                continue
            if not (len(inst.timestamp) in lengths and inst.timestamp.isdigit()):
                self.add(WARNING, "timeline", rel, f"instant time {inst.timestamp} is not yyyyMMddHHmmss[SSS]")
            state = inst.state.name.lower()
            instants.setdefault(inst.timestamp, {}).setdefault(inst.action, set()).add(state)
            try:
                data = storage.read_bytes(rel)
            except HudiError as exc:
                self.add(ERROR, "timeline", rel, f"cannot read: {exc}")
                continue
            if not data:
                if state == "completed" and inst.action not in ("savepoint",):
                    self.add(ERROR, "timeline", rel, "completed instant with empty metadata")
                continue
            self._check_payload(rel, data, inst.action, state, config.version)
        try:
            from ..timeline import Timeline
            Timeline.load(storage, config).archived().instants
        except HudiError as exc:
            where = config.history_dir if config.version >= 8 else config.archive_dir
            self.add(ERROR, "archived-timeline", where, f"the archived timeline does not load: {exc}")
        return instants

    # -- 3 -------------------------------------------------------------------------------------
    def data_files(self, table, storage) -> None:
        from ..view.file_names import parse_base_file_name, parse_log_file_name
        timeline = table.timeline
        known = {i.timestamp for i in timeline.instants}
        start = timeline.start
        partitions_with_data: dict[str, set[str]] = {}
        data_parts: set[str] = set()
        files = list(storage.walk_files("", skip_dirs=(".hoodie",)))
        for info in self.progress(files, "data files", len(files)):
            rel = info.path
            name = posixpath.basename(rel)
            part = posixpath.dirname(rel)
            partitions_with_data.setdefault(part, set()).add(name)
            if name in _PARTITION_METADATA or name.startswith(".hoodie_partition_metadata"):
                continue
            parsed = parse_base_file_name(name) or parse_log_file_name(name)
            if parsed is not None:
                data_parts.add(part)
            if parsed is None:
                if not name.startswith((".", "_")):
                    self.add(WARNING, "file-names", rel, "not a Hudi base or log file name")
                continue
            ts = parsed.instant_time
            if ts not in known and (start is None or ts >= start) and not _is_initial(ts):
                self.add(WARNING, "file-names", rel,
                         f"written by instant {ts}, which the timeline does not know (a failed write's leftover?)")
        for part in sorted(data_parts):
            if not any(n.startswith(".hoodie_partition_metadata") for n in partitions_with_data[part]):
                self.add(ERROR, "partition-metadata", part or ".", "partition has no .hoodie_partition_metadata")

    # -- 4 -------------------------------------------------------------------------------------
    def slices(self, table, storage) -> list:
        from ..log import read_log_file
        try:
            slices = table.file_slices()
        except HudiError as exc:
            self.add(ERROR, "file-slices", "", f"the latest file slices cannot be listed: {exc}")
            return []
        for s in self.progress(slices, "file slices", len(slices)):
            if s.base_file:
                if not storage.exists(s.base_file):
                    self.add(ERROR, "file-slices", s.base_file, "base file of the latest slice is missing")
                elif self.check_data and s.base_file.endswith(".parquet"):
                    self._base_file_footer(storage, s.base_file)
            for lf in s.log_files:
                if not storage.exists(lf):
                    self.add(ERROR, "file-slices", lf, "log file of the latest slice is missing")
                    continue
                if not self.check_data:
                    continue
                try:
                    for block in read_log_file(storage, lf):
                        if block.is_corrupted:
                            self.add(WARNING, "log-blocks", lf,
                                     f"corrupt block at offset {block.offset}: {block.reason}")
                except HudiError as exc:
                    self.add(ERROR, "log-blocks", lf, f"log file unreadable: {exc}")
        latest = table.timeline.latest_completed_write()
        if latest is not None and table.timeline._is_active(latest):
            try:
                meta = table.timeline.metadata(latest)
                for stats in meta.partition_to_write_stats.values():
                    for st in stats:
                        if st.path and not storage.exists(st.path):
                            self.add(ERROR, "commit-files", st.path,
                                     f"committed by the latest write {latest.timestamp} but missing")
            except HudiError as exc:
                self.add(ERROR, "timeline", latest.file_name or latest.timestamp, f"metadata unusable: {exc}")
        return slices

    def _base_file_footer(self, storage, rel: str) -> None:
        """The Parquet footer reads and the bloom filter in it decodes: Hudi's bloom index
        (and ours) reads that filter on every upsert, so a bad one breaks writes, not reads."""
        from ..base_file import BLOOM_FILTER_KEY, BLOOM_TYPE_CODE_KEY, OLD_BLOOM_FILTER_KEY
        from ..bloom import SIMPLE, BloomFilter
        try:
            with storage.open(rel) as f:
                kv = pq.ParquetFile(f).metadata.metadata or {}
        except Exception as exc:  # noqa: BLE001 - pyarrow and fsspec raise many kinds
            self.add(ERROR, "file-slices", rel, f"Parquet footer unreadable: {exc}")
            return
        text = kv.get(BLOOM_FILTER_KEY.encode()) or kv.get(OLD_BLOOM_FILTER_KEY.encode())
        if not text:
            return
        code = kv.get(BLOOM_TYPE_CODE_KEY.encode())
        try:
            BloomFilter.deserialize(text, code.decode("utf-8", "replace") if code else SIMPLE)
        except Exception as exc:  # noqa: BLE001
            self.add(ERROR, "bloom-filter", rel, f"the footer's {BLOOM_FILTER_KEY} does not decode: {exc}")

    def metadata_bloom_filters(self, table, slices) -> None:
        """Every live entry of the metadata table's ``bloom_filters`` partition decodes."""
        from ..metadata import keys as K
        from ..metadata.records import bloom_filter_of
        mdt = table.metadata_table
        if mdt is None or not mdt.has_partition(K.BLOOM_FILTERS):
            return
        names = {K.bloom_filter_key(s.partition_path, posixpath.basename(s.base_file)): s.base_file
                 for s in slices if s.base_file}
        try:
            records = mdt.read(K.BLOOM_FILTERS)
        except HudiError as exc:
            self.add(ERROR, "metadata-table", ".hoodie/metadata/bloom_filters", f"unreadable: {exc}")
            return
        for key, rec in records.items():
            where = names.get(key, f".hoodie/metadata/bloom_filters (key {key})")
            try:
                entry = bloom_filter_of(rec)
                if entry is not None and not entry.is_deleted:
                    entry.filter()
            except Exception as exc:  # noqa: BLE001
                self.add(ERROR, "metadata-table/bloom-filter", where,
                         f"the metadata table's bloom filter for this file does not decode: {exc}")

    # -- 5 -------------------------------------------------------------------------------------
    def metadata_table(self, table, slices) -> None:
        from .. import open_table
        mdt = table.metadata_table
        if mdt is None:
            return
        failure = mdt.read_failure()
        if failure is not None:  # readers fall back to storage, but the table is damaged
            self.add(ERROR, "metadata-table", ".hoodie/metadata", failure)
            return
        try:
            reason = mdt.staleness()
        except HudiError as exc:
            reason = str(exc)
        if reason is not None:
            self.add(WARNING, "metadata-table", ".hoodie/metadata", f"not usable for listing: {reason}")
            return
        plain = open_table(self.path, self.storage_options, options={"hoodie.metadata.enable": "false"})
        try:
            want = {(s.partition_path, s.file_id): s for s in plain.file_slices()}
        except HudiError as exc:
            self.add(ERROR, "file-slices", "", f"storage listing failed: {exc}")
            return
        got = {(s.partition_path, s.file_id): s for s in slices}
        reported = 0
        for key in sorted(set(want) | set(got)):
            if reported >= 20:
                break
            w, g = want.get(key), got.get(key)
            files_w = {f for f in ((w.base_file,) + w.log_files if w else ()) if f}
            files_g = {f for f in ((g.base_file,) + g.log_files if g else ()) if f}
            # a v6 log file written by a since rolled-back deltacommit is in storage, but Hudi
            # rolls its metadata-table entry back too: not a difference
            files_w = {f for f in files_w if f in files_g or not self._rolled_back_log(table, f)}
            if files_w == files_g:
                continue
            reported += 1
            where = f"{key[0] or '.'}/{key[1]}"
            if g is None:
                msg = "file group is in storage but missing from the metadata table's listing"
            elif w is None:
                msg = "the metadata table lists this file group but storage does not have it"
            else:
                parts = []
                if files_w - files_g:
                    parts.append(f"lacks {sorted(p.rsplit('/', 1)[-1] for p in files_w - files_g)}")
                if files_g - files_w:
                    parts.append(f"lists absent {sorted(p.rsplit('/', 1)[-1] for p in files_g - files_w)}")
                msg = "the metadata table's latest slice differs from storage: it " + " and ".join(parts)
            self.add(ERROR, "metadata-table", where, msg)

    def _rolled_back_log(self, table, rel: str) -> bool:
        """Whether every block of log file ``rel`` is data of a rolled-back or failed write."""
        from ..log import BlockType, read_log_file
        if ".log." not in rel:
            return False
        if not hasattr(self, "_undone"):
            tl = table.timeline
            self._undone = tl.rolled_back_instants()
            self._done = {i.timestamp for i in tl.instants if i.is_completed}
        try:
            blocks = list(read_log_file(table.storage, rel))
        except HudiError:
            return False
        return bool(blocks) and all(
            b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA, BlockType.DELETE)
            and (b.instant_time in self._undone or b.instant_time not in self._done) for b in blocks)

    # -- 6 -------------------------------------------------------------------------------------
    def duplicates(self, table) -> None:
        config = table.config
        if config.populate_meta_fields:
            cols = ["_hoodie_partition_path", "_hoodie_record_key"]
        else:
            cols = list(dict.fromkeys(config.record_key_fields + config.partition_fields))
        if not cols:
            return
        pieces = []
        try:
            for batch in self.progress(table.scan(columns=cols), "snapshot keys", None):
                pieces.append(pa.Table.from_batches([batch]).select(cols))
        except HudiError as exc:
            self.add(ERROR, "snapshot", "", f"the snapshot cannot be read: {exc}")
            return
        if not pieces:
            return
        keys = pa.concat_tables(pieces)
        counts = keys.group_by(cols).aggregate([([], "count_all")])
        repeated = counts.filter(pc.greater(counts["count_all"], 1))
        if repeated.num_rows:
            dups = pc.sum(repeated["count_all"]).as_py() - repeated.num_rows
            example = {c: repeated[c][0].as_py() for c in cols}
            # Hudi itself writes these: insert and bulk_insert do not deduplicate against the table
            self.add(WARNING, "duplicate-keys", "",
                     f"{dups} of {keys.num_rows} snapshot rows repeat a record key, e.g. {example} "
                     f"(inserts and bulk inserts do not deduplicate against the table)")


    def record_index(self, table) -> None:
        from ..engine.scan import read_task_table
        from ..metadata.keys import RECORD_INDEX
        mdt = table.metadata_table
        if mdt is None or RECORD_INDEX not in mdt.enabled_partitions or not table.config.populate_meta_fields:
            return
        if mdt.read_failure() is not None or mdt.staleness() is not None:
            return   # reported by the metadata-table check; writers rebuild it
        key = "_hoodie_record_key"
        pieces = []
        for task in self.progress(table.plan_scan(columns=[key]).tasks, "record index: snapshot keys", None):
            keys = read_task_table(task, self.storage_options).column(key)
            fs = task.file_slice
            at = pa.array(np.zeros(len(keys), np.int32))     # one location per slice: dictionaries
            pieces.append(pa.table({"key": keys,
                                    "partition": pa.DictionaryArray.from_arrays(at, pa.array([fs.partition_path])),
                                    "file_id": pa.DictionaryArray.from_arrays(at, pa.array([fs.file_id]))}))
        snap = pa.concat_tables(pieces) if pieces else pa.table({c: pa.array([], pa.string())
                                                                 for c in ("key", "partition", "file_id")})
        index = mdt.record_index_entries().select(["key", "partition", "file_id"])
        lacks, stale, wrong = record_index_mismatch(snap, index)
        where = ".hoodie/metadata/record_index"
        if lacks.num_rows:
            self.add(ERROR, "record-index", where, f"{lacks.num_rows} snapshot keys are not in the record index, "
                     f"e.g. {lacks['key'][0].as_py()!r} of {lacks['partition'][0].as_py() or '.'}/{lacks['file_id'][0].as_py()}")
        if stale.num_rows:
            # a soft delete under event-time ordering may lose to the stored record, so writers
            # keep its key; tagging skips entries of dead file groups, and a write sent to a live
            # one that lacks the key merges there as an insert: harmless, if untidy
            self.add(WARNING, "record-index", where, f"{stale.num_rows} record-index keys are in no file slice "
                     f"(deleted keys kept), e.g. {stale['key'][0].as_py()!r} at "
                     f"{stale['partition'][0].as_py() or '.'}/{stale['file_id'][0].as_py()}")
        if len(wrong):
            at = index.filter(pc.equal(index["key"], wrong[0])).slice(0, 1).to_pylist()[0]
            self.add(ERROR, "record-index", where, f"{len(wrong)} keys are indexed at a file group that does not "
                     f"hold them, e.g. {at['key']!r} at {at['partition'] or '.'}/{at['file_id']}")


def _is_initial(ts: str) -> bool:
    """An instant Hudi names rather than times: the data table's initial ones, or a metadata
    partition's initialisation (``00000000000000`` and an offset). Those of the metadata table
    are chosen among the instants its active timeline does not hold, so one archived can sort
    after one in use again: where no timeline says which, a file of theirs is not flagged."""
    return ts.startswith("00000000000000") or (set(ts) <= {"0", "1"} and ts.startswith("000"))


def record_index_problems(path: str, storage_options: dict | None = None) -> list[Problem]:
    """Check 7 alone: the record index against the snapshot."""
    from .. import open_table
    c = _Checker(path, storage_options, True, None)
    c.guarded("record-index", c.record_index, open_table(path, storage_options))
    return c.problems


def validate_table(path: str, storage_options: dict | None = None, check_data: bool = True,
                   progress: Callable[[Iterable, str, int | None], Iterable] | None = None) -> list[Problem]:
    """Every problem found in the table at ``path`` (an empty list: the table is sound)."""
    from .. import open_table
    c = _Checker(path, storage_options, check_data, progress)
    config, storage = c.properties()
    if config is None:
        return c.problems
    c.timeline(config, storage)
    try:
        table = open_table(path, storage_options)
    except HudiError as exc:
        c.add(ERROR, "open", "", f"the table does not open: {exc}")
        return c.problems
    c.guarded("file-names", c.data_files, table, storage)
    slices = c.guarded("file-slices", c.slices, table, storage) or []
    c.guarded("metadata-table", c.metadata_table, table, slices)
    if check_data:
        c.guarded("metadata-table/bloom-filter", c.metadata_bloom_filters, table, slices)
        c.guarded("snapshot", c.duplicates, table)
        c.guarded("record-index", c.record_index, table)
    if storage.exists(".hoodie/metadata/.hoodie/hoodie.properties"):
        # the metadata table is a Hudi table too: its properties, timeline and slices
        inner = validate_table(storage.uri(".hoodie/metadata"), storage_options, check_data=False,
                               progress=progress)
        for p in inner:
            p.path = f".hoodie/metadata/{p.path}" if p.path else ".hoodie/metadata"
            p.check = f"metadata-table/{p.check}"
        c.problems.extend(inner)
    return c.problems
