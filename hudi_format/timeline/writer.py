"""Writing the timeline: instant transitions and their payloads, as Apache Hudi lays them out.

An action moves through ``requested -> inflight -> completed``; each state is a new file and
older files stay (Hudi keeps all three). The file names follow the table version
(``format_file_name``); every file is created with ``Storage.create_if_absent``, so a file is
never overwritten nor seen half-written, and a second writer of the same instant fails instead
of clobbering the first. For v8+ tables the completion time is issued, and the completed file
written, while holding the table's time lock, as Hudi's ``createCompleteFileInMetaPath`` does.

Payloads, per Hudi's ``HoodieActiveTimeline`` and ``TimelineMetadataUtils``:

- requested commit/deltacommit: an empty file; requested replacecommit/clustering,
  compaction, logcompaction, clean, rollback, restore, indexing: the plan as an Avro container
  (``HoodieRequestedReplaceMetadata``, ``HoodieCompactionPlan``, ``HoodieCleanerPlan``, ...);
- inflight commit/deltacommit/replacecommit: the workload's commit metadata
  (``HoodieCommitMetadata``) if given, else empty; other inflight files: empty (or the plan);
- completed commit, deltacommit, replacecommit (and compaction, logcompaction, clustering,
  which complete as those): commit metadata, as Jackson JSON for v6 tables and as an Avro
  container for v8+; other actions: their Avro metadata (``HoodieCleanMetadata``, ...).

Commit metadata is encoded as Hudi's Java code would: maps come out in ``java.util.HashMap``
iteration order (Hudi builds them as HashMaps), write stats in the field order and with the
defaults of Hudi's ``HoodieWriteStat``/``HoodieDeltaWriteStat``, and the JSON with Jackson's
default pretty printer.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, Iterable, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError, StorageError, TimelineError
from ..java_compat import jackson_json, java_hashmap_order
from ..storage import Storage
from .avro_schemas import encode_avro, schema_json
from .clock import InstantClock
from .instant import (ACTIONS, CLEAN, CLUSTERING, COMMIT, COMPACTION, DELTA_COMMIT, INDEXING,
                      LOG_COMPACTION, REPLACE_COMMIT, RESTORE, ROLLBACK, SAVEPOINT, Instant,
                      State, comparable_action, format_file_name, parse_file_name)
from .metadata import CommitMetadata
from .write_stat import NULL_COMMIT, RUNTIME_FIELDS as _RUNTIME_FIELDS, WriteStat
from .plans import encode_plan

#: actions whose payloads are commit metadata
COMMIT_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION,
                            LOG_COMPACTION})
#: plan schema of the requested (and, where Hudi writes one, inflight) file of each action
PLAN_SCHEMAS = {REPLACE_COMMIT: "HoodieRequestedReplaceMetadata",
                CLUSTERING: "HoodieRequestedReplaceMetadata",
                COMPACTION: "HoodieCompactionPlan", LOG_COMPACTION: "HoodieCompactionPlan",
                CLEAN: "HoodieCleanerPlan", ROLLBACK: "HoodieRollbackPlan",
                RESTORE: "HoodieRestorePlan", INDEXING: "HoodieIndexPlan"}
#: metadata schema of the completed file of the actions that are not commits
COMPLETED_SCHEMAS = {CLEAN: "HoodieCleanMetadata", ROLLBACK: "HoodieRollbackMetadata",
                     RESTORE: "HoodieRestoreMetadata", SAVEPOINT: "HoodieSavepointMetadata",
                     INDEXING: "HoodieIndexCommitMetadata"}

# -- Java collections order ------------------------------------------------------------------


def _hashmap(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in java_hashmap_order(str(k) for k in d)} if d else {}


# -- write stats ------------------------------------------------------------------------------

# HoodieWriteStat fields, in declaration order (Jackson writes them so), with their defaults
_STAT_FIELDS: tuple[tuple[str, Any], ...] = (
    ("fileId", None), ("path", None), ("cdcStats", None), ("prevCommit", NULL_COMMIT),
    ("numWrites", 0), ("numDeletes", 0), ("numUpdateWrites", 0), ("numInserts", 0),
    ("totalWriteBytes", 0), ("totalWriteErrors", 0), ("tempPath", None), ("partitionPath", None),
    ("totalLogRecords", 0), ("totalLogFilesCompacted", 0), ("totalLogSizeCompacted", 0),
    ("totalUpdatedRecordsCompacted", 0), ("totalLogBlocks", 0), ("totalCorruptLogBlock", 0),
    ("totalRollbackBlocks", 0), ("fileSizeInBytes", 0), ("minEventTime", None),
    ("maxEventTime", None), ("runtimeStats", None))
# HoodieDeltaWriteStat adds these (log writes of MOR tables)
_DELTA_FIELDS: tuple[tuple[str, Any], ...] = (
    ("logVersion", 0), ("logOffset", 0), ("baseFile", None), ("logFiles", ()),
    ("recordsStats", {"val": None}))
# Avro HoodieWriteStat fields Hudi 1.x fills with 0 when unset (primitive fields of the POJO)
_AVRO_ZERO = frozenset({
    "numWrites", "numDeletes", "numUpdateWrites", "numInserts", "totalWriteBytes",
    "totalWriteErrors", "totalLogRecords", "totalLogFilesCompacted", "totalLogSizeCompacted",
    "totalUpdatedRecordsCompacted", "totalLogBlocks", "totalCorruptLogBlock",
    "totalRollbackBlocks", "fileSizeInBytes", "totalLogReadTimeMs", "numUpdates"})


def _is_delta(stat: Mapping[str, Any]) -> bool:
    return ("recordsStats" in stat
            or any(stat.get(k) is not None for k in ("logVersion", "logOffset", "baseFile", "logFiles")))


def commit_metadata(write_stats: Iterable[WriteStat | Mapping[str, Any]], *, operation_type: str,
                    extra_metadata: Mapping[str, str] | None = None, compacted: bool = False,
                    replaced_file_ids: Mapping[str, Iterable[str]] | None = None) -> dict:
    """Commit metadata (``HoodieCommitMetadata``, or ``HoodieReplaceCommitMetadata`` when
    ``replaced_file_ids`` is given) grouping ``write_stats`` by their ``partitionPath``."""
    by_partition: dict[str, list[dict]] = {}
    for st in write_stats:
        d = st.to_dict() if isinstance(st, WriteStat) else dict(st)
        by_partition.setdefault(d.get("partitionPath") or "", []).append(d)
    meta: dict[str, Any] = {"partitionToWriteStats": by_partition, "compacted": bool(compacted),
                            "extraMetadata": dict(extra_metadata or {}),
                            "operationType": operation_type}
    if replaced_file_ids is not None:
        meta["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in replaced_file_ids.items()}
    return meta


# -- commit metadata encoding -----------------------------------------------------------------


def _as_dict(meta: Mapping[str, Any] | CommitMetadata) -> Mapping[str, Any]:
    if isinstance(meta, CommitMetadata):
        return meta.raw
    if not isinstance(meta, Mapping):
        raise InvalidOptionError(f"commit metadata must be a mapping or CommitMetadata, "
                                 f"got {type(meta).__name__}")
    return meta


def _stats_map(meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = meta.get(key)
    if value is None:
        return {}
    if isinstance(value, list):  # Arrow-style key/value pairs
        value = dict(value)
    if not isinstance(value, Mapping):
        raise InvalidOptionError(f"commit metadata: {key} must be a mapping, got {type(value).__name__}")
    return value


def _json_stat(stat: Mapping[str, Any]) -> dict:
    fields = _STAT_FIELDS + (_DELTA_FIELDS if _is_delta(stat) else ())
    out = {}
    for name, default in fields:
        value = stat.get(name, default)
        if name == "runtimeStats" and isinstance(value, Mapping):
            value = {k: value.get(k, 0) for k in _RUNTIME_FIELDS}
        elif name == "cdcStats" and isinstance(value, Mapping):
            value = _hashmap(value)
        elif name == "logFiles" and value is not None:
            value = list(value)
        out[name] = value
    return out


def _commit_tree(meta: Mapping[str, Any], replace: bool) -> dict:
    """The object Jackson serialises for ``HoodieCommitMetadata`` (0.x field order)."""
    stats = _stats_map(meta, "partitionToWriteStats")
    tree: dict[str, Any] = {
        "partitionToWriteStats": {p: [_json_stat(s) for s in (stats[p] or ())]
                                  for p in java_hashmap_order(stats)},
        "compacted": bool(meta.get("compacted") or False),
        "extraMetadata": _hashmap(_stats_map(meta, "extraMetadata")),
        "operationType": meta.get("operationType", "UNKNOWN"),
    }
    if replace:
        ids = _stats_map(meta, "partitionToReplaceFileIds")
        tree["partitionToReplaceFileIds"] = {p: list(ids[p] or ()) for p in java_hashmap_order(ids)}
    return tree


def _avro_stat(stat: Mapping[str, Any], fields: Iterable[str]) -> dict:
    delta = _is_delta(stat)
    out = {}
    for name in fields:
        if name in stat:
            value = stat[name]
        elif name in _AVRO_ZERO or (delta and name in ("logVersion", "logOffset")):
            value = 0
        elif name == "prevCommit":
            value = NULL_COMMIT
        elif name == "logFiles" and delta:
            value = []
        else:
            value = None
        if name == "cdcStats" and isinstance(value, Mapping):
            value = _hashmap(value)
        elif name == "logFiles" and value is not None:
            value = list(value)
        out[name] = value
    return out


def _record_fields(schema_name: str, record_name: str) -> list[str]:
    """Field names of a named record type inside a bundled schema."""
    def find(node):
        if isinstance(node, dict):
            if node.get("type") == "record" and node.get("name", "").rsplit(".", 1)[-1] == record_name:
                return [f["name"] for f in node["fields"]]
            for v in node.values():
                got = find(v)
                if got:
                    return got
        elif isinstance(node, list):
            for v in node:
                got = find(v)
                if got:
                    return got
        return None
    return find(json.loads(schema_json(schema_name))) or []


def _commit_avro(meta: Mapping[str, Any], replace: bool) -> tuple[str, dict]:
    name = "HoodieReplaceCommitMetadata" if replace else "HoodieCommitMetadata"
    top = _record_fields(name, name)
    stat_fields = _record_fields(name, "HoodieWriteStat")
    stats = _stats_map(meta, "partitionToWriteStats")
    record: dict[str, Any] = {}
    for field in top:
        if field == "partitionToWriteStats":
            record[field] = {p: [_avro_stat(s, stat_fields) for s in (stats[p] or ())]
                             for p in java_hashmap_order(stats)}
        elif field == "extraMetadata":
            record[field] = {k: ("" if v is None else str(v))
                             for k, v in _hashmap(_stats_map(meta, "extraMetadata")).items()}
        elif field == "compacted":
            record[field] = bool(meta.get("compacted") or False)
        elif field == "operationType":
            record[field] = meta.get("operationType", "UNKNOWN")
        elif field == "partitionToReplaceFileIds":
            ids = _stats_map(meta, "partitionToReplaceFileIds")
            record[field] = {p: [str(i) for i in (ids[p] or ())] for p in java_hashmap_order(ids)}
        else:
            record[field] = meta.get(field)  # e.g. version: Hudi leaves it null
    return name, record


def encode_commit_metadata(meta: Mapping[str, Any] | CommitMetadata, table_version: int,
                           action: str = COMMIT, *, replace: bool | None = None) -> bytes:
    """Commit metadata bytes as Hudi writes them for ``action`` in ``table_version``.

    v6: Jackson's pretty-printed JSON of ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata``
    with ``partitionToReplaceFileIds`` when ``replace``), no trailing newline. v8+: an Avro
    container of the same. ``replace`` defaults to ``action`` being a replacecommit or a
    clustering; the inflight file of a replacecommit holds plain commit metadata
    (``replace=False``). Missing fields take Hudi's defaults; keys unknown to Hudi's 0.x write
    stat are not written to v6 JSON.
    """
    meta = _as_dict(meta)
    if replace is None:
        replace = comparable_action(action, 8) == REPLACE_COMMIT
    if table_version >= 8:
        name, record = _commit_avro(meta, replace)
        return encode_avro(name, record)
    return jackson_json(_commit_tree(meta, replace)).encode("utf-8")


# -- payloads per action and state ------------------------------------------------------------


def _payload(action: str, state: State, metadata: Any, table_version: int) -> bytes:
    if metadata is None:
        return b""
    if isinstance(metadata, (bytes, bytearray, memoryview)):
        return bytes(metadata)
    if action in COMMIT_ACTIONS and (state is State.COMPLETED or
                                     (state is State.INFLIGHT and action in (COMMIT, DELTA_COMMIT,
                                                                             REPLACE_COMMIT))):
        replace = state is State.COMPLETED and comparable_action(action, 8) == REPLACE_COMMIT
        return encode_commit_metadata(metadata, table_version, action, replace=replace)
    if isinstance(metadata, CommitMetadata):
        metadata = metadata.raw
    if not isinstance(metadata, Mapping):
        raise InvalidOptionError(f"{action} {state.name.lower()} metadata must be a mapping or "
                                 f"bytes, got {type(metadata).__name__}")
    schema = COMPLETED_SCHEMAS.get(action) if state is State.COMPLETED else PLAN_SCHEMAS.get(action)
    if schema is None:
        raise InvalidOptionError(f"Hudi writes no {state.name.lower()} payload for action {action!r}")
    return encode_plan(schema, metadata)


class TimelineWriter:
    """Creates the files of instants on a table's active timeline."""

    def __init__(self, storage: Storage, config: TableConfig, clock: InstantClock | None = None):
        self.storage = storage
        self.config = config
        self.version = config.version
        self.timeline_dir = config.timeline_dir
        self._clock = clock

    @property
    def clock(self) -> InstantClock:
        if self._clock is None:
            self._clock = InstantClock(self.storage, self.config)
        return self._clock

    def __repr__(self) -> str:
        return f"TimelineWriter({self.storage.url!r}, v{self.version})"

    # -- paths -------------------------------------------------------------------------------
    def path_of(self, instant: Instant) -> str:
        """Path (relative to the table) of the file that carries ``instant`` in its state."""
        name = instant.file_name or format_file_name(
            instant.timestamp, instant.action, instant.state, self.version, instant.completion_time)
        return f"{self.timeline_dir}/{name}"

    def _path(self, timestamp: str, action: str, state: State) -> str:
        return f"{self.timeline_dir}/{format_file_name(timestamp, action, state, self.version)}"

    def _create(self, rel: str, data: bytes, what: str) -> None:
        if not self.storage.create_if_absent(rel, data):
            raise TimelineError(f"cannot create {what}: {self.storage.uri(rel)} already exists")

    def _completed_files(self, timestamp: str, action: str) -> list[str]:
        done = comparable_action(action, self.version)
        out = []
        for info in self.storage.list(self.timeline_dir):
            if info.is_dir or not info.name.startswith(timestamp):
                continue
            try:
                inst = parse_file_name(info.name, self.version)
            except TimelineError:
                continue
            if inst.timestamp == timestamp and inst.is_completed and inst.action == done:
                out.append(info.name)
        return out

    def _check(self, action: str, timestamp: str) -> str:
        """Validate; return the action as this table version names it (v6 has no clustering)."""
        if action not in ACTIONS:
            raise TimelineError(f"unknown timeline action {action!r}")
        if not isinstance(timestamp, str) or not timestamp.isdigit():
            raise TimelineError(f"instant time must be digits like yyyyMMddHHmmssSSS, got {timestamp!r}")
        return REPLACE_COMMIT if action == CLUSTERING and self.version < 8 else action

    # -- transitions -------------------------------------------------------------------------
    def create_requested(self, action: str, timestamp: str | None = None,
                         plan: Mapping[str, Any] | bytes | None = None, *, known_new: bool = False) -> Instant:
        """Create the requested file of a new instant (``timestamp`` defaults to a new time).

        Savepoints have no requested state: their first file is the inflight one.
        ``known_new``: the caller knows no completed instant has this time (the clock just
        issued it, or the caller checked a timeline it listed under the lock), so the timeline
        is not listed again to check.
        """
        if timestamp is None:
            timestamp, known_new = self.clock.new_instant_time(), True
        action = self._check(action, timestamp)
        if not known_new and self._completed_files(timestamp, action):
            raise TimelineError(f"instant {timestamp} {action} is already completed")
        state = State.INFLIGHT if action == SAVEPOINT else State.REQUESTED
        if plan is not None and action in (COMMIT, DELTA_COMMIT) and not isinstance(plan, (bytes, bytearray)):
            raise InvalidOptionError(f"Hudi writes an empty requested file for a {action}; "
                                     f"pass plan=None")
        data = _payload(action, State.REQUESTED, plan, self.version) if state is State.REQUESTED \
            else _payload(action, state, plan, self.version) if plan is not None else b""
        rel = self._path(timestamp, action, state)
        self._create(rel, data, f"{state.name.lower()} instant {timestamp} {action}")
        return Instant(timestamp, action, state, None, posixpath.basename(rel))

    def transition_to_inflight(self, instant: Instant,
                               metadata: Mapping[str, Any] | CommitMetadata | bytes | None = None, *,
                               known_requested: bool = False) -> Instant:
        """Create the inflight file of a requested instant; ``metadata`` is the workload
        profile (commit metadata) for commits, else the plan or nothing. ``known_requested``:
        the caller just created the requested file (not asked for again)."""
        if instant.state is State.INFLIGHT and instant.action == SAVEPOINT:
            return instant
        if instant.state is not State.REQUESTED:
            raise TimelineError(f"only a requested instant can become inflight, got {instant}")
        action = self._check(instant.action, instant.timestamp)
        instant = Instant(instant.timestamp, action, instant.state)
        req = self._path(instant.timestamp, instant.action, State.REQUESTED)
        if not known_requested and not self.storage.exists(req):
            raise TimelineError(f"cannot move {instant} to inflight: {self.storage.uri(req)} does not exist")
        data = _payload(instant.action, State.INFLIGHT, metadata, self.version)
        rel = self._path(instant.timestamp, instant.action, State.INFLIGHT)
        self._create(rel, data, f"inflight instant {instant.timestamp} {instant.action}")
        return Instant(instant.timestamp, instant.action, State.INFLIGHT, None, posixpath.basename(rel))

    def complete(self, instant: Instant, metadata: Mapping[str, Any] | CommitMetadata | bytes | None,
                 completion_time: str | None = None, *, known_pending: bool = False,
                 known_inflight: bool = False, keep_clock: bool = False) -> Instant:
        """Create the completed file of an inflight instant: the commit point.

        v8+: the completion time (issued by the table clock unless given) is part of the file
        name; the file is written while the clock's lock is held, so completion order equals
        completion-time order between writers of this library. ``known_pending``: the caller
        listed the timeline under the table lock it still holds and saw the instant pending, so
        it is not listed again to check that it is not completed yet. ``known_inflight``: the
        caller created the inflight file itself and nothing else removes it meanwhile (it is not
        asked for again). ``keep_clock``: inside the clock's ``sharing`` block, keep its lock
        for the next completion (``InstantClock.hold``).
        """
        if instant.state is not State.INFLIGHT:
            raise TimelineError(f"only an inflight instant can be completed, got {instant}")
        ts = instant.timestamp
        action = self._check(instant.action, ts)
        infl = self._path(ts, action, State.INFLIGHT)
        if not known_inflight and not self.storage.exists(infl):
            raise TimelineError(f"cannot complete {instant}: {self.storage.uri(infl)} does not exist")
        data = _payload(action, State.COMPLETED, metadata, self.version)
        done = comparable_action(action, self.version)
        if self.version < 8:
            if not known_pending and self._completed_files(ts, action):
                raise TimelineError(f"instant {ts} {done} is already completed")
            rel = f"{self.timeline_dir}/{format_file_name(ts, action, State.COMPLETED, self.version)}"
            self._create(rel, data, f"completed instant {ts} {done}")
            return Instant(ts, done, State.COMPLETED, None, posixpath.basename(rel))
        with self.clock.hold(keep=keep_clock) as generate:
            existing = [] if known_pending else self._completed_files(ts, action)
            if existing:
                raise TimelineError(f"instant {ts} {done} is already completed ({existing[0]})")
            ct = completion_time if completion_time is not None else generate()
            if not ct.isdigit():
                raise TimelineError(f"completion time must be digits, got {ct!r}")
            rel = f"{self.timeline_dir}/{format_file_name(ts, action, State.COMPLETED, self.version, ct)}"
            self._create(rel, data, f"completed instant {ts} {done}")
        return Instant(ts, done, State.COMPLETED, ct, posixpath.basename(rel))

    def delete_instant_files(self, instant: Instant) -> list[str]:
        """Remove the requested and inflight files of a pending instant (for rollback).

        Refuses (``TimelineError``) if the instant has a completed file: completed instants are
        undone by a rollback instant, never by deleting their files. Returns the deleted paths.
        """
        ts = instant.timestamp
        action = self._check(instant.action, ts)
        if self._completed_files(ts, action):
            raise TimelineError(f"instant {ts} {action} is completed; its files cannot be deleted")
        deleted = []
        for state in (State.INFLIGHT, State.REQUESTED):
            if action == SAVEPOINT and state is State.REQUESTED:
                continue
            rel = self._path(ts, action, state)
            if self.storage.exists(rel):
                try:
                    self.storage.delete(rel)
                except StorageError as exc:
                    raise TimelineError(f"cannot delete {self.storage.uri(rel)}: {exc}") from exc
                deleted.append(rel)
        return deleted
