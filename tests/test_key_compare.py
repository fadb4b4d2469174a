"""``validate``'s sort-based key comparisons against the hash joins they replace (the model),
on random snapshots and indexes with every kind of disagreement: missing, stale and misplaced
keys, keys repeated by the snapshot (Hudi's inserts) or by the index, nulls."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hudi_format.cli.key_compare import record_index_mismatch

GROUPS = [("a", "f1"), ("a", "f2"), ("b", "f3"), ("", "f4")]


def _model(snap: pa.Table, index: pa.Table):
    """The join-based check ``validate`` used before (is_in, join, group_by)."""
    snap = snap.filter(pc.is_valid(snap["key"]))
    index = index.filter(pc.is_valid(index["key"]))
    lacks = snap.filter(pc.invert(pc.is_in(snap["key"], index["key"])))
    stale = index.filter(pc.invert(pc.is_in(index["key"], snap["key"])))
    both = snap.join(index.rename_columns(["key", "ri_partition", "ri_file_id"]), "key", join_type="inner")
    same = pc.fill_null(pc.and_(pc.equal(both["partition"], both["ri_partition"]),
                                pc.equal(both["file_id"], both["ri_file_id"])), False)
    per_key = both.select(["key"]).append_column("same", same).group_by("key").aggregate([("same", "any")])
    wrong = sorted(per_key.filter(pc.invert(per_key["same_any"]))["key"].to_pylist())
    return lacks.to_pylist(), stale.to_pylist(), wrong


def _plain(t: pa.Table) -> pa.Table:
    return pa.table({n: c.cast(pa.string()) for n, c in zip(t.column_names, t.columns)})


def _table(rows: list[tuple]) -> pa.Table:
    return pa.table({c: pa.array([r[i] for r in rows], pa.string())
                     for i, c in enumerate(("key", "partition", "file_id"))})


def _as_dictionaries(t: pa.Table) -> pa.Table:
    """``t`` with its locations as dictionaries, one per row (as validate gives them per slice)."""
    cols = {"key": t["key"]}
    for c in ("partition", "file_id"):   # one chunk per row, each its own dictionary
        cols[c] = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array(np.zeros(1, np.int32)), pa.array([v], pa.string()))
                                    for v in t[c].to_pylist()], pa.dictionary(pa.int32(), pa.string()))
    return pa.table(cols)


@pytest.mark.parametrize("seed", range(60))
def test_record_index_mismatch_agrees_with_the_join(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 5, 40, 300])
    keys = [f"k{i:04d}" for i in range(n)]
    snap, index = [], []
    for k in keys:
        where = rng.choice(GROUPS)
        fate = rng.random()
        if fate < 0.7:
            snap.append((k, *where))
            index.append((k, *where))
        elif fate < 0.78:
            snap.append((k, *where))                       # the index lacks it
        elif fate < 0.86:
            index.append((k, *where))                      # stale
        elif fate < 0.92:
            snap.append((k, *where))
            index.append((k, *rng.choice(GROUPS)))          # maybe misplaced
        else:                                               # held twice by one side or both
            other = rng.choice(GROUPS)
            snap += [(k, *where), (k, *other)] if rng.random() < 0.7 else [(k, *where)]
            index += [(k, *rng.choice(GROUPS)) for _ in range(rng.choice([1, 2]))]
    if rng.random() < 0.2:
        snap.append((None, "a", "f1"))
    rng.shuffle(snap)
    rng.shuffle(index)
    s, i = _table(snap), _table(index)
    got = record_index_mismatch(_as_dictionaries(s) if seed % 2 else s, i)
    lacks, stale, wrong = _model(s, i)
    assert _plain(got.lacks).to_pylist() == lacks       # both in snapshot order
    assert got.stale.to_pylist() == stale       # both in index order
    assert got.wrong.to_pylist() == wrong


def test_record_index_mismatch_finds_each_kind():
    snap = _table([("x", "a", "f1"), ("y", "a", "f1"), ("z", "b", "f3"), ("d", "a", "f1"), ("d", "a", "f2")])
    index = _table([("y", "a", "f2"), ("z", "b", "f3"), ("gone", "a", "f1"), ("d", "a", "f2")])
    got = record_index_mismatch(snap, index)
    assert got.lacks["key"].to_pylist() == ["x"]
    assert got.stale["key"].to_pylist() == ["gone"]
    assert got.wrong.to_pylist() == ["y"]        # "d" is at one of its two snapshot rows
