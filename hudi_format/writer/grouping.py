"""Rows grouped by column values (partition path, file group): the one grouping the planner,
the index and the streaming writer share. Dictionary codes and a stable sort, no hash join engine
(Acero's first group-by in a process costs more than the grouping itself)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array

__all__ = ["groups_of"]


def groups_of(table: pa.Table, by: list[str]) -> list[tuple[tuple, pa.Array]]:
    """Row numbers (column ``row``) of ``table`` grouped by the ``by`` columns, in row order;
    groups in order of first appearance (a dictionary-encoded column: in dictionary order,
    which must then hold distinct values)."""
    if table.num_rows == 0:
        return []
    code = np.zeros(table.num_rows, np.int64)
    dictionaries = []
    for c in by:
        enc = pc.dictionary_encode(one_array(table.column(c)), null_encoding="encode")
        dictionaries.append(enc.dictionary.to_pylist())
        code *= len(enc.dictionary)
        code += enc.indices.to_numpy()
    if len(by) == 1:     # the codes already number the groups in order of appearance
        gidx, values = code, list(range(len(dictionaries[0])))
    else:
        groups = pc.dictionary_encode(pa.array(code))
        gidx, values = groups.indices.to_numpy(), groups.dictionary.to_pylist()
    if len(values) <= 64:     # few groups (partitions, file groups): a mask per group beats a sort
        members = [np.flatnonzero(gidx == g) for g in range(len(values))]
    else:
        order = np.argsort(gidx, kind="stable")
        members = np.split(order, np.cumsum(np.bincount(gidx))[:-1])
    row = one_array(table.column("row"))
    out = []
    for value, idx in zip(values, members):
        if not len(idx):     # a dictionary entry no row uses (rows taken from a bigger array)
            continue
        key = []
        for d in reversed(dictionaries):
            value, i = divmod(value, len(d))
            key.append(d[i])
        out.append((tuple(reversed(key)), pc.take(row, pa.array(idx))))
    return out
