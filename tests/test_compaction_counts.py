"""A compaction's record counts (``services.compaction.record_changes``) against their
definition over every key (the model), on random base files, log keys and merges: rows kept,
updated, inserted, deleted, keys repeated, untouched rows dropped, nulls."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hudi_format.services.compaction import record_changes


def _model(old: pa.Array, new: pa.Array, touched: pa.Array) -> tuple[int, int, int]:
    in_old = pc.is_in(new, value_set=old)
    hit = pc.is_in(new, value_set=touched)
    return (pc.sum(pc.and_(in_old, hit)).as_py() or 0, pc.sum(pc.invert(in_old)).as_py() or 0,
            len(old) - (pc.sum(pc.is_in(old, value_set=new)).as_py() or 0))


@pytest.mark.parametrize("seed", range(80))
def test_record_counts_agree_with_their_definition(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 3, 50, 40_000])      # 40,000: the probes take membership's join
    old = [f"k{i}" for i in range(n)]
    if n and rng.random() < 0.2:
        old += rng.sample(old, min(3, n))       # a base file repeating keys
    if n and rng.random() < 0.1:
        old.append(None)
    logged = rng.sample(old, min(len(old), rng.choice([0, 1, 10, 500]))) + [f"new{i}" for i in range(rng.choice([0, 2, 30]))]
    deleted = set(rng.sample(logged, len(logged) // 4)) if logged else set()
    new = [k for k in old if k not in deleted]
    if rng.random() < 0.2 and new:          # a merge dropping untouched rows (a repeat decided)
        new = new[1:]
    new += [k for k in logged if k not in deleted and k not in old]
    rng.shuffle(new)
    updated, inserted, deleted = record_changes(pa.array(old, pa.string()), pa.array(new, pa.string()),
                                                pa.chunked_array([pa.array(logged, pa.string())], pa.string()))
    assert (updated, len(inserted), deleted) == _model(pa.array(old, pa.string()), pa.array(new, pa.string()),
                                                       pa.array(logged, pa.string()))
    olds = set(old)
    assert inserted.to_pylist() == [k for k in new if k not in olds]    # in the new rows' order
