"""Hudi log files: ``#HUDI#`` blocks of data, deletes and commands appended to a file group.

``read_log_file(storage, path)`` yields :class:`LogBlock` objects; data blocks turn into Arrow
with :meth:`LogBlock.records`, delete blocks with :meth:`LogBlock.deleted_keys`.

Writing: the ``encode_*`` functions (:mod:`.encode`) return the bytes of complete blocks and
:func:`write_log_file` (:mod:`.writer`) writes them into new log files of a file group.
"""

from .block import BlockType, CommandType, HeaderKey, LogBlock, data_records
from .reader import MAGIC, read_log_file

# Writer names load on first use, so reading headers does not import fastavro/pyarrow.parquet.
_LAZY = {
    "encode_block": "encode", "encode_avro_data_block": "encode",
    "encode_parquet_data_block": "encode", "encode_delete_block": "encode",
    "encode_rollback_block": "encode", "encode_data_blocks": "encode",
    "write_log_file": "writer", "next_log_version": "writer", "LogFileWriteResult": "writer",
    "LogVersionTakenError": "writer",
}

__all__ = ["read_log_file", "LogBlock", "BlockType", "HeaderKey", "CommandType", "MAGIC", "data_records",
           *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
