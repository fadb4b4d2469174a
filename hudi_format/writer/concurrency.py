"""Optimistic concurrency control: detect a conflicting commit before completing ours.

Writers work without the table lock; under it, just before completing, a writer reloads the
timeline and looks at every write that completed since it started (and at clustering scheduled
since): if one touched a file group this writer also touched, the later writer loses, as with
Hudi's simple file-level conflict resolution. Writes that only create new file groups never
conflict.
"""

from __future__ import annotations

from typing import Iterable

from ..errors import ConcurrentWriteError, HudiError
from ..timeline import Timeline

WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")


def touched_file_groups(write_stats: dict, replaced: dict | None = None) -> set[tuple[str, str]]:
    out = {(p, st["fileId"]) for p, stats in write_stats.items() for st in stats if st.get("fileId")}
    for p, fids in (replaced or {}).items():
        out.update((p, f) for f in fids)
    return out


def _instant_file_groups(timeline: Timeline, inst) -> set[tuple[str, str]]:
    meta = timeline.metadata(inst)
    out = {(p, st.file_id) for p, stats in meta.partition_to_write_stats.items() for st in stats if st.file_id}
    for p, fids in meta.partition_to_replace_file_ids.items():
        out.update((p, f) for f in fids)
    return out


def check_conflicts(timeline: Timeline, my_instant: str, started_with: Iterable[str],
                    mine: set[tuple[str, str]], new_groups: set[tuple[str, str]]) -> None:
    """Raise ``ConcurrentWriteError`` when a write completed since we started overlaps ``mine``."""
    existing = mine - new_groups
    if not existing:
        return
    seen = set(started_with)
    for inst in timeline.write_instants():
        if inst.timestamp in seen or inst.timestamp == my_instant:
            continue
        try:
            theirs = _instant_file_groups(timeline, inst)
        except HudiError:
            theirs = None  # unreadable metadata: assume the worst
        overlap = existing & theirs if theirs is not None else existing
        if overlap:
            sample = ", ".join(f"{p}/{f}" for p, f in sorted(overlap)[:3])
            raise ConcurrentWriteError(
                f"instant {my_instant} conflicts with {inst.action} {inst.timestamp}, which "
                f"completed first and also wrote file group(s) {sample}")
    for inst in timeline.pending:
        if inst.action in ("clustering", "replacecommit") and inst.timestamp > my_instant:
            plan = timeline.plan(inst)
            groups = {(fs.get("partitionPath"), fs.get("fileId"))
                      for g in ((plan.get("clusteringPlan") or {}).get("inputGroups") or [])
                      for fs in (g.get("slices") or [])}
            overlap = existing & groups
            if overlap:
                raise ConcurrentWriteError(
                    f"instant {my_instant} writes file groups that clustering {inst.timestamp} "
                    f"is rewriting ({len(overlap)} group(s))")
