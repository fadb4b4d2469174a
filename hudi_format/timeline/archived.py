"""The archived timeline: instants moved out of the active timeline by archival.

Two storage layouts, one per timeline layout:

- v8+ (LSM history, ``.hoodie/timeline/history/``): ``_version_`` names the current snapshot,
  ``manifest_<N>`` lists that snapshot's parquet files (JSON ``{"files": [{"fileName",
  "fileLen"}]}``), and each ``<min>_<max>_<level>.parquet`` holds ``HoodieLSMTimelineInstant``
  rows whose ``metadata``/``plan`` columns are the raw bytes of the former active files.
  The version file is written after its manifest, so it is trusted first; a manifest newer
  than it may be half-written. Only when it is missing or broken do we fall back to the
  newest manifest that parses, as Hudi does.
- v6 (``.hoodie/archived/.commits_.archive.<N>_<token>``): Hudi log files whose Avro data
  blocks hold ``HoodieArchivedMetaEntry`` records, one per instant *state*, with the payload
  already decoded into a field chosen by action (``hoodieCommitMetadata``...).

Everything is read on first use and then kept: the archive is consulted rarely (time travel
or incremental reads that reach before the active timeline) and is small per instant.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Iterable, Mapping

import pyarrow as pa

from ..base_file import read_parquet_bytes
from ..config import TableConfig
from ..errors import FileMissingError, HudiError, StorageError, TimelineError
from ..storage import Storage
from .avro_schemas import decode_payload
from .base import TimelineView
from .instant import Instant, State, comparable_action, format_file_name

log = logging.getLogger(__name__)

VERSION_FILE = "_version_"
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_LSM_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_ARCHIVE_FILE = re.compile(r"^\.commits_\.archive\.(\d+)(?:_.*)?$")
MERGE_ARCHIVE_PLAN = "mergeArchivePlan"

# HoodieArchivedMetaEntry field that carries the payload of (action, state)
_V6_COMPLETED_FIELD = {
    "commit": "hoodieCommitMetadata", "deltacommit": "hoodieCommitMetadata",
    "replacecommit": "hoodieReplaceCommitMetadata", "clean": "hoodieCleanMetadata",
    "rollback": "hoodieRollbackMetadata", "savepoint": "hoodieSavePointMetadata",
    "indexing": "hoodieIndexCommitMetadata", "compaction": "hoodieCompactionMetadata",
}
_V6_PENDING_FIELDS = ("hoodieCompactionPlan", "hoodieCleanerPlan", "hoodieRequestedReplaceMetadata",
                      "HoodieInflightReplaceMetadata", "hoodieCommitMetadata")

class ArchivedTimeline(TimelineView):
    """Archived instants with the same queries as the active timeline."""

    def __init__(self, storage: Storage, config: TableConfig, instants: Iterable[Instant],
                 payloads: Mapping[tuple[str, str], Mapping[State, tuple[Any, str]]]):
        super().__init__(instants, config.version)
        self.storage = storage
        self.config = config
        self.timezone = config.timeline_timezone
        self._payloads = {k: dict(v) for k, v in payloads.items()}
        self._decoded: dict[tuple[tuple[str, str], State], dict | None] = {}

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> "ArchivedTimeline":
        if config.version >= 8:
            entries = _read_lsm(storage, config.history_dir)
        else:
            entries = _read_v6_archive(storage, config.archive_dir)
        instants: dict[tuple[str, str], Instant] = {}
        payloads: dict[tuple[str, str], dict[State, tuple[Any, str]]] = {}
        for inst, by_state in entries:
            key = (inst.timestamp, comparable_action(inst.action, config.version))
            current = instants.get(key)
            if current is None or inst.state > current.state:
                instants[key] = inst
            slot = payloads.setdefault(key, {})
            for state, payload in by_state.items():
                if slot.get(state, (None, ""))[0] is None:  # first archived copy with content wins
                    slot[state] = payload
        return cls(storage, config, instants.values(), payloads)

    # -- payloads ----------------------------------------------------------------------------
    def _payload(self, instant: Instant, state: State) -> dict | None:
        key = self.key(instant)
        cache_key = (key, state)
        if cache_key not in self._decoded:
            raw, source = self._payloads.get(key, {}).get(state, (None, ""))
            if raw is None or isinstance(raw, (bytes, bytearray)) and not raw:
                value = None
            elif isinstance(raw, (bytes, bytearray)):
                value = decode_payload(bytes(raw), source)
            else:
                value = dict(raw)
            self._decoded[cache_key] = value
        return self._decoded[cache_key]

    def _source(self, instant: Instant, state: State) -> str:
        return self._payloads.get(self.key(instant), {}).get(state, (None, "archived timeline"))[1]

    def _completed_payload(self, instant: Instant) -> tuple[Mapping[str, Any], str]:
        if self.key(instant) not in self._by_key:
            raise TimelineError(f"instant {instant} is neither on the active nor the archived timeline")
        payload = self._payload(instant, State.COMPLETED)
        source = f"{self._source(instant, State.COMPLETED)} (archived {instant})"
        if payload is None:
            raise TimelineError(f"{source}: no completion metadata was archived for this instant")
        return payload, source

    def _plan_payload(self, instant: Instant, state: State | None) -> dict:
        if self.key(instant) not in self._by_key:
            raise TimelineError(f"instant {instant} is neither on the active nor the archived timeline")
        for st in ([state] if state is not None else [State.REQUESTED, State.INFLIGHT]):
            payload = self._payload(instant, st)
            if payload is not None:
                return dict(payload)
        return {}


# -- v8+: LSM history --------------------------------------------------------------------------
def _read_text(storage: Storage, rel: str) -> str | None:
    try:
        return storage.read_bytes(rel).decode("utf-8")
    except (StorageError, UnicodeDecodeError):
        return None


def _manifest_files(storage: Storage, rel: str) -> list[str] | None:
    text = _read_text(storage, rel)
    if text is None:
        return None
    if not text.strip():
        return []  # Hudi reads an empty manifest as an empty snapshot
    try:
        files = json.loads(text).get("files") or []
        return [str(f["fileName"]) for f in files]
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable LSM manifest %s: %s", storage.uri(rel), exc)
        return None


def latest_manifest(storage: Storage, history_dir: str) -> tuple[int, list[str]]:
    """The current snapshot of the LSM history: (version, parquet file names); (-1, []) if none."""
    listed = sorted((int(m.group(1)) for f in storage.list(history_dir)
                     if not f.is_dir and (m := _MANIFEST.match(f.name))), reverse=True)
    candidates: list[int] = []
    text = _read_text(storage, f"{history_dir}/{VERSION_FILE}")
    if text is not None:
        try:
            candidates.append(int(text.strip()))
        except ValueError:
            log.warning("ignoring unreadable %s/%s: %r", history_dir, VERSION_FILE, text[:40])
    candidates += [v for v in listed if v not in candidates]
    for version in candidates:
        files = _manifest_files(storage, f"{history_dir}/manifest_{version}")
        if files is not None:
            return version, files
    return -1, []


_SNAPSHOT_READS = 3   # snapshots tried when archivers compact and clean the one being read


def _read_lsm(storage: Storage, history_dir: str) -> list[tuple[Instant, dict[State, tuple[Any, str]]]]:
    """The rows of the current snapshot. A file of it that is gone was compacted and cleaned
    by an archiver since the snapshot was listed (only the newest few snapshots are kept):
    the then current snapshot is read instead; a file missing from the current one is damage."""
    for attempt in range(_SNAPSHOT_READS):
        version, files = latest_manifest(storage, history_dir)
        try:
            return _read_lsm_files(storage, history_dir, files)
        except FileMissingError as exc:
            if attempt + 1 < _SNAPSHOT_READS and latest_manifest(storage, history_dir)[0] != version:
                continue
            raise TimelineError(str(exc)) from exc
    raise AssertionError("unreachable")


def _read_lsm_files(storage: Storage, history_dir: str,
                    files: list[str]) -> list[tuple[Instant, dict[State, tuple[Any, str]]]]:
    out = []
    for name in files:
        if not _LSM_FILE.match(name):
            log.warning("LSM manifest lists %s, which is not named <min>_<max>_<level>.parquet", name)
        rel = f"{history_dir}/{name}"
        source = storage.uri(rel)
        try:
            table = read_parquet_bytes(storage.read_bytes(rel))
        except FileMissingError as exc:
            raise FileMissingError(f"cannot read LSM timeline file {source}: {exc}") from exc
        except (StorageError, pa.ArrowException, OSError) as exc:
            raise TimelineError(f"cannot read LSM timeline file {source}: {exc}") from exc
        cols = {c: table.column(c).to_pylist() if c in table.column_names else [None] * table.num_rows
                for c in ("instantTime", "completionTime", "action", "metadata", "plan")}
        for row in range(table.num_rows):
            ts, done, action = cols["instantTime"][row], cols["completionTime"][row], cols["action"][row]
            if not ts or not action:
                log.warning("skipping an LSM row without instant time or action in %s", source)
                continue
            done = done or ts
            inst = Instant(ts, action, State.COMPLETED, done,
                           format_file_name(ts, action, State.COMPLETED, 8, done))
            out.append((inst, {State.COMPLETED: (cols["metadata"][row], source),
                               State.REQUESTED: (cols["plan"][row], source)}))
    return out


# -- v6: archived log files -------------------------------------------------------------------
def _to_python(value: Any, typ: pa.DataType) -> Any:
    """Arrow ``to_pylist`` values with maps turned back into dicts (Avro maps)."""
    if value is None:
        return None
    if pa.types.is_map(typ):
        return {k: _to_python(v, typ.item_type) for k, v in value}
    if pa.types.is_struct(typ):
        return {f.name: _to_python(value.get(f.name), f.type) for f in typ}
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return [_to_python(v, typ.value_type) for v in value]
    return value


def arrow_records(table: pa.Table) -> list[dict]:
    columns = {f.name: [_to_python(v, f.type) for v in table.column(f.name).to_pylist()]
               for f in table.schema}
    return [{name: col[i] for name, col in columns.items()} for i in range(table.num_rows)]


def _merge_plan_target(storage: Storage, archive_dir: str) -> str | None:
    rel = f"{archive_dir}/{MERGE_ARCHIVE_PLAN}"
    if not storage.exists(rel):
        return None
    try:
        return decode_payload(storage.read_bytes(rel), storage.uri(rel)).get("mergedArchiveFileName")
    except HudiError:
        return None


def _v6_entry(record: Mapping[str, Any], source: str) -> tuple[Instant, dict[State, tuple[Any, str]]] | None:
    ts, action = record.get("commitTime"), record.get("actionType")
    if not ts or not action:
        return None
    state_name = record.get("actionState") or "COMPLETED"
    try:
        state = State[str(state_name).upper()]
    except KeyError:
        return None
    if state is State.COMPLETED:
        payload = record.get(_V6_COMPLETED_FIELD.get(action, ""))
    else:
        payload = next((record[f] for f in _V6_PENDING_FIELDS if record.get(f) is not None), None)
    try:
        name = format_file_name(ts, action, state, 6)
    except TimelineError:
        log.warning("skipping archived record of unknown action %r at %s in %s", action, ts, source)
        return None
    if state is State.COMPLETED:
        action = comparable_action(action, 6)  # a completed compaction is a commit
    return Instant(ts, action, state, None, name), {state: (payload, source)}


def _read_v6_archive(storage: Storage, archive_dir: str) -> list[tuple[Instant, dict[State, tuple[Any, str]]]]:
    files = sorted(((int(m.group(1)), f.path) for f in storage.list(archive_dir)
                    if not f.is_dir and (m := _ARCHIVE_FILE.match(f.name))), reverse=True)
    if not files:
        return []
    from ..log import BlockType, read_log_file  # local: only v6 archives need the log reader

    out = []
    for _, rel in files:
        source = storage.uri(rel)
        try:
            for block in read_log_file(storage, rel):
                if block.block_type == BlockType.CORRUPTED:
                    # Hudi's archive loader skips what is not an Avro data block, corrupt ones too
                    log.warning("skipping %s", block.describe())
                    continue
                if block.block_type != BlockType.AVRO_DATA:
                    continue
                for record in arrow_records(block.records()):
                    entry = _v6_entry(record, source)
                    if entry is not None:
                        out.append(entry)
        except HudiError as exc:
            if rel.rsplit("/", 1)[-1] == _merge_plan_target(storage, archive_dir):
                log.warning("skipping half-merged archive file %s: %s", source, exc)
                continue
            raise TimelineError(f"cannot read archived timeline file {source}: {exc}") from exc
    return out
