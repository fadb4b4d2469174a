"""Comparing millions of record keys by sorting them, for ``validate``'s snapshot checks.

Hashing strings with Arrow (``is_in``, joins, ``group_by``) builds a memo table of every key:
on 5M keys each such step took 1.3-4.7 s, and checking the record index against the snapshot
took four of them. Sorting the keys (stably) costs 0.4 s per 5M and puts each key's rows side
by side, so the rest is numpy over group ids; only keys held more than once by one side go
through a join, and those are few. ``hudi-format validate`` of a 5M-row table keeping the record
index: 15.7-16.8 s before, 6.1-7.2 s after (it also reads the index once instead of twice).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["IndexMismatch", "record_index_mismatch", "repeated_rows"]


class IndexMismatch(NamedTuple):
    lacks: pa.Table     # snapshot rows whose key the index does not hold (snapshot order)
    stale: pa.Table     # index rows whose key no snapshot row has (index order)
    wrong: pa.Array     # keys held by both, but at no location a snapshot row of the key has (sorted)


def _array(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _differs_from_previous(sorted_cols: list[pa.Array]) -> np.ndarray:
    """Per row of rows sorted by ``sorted_cols``, whether it starts a new group (nulls equal)."""
    n = len(sorted_cols[0])
    new = np.zeros(n, bool)
    if not n:
        return new
    new[0] = True
    for col in sorted_cols:
        a, b = col.slice(1), col.slice(0, n - 1)
        same = pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_null(a), pc.is_null(b)))
        new[1:] |= ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return new


def _codes(col, offset: int) -> tuple[np.ndarray, list]:
    """``col``'s values as int codes into its distinct values (a null: ``offset``, which the
    caller picks so that a null never equals the other side's codes). A dictionary column
    (the snapshot's locations, one per file slice) has its codes already."""
    if pa.types.is_dictionary(col.type):
        chunks = pa.table({"c": col}).unify_dictionaries().column("c").chunks
        values = chunks[0].dictionary.to_pylist() if chunks else []
        codes = np.concatenate([np.asarray(pc.fill_null(c.indices, -1)) for c in chunks] or [np.zeros(0, np.int64)])
        values.append(None)
        codes = np.where(codes < 0, len(values) - 1, codes)
    else:
        distinct = pc.unique(col)
        codes = _array(pc.index_in(col, value_set=distinct)).to_numpy(zero_copy_only=False)
        values = distinct.to_pylist()
    if None in values:
        codes = np.where(codes == values.index(None), offset, codes)
    return codes.astype(np.int64), values


def _same_location(index: pa.Table, snap: pa.Table, i_rows: np.ndarray, s_rows: np.ndarray) -> np.ndarray:
    """Whether index row ``i_rows[j]`` has the partition and file id of snapshot row
    ``s_rows[j]``: both sides' strings coded by their (few) distinct values, the index's codes
    translated to the snapshot's, so no string is gathered."""
    same = np.ones(len(i_rows), bool)
    for column in ("partition", "file_id"):
        s_codes, s_values = _codes(snap[column], -2)
        i_codes, i_values = _codes(index[column], -1)
        at = {v: n for n, v in enumerate(s_values) if v is not None}
        to_snap = np.array([at.get(v, -3) if v is not None else -1 for v in i_values] + [-1], np.int64)
        same &= to_snap[i_codes[i_rows]] == s_codes[s_rows]
    return same


def record_index_mismatch(snap: pa.Table, index: pa.Table) -> IndexMismatch:
    """How the record index (``key, partition, file_id``) disagrees with the snapshot's rows
    (``key, partition, file_id`` of the file group each is in); a key with several snapshot
    rows (duplicates Hudi's inserts make) is right when the index has it at any of them."""
    if snap["key"].null_count:
        snap = snap.filter(pc.is_valid(snap["key"]))
    if index["key"].null_count:
        index = index.filter(pc.is_valid(index["key"]))
    n_i = index.num_rows
    parts = [_array(index["key"]), _array(snap["key"])]
    wide = sum(p.nbytes for p in parts) >= 1 << 30        # offsets of one string array: < 2 GiB
    keys = pa.concat_arrays([p.cast(pa.large_string() if wide else pa.string()) for p in parts])
    if not len(keys):
        return IndexMismatch(snap, index, pa.array([], pa.string()))
    order = pc.sort_indices(keys).to_numpy()     # stable: a key's index rows come first
    new = _differs_from_previous([keys.take(pa.array(order))])
    gid = np.cumsum(new, dtype=np.int64 if len(keys) >> 31 else np.int32) - 1   # (bool to int64: 10x slower)
    from_index = order < n_i
    groups = int(gid[-1]) + 1
    in_index = np.bincount(gid[from_index], minlength=groups)
    in_snap = np.bincount(gid, minlength=groups) - in_index
    lacks = np.sort(order[~from_index & (in_index[gid] == 0)] - n_i)
    stale = np.sort(order[from_index & (in_snap[gid] == 0)])
    starts = np.flatnonzero(new)
    # one row each side (the usual case): the index row, then the snapshot row
    pairs = starts[np.flatnonzero((in_index == 1) & (in_snap == 1))]
    i_rows, s_rows = order[pairs], order[pairs + 1] - n_i
    misplaced = i_rows[~_same_location(index, snap, i_rows, s_rows)]
    wrong = [_array(index["key"]).take(pa.array(misplaced)).cast(pa.string())]
    several = np.flatnonzero((in_index >= 1) & (in_snap >= 1) & ((in_index > 1) | (in_snap > 1)))
    if len(several):
        wanted = keys.take(pa.array(order[starts[several]])).cast(pa.string())
        wrong.append(_misplaced(snap.filter(pc.is_in(snap["key"], value_set=wanted)),
                                index.filter(pc.is_in(index["key"], value_set=wanted))))
    wrong_keys = pa.concat_arrays(wrong)
    return IndexMismatch(snap.take(pa.array(lacks)), index.take(pa.array(stale)),
                         wrong_keys.take(pc.sort_indices(wrong_keys)))


def _misplaced(snap: pa.Table, index: pa.Table) -> pa.Array:
    """Keys (held by both) of which no index row is at a snapshot row's location."""
    snap, index = _decoded(snap), _decoded(index)
    both = snap.select(["key", "partition", "file_id"]).join(
        index.select(["key", "partition", "file_id"]).rename_columns(["key", "ri_partition", "ri_file_id"]),
        "key", join_type="inner")
    same = pc.fill_null(pc.and_(pc.equal(both["partition"], both["ri_partition"]),
                                pc.equal(both["file_id"], both["ri_file_id"])), False)
    per_key = both.select(["key"]).append_column("same", same).group_by("key").aggregate([("same", "any")])
    return _array(per_key.filter(pc.invert(per_key["same_any"]))["key"]).cast(pa.string())


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as plain ones (for joins and comparisons)."""
    return pa.table({n: c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
                     for n, c in zip(table.column_names, table.columns)})


def repeated_rows(rows: pa.Table) -> tuple[int, int]:
    """``(extra, first)``: how many rows repeat an earlier row's values (of every column;
    nulls equal) and the index of one such row (``-1`` when none)."""
    if rows.num_rows < 2:
        return 0, -1
    order = pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in rows.column_names])
    ordered = rows.take(order)
    repeat = ~_differs_from_previous([_array(c) for c in ordered.columns])
    extra = int(repeat.sum())
    return extra, (int(order[int(np.argmax(repeat))].as_py()) if extra else -1)
