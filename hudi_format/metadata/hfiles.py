"""HFile files of the metadata table: base HFiles and ``HFILE_DATA`` log blocks, as Hudi's
``HoodieAvroHFileWriter`` and ``HFileUtils`` lay them out, and the write stats recording them.

Block size: Hudi cuts every metadata HFile into 1 MiB blocks (``hoodie.hfile.block.size``,
``HFileUtils.DEFAULT_BLOCK_SIZE_FOR_LOG_FILE``), which suits the partitions read whole or by
key prefix. The ``record_index`` partition is read by point lookups instead: a key costs
inflating and locating the cells of its whole block, so its HFiles are cut into
:data:`RECORD_INDEX_BLOCK_SIZE` blocks (16 KiB measured fastest for both a 1,000-key lookup
and a 100k-key tagging of a 5M-entry index; the files grow by half, the index stays one
level: see :func:`_block_size`). Readers take any block size from the block index (Hudi's,
HBase's, hudi-rs), and the rest of the layout is unchanged.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..hfile import DEFAULT_BLOCK_SIZE, HFileWriter
from ..log import BlockType, HeaderKey
from ..log.encode import HFILE_LOG_BLOCK_SIZE, encode_block
from ..storage import Storage
from . import keys as K
from . import payloads as P

__all__ = ["cells_by_file_group", "cells_of", "file_groups_of", "hfile_data_block", "hfile_data_block_of", "write_base_hfile",
           "write_base_hfile_of", "RECORD_INDEX_BLOCK_SIZE"]

RECORD_INDEX_BLOCK_SIZE = 16 * 1024
_ROOT_BUDGET = 120 * 1024  # under the 128 KiB at which the block index goes multi-level
_CELL_OVERHEAD = 21  # key/value lengths, row length, family length, timestamp, type, MVCC


def _block_size(partition: str | None, default: int, keys: pa.Array, values: pa.Array) -> int:
    """The data block size of an HFile of these cells for metadata partition ``partition``.

    Record index HFiles take small blocks, but never so many that the block index outgrows
    one root block: Hudi 1.0's own reader (``HFileReaderImpl``) reads the root level only,
    and Hudi, cutting 1 MiB blocks, never writes more. An index entry takes at most
    ``row + 28`` bytes, and every block but the last holds at least ``block_size`` bytes."""
    if partition != K.RECORD_INDEX or not len(keys):
        return default
    key_len = pc.binary_length(keys)
    total = pc.sum(key_len).as_py() + pc.sum(pc.binary_length(values)).as_py() + _CELL_OVERHEAD * len(keys)
    most = max(2, _ROOT_BUDGET // (pc.max(key_len).as_py() + 28))
    return max(RECORD_INDEX_BLOCK_SIZE, -(-total // (most - 1)))


def _arrays(items: list[tuple[bytes, bytes]]) -> tuple[pa.Array, pa.Array]:
    return (pa.array(list(map(itemgetter(0), items)), pa.binary()),
            pa.array(list(map(itemgetter(1), items)), pa.binary()))


def hfile_data_block(items: list[tuple[bytes, bytes]], instant: str, partition: str | None = None) -> bytes:
    """An ``HFILE_DATA`` log block of sorted ``(key, value)`` cells (HFileUtils' layout) for
    metadata partition ``partition`` (its block size, see the module docstring)."""
    return hfile_data_block_of(*_arrays(items), instant, partition)


def hfile_data_block_of(keys: pa.Array, values: pa.Array, instant: str, partition: str | None = None) -> bytes:
    """:func:`hfile_data_block` of cells given as Arrow arrays (``keys`` binary, sorted)."""
    w = HFileWriter(None, block_size=_block_size(partition, HFILE_LOG_BLOCK_SIZE, keys, values), compression="GZ")
    w.append_sorted(keys, values)
    w.add_file_info("schema", P.SCHEMA_JSON)
    content = w.close()
    return encode_block(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant,
                                               HeaderKey.SCHEMA: P.SCHEMA_JSON}, content)


def write_base_hfile(storage: Storage, rel: str, items: list[tuple[bytes, bytes]],
                     partition: str | None = None) -> int:
    """A base HFile of the metadata table of sorted ``(key, value)`` cells; returns its size."""
    return write_base_hfile_of(storage, rel, *_arrays(items), partition)


def write_base_hfile_of(storage: Storage, rel: str, keys: pa.Array, values: pa.Array,
                        partition: str | None = None) -> int:
    """A base HFile of the metadata table (``HoodieAvroHFileWriter``) of cells given as Arrow
    arrays (``keys`` binary, sorted): the cells, the schema, a bloom filter of the keys and the
    min/max keys; returns its size."""
    from ..bloom import new_bloom_filter
    bloom = new_bloom_filter(60000, 0.000000001, "DYNAMIC_V0", 100000)
    if len(keys):
        bloom.add_all(keys)
    w = HFileWriter(storage, rel, compression="GZ", block_size=_block_size(partition, DEFAULT_BLOCK_SIZE, keys, values))
    w.append_sorted(keys, values)
    w.add_file_info("schema", P.SCHEMA_JSON)
    w.add_file_info("bloomFilterTypeCode", "DYNAMIC_V0")
    if len(keys):
        w.add_file_info("minRecordKey", keys[0].as_py())
        w.add_file_info("maxRecordKey", keys[len(keys) - 1].as_py())
    w.add_meta_block("bloomFilter", bloom.serialize())
    w.close()
    return storage.size(rel)


def cells_by_file_group(upserts: Mapping[str, bytes], n: int) -> dict[int, tuple[pa.Array, pa.Array]]:
    """``upserts`` (key -> encoded value) as the cells of each of ``n`` file groups (Hudi's key
    hash): (keys as UTF-8 bytes, in byte order, and their values), sorted column-wise."""
    if not upserts:
        return {}
    return cells_of(pa.array(list(upserts), pa.string()), pa.array(list(upserts.values()), pa.binary()), n)


def cells_of(keys: pa.Array, values: pa.Array, n: int) -> dict[int, tuple[pa.Array, pa.Array]]:
    """:func:`cells_by_file_group` of keys (strings, each once) and values given as arrays."""
    if not len(keys):
        return {}
    groups = pa.array(file_groups_of(keys, n), pa.int32())
    t = pa.table({"g": groups, "k": keys.cast(pa.binary()), "v": values})
    t = t.sort_by([("g", "ascending"), ("k", "ascending")])
    g = t.column("g").to_numpy()
    cuts = np.flatnonzero(np.diff(g)) + 1
    starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(g)]])
    k, v = t.column("k").combine_chunks(), t.column("v").combine_chunks()
    return {int(g[a]): (k.slice(a, b - a), v.slice(a, b - a)) for a, b in zip(starts, ends)}


def file_groups_of(keys: pa.Array, n: int) -> np.ndarray:
    """The file group of each key among ``n`` (Hudi's key hash), as int32 NumPy."""
    if n == 1:
        return np.zeros(len(keys), np.int32)
    return K.file_group_indexes(keys, n).to_numpy()
