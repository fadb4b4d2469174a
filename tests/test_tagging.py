"""Tagging incoming records with the file groups that hold their keys (``writer.index.tag``).

Each record's location is found in place among the stored ones (which the index narrows to
the keys that arrive; stored keys no record brings change nothing); it must tag exactly as a
left outer join on (key, partition) - on key alone for a global index - would, and fall back to
that join when a location is stored twice.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hudi_format.writer.index import _tag_by_join, tag


def _case(seed: int, dup: bool) -> tuple[pa.Table, pa.Table]:
    rnd = random.Random(seed)
    parts = ["p1", "p2", "p3"]
    stored = [(f"k{i}", rnd.choice(parts), f"f{i % 7}") for i in range(0, 400, 2)]
    if dup:
        stored.append((stored[5][0], stored[5][1], "f-dup"))
    keys = [f"k{rnd.randrange(500)}" for _ in range(300)] + [None]
    incoming = pa.table({"key": pa.array(keys, pa.string()),
                         "partition": [rnd.choice(parts) for _ in keys],
                         "row": pa.array(range(len(keys)), pa.int64())})
    existing = pa.table({"key": [s[0] for s in stored], "partition": [s[1] for s in stored],
                         "file_id": [s[2] for s in stored]})
    return incoming, existing


@pytest.mark.parametrize("global_index", [False, True])
@pytest.mark.parametrize("dup", [False, True])
def test_tag_agrees_with_a_left_outer_join(global_index, dup):
    cols = ["key", "partition", "row", "file_id", "existing_partition"]
    for seed in range(5):
        incoming, existing = _case(seed, dup)
        got = tag(incoming, existing, global_index).select(cols)
        want = _tag_by_join(incoming, existing, global_index).select(cols)
        assert got.to_pylist() == want.to_pylist()
        tagged = got.filter(pa.compute.is_valid(got.column("file_id"))).num_rows
        assert 0 < tagged < incoming.num_rows
