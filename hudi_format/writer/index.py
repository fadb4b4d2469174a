"""Tagging: which file group already holds each incoming record key.

The simple index joins the incoming keys with the keys stored in the latest file slices of the
affected partitions (all partitions for the global variant). With the bloom index, each base
file's footer bloom filter (and min/max key range) first rules out the files that cannot hold
any incoming key, so only candidate files are opened for their keys.
"""

from __future__ import annotations

import logging
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..read.merge import MergeSpec, merge_file_slice, record_keys
from ..storage import Storage
from ..view import FileSlice

log = logging.getLogger(__name__)


def existing_keys(storage: Storage, slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema,
                  visible: Callable[[str], bool]) -> pa.Table:
    """``(key, partition, file_id)`` of every live record in ``slices``."""
    key_schema = pa.schema([f for f in schema if f.name in set(spec.needed_columns())])
    parts = []
    for s in slices:
        rows = merge_file_slice(storage, s, key_schema, spec, visible)
        if rows.num_rows == 0:
            continue
        keys = pc.cast(record_keys(rows, spec), pa.string())
        n = rows.num_rows
        parts.append(pa.table({"key": keys, "partition": pa.repeat(pa.scalar(s.partition_path), n),
                               "file_id": pa.repeat(pa.scalar(s.file_id), n)}))
    if not parts:
        return pa.table({"key": pa.array([], pa.string()), "partition": pa.array([], pa.string()),
                         "file_id": pa.array([], pa.string())})
    return pa.concat_tables(parts)


def candidate_slices_by_bloom(storage: Storage, slices: list[FileSlice], keys: pa.Array,
                              read_footer) -> list[FileSlice]:
    """Slices whose base file may hold one of ``keys`` (range + bloom check); log files are
    not indexed by blooms, so slices with logs always stay candidates."""
    out = []
    for s in slices:
        if s.log_files or not s.base_file:
            out.append(s)
            continue
        footer = read_footer(storage, s.base_file)
        if footer.min_key is not None and footer.max_key is not None:
            in_range = pc.and_(pc.greater_equal(keys, footer.min_key), pc.less_equal(keys, footer.max_key))
            subset = pc.filter(keys, in_range)
        else:
            subset = keys
        if len(subset) == 0:
            continue
        if footer.bloom_filter is None or pc.any(footer.bloom_filter.might_contain_all(subset)).as_py():
            out.append(s)
    return out


def tag(incoming: pa.Table, existing: pa.Table, global_index: bool) -> pa.Table:
    """Add ``file_id`` (null for new records) and ``existing_partition`` to ``incoming``.

    ``incoming`` has columns ``key`` and ``partition`` (plus ``row``, the position in the batch).
    """
    if global_index:
        right = existing.select(["key", "partition", "file_id"]).rename_columns(
            ["key", "existing_partition", "file_id"])
        joined = incoming.join(right, "key", join_type="left outer")
    else:
        right = existing.select(["key", "partition", "file_id"])
        joined = incoming.join(right, ["key", "partition"], join_type="left outer")
        joined = joined.append_column("existing_partition",
                                      pc.if_else(pc.is_null(joined.column("file_id")),
                                                 pa.scalar(None, pa.string()), joined.column("partition")))
    return joined.sort_by("row")
