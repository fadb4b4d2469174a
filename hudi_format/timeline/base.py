"""Queries shared by the active and the archived timeline.

Both hold one instant per (request time, comparable action) and answer the same questions;
only where the bytes of plans and metadata come from differs. Ordering follows the table
version: v8+ tables order completed instants by completion time (the time their effects
became visible), v6 tables by request time (the only time they record).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from ..errors import TimelineError
from .instant import WRITE_ACTIONS, Instant, State, comparable_action, format_instant_time
from .metadata import CommitMetadata, rolled_back_from



def completion_order(instants: Iterable[Instant]) -> list[Instant]:
    return sorted(instants, key=lambda i: (i.ordering_time, i.timestamp))


def in_range(instant: Instant, start_exclusive: str | None, end_inclusive: str | None) -> bool:
    t = instant.ordering_time
    return (start_exclusive is None or t > start_exclusive) and (end_inclusive is None or t <= end_inclusive)


class TimelineView:
    """Instants of one timeline (active or archived) and the queries over them."""

    table_version: int
    timezone: str = "LOCAL"

    def __init__(self, instants: Iterable[Instant], table_version: int):
        self.table_version = table_version
        self._instants = sorted(instants, key=lambda i: (i.timestamp, i.action, i.state))
        self._by_key: dict[tuple[str, str], Instant] = {self.key(i): i for i in self._instants}
        self._by_ts: dict[str, list[Instant]] = {}
        for i in self._instants:
            self._by_ts.setdefault(i.timestamp, []).append(i)
        self._completed = completion_order(i for i in self._instants if i.is_completed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table version {self.table_version}, {len(self._instants)} instants)"

    # -- keys and lookups --------------------------------------------------------------------
    def key(self, instant: Instant) -> tuple[str, str]:
        return instant.timestamp, comparable_action(instant.action, self.table_version)

    def _ts(self, value: Any) -> str:
        return format_instant_time(value, self.timezone)

    def _lookup(self, timestamp: str, action: str | None = None) -> Instant | None:
        candidates = self._by_ts.get(timestamp, ())
        if action is not None:
            want = comparable_action(action, self.table_version)
            candidates = [i for i in candidates if self.key(i)[1] == want]
        if not candidates:
            return None
        # several actions at one time (rare): prefer a completed one, then the write
        return max(candidates, key=lambda i: (i.state, i.action in WRITE_ACTIONS))

    def _resolve(self, instant: "Instant | str") -> Instant:
        if isinstance(instant, Instant):
            return instant
        found = self.get(instant)
        if found is None:
            raise TimelineError(f"instant {instant} is not on the timeline")
        return found

    # -- the instants ------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Instant]:
        return iter(self._instants)

    def __len__(self) -> int:
        return len(self._instants)

    @property
    def instants(self) -> list[Instant]:
        """Every instant at its furthest state, by request time."""
        return list(self._instants)

    @property
    def completed(self) -> list[Instant]:
        """Completed instants in completion order (request order for v6)."""
        return list(self._completed)

    @property
    def pending(self) -> list[Instant]:
        """Requested or inflight instants, by request time."""
        return [i for i in self._instants if not i.is_completed]

    def write_instants(self) -> list[Instant]:
        """Completed commits, deltacommits and replacecommits in completion order."""
        return [i for i in self.completed if i.action in WRITE_ACTIONS]

    def latest_completed_write(self) -> Instant | None:
        writes = self.write_instants()
        return writes[-1] if writes else None

    def get(self, timestamp: Any, action: str | None = None) -> Instant | None:
        """The instant requested at ``timestamp`` (optionally of ``action``), or ``None``."""
        return self._lookup(self._ts(timestamp), action)

    def is_completed(self, timestamp: Any) -> bool:
        found = self._lookup(self._ts(timestamp))
        return found is not None and found.is_completed

    def completion_time(self, timestamp: Any) -> str | None:
        """When the instant requested at ``timestamp`` completed; v6: the request time itself.

        ``None`` when the instant is pending or unknown.
        """
        found = self._lookup(self._ts(timestamp))
        if found is None or not found.is_completed:
            return None
        return found.ordering_time

    def instants_in_range(self, start_exclusive: Any = None, end_inclusive: Any = None,
                          actions: Iterable[str] | None = WRITE_ACTIONS) -> list[Instant]:
        """Completed instants in ``(start, end]``, compared by completion time (v8+) or request
        time (v6), in completion order. ``actions=None`` selects every action."""
        start = None if start_exclusive is None else self._ts(start_exclusive)
        end = None if end_inclusive is None else self._ts(end_inclusive)
        wanted = None if actions is None else set(actions)
        return [i for i in self.completed
                if (wanted is None or i.action in wanted) and in_range(i, start, end)]

    # -- payloads (subclasses provide the bytes) ---------------------------------------------
    def _completed_payload(self, instant: Instant) -> tuple[Mapping[str, Any], str]:
        raise NotImplementedError

    def _plan_payload(self, instant: Instant, state: State | None) -> dict:
        raise NotImplementedError

    def raw_metadata(self, instant: "Instant | str") -> dict:
        """Decoded completion metadata of any completed action (clean, rollback, indexing...)."""
        inst = self._resolve(instant)
        if not inst.is_completed:
            raise TimelineError(f"instant {inst} is not completed; its payload is a plan, see plan()")
        return dict(self._completed_payload(inst)[0])

    def metadata(self, instant: "Instant | str") -> CommitMetadata:
        """Commit metadata of a completed commit, deltacommit or replacecommit."""
        inst = self._resolve(instant)
        if inst.action not in WRITE_ACTIONS:
            raise TimelineError(f"instant {inst} is a {inst.action}, which has no commit metadata")
        if not inst.is_completed:
            raise TimelineError(f"instant {inst} is not completed; its payload is a plan, see plan()")
        payload, source = self._completed_payload(inst)
        return CommitMetadata.from_dict(payload, source)

    def plan(self, instant: "Instant | str", state: State | None = None) -> dict:
        """Decoded plan of an instant: the first non-empty of its requested and inflight files
        (or exactly ``state``'s file). Empty plan files, normal for plain writes, give ``{}``."""
        return self._plan_payload(self._resolve(instant), None if state is None else State(state))

    def rolled_back_instants(self, include_pending: bool = False) -> set[str]:
        """Request times undone by completed rollbacks and restores (and, with
        ``include_pending``, the targets of rollbacks still in progress)."""
        out: set[str] = set()
        for inst in self._instants:
            if inst.action not in ("rollback", "restore"):
                continue
            if inst.is_completed:
                out |= rolled_back_from(inst.action, self.raw_metadata(inst))
            elif include_pending and inst.action == "rollback":
                target = (self.plan(inst).get("instantToRollback") or {}).get("commitTime")
                if target:
                    out.add(str(target))
        return out
