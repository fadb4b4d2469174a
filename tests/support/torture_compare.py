"""How the torture test compares rows (reads and model in one schema, their differences), apart from its runner."""

from __future__ import annotations

import os
import sys

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from canonical import canonical_rows  # noqa: E402
from writemodel import SCHEMA  # noqa: E402


#: the schema rows are compared in: the evolving sequences' new column, ``n`` widened to long
EXTRA = "extra"
COMPARED = pa.schema([pa.field("n", pa.int64()) if f.name == "n" else f for f in SCHEMA] + [(EXTRA, pa.string())])


def data_rows(table: pa.Table) -> list[dict]:
    """A read's canonical rows in ``COMPARED`` (``extra`` null where the read has no such column)."""
    if table.num_rows == 0:
        return []   # a table whose commits were all rolled back may not know its columns
    if EXTRA not in table.column_names:
        table = table.append_column(EXTRA, pa.nulls(table.num_rows, pa.string()))
    return canonical_rows(table.select(COMPARED.names))


def model_rows(rows: dict) -> list[dict]:
    return canonical_rows(pa.Table.from_pylist(list(rows.values()), schema=COMPARED))


def _diff(got: list[dict], want: list[dict]) -> str:
    g = {r["id"]: r for r in got}
    w = {r["id"]: r for r in want}
    missing = sorted(set(w) - set(g))
    extra = sorted(set(g) - set(w))
    dup = len(got) - len(g)
    changed = sorted(k for k in set(g) & set(w) if g[k] != w[k])
    detail = ""
    if changed:
        k = changed[0]
        detail = f"; e.g. {k}: got ts={g[k].get('ts')} want ts={w[k].get('ts')}"
    return (f"{len(got)} rows vs {len(want)}: missing {len(missing)} {missing[:4]}, extra {len(extra)} "
            f"{extra[:4]}, duplicates {dup}, changed {len(changed)} {changed[:4]}{detail}")
