"""Cleans, rollbacks and restores that other processes began after a snapshot was loaded.

A snapshot pins a timeline, but its files are listed later, on first use, and in between
another process may have deleted some: a clean of file groups a clustering replaced after the
snapshot (the listing then holds neither the old groups nor the new), a rollback or restore of
a commit the snapshot saw. Built from such a listing, a query silently misses rows, and a
write misses keys: a delete does nothing, an upsert adds a second copy. Those actions record
what they delete (planned before they delete, in their metadata once done), so the listing can
be checked once taken: :meth:`ConcurrentDeletions.check` raises ``FileMissingError`` naming a
file the snapshot needs that one of them removed (or is removing). A query reports it (the
table is to be refreshed); a write takes it as the conflict it is and runs again.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, NamedTuple

from ..config import TableConfig
from ..errors import FileMissingError, HudiError
from ..storage import Storage
from ..timeline import WRITE_ACTIONS, Instant, Timeline
from ..view import FileSlice
from .cleaned import DELETING_ACTIONS, cleaned_slice, deleted_by, undone_by
from .snapshot import ReadState

log = logging.getLogger(__name__)

__all__ = ["ConcurrentDeletions", "Later"]


class Later(NamedTuple):
    """A clean, rollback or restore begun since the timeline was loaded: the file names it
    deleted (or is deleting) per partition, and the instants it undid."""

    instant: Instant
    deleted: dict[str, list[str]]
    undone: list[str]


class ConcurrentDeletions:
    """The deleting actions begun since ``timeline`` (a snapshot's) was loaded, and the check of
    a listing against them. Keeps the archive it read (archival rarely runs between checks)."""

    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline):
        self.storage = storage
        self.config = config
        self.timeline = timeline
        self._archive: tuple[str | None, Any] | None = None

    def check(self, state: ReadState, listed: list[FileSlice], accepts: Callable[[str], bool] | None = None) -> None:
        """Raise ``FileMissingError`` when the view of ``state`` (``listed``: its slices of the
        partitions ``accepts`` takes, all by default) needs a file that the cleaner removed:
        time travel to an old instant, or the latest snapshot of a table loaded before another
        process's clean, rollback or restore (checked after the listing, which then no longer
        holds what those removed)."""
        later = self.later()
        if state.as_of is None and not later:
            return
        self._check_not_undone(state, later)
        gone = cleaned_slice(state, listed, accepts, [(x.instant, x.deleted) for x in later])
        if gone is None:
            return
        path = self.storage.uri(gone.path)
        if any(gone.clean.timestamp == x.instant.timestamp for x in later):
            seen = self.timeline.latest_completed_write()
            what = f"time travel to {state.as_of}" if state.as_of is not None else "the snapshot"
            keep = (", or keep more commits (hoodie.cleaner.commits.retained) for readers that hold "
                    "a table this long") if gone.clean.action == "clean" else ""
            raise FileMissingError(
                f"{self.storage.url}: {path}, part of {what} of this table as opened (its timeline "
                f"ends at {seen.timestamp if seen else 'no commit'}), was removed by "
                f"{gone.clean.action} {gone.clean.timestamp}, not yet complete when the table was "
                f"opened; refresh() the table and read again{keep}")
        cleans = [i for i in self.timeline.completed if i.action == "clean"]
        keep = ""
        if cleans:
            try:
                ectr = self.timeline.raw_metadata(cleans[-1]).get("earliestCommitToRetain")
            except HudiError:
                ectr = None
            keep = f"; the latest clean keeps every slice from {ectr} on" if ectr else ""
        raise FileMissingError(f"time travel to {state.as_of} of {self.storage.url}: the cleaner removed "
                               f"file slices that were current then (e.g. {path}), so "
                               f"the table as of that instant cannot be read whole{keep}")

    def torn(self, state: ReadState, listed: Callable[[], list[FileSlice]],
             accepts: Callable[[str], bool] | None, fresh: Timeline) -> str | None:
        """Why a writer's listing of ``state`` (``listed()``: its slices of the partitions
        ``accepts`` takes) lacks what that snapshot holds, as found on ``fresh`` (the timeline
        its commit loaded under the lock; ``None``: it is whole). Only a slice missing from the
        listing counts: one still listed was read as it was (or its read failed)."""
        later = self.later(fresh)
        if not later:
            return None
        undone = _undone_commit(state, later)
        if undone is not None:
            commit, x = undone
            return f"commit {commit} of its snapshot was undone by {x.instant.action} {x.instant.timestamp}"
        gone = cleaned_slice(state, listed(), accepts, [(x.instant, x.deleted) for x in later], unlisted_only=True)
        if gone is None:
            return None
        return (f"{self.storage.uri(gone.path)}, part of its snapshot, was removed by {gone.clean.action} "
                f"{gone.clean.timestamp} before the write listed its partition")

    def later(self, fresh: Timeline | None = None) -> list[Later]:
        """Cleans, rollbacks and restores completed or begun since the timeline was loaded
        (another process's), each with the file names it deleted, or plans to delete while in
        flight (it deletes before it completes), per partition, and the instants it undid:
        one listing of the timeline folder, and the archive when instants left the active
        timeline since (a held table's later cleans may be there). ``fresh``: that listing,
        when the caller has just taken it."""
        known = {i.timestamp for i in self.timeline.completed if i.action in DELETING_ACTIONS}
        if fresh is None:
            try:
                fresh = Timeline.load(self.storage, self.config)
            except HudiError as exc:   # the check is best effort; the query itself does not need it
                log.warning("cannot check %s for cleans since it was opened: %s", self.storage.url, exc)
                return []
        found: list[tuple[Instant, Any]] = [(i, fresh) for i in fresh.instants if i.action in DELETING_ACTIONS]
        first = self._first_active_commit(fresh)
        if self._archive is not None and self._archive[0] == first:
            fresh.adopt_archive(self._archive[1])
        if self._archived_since(fresh, first):
            # archival ran since, past the snapshot: its later cleans may be in the archive
            try:
                archive = fresh.archived()
                self._archive = (first, archive)
                oldest = self.timeline.instants[0].timestamp
                found += [(i, archive) for i in archive.completed
                          if i.action in DELETING_ACTIONS and i.timestamp >= oldest]
            except HudiError as exc:
                log.warning("cannot read the archived timeline of %s: %s", self.storage.url, exc)
        out, done = [], set()
        for i, source in found:
            if i.timestamp in known or i.timestamp in done:
                continue
            try:
                later = Later(i, deleted_by(i, source), undone_by(i, source))
                if not i.is_completed and i.action != "clean":
                    # a rollback (restore) hides its target before it deletes anything: one whose
                    # targets are all still completed has undone nothing yet (killed, say), and
                    # readers take them as committed, as Hudi's do
                    hidden = [t for t in later.undone if not fresh.is_completed(t)]
                    later = Later(i, later.deleted if hidden else {}, hidden)
                out.append(later)
            except HudiError as exc:
                log.warning("cannot read %s %s of %s: %s", i.action, i.timestamp, self.storage.url, exc)
                continue
            done.add(i.timestamp)
        return out

    @staticmethod
    def _first_active_commit(fresh: Timeline) -> str | None:
        savepoints = {i.timestamp for i in fresh.completed if i.action == "savepoint"}
        return min((i.timestamp for i in fresh.completed
                    if i.action in WRITE_ACTIONS and i.timestamp not in savepoints), default=None)

    def _archived_since(self, fresh: Timeline, first: str | None) -> bool:
        """Whether archival may have moved a clean (rollback) begun after the snapshot out of
        the active timeline: archival takes commits oldest first, and cleans and rollbacks
        older than the newest commit it takes, so everything archived is older than the first
        commit left active (savepointed ones aside). The archive (a whole log to decode on v6)
        is then read only when that commit is newer than the snapshot's last instant and its
        cleans still pending then."""
        loaded = self.timeline.instants
        active = {i.timestamp for i in fresh.instants}
        if not loaded or all(i.timestamp in active for i in loaded if i.is_completed):
            return False
        since = min([loaded[-1].timestamp] + [i.timestamp for i in loaded
                                              if i.action in DELETING_ACTIONS and not i.is_completed])
        return first is None or first > since

    def _check_not_undone(self, state: ReadState, later: list[Later]) -> None:
        """A rollback or restore begun since the table was loaded that undoes a commit of the
        view fails it: the commit's files are gone, or (version 6 MOR) a command block now
        hides its log blocks, and the view would silently be the state before it."""
        undone = _undone_commit(state, later)
        if undone is not None:
            commit, x = undone
            seen = self.timeline.latest_completed_write()
            raise FileMissingError(
                f"{self.storage.url}: commit {commit}, part of the view of this table as opened (its "
                f"timeline ends at {seen.timestamp if seen else 'no commit'}), was undone by "
                f"{x.instant.action} {x.instant.timestamp}, not yet complete when the table was "
                f"opened; refresh() the table and read again")


def _undone_commit(state: ReadState, later: list[Later]) -> tuple[str, Later] | None:
    """A commit visible in ``state`` that one of ``later`` undid (or is undoing), with it."""
    for x in later:
        for t in x.undone:
            if t and state.visible(t):
                return t, x
    return None
