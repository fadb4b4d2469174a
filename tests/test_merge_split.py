"""The merge's fast path (base rows of keys no log mentions passed through untouched) gives
exactly the full sort-based merge's table, rows and order, on random slices: duplicate keys in
the base and in logs, ``_hoodie_is_deleted`` flags, delete blocks with and without ordering
values, both merge modes."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hudi_format.read.merge import MergeSpec, _merge_all, merge_pieces, row_numbers

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                    ("_hoodie_is_deleted", pa.bool_())])
SPECS = [MergeSpec(("id",), ("ts",), event_time=True, has_meta_fields=True),
         MergeSpec(("id",), ("ts",), event_time=False, has_meta_fields=True)]


def _rows(rng: random.Random, n: int, keys: int, dup_ok: bool) -> pa.Table:
    ks = [f"k{rng.randrange(keys)}" for _ in range(n)] if dup_ok else [f"k{i}" for i in rng.sample(range(keys), n)]
    return pa.table({"_hoodie_record_key": ks, "ts": [rng.choice([None, 0, 1, 2, 3]) for _ in ks],
                     "v": [rng.randrange(1000) for _ in ks],
                     "_hoodie_is_deleted": [rng.random() < 0.1 or None for _ in ks]}, schema=SCHEMA)


def _deletes(rng: random.Random, n: int, keys: int) -> pa.Table:
    return pa.table({"record_key": pa.array([f"k{rng.randrange(keys)}" for _ in range(n)], pa.string()),
                     "partition_path": [""] * n,
                     "ordering_value": pa.array([rng.choice([None, 0, 2, 5]) for _ in range(n)], pa.int64())})


@pytest.mark.parametrize("seed", range(40))
def test_fast_path_equals_full_merge(seed):
    rng = random.Random(seed)
    keys = rng.choice([5, 30, 200])
    base_dups = seed % 4 == 0
    pieces: list = [_rows(rng, rng.randrange(0, min(keys, 60) + 1), keys, base_dups)]
    deletes = []
    for _ in range(rng.randrange(0, 4)):
        if rng.random() < 0.3:
            deletes.append((len(pieces), _deletes(rng, rng.randrange(0, 6), keys)))
            pieces.append(None)
        else:
            pieces.append(_rows(rng, rng.randrange(0, 20), keys, True))
    for spec in SPECS:
        fast = merge_pieces(pieces, deletes, SCHEMA, spec)
        full = _merge_all(pieces, dict(deletes), SCHEMA, spec)
        assert fast.to_pylist() == full.to_pylist()


def test_row_numbers():
    assert row_numbers(4).to_pylist() == [0, 1, 2, 3]
    assert row_numbers(3, 7).to_pylist() == [7, 8, 9]
    assert row_numbers(0).to_pylist() == []
