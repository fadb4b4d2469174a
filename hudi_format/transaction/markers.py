"""Write markers: which files an instant created, so a failed write can be undone exactly.

Before a writer creates or appends to a data file it leaves a marker
``.hoodie/.temp/<instant>/<partition>/<file name>.marker.<IOType>`` (Hudi's direct markers;
IOType CREATE, MERGE or APPEND). A rollback reads them instead of guessing from names, which
matters for table version 6 where a log file's name carries the slice's base instant, not the
writer's. The folder goes away once the instant completes.
"""

from __future__ import annotations

import posixpath
from typing import Iterable

from ..errors import HudiError
from ..log import read_log_file
from ..storage import Storage
from ..view.file_names import parse_base_file_name, parse_log_file_name

TEMP_DIR = ".hoodie/.temp"
IO_TYPES = ("CREATE", "MERGE", "APPEND")


def marker_dir(instant: str) -> str:
    return f"{TEMP_DIR}/{instant}"


def marker_path(instant: str, data_path: str, io_type: str) -> str:
    """Where the marker of data file ``data_path`` (relative to the table) written by
    ``instant`` with ``io_type`` lives."""
    partition, name = posixpath.split(data_path)
    return posixpath.join(marker_dir(instant), partition, f"{name}.marker.{io_type}") if partition \
        else posixpath.join(marker_dir(instant), f"{name}.marker.{io_type}")


def create_marker(storage: Storage, instant: str, data_path: str, io_type: str) -> None:
    storage.create_if_absent(marker_path(instant, data_path, io_type), b"")


def markers_of(instant: str, data_files: Iterable[str]) -> list[str]:
    """Every marker a writer of ``instant`` can have left for these data files: a base file
    is created (CREATE) or rewritten (MERGE), a log file appended to (APPEND, named after the
    first log file of the append)."""
    out = []
    for path in data_files:
        types = ("APPEND",) if posixpath.basename(path).startswith(".") else ("CREATE", "MERGE")
        out += [marker_path(instant, path, t) for t in types]
    return out


def read_markers(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """``(data file path relative to the table, io type)`` of every marker of ``instant``."""
    root = marker_dir(instant)
    out = []
    for info in storage.walk_files(root):
        rel = info.path[len(root) + 1:] if info.path.startswith(root + "/") else info.name
        if ".marker." not in rel:
            continue
        data, io_type = rel.rsplit(".marker.", 1)
        if io_type in IO_TYPES:
            out.append((data, io_type))
    return sorted(out)


def delete_markers(storage: Storage, instant: str, data_files: Iterable[str] | None = None) -> None:
    """Remove the markers of ``instant``.

    ``data_files``: every file the instant wrote, when the caller knows that no other marker
    can exist (a committed transaction that began the instant and saw every attempt): on a
    store that deletes in batches the markers go by name, in one request, without listing.
    Otherwise (a crashed or failed writer's leftovers) the marker folder is listed: one
    recursive removal, falling back to file by file where the filesystem refuses it."""
    if data_files is not None and storage.deletes_in_batches:
        storage.delete_many(markers_of(instant, data_files))
        return
    try:
        storage.delete_tree(marker_dir(instant))
        return
    except OSError:
        pass
    for info in list(storage.walk_files(marker_dir(instant))):
        storage.delete(info.path)


def written_by(storage: Storage, path: str, instant: str) -> bool:
    """Whether the data file ``path`` was written by ``instant``.

    A marker is created *before* its file: a writer whose exclusive create then lost the race
    for a v6 log file version (``.log.N``) holds a marker naming another writer's file. Base
    files and v8 log files carry their instant in their name; a v6 log file is named after its
    slice's base instant, so its first block's header says who wrote it. A file that cannot be
    read is not claimed."""
    name = posixpath.basename(path)
    base = parse_base_file_name(name)
    if base is not None:
        return base.instant_time == instant
    log_name = parse_log_file_name(name)
    if log_name is None:
        return False
    if log_name.instant_time == instant:
        return True
    try:
        for block in read_log_file(storage, path):
            return block.instant_time == instant
    except (HudiError, OSError):
        return False
    return False
