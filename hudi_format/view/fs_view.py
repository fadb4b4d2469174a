"""The file-system view: which files make up the table as of an instant.

Storage holds committed files next to debris of failed writes, files of pending compactions and
clustering, and file groups that a replacecommit has retired. The view turns one listing plus the
timeline into the latest file slice per live file group, as of any completed instant, so that
every reader sees exactly one committed state.

Slicing rule (both table versions): a log file joins the slice of the newest *visible* base file
whose instant is at or before the log file's key, where the key is the base instant in its name
(v6) or the completion time of the delta commit that wrote it (v8+, non-blocking concurrency
control). A slice started by a pending (or not-yet-visible) compaction therefore folds into the
previous slice, as Hudi's "merged file slice" does.
"""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from typing import Callable, Iterable

import attrs

from ..config import TableConfig
from ..storage import FileInfo, Storage
from .file_names import parse_base_file_name, parse_log_file_name
from .file_slice import FileGroup, FileSlice

log = logging.getLogger(__name__)

PARTITION_METAFILE_PREFIX = ".hoodie_partition_metadata"
_SKIP_DIRS = (".hoodie",)


class FileSystemView:
    """Latest file slices per file group as of an instant, from one cached listing.

    ``visible`` tells whether a write instant (by requested time) is committed as of the query;
    ``key_time`` maps a v8+ delta commit instant to its completion time; ``replaced`` lists the
    ``(partition, file_id)`` pairs retired by replacecommits visible as of the query.
    """

    def __init__(self, storage: Storage, config: TableConfig,
                 listing: dict[str, list[FileInfo]] | None = None,
                 lister: Callable[[], dict[str, list[FileInfo]] | None] | None = None):
        self.storage = storage
        self.config = config
        self._listing = listing
        self._partial: dict[str, list[FileInfo]] = {}   # partitions listed one by one
        # ``lister`` supplies the listing on first use (the metadata table's ``files``
        # partition); when it gives ``None`` the view lists storage instead.
        self._lister = lister

    # -- listing -----------------------------------------------------------------------------
    def _discover(self) -> dict[str, list[FileInfo]]:
        """Walk the table once: partitions are folders with a partition metafile."""
        out: dict[str, list[FileInfo]] = {}

        def visit(rel: str) -> None:
            entries = self.storage.list(rel)
            files = [e for e in entries if not e.is_dir]
            if any(f.name.startswith(PARTITION_METAFILE_PREFIX) for f in files):
                out[rel] = files
            for e in entries:
                if e.is_dir and e.name not in _SKIP_DIRS and not (rel == "" and e.name.startswith(".")):
                    visit(e.path)

        visit("")
        return out

    @property
    def listing(self) -> dict[str, list[FileInfo]]:
        if self._listing is None and self._lister is not None:
            self._listing = self._lister()
        if self._listing is None:
            self._listing = self._discover()
        return self._listing

    def partitions(self) -> list[str]:
        return sorted(self.listing)

    def listed_partitions(self) -> list[str] | None:
        """The partitions listed so far, without listing more: ``None`` once the whole table
        was (then any partition, one deleted whole too, is known by its absence)."""
        if self._listing is not None:
            return None
        return sorted(self._partial)

    def files_in(self, partition: str) -> list[FileInfo]:
        """The files of one partition: from the whole-table listing once taken, else one
        listing of that partition's folder alone (a write touching a few partitions of a big
        table lists those, not the table)."""
        if self._listing is None and self._lister is None:
            if partition not in self._partial:
                self._partial[partition] = [e for e in self.storage.list(partition) if not e.is_dir]
            return self._partial[partition]
        return self.listing.get(partition, [])

    # -- slicing -----------------------------------------------------------------------------
    def file_groups(self, partition: str, visible: Callable[[str], bool],
                    key_time: Callable[[str], str | None] | None = None) -> list[FileGroup]:
        """File groups of ``partition`` built only from files of visible instants."""
        bases: dict[str, dict[str, FileInfo]] = defaultdict(dict)
        logs: dict[str, list[tuple]] = defaultdict(list)
        ext = self.config.base_file_extension
        v8 = self.config.version >= 8
        for f in self.files_in(partition):
            name = f.name
            if name.startswith("."):
                lf = parse_log_file_name(name)
                if lf is None or lf.is_cdc or lf.extension != "log":
                    continue
                if v8 and not visible(lf.instant_time):
                    continue
                logs[lf.file_id].append((lf.instant_time, lf.sort_key(), f))
            else:
                bf = parse_base_file_name(name)
                if bf is None or bf.extension != ext or not visible(bf.instant_time):
                    continue
                prev = bases[bf.file_id].get(bf.instant_time)
                # Two base files of one instant in one group only happen when a retried task
                # left a duplicate; Hudi keeps the one the commit names, and the newest write
                # token is the committed retry.
                if prev is None or prev.name < f.name:
                    bases[bf.file_id][bf.instant_time] = f

        groups = []
        for file_id in sorted(set(bases) | set(logs)):
            instants = sorted(bases.get(file_id, {}))
            slice_logs: dict[str | None, list[tuple]] = defaultdict(list)
            for instant_time, sort_key, f in logs.get(file_id, ()):
                key = instant_time
                if v8 and key_time is not None and instants and instant_time < instants[-1]:
                    # Only a log older than the newest base file needs its completion time to
                    # pick its slice (a later one lands in the newest slice either way), so
                    # a log of an archived instant loads the archive only when it matters.
                    key = key_time(instant_time) or instant_time
                i = bisect.bisect_right(instants, key)
                slice_logs[instants[i - 1] if i else None].append((sort_key, f))
            slices = []
            if None in slice_logs:
                # Log-only slice (no visible base file at or before its logs). Its base instant
                # is its first log's (v6: the instant the log names, which for a file group a
                # write started with logs is that write's own); a slice whose base instant is
                # not committed is none, as Hudi's ``isFileSliceCommitted`` (v8 logs of
                # invisible instants were dropped above).
                entries = sorted(slice_logs[None], key=lambda t: t[0])
                if v8 or visible(entries[0][0][0]):
                    slices.append(self._slice(partition, file_id, entries[0][0][0], None, entries))
            for inst in instants:
                entries = sorted(slice_logs.get(inst, ()), key=lambda t: t[0])
                slices.append(self._slice(partition, file_id, inst, bases[file_id][inst], entries))
            groups.append(FileGroup(partition, file_id, tuple(slices)))
        return groups

    @staticmethod
    def _slice(partition: str, file_id: str, base_instant: str, base: FileInfo | None,
               log_entries: Iterable[tuple]) -> FileSlice:
        log_entries = list(log_entries)
        return FileSlice(
            partition_path=partition, file_id=file_id, base_instant=base_instant,
            base_file=base.path if base else None,
            log_files=tuple(f.path for _, f in log_entries),
            base_file_size=base.size if base else 0,
            log_file_sizes=tuple(f.size for _, f in log_entries))

    def latest_file_slices(self, visible: Callable[[str], bool],
                           key_time: Callable[[str], str | None] | None = None,
                           replaced: frozenset[tuple[str, str]] = frozenset(),
                           partitions: Iterable[str] | None = None,
                           read_optimized: bool = False) -> list[FileSlice]:
        out = []
        for partition in (self.partitions() if partitions is None else partitions):
            # read-optimized drops the logs, so where they would join does not matter
            for group in self.file_groups(partition, visible, None if read_optimized else key_time):
                if (partition, group.file_id) in replaced:
                    continue
                latest = group.latest
                if read_optimized:
                    with_base = [s for s in group.slices if s.base_file]
                    if not with_base:
                        continue
                    latest = attrs.evolve(with_base[-1], log_files=(), log_file_sizes=())
                if latest is not None:
                    out.append(latest)
        return out

