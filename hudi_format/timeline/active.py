"""The active timeline: the instant files in ``.hoodie/`` (v6) or ``.hoodie/timeline/`` (v8+).

Loading lists the folder once and groups the files of each instant, keeping its furthest
state; payloads are read only when asked for. Files that are not instants are skipped:
folders, ``hoodie.properties*`` and hidden files (``.crc`` checksums) silently, anything
else with a warning, because a stray file must not make a table unreadable.

Instants older than the active timeline live in the archived timeline, which is loaded on
first use by a query that reaches before the first active instant (``archived()``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar

from ..config import TableConfig
from ..errors import StorageError, TimelineError
from ..storage import Storage
from .avro_schemas import decode_payload
from .base import TimelineView, completion_order
from .instant import (WRITE_ACTIONS, WRITE_TIMELINE_ACTIONS, Instant, State, comparable_action,
                      format_instant_time, parse_file_name)

if TYPE_CHECKING:
    from .archived import ArchivedTimeline

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def _is_instant_candidate(name: str) -> bool:
    return not (name.startswith("hoodie.properties") or name.startswith("."))


def _first_non_savepoint(instants: list[Instant]) -> str | None:
    """First instant of the write timeline that is not a savepointed commit. Restores, cleans
    and rollbacks do not count: Hudi never archives a restore, so one can stay in front of
    commits archived after it (a start there would count those commits as never completed)."""
    # with no write instant left (every active one rolled back), the first instant of any action
    writes = [i for i in instants if i.action in WRITE_TIMELINE_ACTIONS] or instants
    savepointed = {i.timestamp for i in instants if i.action == "savepoint" and i.is_completed}
    first = next((i.timestamp for i in writes if i.timestamp not in savepointed), None)
    if first is None and writes:
        first = writes[0].timestamp
    return first


class Timeline(TimelineView):
    """The active timeline of a table.

    Use ``Timeline.load(storage, config)``. Queries about instants older than the first
    active one consult the archived timeline, which is loaded lazily.
    """

    def __init__(self, storage: Storage, config: TableConfig, instants: Iterable[Instant],
                 files: Mapping[tuple[str, str], Mapping[State, str]]):
        super().__init__(instants, config.version)
        self.storage = storage
        self.config = config
        self.timezone = config.timeline_timezone
        self._files = {k: dict(v) for k, v in files.items()}
        self._payloads: dict[str, dict] = {}
        self._archived = None
        self._archived_after_listing = False   # self._archived was loaded after the listing
        self._start = _first_non_savepoint(self._instants)
        self._changes: int | None = None   # this process's change count of the folder when listed

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def load(cls, storage: Storage, config: TableConfig | None = None) -> "Timeline":
        config = config if config is not None else TableConfig.load(storage)
        version = config.version
        changes = storage.changes(config.timeline_dir, hidden=False)
        files: dict[tuple[str, str], dict[State, str]] = {}
        parsed: dict[tuple[str, str], dict[State, Instant]] = {}
        for info in storage.list(config.timeline_dir):
            if info.is_dir:
                continue
            name = info.name
            if not _is_instant_candidate(name):
                log.debug("skipping non-instant file %s in the timeline", name)
                continue
            try:
                inst = parse_file_name(name, version)
            except TimelineError as exc:
                log.warning("ignoring %s/%s: %s", config.timeline_dir, name, exc)
                continue
            key = (inst.timestamp, comparable_action(inst.action, version))
            by_state = parsed.setdefault(key, {})
            if inst.state in by_state:
                # e.g. two completion files for one instant: keep the first by name, loudly
                kept = min(by_state[inst.state].file_name, name)
                log.warning("instant %s has several %s files; using %s", key, inst.state.name, kept)
                if kept != name:
                    continue
            by_state[inst.state] = inst
            files.setdefault(key, {})[inst.state] = name
        instants = [by_state[max(by_state)] for by_state in parsed.values()]
        timeline = cls(storage, config, instants, files)
        timeline._changes = changes
        return timeline

    @classmethod
    def current(cls, storage: Storage, config: TableConfig, timeline: "Timeline | None") -> "Timeline":
        """``timeline`` when this process changed nothing in the timeline folder since it was
        listed (load once per operation), else a fresh listing. Changes by other processes are
        not seen: callers that must see them (the conflict check) load."""
        if (timeline is not None and timeline._changes is not None and timeline.storage.url == storage.url
                and timeline.timeline_dir == config.timeline_dir
                and storage.changes(config.timeline_dir, hidden=False) == timeline._changes):
            return timeline
        return cls.load(storage, config)

    def advanced(self, instant: Instant) -> "Timeline":
        """This timeline with ``instant`` (its file just written by this process) in its newest
        state: the state after a commit, without listing the folder again. It counts as current
        (``Timeline.current``) only while that file is the one change since this was listed."""
        files = {k: dict(v) for k, v in self._files.items()}
        key = self.key(instant)
        if instant.file_name:
            files.setdefault(key, {})[instant.state] = instant.file_name
        instants = [i for i in self._instants if self.key(i) != key] + [instant]
        timeline = Timeline(self.storage, self.config, instants, files)
        timeline._changes = None if self._changes is None else self._changes + 1
        timeline._archived = self._archived
        return timeline

    def reload(self) -> "Timeline":
        """A freshly listed timeline of the same table."""
        return Timeline.load(self.storage, self.config)

    @property
    def timeline_dir(self) -> str:
        return self.config.timeline_dir

    def file_path(self, instant: "Instant | str", state: State | None = None) -> str:
        """Path (relative to the table) of an active instant's file at ``state`` (default: its own)."""
        inst = self._resolve_active(instant)
        files = self._files[self.key(inst)]
        st = inst.state if state is None else State(state)
        if st not in files:
            raise TimelineError(f"instant {inst} has no {st.name.lower()} file in {self.timeline_dir}")
        return f"{self.timeline_dir}/{files[st]}"

    def files_of(self, instant: "Instant | str") -> dict[State, str]:
        """File names (in the timeline folder) of every state an active instant has reached."""
        return dict(self._files[self.key(self._resolve_active(instant))])

    # -- the archive -------------------------------------------------------------------------
    def archived(self) -> "ArchivedTimeline":
        """The archived timeline (LSM history for v8+, archive log files for v6), loaded once."""
        if self._archived is None:
            from .archived import ArchivedTimeline
            self._archived = ArchivedTimeline.load(self.storage, self.config)
        return self._archived

    def adopt_archive(self, archive: "ArchivedTimeline") -> None:
        """Use ``archive``, loaded by another listing of this table, as this timeline's (and
        first, for files archived since this listing; a fresh one is loaded when it lacks
        one): a reader re-listing the timeline does not decode the archive every time."""
        self._archived = archive
        self._archived_after_listing = True

    @property
    def archive_loaded(self) -> bool:
        return self._archived is not None

    @property
    def start(self) -> str | None:
        """Request time of the first active write-timeline instant that is not a savepointed
        commit; older ones are archived (Hudi's ``getFirstNonSavepointCommit`` on the write
        timeline: archival beyond a savepoint leaves the savepointed commit active, in front of
        a hole, and a restore, never archived, may stay in front of archived commits)."""
        return self._start

    def _before_start(self, timestamp: str) -> bool:
        return self._start is None or timestamp < self._start

    # -- queries that may reach into the archive ---------------------------------------------
    def get(self, timestamp: Any, action: str | None = None) -> Instant | None:
        ts = self._ts(timestamp)
        found = self._lookup(ts, action)
        if found is None and self._before_start(ts):
            found = self.archived().get(ts, action)
        return found

    def is_completed(self, timestamp: Any) -> bool:
        found = self.get(timestamp)
        return found is not None and found.is_completed

    def completion_time(self, timestamp: Any) -> str | None:
        found = self.get(timestamp)
        if found is None or not found.is_completed:
            return None
        return found.ordering_time

    def write_instants(self, include_archived: bool = False) -> list[Instant]:
        """Completed commits, deltacommits and replacecommits in completion order."""
        active = super().write_instants()
        if not include_archived:
            return active
        return self._merge(self.archived().write_instants(), active)

    def latest_completed_write(self) -> Instant | None:
        writes = super().write_instants()
        if writes:
            return writes[-1]
        return self.archived().latest_completed_write()

    def instants_in_range(self, start_exclusive: Any = None, end_inclusive: Any = None,
                          actions: Iterable[str] | None = WRITE_ACTIONS) -> list[Instant]:
        """Completed instants in ``(start, end]`` by completion time (v8+) or request time (v6),
        including archived ones when ``start`` reaches before the active timeline."""
        active = super().instants_in_range(start_exclusive, end_inclusive, actions)
        start = None if start_exclusive is None else self._ts(start_exclusive)
        if start is not None and not self._before_start(start):
            return active
        older = self.archived().instants_in_range(start_exclusive, end_inclusive, actions)
        return self._merge(older, active)

    def _merge(self, older: list[Instant], active: list[Instant]) -> list[Instant]:
        keys = {self.key(i) for i in active}
        return completion_order([i for i in older if self.key(i) not in keys] + active)

    # -- payloads ----------------------------------------------------------------------------
    def _resolve_active(self, instant: "Instant | str") -> Instant:
        if isinstance(instant, Instant):
            if self.key(instant) not in self._files:
                raise TimelineError(f"instant {instant} is not on the active timeline")
            return self._by_key.get(self.key(instant), instant)
        found = self._lookup(format_instant_time(instant, self.timezone))
        if found is None:
            raise TimelineError(f"instant {instant} is not on the active timeline")
        return found

    def _is_active(self, instant: Instant) -> bool:
        return self.key(instant) in self._files

    def _decode(self, name: str, allow_empty: bool = False) -> dict | None:
        """Decoded payload of a timeline file (cached); ``None`` for an allowed empty file."""
        if name not in self._payloads:
            rel = f"{self.timeline_dir}/{name}"
            try:
                data = self.storage.read_bytes(rel)
            except StorageError as exc:
                raise TimelineError(f"cannot read timeline file {self.storage.uri(rel)}: {exc}") from exc
            self._payloads[name] = decode_payload(data, self.storage.uri(rel)) if data else None
        payload = self._payloads[name]
        if payload is None and not allow_empty:
            rel = f"{self.timeline_dir}/{name}"
            raise TimelineError(f"{self.storage.uri(rel)}: file is empty, expected instant metadata")
        return payload

    def _completed_payload(self, instant: Instant) -> tuple[Mapping[str, Any], str]:
        if not self._is_active(instant):
            return self.archived()._completed_payload(instant)
        name = self._files[self.key(instant)].get(State.COMPLETED)
        if name is None:
            raise TimelineError(f"instant {instant} has no completed file in {self.timeline_dir}")
        try:
            return self._decode(name), self.storage.uri(f"{self.timeline_dir}/{name}")
        except TimelineError:
            moved = self._archived_since_listing(name, lambda a: a._completed_payload(instant))
            if moved is None:
                raise
            return moved

    def _archived_since_listing(self, name: str, read: Callable[["ArchivedTimeline"], _T]) -> _T | None:
        """``read`` of a fresh archive when the active file ``name`` is gone: another process
        archived its instant after this timeline was listed (archival writes the archive before
        it deletes the active files, plans first). ``None`` when the file is there (a real read
        failure) or the archive does not hold the instant either (``read`` raises)."""
        if self.storage.exists(f"{self.timeline_dir}/{name}"):
            return None
        if self._archived is not None and self._archived_after_listing:
            try:   # an archive loaded after the listing holds what was archived before it
                return read(self._archived)
            except TimelineError:
                pass
        from .archived import ArchivedTimeline
        archive = ArchivedTimeline.load(self.storage, self.config)
        try:
            found = read(archive)
        except TimelineError:
            return None
        self._archived = archive      # newer than the one loaded before, if any
        self._archived_after_listing = True
        return found

    def _plan_payload(self, instant: Instant, state: State | None) -> dict:
        if not self._is_active(instant):
            return self.archived()._plan_payload(instant, state)
        files = self._files[self.key(instant)]
        states = [state] if state is not None else [State.REQUESTED, State.INFLIGHT]
        present = [files[s] for s in states if s in files]
        if not present:
            wanted = " or ".join(s.name.lower() for s in states)
            raise TimelineError(f"instant {instant} has no {wanted} file in {self.timeline_dir}")
        for name in present:
            try:
                payload = self._decode(name, allow_empty=True)
            except TimelineError:
                # the whole plan from the archive: it keeps what the active files held
                moved = self._archived_since_listing(name, lambda a: a._plan_payload(instant, state))
                if moved is None:
                    raise
                return moved
            if payload is not None:
                return dict(payload)
        return {}

    def _resolve(self, instant: "Instant | str") -> Instant:
        if isinstance(instant, Instant):
            if self._is_active(instant):
                return self._by_key.get(self.key(instant), instant)
            return instant
        found = self.get(instant)
        if found is None:
            raise TimelineError(f"instant {instant} is not on the timeline")
        return found
