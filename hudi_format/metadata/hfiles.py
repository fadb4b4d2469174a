"""HFile files of the metadata table: base HFiles and ``HFILE_DATA`` log blocks, as Hudi's
``HoodieAvroHFileWriter`` and ``HFileUtils`` lay them out, and the write stats recording them."""

from __future__ import annotations

import pyarrow as pa

from ..hfile import HFileWriter
from ..log import BlockType, HeaderKey
from ..log.encode import HFILE_LOG_BLOCK_SIZE, encode_block
from ..storage import Storage
from . import payloads as P

__all__ = ["hfile_data_block", "write_base_hfile"]


def hfile_data_block(items: list[tuple[bytes, bytes]], instant: str) -> bytes:
    """An ``HFILE_DATA`` log block of sorted ``(key, value)`` cells (HFileUtils' layout)."""
    w = HFileWriter(None, block_size=HFILE_LOG_BLOCK_SIZE, compression="GZ")
    for k, v in items:
        w.append(k, v)
    w.add_file_info("schema", P.SCHEMA_JSON)
    content = w.close()
    return encode_block(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant,
                                               HeaderKey.SCHEMA: P.SCHEMA_JSON}, content)


def write_base_hfile(storage: Storage, rel: str, items: list[tuple[bytes, bytes]]) -> int:
    """A base HFile of the metadata table (``HoodieAvroHFileWriter``): the cells, the schema,
    a bloom filter of the keys and the min/max keys; returns its size."""
    from ..bloom import new_bloom_filter
    bloom = new_bloom_filter(60000, 0.000000001, "DYNAMIC_V0", 100000)
    if items:
        bloom.add_all(pa.array([k for k, _ in items], pa.binary()))
    w = HFileWriter(storage, rel, compression="GZ")
    for k, v in items:
        w.append(k, v)
    w.add_file_info("schema", P.SCHEMA_JSON)
    w.add_file_info("bloomFilterTypeCode", "DYNAMIC_V0")
    if items:
        w.add_file_info("minRecordKey", items[0][0])
        w.add_file_info("maxRecordKey", items[-1][0])
    w.add_meta_block("bloomFilter", bloom.serialize())
    w.close()
    return storage.size(rel)
