"""Hudi log files: ``#HUDI#`` blocks of data, deletes and commands appended to a file group.

``read_log_file(storage, path)`` yields :class:`LogBlock` objects; data blocks turn into Arrow
with :meth:`LogBlock.records`, delete blocks with :meth:`LogBlock.deleted_keys`.
"""

from .block import BlockType, CommandType, HeaderKey, LogBlock
from .reader import MAGIC, read_log_file

__all__ = ["read_log_file", "LogBlock", "BlockType", "HeaderKey", "CommandType", "MAGIC"]
