"""Whether the cleaner removed file slices a time-travel query needs.

A view as of an old instant is built from today's listing. Once the cleaner has deleted the
slice a file group had then, that view silently takes an older slice of the group (older rows)
or none (rows gone): a wrong answer with no error. The cleans' own metadata names every file they
deleted, so the loss is detectable: a deleted file of an instant visible as of the query
belonged to the slice the query needs unless the group's slice in the view starts after it
(the cleaner deletes whole slices, oldest first), or the group was replaced by then.

The same holds for the latest snapshot of a table opened a while ago: its view is built from
the listing when it is first read, so a clean another process completed meanwhile (``later``)
must be checked as well, or the pinned snapshot silently lacks what that clean removed.
"""

from __future__ import annotations

import posixpath
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from ..errors import HudiError
from ..timeline import Instant
from ..timeline.base import TimelineView
from ..timeline.metadata import deleted_files, planned_deletions, rolled_back_from
from ..view import FileSlice
from ..view.file_names import parse_base_file_name, parse_log_file_name
from .snapshot import ReadState, replaced_by

__all__ = ["cleaned_slice", "Cleaned", "DELETING_ACTIONS", "deleted_by", "undone_by"]


DELETING_ACTIONS = ("clean", "rollback", "restore")   # actions that delete committed files


def deleted_by(instant: Instant, timeline: TimelineView) -> dict[str, list[str]]:
    """Names of the files a clean, rollback or restore deleted (completed), or is deleting (in
    flight: its plan; a restore's plan names instants only, so nothing), per partition."""
    if instant.is_completed:
        meta = timeline.raw_metadata(instant)
        if instant.action != "restore":
            return deleted_files(meta)
        out: dict[str, list[str]] = {}
        for rollbacks in (meta.get("hoodieRestoreMetadata") or {}).values():
            for rb in rollbacks or ():
                for part, names in deleted_files(rb).items():
                    out.setdefault(part, []).extend(names)
        return out
    plan = timeline.plan(instant) or {}
    if instant.action == "clean":
        return planned_deletions(plan)
    out = {}
    for req in plan.get("RollbackRequests") or ():
        names = [posixpath.basename(f) for f in req.get("filesToBeDeleted") or ()]
        out.setdefault(req.get("partitionPath") or "", []).extend(names)
    return out


def undone_by(instant: Instant, timeline: TimelineView) -> list[str]:
    """The instants a rollback or restore undid (completed) or is undoing (in flight: its plan)."""
    if instant.action not in ("rollback", "restore"):
        return []
    if instant.is_completed:
        return sorted(rolled_back_from(instant.action, timeline.raw_metadata(instant)))
    plan = timeline.plan(instant) or {}
    if instant.action == "rollback":
        return [str((plan.get("instantToRollback") or {}).get("commitTime") or "")]
    return [str(e.get("commitTime") or "") for e in plan.get("instantsToRollback") or ()]


class Cleaned(NamedTuple):
    """A file a view needs that a clean (rollback, restore) deleted (table-relative path), and
    that instant."""

    path: str
    clean: Instant


def _deleted_files(state: ReadState, later: Sequence[tuple[Instant, Mapping[str, list[str]]]] = ()
                   ) -> Iterable[tuple[str, str, str, str, Instant]]:
    """``(partition, file id, instant, path, clean)`` of every file a completed clean deleted;
    the archive's cleans too when the query reaches behind the active timeline; ``later``:
    ``(clean, names it deleted or is deleting per partition)`` of the cleans completed or
    begun since ``state``'s timeline was loaded."""
    timeline = state.timeline
    # the latest snapshot as loaded: the cleans before it kept its slices (cleaners never
    # delete the latest), so only the later ones can have removed any
    cleans: list[tuple[Instant, TimelineView]] = [] if state.as_of is None else [
        (i, timeline) for i in timeline.completed if i.action == "clean"]
    if state.needs_archive:
        archived = timeline.archived()
        cleans += [(i, archived) for i in archived.completed if i.action == "clean"]
    deletions: list[tuple[Instant, Mapping[str, list[str]]]] = []
    for inst, source in cleans:
        try:
            deletions.append((inst, deleted_by(inst, source)))
        except HudiError:
            continue
    for inst, by_partition in deletions + list(later):
        for partition, names in by_partition.items():
            for name in names:
                parsed = parse_log_file_name(name) if name.startswith(".") else parse_base_file_name(name)
                if parsed is not None:   # named by the table-relative path, for the error message
                    yield (partition or "", parsed.file_id, parsed.instant_time,
                           posixpath.join(partition or "", name), inst)


def cleaned_slice(state: ReadState, slices: list[FileSlice],
                  accepts: Callable[[str], bool] | None = None,
                  later: Sequence[tuple[Instant, Mapping[str, list[str]]]] = (),
                  unlisted_only: bool = False) -> Cleaned | None:
    """A file the cleaner deleted that the view as of ``state`` (``slices``: its slices of the
    partitions ``accepts`` takes, all by default) would need, or ``None`` when the view is
    whole. A partition is judged by its cleaned files, not by the listing: a partition deleted
    whole (``delete_partition``, then cleaned) is in no listing any more. ``later``: cleans
    completed since the timeline was loaded (see :func:`_deleted_files`). ``unlisted_only``:
    only a slice the listing lacks counts (a writer's listing that still held the deleted
    slice saw its records, and reading it fails on its own)."""
    needed: dict[tuple[str, str], tuple[str, Cleaned]] = {}
    undone: set[str] | None = None    # a cleaned file of a commit later restored away was never needed
    for partition, file_id, instant, path, clean in _deleted_files(state, later):
        if (accepts is None or accepts(partition)) and state.visible(instant):
            if undone is None:
                undone = _undone(state)
            if instant in undone:
                continue
            key = (partition, file_id)
            if key not in needed or needed[key][0] < instant:
                needed[key] = (instant, Cleaned(path, clean))
    if not needed:
        return None
    # a slice whose base instant is not visible is none (version 6 names log files after their
    # slice's base, so the logs of a newer slice show as a log-only slice, all blocks unread);
    # nor is a log-only slice of a group that lost files: its base was cleaned from under its
    # logs (the cleaner deletes whole slices, and log files are listed until they go too)
    current = {(s.partition_path, s.file_id): s.base_instant for s in slices
               if state.visible(s.base_instant) and (s.base_file or (s.partition_path, s.file_id) not in needed)}
    replaced: set[tuple[str, str]] | None = None
    for key, (instant, gone) in sorted(needed.items()):
        base = current.get(key)
        if base is None:   # gone: fine when replaced as of then (its replacecommit may be archived)
            if replaced is None:
                replaced = set(state.replaced_file_groups) | _replaced_in_archive(state)
            if key in replaced:
                continue
        if base is None or base < instant or (base == instant and not unlisted_only):
            return gone
    return None


def _undone(state: ReadState) -> set[str]:
    """Request times rolled back or restored away (visibility takes anything before the active
    timeline for committed, and a savepoint kept in front of a restore puts them there)."""
    undone = set(state.timeline.rolled_back_instants())
    if state.needs_archive:
        undone |= state.timeline.archived().rolled_back_instants()
    return undone


def _replaced_in_archive(state: ReadState) -> set[tuple[str, str]]:
    """File groups retired by archived replacecommits visible as of ``state`` (its own set
    holds the archived ones only when the query reaches behind the active timeline)."""
    if state.needs_archive:
        return set()
    archived = state.timeline.archived()

    def metadata(inst: Instant):
        try:
            return archived.metadata(inst)
        except HudiError:
            return None
    return replaced_by((i for i in archived.completed if state.visible(i.timestamp)), metadata)
