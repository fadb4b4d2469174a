"""Walk the blocks of a Hudi log file, detecting corrupt or truncated blocks as Hudi does.

Block layout (log format version 1, all integers big-endian)::

    "#HUDI#" | long size | int version | int type | header | long content length | content
             | footer | long total length

``size`` counts every byte after itself; ``total length`` equals ``size + 6`` (the block from
its magic through the content and footer). Header and footer are an int entry count followed by
(int key, int byte length, UTF-8 bytes) entries.

A block is corrupt when its size runs past the end of the file, when the trailing total length
disagrees with the size, or when the bytes after it are neither ``#HUDI#`` nor the end of the
file (``HoodieLogFileReader.isBlockCorrupted``). The reader then reports the region up to the
next ``#HUDI#`` as a ``CORRUPTED`` block and carries on there, so one torn append costs one
block, not the file. Inner inconsistencies of a well-framed block (lengths that overrun the
frame, unknown types, a log format version other than 1) make that one block ``CORRUPTED``
too. Unlike Hudi, which stops silently, a torn tail shorter than a magic is reported as a
``CORRUPTED`` block as well, so every byte of the file is accounted for.
"""

from __future__ import annotations

import logging
import struct
from typing import Iterator

from ..errors import LogFormatError
from ..storage import Storage
from .block import BlockType, HeaderKey, LogBlock

__all__ = ["read_log_file", "MAGIC"]

log = logging.getLogger(__name__)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
# version + type + header count + content length + footer count + total length
_MIN_BLOCK_SIZE = 4 + 4 + 4 + 8 + 4 + 8
_WHOLE_FILE_LIMIT = 8 << 20  # files up to this size are read in one request
_WINDOW = 256 << 10  # ranged-read window for headers of large files
_SCAN_CHUNK = 1 << 20
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_VALID_TYPES = {t.value for t in BlockType} - {BlockType.CORRUPTED.value}


class _Source:
    """The bytes of one log file: held whole when small, else fetched in ranged windows."""

    def __init__(self, storage: Storage, path: str):
        self.storage, self.path = storage, path
        self.size = storage.size(path)
        self._data: bytes | None = None
        if 0 < self.size <= _WHOLE_FILE_LIMIT:
            self._data = storage.read_bytes(path)
            self.size = len(self._data)
        self._win_start, self._win = 0, b""

    def read(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``start`` (fewer at the end of the file)."""
        end = min(start + length, self.size)
        if start < 0 or start >= end:
            return b""
        if self._data is not None:
            return self._data[start:end]
        w0 = self._win_start
        if w0 <= start and end <= w0 + len(self._win):
            return self._win[start - w0:end - w0]
        if end - start >= _WINDOW:
            return self.storage.read_range(self.path, start, end - start)
        self._win_start = start
        self._win = self.storage.read_range(self.path, start, min(_WINDOW, self.size - start))
        return self._win[:end - start]

    def find_magic(self, start: int) -> int:
        """Offset of the next ``#HUDI#`` at or after ``start``, or the file size if none."""
        if self._data is not None:
            i = self._data.find(MAGIC, start)
            return self.size if i < 0 else i
        pos = start
        while pos < self.size:
            chunk = self.storage.read_range(self.path, pos, min(_SCAN_CHUNK, self.size - pos))
            i = chunk.find(MAGIC)
            if i >= 0:
                return pos + i
            if pos + len(chunk) >= self.size:
                break
            pos += max(len(chunk) - len(MAGIC) + 1, 1)
        return self.size


class _BadBlock(Exception):
    """A framed block whose inside does not parse (internal to this module)."""


class _Cursor:
    """Bounds-checked big-endian reads within one block's frame."""

    def __init__(self, src: _Source, pos: int, end: int):
        self.src, self.pos, self.end = src, pos, end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise _BadBlock(f"a field at offset {self.pos} runs past the block end {self.end}")
        data = self.src.read(self.pos, n)
        if len(data) != n:
            raise _BadBlock(f"file ends inside the block at offset {self.pos}")
        self.pos += n
        return data

    def int32(self) -> int:
        return _INT.unpack(self.take(4))[0]

    def int64(self) -> int:
        return _LONG.unpack(self.take(8))[0]

    def metadata(self, what: str) -> dict:
        count = self.int32()
        if count < 0 or count * 8 > self.end - self.pos:
            raise _BadBlock(f"impossible {what} entry count {count}")
        out: dict = {}
        for _ in range(count):
            key, size = self.int32(), self.int32()
            raw = self.take(size)
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _BadBlock(f"{what} entry {key} is not UTF-8") from exc
            try:
                out[HeaderKey(key)] = value
            except ValueError:
                log.warning("ignoring unknown %s key %d in %s", what, key, self.src.path)
        return out


def _corrupt(src: _Source, start: int, end: int, reason: str, where: str) -> LogBlock:
    log.warning("corrupt log block in %s at bytes %d..%d: %s", where, start, end, reason)
    return LogBlock(path=src.path, offset=start, length=end - start,
                    block_type=BlockType.CORRUPTED, version=-1, header={}, footer={},
                    content_offset=start, content_length=end - start, reason=reason,
                    read=src.read, where=where)


def _next_block(src: _Source, pos: int, where: str) -> tuple[LogBlock, int]:
    """The block (or corrupt region) starting at ``pos`` and the offset after it."""
    def corrupt_to_next_magic(reason: str):
        nxt = src.find_magic(pos + len(MAGIC))
        return _corrupt(src, pos, nxt, reason, where), nxt

    if src.read(pos, len(MAGIC)) != MAGIC:
        return corrupt_to_next_magic("no #HUDI# magic where a block should start")
    raw = src.read(pos + 6, 8)
    if len(raw) < 8:
        return corrupt_to_next_magic("file ends inside the block size")
    size = _LONG.unpack(raw)[0]
    end = pos + 14 + size
    if size < _MIN_BLOCK_SIZE:
        return corrupt_to_next_magic(f"impossible block size {size}")
    if end > src.size:
        return corrupt_to_next_magic(f"block size {size} runs past the end of the file")
    total = _LONG.unpack(src.read(end - 8, 8))[0]
    if total - len(MAGIC) != size:
        return corrupt_to_next_magic(f"trailing block length {total} does not match size {size}")
    after = src.read(end, len(MAGIC))
    if len(after) == len(MAGIC) and after != MAGIC:
        return corrupt_to_next_magic("block is not followed by #HUDI# or the end of the file")

    cur = _Cursor(src, pos + 14, end - 8)
    try:
        version = cur.int32()
        if version != LOG_FORMAT_VERSION:
            raise _BadBlock(f"unsupported log format version {version}")
        btype = cur.int32()
        if btype not in _VALID_TYPES:
            raise _BadBlock(f"unknown block type {btype}")
        header = cur.metadata("header")
        content_length = cur.int64()
        content_offset = cur.pos
        _skip(cur, content_length)  # content is read only when asked for
        footer = cur.metadata("footer")
        if cur.pos != end - 8:
            raise _BadBlock(f"{end - 8 - cur.pos} unexplained bytes before the block's total length")
    except _BadBlock as exc:
        return _corrupt(src, pos, end, str(exc), where), end
    block = LogBlock(path=src.path, offset=pos, length=end - pos, block_type=BlockType(btype),
                     version=version, header=header, footer=footer,
                     content_offset=content_offset, content_length=content_length,
                     read=src.read, where=where)
    return block, end


def _skip(cur: _Cursor, n: int) -> None:
    """Step over content without reading it (large content is loaded only on demand)."""
    if n < 0 or cur.pos + n > cur.end:
        raise _BadBlock(f"content length {n} runs past the block end")
    cur.pos += n


def read_log_file(storage: Storage, path: str) -> Iterator[LogBlock]:
    """The blocks of log file ``path`` (relative to ``storage``), in file order.

    Damaged regions come back as ``BlockType.CORRUPTED`` blocks; a file that does not start
    like a log file raises :class:`LogFormatError`. An empty file has no blocks.
    """
    src = _Source(storage, path)
    where = storage.uri(path)
    if src.size == 0:
        return
    head = src.read(0, len(MAGIC))
    if head != MAGIC and not (len(head) < len(MAGIC) and MAGIC.startswith(head)):
        raise LogFormatError(f"{where} is not a Hudi log file: it does not start with #HUDI#")
    pos = 0
    while pos < src.size:
        block, pos = _next_block(src, pos, where)
        yield block
