"""HFile v3, the base-file and log-block format of Hudi's metadata table.

No Python package reads or writes HFiles, so this one does, byte-compatible with HBase 2.x
(which wrote Hudi 0.x's files), Hudi 1.x's own writer and hudi-rs::

    from hudi_format.hfile import HFileReader, HFileWriter
    r = HFileReader(storage, "files/files-0000-0_0-5-4_00000000000000000.hfile")
    r.get(b"__all_partitions__"); r.prefix(b"2024/"); r.file_info[b"schema"]

    w = HFileWriter(storage, "out.hfile", block_size=64 * 1024, compression="GZ")
    w.append(b"key-1", b"value"); w.add_file_info("schema", avsc); w.close()

Modules: :mod:`.trailer` (trailer and file info, a tiny protobuf codec), :mod:`.blocks`
(block framing, compression, checksums, cells), :mod:`.index` (multi-level block index),
:mod:`.reader`, :mod:`.writer`.
"""

from .reader import SEEK_BEFORE_FIRST, SEEK_FOUND, SEEK_IN_RANGE, HFileReader
from .writer import DEFAULT_BLOCK_SIZE, HFileWriter, write_hfile

__all__ = ["HFileReader", "HFileWriter", "write_hfile", "SEEK_FOUND", "SEEK_IN_RANGE",
           "SEEK_BEFORE_FIRST", "DEFAULT_BLOCK_SIZE"]
