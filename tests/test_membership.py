"""``membership.is_in`` answers what ``pyarrow.compute.is_in`` answers, whichever way it takes.

Above ``JOIN_FROM`` probed values it is a hash join (left semi, row numbers scattered into a
mask); below it, or with nulls, dictionary or nested values, it is ``is_in`` itself. Random
cases over the key types the write and read paths probe (string, large string, binary,
integers), chunked or not, value sets with repeats, nulls, empty sets and sets of another
string type than the values."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hudi_format import membership
from hudi_format.membership import is_in

TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.int64(), pa.int32()]


def _values(rng: random.Random, typ: pa.DataType, n: int, nulls: bool) -> pa.Array:
    ints = [rng.randrange(0, 3 * n + 10) for _ in range(n)]
    vals = [None if nulls and rng.random() < 0.05 else i for i in ints]
    if pa.types.is_integer(typ):
        return pa.array(vals, typ)
    return pa.array([None if v is None else f"key-{v}\x00{v % 7}" for v in vals], pa.string()).cast(typ)


def _same(got, want) -> None:
    assert isinstance(got, pa.ChunkedArray) == isinstance(want, pa.ChunkedArray)
    flat = lambda a: a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a  # noqa: E731
    assert flat(got).to_pylist() == flat(want).to_pylist()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("join_from", [0, 10**9])
def test_is_in_equals_arrows_is_in(seed, join_from, monkeypatch):
    monkeypatch.setattr(membership, "JOIN_FROM", join_from)
    rng = random.Random(seed)
    typ = TYPES[seed % len(TYPES)]
    n = rng.choice([0, 1, 50, 5000, 40000])
    values = _values(rng, typ, n, nulls=seed % 4 == 3)
    wanted = _values(rng, typ, rng.choice([0, 1, 30, 2000]), nulls=seed % 6 == 5)
    if len(wanted) > 3:   # repeats in the set
        wanted = pa.concat_arrays([wanted, wanted.slice(0, 3)])
    if seed % 3 == 0 and n > 1:
        values = pa.chunked_array([values.slice(0, n // 3), values.slice(n // 3)])
    _same(is_in(values, wanted), pc.is_in(values, value_set=wanted))


def test_a_set_of_another_string_type_is_cast(monkeypatch):
    monkeypatch.setattr(membership, "JOIN_FROM", 0)
    values = pa.array([f"k{i}" for i in range(1000)])
    wanted = pa.array(["k5", "k999", "nope"], pa.large_string())
    got = is_in(values, wanted)
    assert np.flatnonzero(got.to_numpy(zero_copy_only=False)).tolist() == [5, 999]


def test_the_join_is_taken_above_the_threshold(monkeypatch):
    """Guards the test above against a helper that always falls back to ``pc.is_in``."""
    calls = []
    real = membership._by_join

    def spy(values, wanted):
        calls.append(len(values))
        return real(values, wanted)
    monkeypatch.setattr(membership, "_by_join", spy)
    values = pa.array([f"k{i}" for i in range(membership.JOIN_FROM)])
    assert pc.sum(is_in(values, pa.array(["k1", "k2"]))).as_py() == 2
    assert calls == [membership.JOIN_FROM]
    calls.clear()
    assert pc.sum(is_in(values.slice(1), pa.array(["k1", "k2"]))).as_py() == 2   # one below: is_in
    assert calls == []


@pytest.mark.parametrize("kind", ["arrow", "chunked", "numpy"])
def test_rows_in_is_is_in_of_row_numbers(kind):
    rng = np.random.default_rng(7)
    rows = rng.choice(1000, 300)            # repeats included
    given = {"arrow": pa.array(rows), "chunked": pa.chunked_array([rows[:100], rows[100:]]), "numpy": rows}[kind]
    want = pc.is_in(pa.array(np.arange(1000)), value_set=pa.array(rows))
    assert membership.rows_in(1000, given).to_pylist() == want.to_pylist()
    assert membership.rows_in(5, pa.array([], pa.int64())).to_pylist() == [False] * 5
