"""Writing the archived timeline: the LSM history (v8+) and the archived log (v6).

Both take *active actions*: every file (requested, inflight, completed) of one instant of the
active timeline, read before the archiver deletes them.

LSM history (``LSMTimelineWriter`` of Hudi 1.x), in ``.hoodie/timeline/history/``:

- each archival writes one level-0 parquet file ``<first>_<last>_0.parquet`` (request times of
  its first and last instant) of ``HoodieLSMTimelineInstant`` rows: the completed file's bytes as
  ``metadata`` and, by action, the plan (clean and compaction plans; for replacecommit and
  clustering the requested file, overridden by a non-empty inflight file) as ``plan``;
- a snapshot is committed by writing ``manifest_<v+1>`` (JSON ``{"files": [{"fileName",
  "fileLen"}]}``, Jackson-pretty-printed) and then replacing ``_version_`` with ``v+1``; a file
  already listed by the latest manifest was committed by a run that died before deleting the
  active files, and is not written again;
- compaction: when a level holds ``hoodie.timeline.compaction.batch.size`` (10) files, the
  oldest ones (at most that many, at most ``hoodie.timeline.compaction.target.file.max.bytes``
  together, at least 2) are merged into one file of the next level named
  ``<min>_<max>_<level+1>.parquet``, and so on up the levels;
- cleaning: only the ``3 + levels compacted`` newest snapshots are kept; older manifests, then
  parquet files no kept snapshot lists, are deleted.

Archived log (``HoodieTimelineArchiver`` of Hudi 0.x), in ``.hoodie/archived/``: one
``HoodieArchivedMetaEntry`` record per instant *state*, the payload decoded into the field its
action and state use (commit metadata converted from JSON to Avro), written as Avro data blocks
of ``hoodie.commits.archival.batch`` (10) records with only the SCHEMA header. Object stores
cannot append, so every archival writes the next log version ``.commits_.archive.<N>_1-0-1``
(created exclusively), which is what Hudi does where appends are not supported.
"""

from __future__ import annotations

import io
import logging
import re
import struct
from typing import Any, Iterable, Mapping, Sequence

import attrs
import fastavro

from ..base_file import read_parquet_bytes
from ..config import TableConfig
from ..errors import StorageError, TimelineError
from ..options import default
from ..storage import Storage
from .archived import VERSION_FILE, latest_manifest
from .avro_schemas import decode_payload, parsed_schema, schema_json
from .instant import Instant, State, comparable_action
from .writer import _commit_avro, jackson_json

log = logging.getLogger(__name__)

LSM_INSTANT_VERSION = 1  # LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
DEFAULT_BATCH_SIZE: int = default("hoodie.timeline.compaction.batch.size")
DEFAULT_TARGET_FILE_MAX_BYTES: int = default("hoodie.timeline.compaction.target.file.max.bytes")
DEFAULT_ARCHIVAL_BATCH: int = default("hoodie.commits.archival.batch")
SNAPSHOTS_TO_KEEP = 3
_LSM_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_ARCHIVE_LOG = re.compile(r"^\.commits_\.archive\.(\d+)(?:_.*)?$")
V6_ARCHIVE_TOKEN = "1-0-1"  # HoodieLogFormat.UNKNOWN_WRITE_TOKEN


@attrs.frozen
class ActiveAction:
    """The files of one instant on the active timeline, by state (names in the timeline folder)."""

    timestamp: str
    action: str                       # the completed action (commit for a compaction)
    completion_time: str | None
    files: Mapping[State, str]
    pending_action: str               # the action of its requested/inflight files

    @classmethod
    def of(cls, timeline, instant: Instant) -> "ActiveAction":
        files = timeline.files_of(instant)
        pending = instant.action
        for st in (State.REQUESTED, State.INFLIGHT):
            name = files.get(st)
            if name is not None:
                pending = _action_in_name(name, instant.action)
                break
        return cls(instant.timestamp, comparable_action(instant.action, timeline.config.version),
                   instant.completion_time, dict(files), pending)


def _action_in_name(name: str, default: str) -> str:
    parts = name.split(".")
    if len(parts) == 2 and parts[1] == "inflight":
        return "commit"
    return parts[1] if len(parts) >= 2 else default


def _read(storage: Storage, timeline_dir: str, name: str | None) -> bytes | None:
    if name is None:
        return None
    try:
        return storage.read_bytes(f"{timeline_dir}/{name}")
    except StorageError:
        return None


# -- v8+: LSM history --------------------------------------------------------------------------
def lsm_row(storage: Storage, timeline_dir: str, action: ActiveAction) -> dict:
    """``MetadataConversionUtils.createLSMTimelineInstant``."""
    completed = _read(storage, timeline_dir, action.files.get(State.COMPLETED))
    requested = _read(storage, timeline_dir, action.files.get(State.REQUESTED))
    inflight = _read(storage, timeline_dir, action.files.get(State.INFLIGHT))
    plan = None
    if action.pending_action in ("clean", "compaction", "logcompaction"):
        plan = requested or None
    elif action.pending_action in ("replacecommit", "clustering"):
        plan = requested or None
        if inflight:
            plan = inflight
    return {"instantTime": action.timestamp, "completionTime": action.completion_time,
            "action": action.action, "metadata": completed or None, "plan": plan,
            "version": LSM_INSTANT_VERSION}


def lsm_file_name(min_instant: str, max_instant: str, level: int) -> str:
    return f"{min_instant}_{max_instant}_{level}.parquet"


def _level(name: str) -> int | None:
    m = _LSM_FILE.match(name)
    return int(m.group(3)) if m else None


def _write_lsm_file(storage: Storage, rel: str, rows: Sequence[dict]) -> int:
    import pyarrow as pa

    from ..base_file import write_base_file
    schema = pa.schema([pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
                        pa.field("action", pa.string()), pa.field("metadata", pa.binary()),
                        pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False)])
    table = pa.Table.from_pylist(list(rows), schema=schema)
    if storage.exists(rel):
        storage.delete(rel)  # left by a run that died before committing it to a manifest
    write_base_file(storage, rel, table, schema_json("HoodieLSMTimelineInstant"))
    return storage.size(rel)


def _read_lsm_rows(storage: Storage, rel: str) -> list[dict]:
    return read_parquet_bytes(storage.read_bytes(rel)).to_pylist()


class LSMTimelineWriter:
    """Appends archived instants to the LSM history of a v8+ table."""

    def __init__(self, storage: Storage, config: TableConfig, batch_size: int = DEFAULT_BATCH_SIZE,
                 target_file_max_bytes: int = DEFAULT_TARGET_FILE_MAX_BYTES):
        if batch_size < 2:
            raise TimelineError(f"hoodie.timeline.compaction.batch.size must be at least 2, got {batch_size}")
        self.storage = storage
        self.config = config
        self.dir = config.history_dir
        self.batch_size = batch_size
        self.target_file_max_bytes = target_file_max_bytes

    def _snapshot(self) -> tuple[int, list[dict]]:
        version, names = latest_manifest(self.storage, self.dir)
        return version, [{"fileName": n, "fileLen": self._len(n)} for n in names]

    def _len(self, name: str) -> int:
        try:
            return self.storage.size(f"{self.dir}/{name}")
        except StorageError:
            return 0

    def _commit(self, version: int, files: list[dict]) -> int:
        """Write ``manifest_<version+1>`` then point ``_version_`` at it."""
        new = 1 if version < 0 else version + 1
        manifest = f"{self.dir}/manifest_{new}"
        if self.storage.exists(manifest):
            self.storage.delete(manifest)  # written by a run that died before updating _version_
        body = jackson_json({"files": [{"fileName": f["fileName"], "fileLen": int(f["fileLen"])}
                                       for f in files]}).encode("utf-8")
        if not self.storage.create_if_absent(manifest, body):
            raise TimelineError(f"another archiver wrote {self.storage.uri(manifest)} concurrently")
        version_file = f"{self.dir}/{VERSION_FILE}"
        self.storage.delete(version_file)
        # between these two steps readers fall back to the newest manifest, which is complete
        if not self.storage.create_if_absent(version_file, str(new).encode("utf-8")):
            raise TimelineError(f"another archiver wrote {self.storage.uri(version_file)} concurrently")
        return new

    def write(self, actions: Sequence[ActiveAction], timeline_dir: str) -> str | None:
        """Archive ``actions`` (sorted by request time) into a new level-0 file and commit it;
        returns the file name (``None`` if there was nothing to write)."""
        if not actions:
            return None
        actions = sorted(actions, key=lambda a: a.timestamp)
        name = lsm_file_name(actions[0].timestamp, actions[-1].timestamp, 0)
        version, files = self._snapshot()
        if any(f["fileName"] == name for f in files):
            log.info("LSM file %s is already committed; not writing it again", name)
            return name
        rows = [lsm_row(self.storage, timeline_dir, a) for a in actions]
        size = _write_lsm_file(self.storage, f"{self.dir}/{name}", rows)
        self._commit(version, files + [{"fileName": name, "fileLen": size}])
        return name

    # -- compaction of levels ----------------------------------------------------------------
    def _candidates(self, files: list[dict]) -> list[str]:
        out, total = [], 0
        for f in sorted(files, key=lambda f: f["fileName"]):
            total += int(f["fileLen"])
            out.append(f["fileName"])
            if len(out) >= self.batch_size:
                break
            if total > self.target_file_max_bytes:
                if len(out) < 2:
                    out, total = [], 0
                else:
                    break
        return out

    def compact_and_clean(self) -> list[str]:
        """Compact full levels upwards, then drop old snapshots; the new file names."""
        created = []
        level = 0
        while True:
            version, files = self._snapshot()
            in_level = [f for f in files if _level(f["fileName"]) == level]
            if len(in_level) < self.batch_size:
                break
            candidates = self._candidates(in_level)
            if len(candidates) < 2:
                break
            name = lsm_file_name(min(_LSM_FILE.match(c).group(1) for c in candidates),
                                 max(_LSM_FILE.match(c).group(2) for c in candidates), level + 1)
            rows = [r for c in candidates for r in _read_lsm_rows(self.storage, f"{self.dir}/{c}")]
            size = _write_lsm_file(self.storage, f"{self.dir}/{name}", rows)
            kept = [f for f in files if f["fileName"] not in candidates]
            self._commit(version, kept + [{"fileName": name, "fileLen": size}])
            created.append(name)
            level += 1
        self.clean(level)
        return created

    def clean(self, compacted_levels: int = 0) -> None:
        versions = sorted((int(m.group(1)) for f in self.storage.list(self.dir)
                           if not f.is_dir and (m := _MANIFEST.match(f.name))), reverse=True)
        keep_n = SNAPSHOTS_TO_KEEP + compacted_levels
        if len(versions) <= keep_n:
            return
        keep = versions[:keep_n]
        referenced: set[str] = set()
        from .archived import _manifest_files
        for v in keep:
            referenced.update(_manifest_files(self.storage, f"{self.dir}/manifest_{v}") or ())
        for v in versions[keep_n:]:
            self.storage.delete(f"{self.dir}/manifest_{v}")
        for f in self.storage.list(self.dir):
            if not f.is_dir and _LSM_FILE.match(f.name) and f.name not in referenced:
                self.storage.delete(f.path)


# -- v6: archived log -------------------------------------------------------------------------
def _commit_record(data: bytes | None, replace: bool, source: str) -> dict:
    """Jackson JSON (or Avro) commit metadata -> the Avro record ``convertCommitMetadata`` makes;
    an empty file gives empty metadata, as ``HoodieCommitMetadata.fromBytes`` does."""
    meta = decode_payload(data, source) if data else {}
    meta = dict(meta)
    meta.setdefault("partitionToWriteStats", {})
    meta.setdefault("extraMetadata", {})
    meta.setdefault("operationType", "UNKNOWN")
    if replace:
        meta.setdefault("partitionToReplaceFileIds", {})
    return _commit_avro(meta, replace)[1]


def _mtime_instant(storage: Storage, rel: str, timezone: str) -> str | None:
    try:
        info = storage.fs.info(storage.full(rel))
    except (OSError, ValueError):
        return None
    mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
    if mtime is None:
        return None
    from .clock import format_epoch_millis
    seconds = mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime)
    return format_epoch_millis(int(seconds * 1000), timezone)


def archived_meta_entries(storage: Storage, config: TableConfig, action: ActiveAction) -> list[dict]:
    """``MetadataConversionUtils.createMetaWrapper`` for every state file of ``action``."""
    out = []
    tdir = config.timeline_dir
    for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
        name = action.files.get(state)
        if name is None:
            continue
        data = _read(storage, tdir, name)
        source = storage.uri(f"{tdir}/{name}")
        act = action.action if state is State.COMPLETED else action.pending_action
        rec: dict[str, Any] = {"commitTime": action.timestamp, "actionState": state.name,
                               "stateTransitionTime": _mtime_instant(storage, f"{tdir}/{name}",
                                                                     config.timeline_timezone),
                               "actionType": act, "version": None}
        if act in ("commit", "deltacommit"):
            rec["hoodieCommitMetadata"] = _commit_record(data, False, source)
        elif act in ("replacecommit", "clustering"):
            if state is State.COMPLETED:
                rec["hoodieReplaceCommitMetadata"] = _commit_record(data, True, source)
            elif state is State.INFLIGHT and data:
                rec["HoodieInflightReplaceMetadata"] = _commit_record(data, False, source)
            elif state is State.REQUESTED and data:
                rec["hoodieRequestedReplaceMetadata"] = decode_payload(data, source)
        elif act == "clean":
            if state is State.COMPLETED:
                rec["hoodieCleanMetadata"] = decode_payload(data, source) if data else None
            else:
                plan = data or _read(storage, tdir, action.files.get(State.REQUESTED))
                rec["hoodieCleanerPlan"] = decode_payload(plan, source) if plan else None
        elif act == "rollback":
            if state is State.COMPLETED and data:
                rec["hoodieRollbackMetadata"] = decode_payload(data, source)
        elif act == "savepoint":
            if data:
                rec["hoodieSavePointMetadata"] = decode_payload(data, source)
        elif act in ("compaction", "logcompaction"):
            if state is State.REQUESTED and data:
                rec["hoodieCompactionPlan"] = decode_payload(data, source)
        else:
            raise TimelineError(f"cannot archive {act} instant {action.timestamp}: "
                                "Hudi's archived log has no field for it")
        out.append(rec)
    return out


def _avro_block(records: Sequence[dict]) -> bytes:
    from ..log import BlockType, HeaderKey, encode_block
    schema = parsed_schema("HoodieArchivedMetaEntry")
    buf = io.BytesIO()
    parts = [struct.pack(">ii", 3, len(records))]  # HoodieAvroDataBlock version 3, record count
    for rec in records:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, schema, rec)
        parts += [struct.pack(">i", buf.tell()), buf.getvalue()]
    return encode_block(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: schema_json("HoodieArchivedMetaEntry")},
                        b"".join(parts))


def write_v6_archive(storage: Storage, config: TableConfig, actions: Iterable[ActiveAction],
                     batch: int = DEFAULT_ARCHIVAL_BATCH) -> str | None:
    """Write the archived-log records of ``actions`` into the next archive log version; the
    file's path (``None`` when there was nothing to write)."""
    records = [r for a in sorted(actions, key=lambda a: a.timestamp)
               for r in archived_meta_entries(storage, config, a)]
    if not records:
        return None
    batch = max(int(batch), 1)
    data = b"".join(_avro_block(records[i:i + batch]) for i in range(0, len(records), batch))
    adir = config.archive_dir
    version = max((int(m.group(1)) for f in storage.list(adir)
                   if not f.is_dir and (m := _ARCHIVE_LOG.match(f.name))), default=0) + 1
    while True:
        rel = f"{adir}/.commits_.archive.{version}_{V6_ARCHIVE_TOKEN}"
        if storage.create_if_absent(rel, data):
            return rel
        version += 1


__all__ = ["ActiveAction", "LSMTimelineWriter", "lsm_row", "lsm_file_name", "write_v6_archive",
           "archived_meta_entries"]
