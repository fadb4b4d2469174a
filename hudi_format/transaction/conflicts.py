"""Conflict detection under the table lock, as Hudi's ``SimpleConcurrentFileWritesConflictResolutionStrategy``.

Candidates (Hudi's ``getCandidateInstants``): every commit, deltacommit, replacecommit or
compaction that completed since the committing operation started, and every clustering that is
pending with a plan. Two rules keep an acknowledged write from being lost:

- "Since it started" means *not on the timeline it started from*, whatever the instant time:
  a clustering may have an earlier instant time than a writer and still be planned after the
  writer began, so comparing instant times misses it.
- A pending clustering conflicts with a write to any of its input file groups whenever it was
  planned (a writer never plans into groups under clustering, so an overlap means the plan came
  later); and completing a clustering checks, under the same lock, that none of its input file
  groups changed since it was planned. So of a write and a clustering over one file group,
  exactly one commits.

- Table version 6 names a log file after its slice's base instant: a writer that saw a pending
  compaction names its log files after the compaction (they join the slice the compaction
  creates); one that started before the compaction was planned did not, and its log files
  would be dropped by the compaction, which therefore could never complete. Such a write
  conflicts with the compaction.

- "Completed since it started" includes instants archival moved out of the active timeline
  meanwhile: a clustering completed, its replaced files cleaned and its replacecommit archived
  while a write tagged to one of those groups ran; judged on the active timeline alone, the write
  committed into the replaced group, whose rows then came back beside the clustering's.

Writes that only create new file groups never conflict.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple

from ..errors import ConcurrentWriteError, HudiError
from ..timeline import CommitMetadata, Instant, Timeline
from ..view.file_names import parse_log_file_name

WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")
CLUSTERING_ACTIONS = ("clustering", "replacecommit")

FileGroup = tuple[str, str]


def touched_file_groups(write_stats: Mapping[str, Any], replaced: Mapping[str, Any] | None = None) -> set[FileGroup]:
    """``(partition, file id)`` of every file group a commit's stats write or replace."""
    out = {(p, st["fileId"]) for p, stats in write_stats.items() for st in stats if st.get("fileId")}
    for p, fids in (replaced or {}).items():
        out.update((p, f) for f in fids)
    return out


def new_file_groups(write_stats: Mapping[str, Any]) -> set[FileGroup]:
    """File groups a commit creates (no previous commit): they cannot conflict."""
    return {(p, st["fileId"]) for p, stats in write_stats.items() for st in stats
            if st.get("prevCommit") in (None, "null")}


class StartedFrom(NamedTuple):
    """What an operation saw when it started: the times of the completed writes (``seen``) and
    of every instant, in any state, on that active timeline (``instants``)."""
    seen: frozenset[str]
    instants: frozenset[str]


def started_with(timeline: Timeline | None) -> StartedFrom:
    """What an operation saw when it started (see :class:`StartedFrom`)."""
    if timeline is None:
        return StartedFrom(frozenset(), frozenset())
    return StartedFrom(frozenset(i.timestamp for i in timeline.write_instants()),
                       frozenset(i.timestamp for i in timeline.instants))


def instant_file_groups(timeline: Timeline, inst: Instant) -> set[FileGroup]:
    """File groups a completed write instant wrote or replaced."""
    return _file_groups(timeline.metadata(inst))


def _file_groups(meta: CommitMetadata) -> set[FileGroup]:
    """File groups a commit's metadata wrote or replaced."""
    out = {(p, st.file_id) for p, stats in meta.partition_to_write_stats.items() for st in stats if st.file_id}
    for p, fids in meta.partition_to_replace_file_ids.items():
        out.update((p, f) for f in fids)
    return out


def clustering_plan_groups(timeline: Timeline, inst: Instant) -> set[FileGroup] | None:
    """Input file groups of a pending clustering; ``None`` when ``inst`` is no clustering (a
    pending replacecommit of insert_overwrite has no clustering plan)."""
    if inst.is_completed or inst.action not in CLUSTERING_ACTIONS:
        return None
    try:
        plan = timeline.plan(inst)
    except HudiError:
        return None
    cplan = plan.get("clusteringPlan") if isinstance(plan, Mapping) else None
    if not cplan:
        return None
    return {(s.get("partitionPath") or "", s.get("fileId"))
            for g in (cplan.get("inputGroups") or ()) for s in (g.get("slices") or ())}


def candidate_instants(timeline: Timeline, my_instant: str, seen: StartedFrom | Iterable[str]) -> list[Instant]:
    """Completed write instants not on the timeline the operation started from (with
    :class:`StartedFrom`, also those archived since it started)."""
    return [i for i, _ in _candidates(timeline, my_instant, seen)]


def _candidates(timeline: Timeline, my_instant: str,
                seen: StartedFrom | Iterable[str]) -> list[tuple[Instant, Any]]:
    """``(instant, the timeline holding its metadata)`` of every candidate."""
    started = seen if isinstance(seen, StartedFrom) else StartedFrom(frozenset(seen), frozenset())
    out: list[tuple[Instant, Any]] = [(i, timeline) for i in timeline.write_instants()
                                      if i.timestamp not in started.seen and i.timestamp != my_instant]
    return out + [(i, archive) for i, archive in _archived_since(timeline, started, my_instant)]


def _archived_since(timeline: Timeline, started: StartedFrom, my_instant: str) -> list[tuple[Instant, Any]]:
    """Completed writes the operation did not see that archival moved out since it started.

    Only when an instant it saw is gone from the active timeline (archival takes the oldest
    first, so it always does: no archive read otherwise). Of the archived writes, those pending
    when it started, or newer than everything it saw (instant times only grow), are candidates;
    older ones were archived before it started."""
    if not started.instants or not hasattr(timeline, "archived"):
        return []
    active = {i.timestamp for i in timeline.instants}
    if started.instants <= active:
        return []
    from ..timeline.archived import ArchivedTimeline
    archive = ArchivedTimeline.load(timeline.storage, timeline.config)   # fresh: under the lock
    newest = max(started.instants)
    return [(i, archive) for i in archive.write_instants()
            if i.timestamp not in started.seen and i.timestamp not in active and i.timestamp != my_instant
            and (i.timestamp in started.instants or i.timestamp > newest)]


def compaction_plan_groups(timeline: Timeline, inst: Instant) -> set[FileGroup]:
    """File groups a pending compaction rewrites (empty when its plan cannot be read)."""
    if inst.is_completed or inst.action != "compaction":
        return set()
    try:
        plan = timeline.plan(inst)
    except HudiError:
        return set()
    ops = plan.get("operations") if isinstance(plan, Mapping) else None
    return {(op.get("partitionPath") or "", op.get("fileId")) for op in (ops or ())}


def check_write_conflicts(timeline: Timeline, my_instant: str, seen: StartedFrom | Iterable[str],
                          mine: set[FileGroup], new_groups: set[FileGroup],
                          v6_log_files: Mapping[FileGroup, Iterable[str]] | None = None,
                          completion_time_slices: bool = False) -> None:
    """Raise ``ConcurrentWriteError`` when a write that completed since we started, or a pending
    clustering, overlaps the existing file groups this write touches; on table version 6 also
    when a pending compaction covers a group this write logged to under another slice's name
    (``v6_log_files``: the log file names this write created, per file group).

    ``completion_time_slices`` (table version 8+: a log file joins the slice by its
    deltacommit's completion time): a compaction whose instant is older than this write's is
    no conflict, as in Hudi's strategy -- this write completes after that compaction was
    planned, so its log files land in the compaction's new slice."""
    existing = mine - new_groups
    if not existing:
        return
    for inst, source in _candidates(timeline, my_instant, seen):
        try:
            meta = source.metadata(inst)
            if completion_time_slices and inst.timestamp < my_instant and inst.action == "commit" \
                    and (meta.operation_type or "").upper() == "COMPACT":
                continue   # a compaction older than this write (see above)
            theirs = _file_groups(meta)
        except HudiError:
            theirs = None  # unreadable metadata: assume the worst
        overlap = existing & theirs if theirs is not None else existing
        if overlap:
            sample = ", ".join(f"{p}/{f}" for p, f in sorted(overlap)[:3])
            raise ConcurrentWriteError(
                f"instant {my_instant} conflicts with {inst.action} {inst.timestamp}, which "
                f"completed first and also wrote file group(s) {sample}")
    for inst in timeline.pending:
        if inst.timestamp == my_instant:
            continue
        groups = clustering_plan_groups(timeline, inst)
        overlap = existing & groups if groups else set()
        if overlap:
            raise ConcurrentWriteError(
                f"instant {my_instant} conflicts with clustering {inst.timestamp}, which is "
                f"rewriting {len(overlap)} file group(s) this write updates (e.g. "
                f"{sorted(overlap)[0][0]}/{sorted(overlap)[0][1]}); retry the write")
        for group in (compaction_plan_groups(timeline, inst) & existing) if v6_log_files else ():
            stray = [n for n in v6_log_files.get(group, ())
                     if (parsed := parse_log_file_name(n)) is not None and parsed.instant_time != inst.timestamp]
            if stray:
                raise ConcurrentWriteError(
                    f"instant {my_instant} conflicts with compaction {inst.timestamp}, planned while "
                    f"this write appended {stray[0]} to file group {group[0]}/{group[1]}; retry the write")


# kept under its old name for callers of writer.concurrency
check_conflicts = check_write_conflicts
