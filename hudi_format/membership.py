"""Which of many values are in a few: ``pyarrow.compute.is_in``, as a hash join where faster.

The write and read paths keep asking whether each stored record key is among a few given
ones: the simple index over every key of the touched partitions, a copy-on-write merge over
its old file's keys, a point lookup over the rows of a row group. Arrow's ``is_in`` hashes
each probed value on its own into the value set's memo table (21-24 ns a string key); Acero's
hash join hashes and probes them a batch at a time. A left semi join of the 1.25M keys of a
base file against 250 or 8,000 keys took 10-11 ms of CPU where ``is_in`` took 26-30 ms
(100,000 keys: 24 against 39 ms; a million: even), so :func:`is_in` joins from
:data:`JOIN_FROM` probed values on.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["is_in", "rows_in", "JOIN_FROM"]

# probed values from which the join is used (below, its plan's fixed cost, ~0.3 ms, is
# a sizeable part of the work)
JOIN_FROM = 32_768

_JOINABLE = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
             pa.types.is_integer)


def is_in(values: pa.Array | pa.ChunkedArray, value_set: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``pc.is_in(values, value_set=value_set)``: a boolean per value, the same kind of array
    as ``values`` (chunked or not), nulls matching nulls."""
    if len(values) < JOIN_FROM or not len(value_set) or values.null_count or value_set.null_count \
            or not any(test(values.type) for test in _JOINABLE):
        return pc.is_in(values, value_set=value_set)
    wanted = value_set
    if wanted.type != values.type:
        try:
            wanted = wanted.cast(values.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return pc.is_in(values, value_set=value_set)
    out = _by_join(values, wanted)
    return pa.chunked_array([out]) if isinstance(values, pa.ChunkedArray) else out


def _by_join(values: pa.Array | pa.ChunkedArray, wanted: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The mask of ``values`` (no nulls) found in ``wanted`` (same type): a left semi join of
    the values with their row numbers, the rows it keeps scattered into the mask."""
    n = len(values)
    probe = pa.table({"k": values, "i": pa.array(np.arange(n, dtype=np.int64))})
    hit = probe.join(pa.table({"k": wanted}), "k", join_type="left semi", use_threads=False).column("i")
    return rows_in(n, hit)


def rows_in(n: int, rows: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Array:
    """Which of the row numbers ``0 .. n - 1`` are among ``rows`` (integers in that range, no
    nulls): ``is_in(row numbers, rows)`` by scattering into a mask, with no hashing."""
    mask = np.zeros(n, np.bool_)
    mask[rows if isinstance(rows, np.ndarray) else rows.to_numpy()] = True
    return pa.array(mask)
