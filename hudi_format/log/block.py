"""One block of a Hudi log file: its type, header, footer and lazily loaded content.

The enum values are the ordinals Hudi's Java enums serialize on disk (``HoodieLogBlockType``,
``HeaderMetadataType``, ``HoodieCommandBlockTypeEnum``). They are 0-based: the spec's tables
number them from 1, but the bytes Hudi writes are ordinals (an Avro data block says 3).

A block only remembers where its content lies in the file; :meth:`LogBlock.content` reads it on
demand, so walking a large log to look at headers (instant times, rollbacks) costs no memory.
"""

from __future__ import annotations

import enum
from typing import Callable

import attrs
import pyarrow as pa

from ..errors import HudiError, LogFormatError, UnsupportedFeatureError

__all__ = ["BlockType", "HeaderKey", "CommandType", "LogBlock", "data_records"]


class BlockType(enum.IntEnum):
    """``HoodieLogBlockType``; the value is the int written in the block."""

    COMMAND = 0
    DELETE = 1
    CORRUPTED = 2  # never written: the reader's name for a damaged region
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC = 6


class HeaderKey(enum.IntEnum):
    """``HeaderMetadataType``: keys of header (and footer) entries."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandType(enum.IntEnum):
    """``HoodieCommandBlockTypeEnum``: the header value of a command block, as a decimal int."""

    ROLLBACK_BLOCK = 0


@attrs.frozen(eq=False)
class LogBlock:
    """A block (or a corrupt region) of one log file.

    ``offset``/``length`` span the whole block from its magic through its trailing length, so
    ``offset + length`` is where the next block starts. ``content_offset``/``content_length``
    locate the content bytes. For ``CORRUPTED`` blocks the content is the damaged region itself,
    ``version`` is -1 and ``reason`` says what was wrong.
    """

    path: str
    offset: int
    length: int
    block_type: BlockType
    version: int
    header: dict
    footer: dict
    content_offset: int
    content_length: int
    reason: str | None = None
    _read: Callable[[int, int], bytes] = attrs.field(default=None, repr=False)
    _where: str = attrs.field(default="", repr=False)

    # -- header accessors --------------------------------------------------------------------
    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        """The instant a rollback command block rolls back."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema_json(self) -> str | None:
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_corrupted(self) -> bool:
        return self.block_type == BlockType.CORRUPTED

    @property
    def command_type(self) -> CommandType | None:
        if self.block_type != BlockType.COMMAND:
            return None
        raw = self.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
        if raw is None:
            return None
        try:
            return CommandType(int(raw.strip()))
        except ValueError:
            raise UnsupportedFeatureError(
                f"unknown command block type {raw!r} in {self.describe()}") from None

    def describe(self) -> str:
        """``<TYPE> block at offset N of <file>`` for error messages."""
        return f"{self.block_type.name} block at offset {self.offset} of {self._where or self.path}"

    # -- content -----------------------------------------------------------------------------
    def content(self) -> bytes:
        """The block's content bytes, read from storage now (nothing is kept in the block)."""
        return self.read_content(0, self.content_length)

    def read_content(self, start: int, length: int) -> bytes:
        """``length`` bytes of the content from ``start`` (an HFile block's trailer or index,
        say, without reading the rest)."""
        if start < 0 or length < 0 or start + length > self.content_length:
            raise LogFormatError(f"{self.describe()}: bytes {start}..{start + length} lie outside "
                                 f"its {self.content_length}-byte content")
        if length == 0:
            return b""
        if self._read is None:
            raise LogFormatError(f"{self.describe()} has no readable source")
        data = self._read(self.content_offset + start, length)
        if len(data) != length:
            raise LogFormatError(f"{self.describe()}: file is shorter than the block's content")
        return data

    def records(self, arrow_schema: pa.Schema | None = None) -> pa.Table:
        """Records of a data block, with every field of the block's writer schema.

        With ``arrow_schema``, columns are cast to it, missing ones are null and the field
        order is that of ``arrow_schema`` (how log records line up with base-file rows).
        """
        from . import data  # local: keeps pyarrow.parquet/fastavro off the header-only path

        where = self.describe()
        if self.block_type in (BlockType.AVRO_DATA, BlockType.CDC, BlockType.HFILE_DATA):
            if not self.schema_json:   # before reading the content: nothing could decode it
                raise LogFormatError(f"{where} has no SCHEMA header")
            decode = data.decode_hfile_block if self.block_type == BlockType.HFILE_DATA \
                else data.decode_avro_block
            table = decode(self.content(), self.schema_json, where)
        elif self.block_type == BlockType.PARQUET_DATA:
            table = data.decode_parquet_block(self.content(), where)
        else:
            raise LogFormatError(f"{where} holds no data records")
        if arrow_schema is not None:
            table = data.align_to_schema(table, arrow_schema, where)
        return table

    def deleted_keys(self) -> pa.Table:
        """Keys of a delete block: ``record_key``, ``partition_path``, ``ordering_value``."""
        from . import delete

        if self.block_type != BlockType.DELETE:
            raise LogFormatError(f"{self.describe()} is not a delete block")
        try:
            return delete.decode_delete_block(self.content(), self.describe())
        except HudiError:
            raise
        except Exception as exc:  # any decoder failure on damaged bytes
            raise LogFormatError(f"cannot decode {self.describe()}: {exc}") from exc


#: Avro blocks decoded together hold their contents twice while they decode (each, and joined):
#: runs are cut at this many content bytes, and a block over a quarter of it is decoded alone
JOIN_RUN_BYTES = 64 << 20


def data_records(blocks, arrow_schema: pa.Schema | None = None) -> list[pa.Table | None]:
    """:meth:`LogBlock.records` of each block of ``blocks``, in order (``None`` for a delete
    block); consecutive Avro data blocks of one writer schema are decoded together
    (:func:`.data.decode_avro_blocks`), in runs of at most :data:`JOIN_RUN_BYTES` of content."""
    from . import data

    out: list[pa.Table | None] = [None] * len(blocks)
    run: list[int] = []

    def flush() -> None:
        if len(run) > 1:
            items = [(blocks[i].content(), blocks[i].schema_json, blocks[i].describe()) for i in run]
            for i, table in zip(run, data.decode_avro_blocks(items)):
                out[i] = table if arrow_schema is None else data.align_to_schema(table, arrow_schema, blocks[i].describe())
        run.clear()

    size = 0
    for i, b in enumerate(blocks):
        joinable = b.block_type == BlockType.AVRO_DATA and b.schema_json and b.content_length <= JOIN_RUN_BYTES // 4
        if not joinable or (run and (blocks[run[0]].schema_json != b.schema_json
                                     or size + b.content_length > JOIN_RUN_BYTES)):
            flush()
            size = 0
        if joinable:
            run.append(i)
            size += b.content_length
    flush()
    return [t if t is not None or b.block_type == BlockType.DELETE else b.records(arrow_schema)
            for t, b in zip(out, blocks)]
