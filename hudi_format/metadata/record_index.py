"""Looking record keys up in the metadata table's ``record_index`` partition, column-wise.

Tagging an upsert asks the record index about every incoming key at once (100k keys against
millions of entries), so the bulk path never touches a key in Python: keys are spread over the
partition's file groups with :func:`.keys.file_group_indexes`, each file group's HFiles (base
file, then log blocks in log order) are searched with :meth:`HFileReader.lookup_arrays`
(touched data blocks decoded in bulk, or, for a few keys per block, each key's cell searched:
an entry's value, a ``HoodieRecordIndexInfo``, holds no byte run that could pass for a cell),
and the merge of base and log entries is a sort.

Values are ``HoodieMetadataRecord`` Avro records; a record index value depends only on where
the record lives (partition, file id, instant), so the values found are dictionary-encoded and
each *distinct* value is decoded once with the block's own schema.

Merge rule (``HoodieMetadataPayload``): for a key, the newest source wins -- a log block over
the base file, a later block over an earlier one; a delete block's key removes the entry, and
so does a newer record without record-index content.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array
from ..errors import HudiError
from ..log import BlockType
from ..view import FileSlice
from . import keys as K
from .options import MetadataTableError
from .records import decode_record, record_location_of

__all__ = ["RECORD_INDEX_SCHEMA", "lookup", "entries", "last_of_each", "slice_entries"]

RECORD_INDEX_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()),
                                 ("file_id", pa.string()), ("instant_ms", pa.int64())])
# keys per file group from which a lookup reads its file groups on threads. With a few keys a
# file group's work is mostly Python per block (headers, each key's cell searched) and per file
# (the HFile's root index), and a second thread contends for the GIL: on a 5M-entry index of
# 10 file groups (2 cores, 12 interleaved rounds), 1,000 keys took 74-99 ms on one thread and
# 95-113 ms on two (min-median), 10,000 keys 266-363 against 319-451 ms; at 30,000 the two
# were even, at 100,000 (the whole index inflated and matched) threads won by ~10%
THREADED_FROM = 2000
T = TypeVar("T")
_SOURCE = pa.schema([("key", pa.binary()), ("seq", pa.int32()), ("partition", pa.string()),
                     ("file_id", pa.string()), ("instant_ms", pa.int64())])


def last_of_each(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The row of each distinct key's last occurrence (keys without nulls), in key order: the
    merge rule wherever rows come in log order (a later entry of a key wins)."""
    order = pa.table({"k": keys, "i": pa.array(np.arange(len(keys)))}).sort_by(
        [("k", "ascending"), ("i", "descending")])
    ks, idx = order.column("k").combine_chunks(), order.column("i").combine_chunks()
    if len(ks) < 2:
        return idx
    return idx.filter(pa.concat_arrays([pa.array([True]), pc.not_equal(ks.slice(1), ks.slice(0, len(ks) - 1))]))


def _locations(keys: pa.Array, values: pa.Array, seq: int, schema_json: str, where: str) -> pa.Table:
    """One source's ``(key, seq, partition, file_id)``; each distinct value decoded once."""
    encoded = pc.dictionary_encode(values)
    partitions, file_ids, instants = [], [], []
    for raw in encoded.dictionary.to_pylist():
        loc = record_location_of(decode_record(raw, schema_json, where))
        partitions.append(None if loc is None else loc.partition)
        file_ids.append(None if loc is None else loc.file_id)
        instants.append(None if loc is None else loc.instant_time_millis)
    indices = encoded.indices
    return pa.table([keys, pa.repeat(pa.scalar(seq, pa.int32()), len(keys)),
                     pc.take(pa.array(partitions, pa.string()), indices),
                     pc.take(pa.array(file_ids, pa.string()), indices),
                     pc.take(pa.array(instants, pa.int64()), indices)], schema=_SOURCE)


def _deleted(keys: pa.Array | None, deleted: pa.Array, seq: int) -> pa.Table:
    gone = pc.drop_null(deleted.cast(pa.binary()))
    hit = gone if keys is None else pc.filter(keys, pc.is_in(keys, value_set=gone))
    nulls = pa.nulls(len(hit), pa.string())
    return pa.table([hit, pa.repeat(pa.scalar(seq, pa.int32()), len(hit)), nulls, nulls,
                     pa.nulls(len(hit), pa.int64())], schema=_SOURCE)


def slice_entries(mdt, s: FileSlice, keys: pa.Array | None) -> pa.Table:
    """``(key, partition, file_id)`` of the sorted distinct binary ``keys`` that file slice
    ``s`` of the record index holds (merged over its base file and log blocks); ``keys``
    ``None``: every entry (each HFile read whole)."""
    storage = mdt.mdt_storage
    parts: list[pa.Table] = []
    if s.base_file:
        reader = mdt.hfile_reader(s.base_file, s.base_file_size)
        if reader.num_entries:
            schema = reader.avro_schema
            if not schema:
                raise HudiError(f"{storage.uri(s.base_file)} has no Avro schema in its file info")
            found, values = reader.arrays() if keys is None else reader.lookup_arrays(keys, search=True)
            parts.append(_locations(found, values, 0, schema, storage.uri(s.base_file)))
    for seq, block in enumerate(mdt.log_blocks(s.log_files) if s.log_files else (), start=1):
        where = block.describe()
        if block.block_type == BlockType.DELETE:
            parts.append(_deleted(keys, block.deleted_keys().column("record_key").combine_chunks(), seq))
        elif block.block_type == BlockType.HFILE_DATA:
            reader = mdt.block_reader(block)
            if not reader.num_entries:
                continue
            found, values = reader.arrays() if keys is None else reader.lookup_arrays(keys, search=True)
            parts.append(_locations(found, values, seq, block.schema_json or reader.avro_schema, where))
        else:
            raise MetadataTableError(f"{where}: a {block.block_type.name} block, but the "
                                     "metadata table only holds HFile data and delete blocks")
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return RECORD_INDEX_SCHEMA.empty_table()
    merged = pa.concat_tables(parts).combine_chunks()
    if len(parts) > 1:  # sources in log order: each key's last row is its newest
        merged = merged.take(last_of_each(merged.column("key")))
    merged = merged.filter(pc.is_valid(merged.column("file_id")))
    return pa.table([merged.column("key").cast(pa.string()), merged.column("partition"),
                     merged.column("file_id"), merged.column("instant_ms")], schema=RECORD_INDEX_SCHEMA)


def lookup(mdt, keys: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``(key, partition, file_id, instant_ms)`` of the given keys the record index holds."""
    keys = pc.unique(pc.drop_null(one_array(keys).cast(pa.string())))
    if not len(keys):
        return RECORD_INDEX_SCHEMA.empty_table()
    slices = file_groups(mdt)
    groups = K.file_group_indexes(keys, len(slices))

    def one(i: int) -> pa.Table:
        mine = pc.filter(keys, pc.equal(groups, i)).cast(pa.binary())
        mine = pc.take(mine, pc.sort_indices(mine))
        return mdt.read_slice_guarded(slices[i], lambda s: slice_entries(mdt, s, mine))

    wanted = pc.unique(groups).to_pylist()
    return _each(one, wanted, threaded=len(keys) >= THREADED_FROM * len(wanted))


def file_groups(mdt) -> list[FileSlice]:
    """The record index's file slices, one per file group in hash order. A key's group is its
    hash modulo their count, so a declared index whose groups are not all there (none: dropped,
    or some: rebuilt, while this reader had loaded the table) would answer "absent" for keys it
    holds: that raises instead of answering."""
    slices = sorted(mdt.file_slices(K.RECORD_INDEX), key=lambda s: s.file_id)
    if [s.file_id for s in slices] != K.file_group_ids(K.RECORD_INDEX, len(slices)) or not slices:
        raise MetadataTableError(
            f"the record index of {mdt.storage.url} has file groups {[s.file_id for s in slices][:4]}"
            f"{'...' if len(slices) > 4 else ''} where it needs record-index-0000-0 onwards, each once "
            "(dropped or rebuilt since the table was loaded?)")
    return slices


def entries(mdt) -> pa.Table:
    """Every ``(key, partition, file_id, instant_ms)`` of the record index: each file group read
    whole and merged column-wise (file groups on threads), each distinct value decoded once."""
    slices = mdt.file_slices(K.RECORD_INDEX)

    def one(s: FileSlice) -> pa.Table:
        return mdt.read_slice_guarded(s, lambda s: slice_entries(mdt, s, None))

    return _each(one, slices, threaded=True)


def _each(read: Callable[[T], pa.Table], items: list[T], threaded: bool) -> pa.Table:
    """``read`` of each file group, concatenated; on threads when ``threaded`` (inflating and
    the Arrow kernels release the GIL) and there are several."""
    workers = min(len(items), os.cpu_count() or 1) if threaded else 1
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            out = list(pool.map(read, items))
    else:
        out = [read(i) for i in items]
    return pa.concat_tables(out) if out else RECORD_INDEX_SCHEMA.empty_table()
