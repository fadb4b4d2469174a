"""File groups and file slices: the unit a reader merges and a writer appends to."""

from __future__ import annotations

import posixpath

import attrs


@attrs.frozen
class FileSlice:
    """One version of a file group: an optional base file plus the log files on top of it.

    Paths are relative to the table base so a slice can be shipped to another process or engine
    and opened against the same table location.
    """

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None = None
    log_files: tuple[str, ...] = ()
    base_file_size: int = 0
    log_file_sizes: tuple[int, ...] = ()

    @property
    def has_log_files(self) -> bool:
        return bool(self.log_files)

    @property
    def total_size(self) -> int:
        return self.base_file_size + sum(self.log_file_sizes)

    @property
    def base_file_name(self) -> str | None:
        return posixpath.basename(self.base_file) if self.base_file else None


@attrs.frozen
class FileGroup:
    """All slices of one file id in one partition, oldest first."""

    partition_path: str
    file_id: str
    slices: tuple[FileSlice, ...]

    @property
    def latest(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None
