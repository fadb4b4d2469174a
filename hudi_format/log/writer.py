"""Write encoded blocks into new log files of a file group (``HoodieLogFormatWriter``).

Hudi appends blocks to the latest log file of a file group where the file system can append
(HDFS) and starts a new *version* otherwise. Object stores cannot append, and a file that
other writers or readers may have open is never touched again here either: every call writes
brand-new log files, each created exclusively (never overwriting) and written in one stream.
That is always valid Hudi: readers merge all log files of a slice in (instant, version, write
token) order, so N small files read exactly like one file with the same blocks.

Crash safety comes from the block framing: a block is only taken for valid when its leading
size, its trailing total length and the end of the file (or the next ``#HUDI#``) agree, so a
file cut anywhere holds the complete blocks before the cut plus one detectable torn tail. On
an error while writing a local file, the partly written file is removed; on object stores
nothing becomes visible before the upload completes.
"""

from __future__ import annotations

import logging
import posixpath
import struct
from typing import Iterable, Sequence

import attrs
from fsspec.implementations.local import LocalFileSystem

from ..errors import InvalidOptionError, LogFormatError, StorageError
from ..options import default
from ..storage import Storage
from .file_name import LogFileName, parse_log_file_name
from .reader import MAGIC

__all__ = ["write_log_file", "next_log_version", "LogFileWriteResult", "LogVersionTakenError", "DEFAULT_MAX_FILE_SIZE",
           "LOG_BASE_VERSION"]

log = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE: int = default("hoodie.logfile.max.size")
LOG_BASE_VERSION = 1  # HoodieLogFile.LOGFILE_BASE_VERSION
_LONG = struct.Struct(">q")
_WRITE_TOKEN_PARTS = 3


@attrs.frozen
class LogFileWriteResult:
    """One log file written: ``path`` relative to the table, its version, byte size, blocks."""

    path: str
    version: int
    size: int
    num_blocks: int


def _check_block(i: int, block: bytes) -> None:
    """A block must be one complete frame, or the file would be unreadable after it."""
    if not isinstance(block, (bytes, bytearray, memoryview)):
        raise LogFormatError(f"block {i} is {type(block).__name__}, not bytes")
    n = len(block)
    if n < 14 + 32 or bytes(block[:6]) != MAGIC:
        raise LogFormatError(f"block {i} is not an encoded log block (no #HUDI# frame)")
    size = _LONG.unpack_from(block, 6)[0]
    total = _LONG.unpack_from(block, n - 8)[0]
    if size + 14 != n or total != size + len(MAGIC):
        raise LogFormatError(f"block {i} is not one complete log block: {n} bytes, size field "
                             f"{size}, trailing length {total}")


def next_log_version(storage: Storage, partition_path: str, file_id: str, instant_time: str) -> int:
    """One more than the highest log version of ``file_id`` at ``instant_time`` (any write token).

    ``LOG_BASE_VERSION`` (1) when the partition has no such log file yet; CDC log files
    (``.cdc``) share the version sequence, as in Hudi.
    """
    latest = 0
    for info in storage.list(partition_path):
        if info.is_dir:
            continue
        parsed = parse_log_file_name(info.name)
        if parsed is None or parsed.extension != "log":
            continue
        if parsed.file_id == file_id and parsed.instant_time == instant_time:
            latest = max(latest, parsed.version)
    return max(latest + 1, LOG_BASE_VERSION)


def _create(storage: Storage, rel: str):
    """Open ``rel`` for exclusive creation (``"xb"``).

    Local files fail with ``FileExistsError`` here; object stores (s3fs) check when the object
    is committed at close and raise ``FileExistsError`` then. A file system without ``"xb"``
    falls back to an existence check.
    """
    full = storage.full(rel)
    if not storage.is_object_store:   # no folders there (makedirs costs a HEAD)
        storage.fs.makedirs(posixpath.dirname(full), exist_ok=True)
    try:
        return storage.fs.open(full, "xb")
    except FileExistsError:
        raise
    except (ValueError, NotImplementedError, TypeError):  # a file system without "xb"
        if storage.fs.exists(full):
            raise FileExistsError(full) from None
        return storage.fs.open(full, "wb")


def _write_one(storage: Storage, rel: str, blocks: Sequence[bytes]) -> int:
    f = _create(storage, rel)
    # Only a local open(..., "xb") (O_EXCL) proves the file at ``rel`` is ours while it is being
    # written; elsewhere nothing is visible before close, and a path that exists after a failure
    # may belong to another writer, so it is never deleted.
    created_by_us = isinstance(storage.fs, LocalFileSystem)
    written = 0
    try:
        with f:
            for block in blocks:
                f.write(block)
                written += len(block)
    except FileExistsError:
        raise  # lost a create-if-absent race at commit time: nothing of ours was written
    except BaseException as exc:
        if created_by_us:
            try:
                storage.delete(rel)  # our torn prefix
            except Exception:  # the original error matters more
                log.warning("could not remove partly written log file %s", storage.uri(rel))
        if isinstance(exc, OSError):
            raise StorageError(f"cannot write log file {storage.uri(rel)}: {exc}") from exc
        raise
    return written


def _plan(blocks: Sequence[bytes], max_file_size: int) -> list[list[bytes]]:
    """Group blocks in order into files of at most ``max_file_size`` bytes (a bigger block alone)."""
    files: list[list[bytes]] = []
    size = 0
    for block in blocks:
        if not files or (files[-1] and size + len(block) > max_file_size):
            files.append([])
            size = 0
        files[-1].append(block)
        size += len(block)
    return files



class LogVersionTakenError(InvalidOptionError):
    """An explicit log ``version`` exists already: another writer created it since it was listed."""
def write_log_file(storage: Storage, partition_path: str, file_id: str, instant_time: str,
                   blocks: Iterable[bytes], write_token: str, version: int | None = None,
                   max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> list[LogFileWriteResult]:
    """Write ``blocks`` into new log file(s) ``.<file_id>_<instant_time>.log.<version>_<write_token>``.

    ``version=None`` takes the next free version of that file id and instant (listing the
    partition); an explicit ``version`` must not exist yet. A new, consecutive version starts
    whenever the next block would push the current file past ``max_file_size``
    (``hoodie.logfile.max.size``); a block larger than that goes alone into its own file.
    Every file is created exclusively and written in one stream -- nothing is ever appended to
    or overwritten, which is what object stores need anyway. ``instant_time`` is the base
    instant of the slice for table version 6 and the delta commit's own instant for 8+.

    Returns one :class:`LogFileWriteResult` per file, in version order; no blocks, no files.
    """
    blocks = list(blocks)
    if max_file_size <= 0:
        raise InvalidOptionError(f"max_file_size must be positive, got {max_file_size}")
    if not isinstance(file_id, str) or not file_id or "/" in file_id:
        raise InvalidOptionError(f"invalid file id {file_id!r}")
    if not (isinstance(instant_time, str) and instant_time.isdigit()):
        raise InvalidOptionError(f"instant time must be digits (yyyyMMddHHmmssSSS), got {instant_time!r}")
    parts = write_token.split("-") if isinstance(write_token, str) else []
    if len(parts) != _WRITE_TOKEN_PARTS or not all(p.isdigit() for p in parts):
        raise InvalidOptionError(f"write token must be <taskPartitionId>-<stageId>-<attemptId>, "
                                 f"got {write_token!r}")
    if version is not None and (not isinstance(version, int) or version < LOG_BASE_VERSION):
        raise InvalidOptionError(f"log version must be an int >= {LOG_BASE_VERSION}, got {version!r}")
    for i, block in enumerate(blocks):
        _check_block(i, block)
    if not blocks:
        return []

    auto = version is None
    current = next_log_version(storage, partition_path, file_id, instant_time) if auto else version
    results: list[LogFileWriteResult] = []
    for group in _plan(blocks, max_file_size):
        while True:
            name = LogFileName(file_id, instant_time, current, write_token).name
            rel = posixpath.join(partition_path, name) if partition_path else name
            try:
                size = _write_one(storage, rel, group)
            except FileExistsError:
                if not auto:
                    raise LogVersionTakenError(f"log file {storage.uri(rel)} already exists; "
                                               "pass version=None for the next free one") from None
                current += 1  # another writer took this version meanwhile: take the next one
                continue
            break
        results.append(LogFileWriteResult(rel, current, size, len(group)))
        current += 1
    return results
