"""A COW merge copies the old file's dictionary-only string columns as dictionaries.

The rewritten file must hold the same rows as a plain merge would (new values the old
dictionary lacks, nulls, a column added by the upsert, a key whose string column is
dictionary-encoded), read back by us and by hudi-rs, and keep those columns
dictionary-encoded in Parquet.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.read.parquet import dictionary_columns
from hudi_format.writer import handles
from writemodel import canonical_rows, hudi_rs_read

KEY = dict(record_key="id", ordering_field="ts", partition_by="city")


def _rows(ids, ts, color, city="a", extra=None):
    cols = {"id": pa.array([f"k{i:05d}" for i in ids]), "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([city] * len(ids)), "color": pa.array(color, pa.string())}
    if extra is not None:
        cols["size"] = pa.array(extra, pa.int32())
    return pa.table(cols)


def _latest_base_files(path):
    table = hudi.open_table(path)
    return [f"{path}/{s.base_file}" for s in table.file_slices() if s.base_file]


@pytest.mark.parametrize("evolve", [False, True])
def test_merge_keeps_dictionary_columns_and_rows(tmp_path, monkeypatch, evolve):
    path = str(tmp_path / "t")
    read = []

    def spy(ctx, fs):
        read.append(handles_read_old(ctx, fs))
        return read[-1]
    handles_read_old = handles._read_old
    monkeypatch.setattr(handles, "_read_old", spy)
    n = 3000
    first = _rows(range(n), 1, [("red", "green", "blue")[i % 3] for i in range(n)])
    hudi.write(path, first, operation="insert", **KEY)
    (old_file,) = _latest_base_files(path)
    assert "color" in dictionary_columns(pq.ParquetFile(old_file), ["color"])

    upd_ids = list(range(0, n, 7)) + list(range(n, n + 50))   # updates and inserts
    colors = [("violet", None, "red", "ochre")[i % 4] for i in range(len(upd_ids))]
    extra = list(range(len(upd_ids))) if evolve else None
    upsert = _rows(upd_ids, 2, colors, extra=extra)
    hudi.write(path, upsert, operation="upsert", **KEY)
    (old,) = read   # the merge read the old file with its dictionary column encoded, keys decoded
    assert pa.types.is_dictionary(old.schema.field("color").type)
    assert old.schema.field("id").type == pa.string()

    expected = {r["id"]: {**r, "size": None} for r in first.to_pylist()}
    for r in upsert.to_pylist():
        expected[r["id"]] = {**r, "size": r.get("size")}
    cols = ["id", "ts", "city", "color"] + (["size"] if evolve else [])
    want = canonical_rows(pa.Table.from_pylist([{c: r[c] for c in cols} for r in expected.values()]))

    ours = hudi.open_table(path).read(columns=cols)
    assert canonical_rows(ours) == want
    theirs = hudi_rs_read(path)
    assert canonical_rows(theirs.select(cols)) == want

    (new_file,) = _latest_base_files(path)
    assert new_file != old_file
    pf = pq.ParquetFile(new_file)
    assert pf.schema_arrow.field("color").type == pa.string()   # stored as a plain string column
    assert "color" in dictionary_columns(pf, ["color"])          # whose pages are dictionary indices
