"""``read.merge._touched``: which base rows a later piece writes, and whether the others repeat
a key, against a plain Python model on random keys (nulls, repeats, empty pieces such as a
delete block without keys), and a merge through an empty delete block."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hudi_format.read import merge as M


@pytest.mark.parametrize("seed", range(60))
def test_touched_agrees_with_the_model(seed):
    rng = random.Random(seed)
    nb = rng.choice([0, 1, 2, 5, 50, 40_000])      # 40,000: the probe takes membership's join
    base = [f"k{i}" for i in range(nb)] if rng.random() < 0.5 else \
        [f"k{rng.randrange(nb * 2 + 1)}" for _ in range(nb)]
    for _ in range(rng.choice([0, 0, 1, 2])):
        if base:
            base[rng.randrange(len(base))] = None
    later = [[f"k{rng.randrange(nb * 2 + 2)}" for _ in range(rng.choice([0, 1, 10, 300]))]
             + ([None] if rng.random() < 0.1 else []) for _ in range(rng.choice([1, 2, 3]))]
    touched, unique = M._touched([pa.array(k, pa.string()) for k in later], pa.chunked_array([pa.array(base, pa.string())]))
    written = {k for keys in later for k in keys}
    want = [k in written for k in base]
    rest = [k for k in base if k not in written]
    assert touched.to_pylist() == want
    assert unique == (len(rest) == len(set(rest)))


def test_an_empty_delete_block_merges_as_no_block():
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    spec = M.MergeSpec(record_key_fields=("id",), ordering_fields=("ts",), event_time=True, has_meta_fields=False)
    base = pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "v": ["a1", "b1", "c1"]}, schema=schema)
    update = pa.table({"id": ["b"], "ts": [2], "v": ["b2"]}, schema=schema)
    no_keys = pa.table({"record_key": pa.array([], pa.string()), "partition_path": pa.array([], pa.string()),
                        "ordering_value": pa.array([], pa.int64())})
    merged = M.merge_pieces([base, None, update], [(1, no_keys)], schema, spec)
    assert sorted(merged.to_pylist(), key=lambda r: r["id"]) == [
        {"id": "a", "ts": 1, "v": "a1"}, {"id": "b", "ts": 2, "v": "b2"}, {"id": "c", "ts": 1, "v": "c1"}]
