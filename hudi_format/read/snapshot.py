"""Query planning: what is visible as of an instant, and which file slices to read.

A ``ReadState`` pins one point of the timeline. Everything that decides visibility (which write
instants count, their completion times, which file groups a replacecommit retired) is derived
from it once, so every file slice of one query is read against the same committed state.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any, Callable, Iterable

import attrs

from ..config import TableConfig
from ..timeline import Instant, Timeline
from ..view import FileSlice, FileSystemView

log = logging.getLogger(__name__)

WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")


@attrs.frozen
class Visibility:
    """``ReadState.visible`` as a value: which instants' data a reader may see, decided without
    the timeline, so that a scan task pickled to another process reads the same commits."""

    times: frozenset[str]                 # visible completed write instants of the active timeline
    active_start: str | None              # where the active timeline starts
    archived: frozenset[str] | None = None  # visible archived instants, when the query needs them

    def __call__(self, instant_time: str) -> bool:
        if instant_time in self.times:
            return True
        if self.active_start is None or instant_time >= self.active_start:
            return False
        return self.archived is None or instant_time in self.archived


def replaced_by(instants: Iterable[Instant], metadata: Callable[[Instant], Any]) -> set[tuple[str, str]]:
    """``(partition, file id)`` of the file groups the replacecommits among ``instants`` retired;
    ``metadata(instant)`` gives an instant's commit metadata (``None``: skip it)."""
    out: set[tuple[str, str]] = set()
    for inst in instants:
        if inst.action != "replacecommit":
            continue
        meta = metadata(inst)
        if meta is None:
            continue
        for partition, file_ids in meta.partition_to_replace_file_ids.items():
            out.update((partition, fid) for fid in file_ids)
    return out


class ReadState:
    """The committed state of a table as of ``as_of`` (``None``: the latest commit).

    ``as_of`` compares with completion times for table version 8+ and with instant (requested)
    times for version 6, as Hudi's time travel does.
    """

    def __init__(self, config: TableConfig, timeline: Timeline, as_of: str | None = None):
        self.config = config
        self.timeline = timeline
        self.as_of = as_of
        self.use_completion = config.version >= 8

    def bound(self, instant: Instant) -> str:
        if self.use_completion:
            return instant.completion_time or instant.timestamp
        return instant.timestamp

    @cached_property
    def instants(self) -> list[Instant]:
        """Completed write instants visible as of the bound, in completion order."""
        out = []
        for inst in self.timeline.write_instants():
            if self.as_of is None or self.bound(inst) <= self.as_of:
                out.append(inst)
        return out

    @cached_property
    def _visible_times(self) -> dict[str, Instant]:
        return {i.timestamp: i for i in self.instants}

    @cached_property
    def active_start(self) -> str | None:
        """Where the active timeline starts: its first instant that is not a savepointed commit
        (archival beyond a savepoint leaves that commit in front of a hole)."""
        return self.timeline.start

    @cached_property
    def needs_archive(self) -> bool:
        """Only a query pinned before the active timeline starts has to read the archive."""
        return (self.as_of is not None and self.active_start is not None
                and self.as_of < self.active_start)

    @cached_property
    def archived_instants(self) -> dict[str, Instant]:
        """Archived write instants visible as of the bound (loads the archive)."""
        out = {}
        for inst in self.timeline.archived().write_instants():
            if self.as_of is None or self.bound(inst) <= self.as_of:
                out[inst.timestamp] = inst
        return out

    def visible(self, instant_time: str) -> bool:
        """Is data written at ``instant_time`` committed as of this state?"""
        if instant_time in self._visible_times:
            return True
        start = self.active_start
        if start is None or instant_time >= start:
            return False
        # Before the active timeline starts, data is committed (Hudi archives only completed
        # instants and rolls back the rest); only a query pinned that far back asks the archive.
        if not self.needs_archive:
            return True
        return instant_time in self.archived_instants

    def visibility(self) -> Visibility:
        """What :meth:`visible` decides, as a picklable value (one per state, shared by its tasks)."""
        if "_visibility" not in self.__dict__:
            archived = frozenset(self.archived_instants) if self.needs_archive else None
            self.__dict__["_visibility"] = Visibility(frozenset(self._visible_times), self.active_start, archived)
        return self.__dict__["_visibility"]

    def completion_time(self, instant_time: str) -> str | None:
        """Completion time of a visible write instant; ``None`` if it is not visible.

        An instant older than the active timeline was archived, and archived instants are
        completed: their completion time comes from the archive, which is loaded only for such
        an instant (as Hudi's ``CompletionTimeQueryView`` loads it lazily).
        """
        inst = self._visible_times.get(instant_time)
        if inst is None and self.needs_archive:
            inst = self.archived_instants.get(instant_time)
        if inst is not None:
            return inst.completion_time
        if self.needs_archive or not self.visible(instant_time):
            return None
        return self.archived_completion_time(instant_time)

    def archived_completion_time(self, instant_time: str) -> str:
        """Completion time of an instant before the active timeline (loads the archive once).

        An archived instant whose record is missing from the archive is still completed (only
        completed instants are archived); its request time is then the best bound we have.
        """
        cache = self.__dict__.setdefault("_archived_done", {})
        if instant_time not in cache:
            found = self.timeline.archived().get(instant_time)
            done = found.ordering_time if found is not None and found.is_completed else None
            if done is None:
                log.warning("instant %s is older than the active timeline but not in the archive of "
                            "%s; taking its request time as its completion time",
                            instant_time, self.timeline.storage.url)
                done = instant_time
            cache[instant_time] = done
        return cache[instant_time]

    @cached_property
    def replaced_file_groups(self) -> frozenset[tuple[str, str]]:
        instants = list(self.instants)
        if self.needs_archive:
            instants += list(self.archived_instants.values())
        return frozenset(replaced_by(instants, lambda inst: self.timeline.metadata(inst)
                                     if inst.timestamp in self._visible_times
                                     else self.timeline.archived().metadata(inst)))

    @property
    def latest(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    def file_slices(self, view: FileSystemView, partition_filter: Callable[[str], bool] | None = None,
                    read_optimized: bool = False, *, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """Latest slices of the partitions ``partition_filter`` accepts, or of exactly the named
        ``partitions`` (those alone are listed, not the whole table)."""
        if not self.instants and not (self.needs_archive and self.archived_instants):
            return []
        if partitions is not None:
            partitions = sorted(set(partitions))
        else:
            partitions = [p for p in view.partitions() if partition_filter is None or partition_filter(p)]
        key_time = self.completion_time if self.use_completion else None
        return view.latest_file_slices(self.visible, key_time, self.replaced_file_groups,
                                       partitions, read_optimized)
