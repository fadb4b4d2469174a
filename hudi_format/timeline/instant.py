"""Instants and the file names that carry them, per timeline layout.

A timeline is a folder of small files whose *names* are the data: request time, optional
completion time, action and state. Two layouts exist:

- table version 6 (layout 1, in ``.hoodie/``): ``<ts>.<action>`` when completed,
  ``<ts>.<action>.requested|.inflight`` when pending;
- table version 8+ (layout 2, in ``.hoodie/timeline/``): ``<ts>_<completion>.<action>`` when
  completed, the same pending names as before.

In both, the inflight file of a plain ``commit`` is the bare ``<ts>.inflight`` (kept for
backwards compatibility by Hudi), and some actions change name when they complete:
``compaction`` becomes ``commit``, ``logcompaction`` becomes ``deltacommit`` and (v8+)
``clustering`` becomes ``replacecommit``. Grouping the files of one instant therefore uses the
*comparable* action, exactly like Hudi's ``InstantComparatorV1/V2``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re

import attrs

from ..errors import TimelineError

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
CLUSTERING = "clustering"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
ROLLBACK = "rollback"
CLEAN = "clean"
SAVEPOINT = "savepoint"
RESTORE = "restore"
INDEXING = "indexing"
SCHEMA_COMMIT = "schemacommit"

ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION,
                     ROLLBACK, CLEAN, SAVEPOINT, RESTORE, INDEXING, SCHEMA_COMMIT})
#: completed actions that add or replace data files: what a reader's snapshot is built from
WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
#: Hudi's write timeline (``getWriteTimeline``), in any state: readers take an instant before its
#: first (non-savepointed) instant as archived and completed, so where the active timeline starts
#: is decided on it
WRITE_TIMELINE_ACTIONS = frozenset(WRITE_ACTIONS | {COMPACTION, LOG_COMPACTION, CLUSTERING})

# the action a pending instant has once completed (and by which its files are grouped)
_COMPLETES_AS_V1 = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT}
_COMPLETES_AS_V2 = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}

_NAME = re.compile(r"^(\d+)(?:_(\d+))?\.([a-z]+)(?:\.(requested|inflight))?$")


class State(enum.IntEnum):
    """Instant states, ordered as they progress (a later state supersedes an earlier one)."""

    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


def comparable_action(action: str, table_version: int = 8) -> str:
    """The action under which the files of one instant are grouped (its completed action)."""
    table = _COMPLETES_AS_V2 if table_version >= 8 else _COMPLETES_AS_V1
    return table.get(action, action)


@attrs.frozen(order=False)
class Instant:
    """One action on the timeline at one state.

    ``timestamp`` is the request time; ``completion_time`` is only known for completed
    instants of v8+ tables. ``file_name`` is relative to the timeline folder (for an archived
    instant: the name it had while active).
    """

    timestamp: str
    action: str
    state: State
    completion_time: str | None = None
    file_name: str | None = attrs.field(default=None, eq=False)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    @property
    def is_write(self) -> bool:
        """A completed commit, deltacommit or replacecommit."""
        return self.is_completed and self.action in WRITE_ACTIONS

    @property
    def ordering_time(self) -> str:
        """Completion time when known (v8+), else the request time (v6 orders by it)."""
        return self.completion_time or self.timestamp

    def __str__(self) -> str:
        done = f"__{self.completion_time}" if self.completion_time else ""
        return f"[{self.timestamp}__{self.action}__{self.state.name}{done}]"


def parse_file_name(name: str, table_version: int) -> Instant:
    """Parse a timeline file name; raise ``TimelineError`` if it is not an instant file.

    For a v8+ completed file without completion time (written by 0.x before an upgrade)
    the request time stands in for the completion time.
    """
    m = _NAME.match(name)
    if m is None:
        raise TimelineError(f"not a timeline instant file name: {name!r}")
    ts, completion, action, suffix = m.groups()
    if suffix is None and action in ("inflight", "requested"):
        if action == "requested":
            raise TimelineError(f"not a timeline instant file name: {name!r}")
        # "<ts>.inflight" is the inflight file of a plain commit
        action, state = COMMIT, State.INFLIGHT
    elif action not in ACTIONS:
        raise TimelineError(f"unknown action {action!r} in timeline file name {name!r}")
    else:
        state = State.COMPLETED if suffix is None else State[suffix.upper()]
    if completion is not None and state is not State.COMPLETED:
        raise TimelineError(f"pending instant file {name!r} must not carry a completion time")
    if table_version < 8:
        if completion is not None:
            raise TimelineError(f"{name!r} uses the v8+ file naming in a v{table_version} timeline")
        completion = None
    elif state is State.COMPLETED and completion is None:
        completion = ts
    return Instant(ts, action, state, completion, name)


def format_file_name(timestamp: str, action: str, state: State, table_version: int,
                     completion_time: str | None = None) -> str:
    """The file name Hudi gives an instant in the given table version's layout."""
    if action not in ACTIONS:
        raise TimelineError(f"unknown timeline action {action!r}")
    state = State(state)
    if state is State.COMPLETED:
        done = comparable_action(action, table_version)
        if table_version >= 8:
            if not completion_time:
                raise TimelineError(f"completed instant {timestamp}.{action} needs a completion time")
            return f"{timestamp}_{completion_time}.{done}"
        return f"{timestamp}.{done}"
    if table_version < 8 and action == CLUSTERING:
        action = REPLACE_COMMIT  # 0.x plans clustering as a replacecommit
    if action == SAVEPOINT:
        return f"{timestamp}.{SAVEPOINT}.inflight"  # savepoints have no requested file
    if action == COMMIT and state is State.INFLIGHT:
        return f"{timestamp}.inflight"
    return f"{timestamp}.{action}.{state.name.lower()}"


def instant_file_name(instant: Instant, table_version: int) -> str:
    return format_file_name(instant.timestamp, instant.action, instant.state, table_version,
                            instant.completion_time)


def format_instant_time(value: str | _dt.datetime | _dt.date, timezone: str = "LOCAL") -> str:
    """Normalise a user-given instant: strings pass through, datetimes become ``yyyyMMddHHmmssSSS``.

    Aware datetimes are converted to the table's timeline timezone (``UTC`` or ``LOCAL``).
    """
    if isinstance(value, str):
        if not value.isdigit():
            raise TimelineError(f"instant time must be digits like yyyyMMddHHmmssSSS, got {value!r}")
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc) if timezone.upper() == "UTC" else value.astimezone()
        return value.strftime("%Y%m%d%H%M%S") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, _dt.date):
        return value.strftime("%Y%m%d") + "000000000"
    raise TimelineError(f"instant time must be a string or datetime, got {type(value).__name__}")
