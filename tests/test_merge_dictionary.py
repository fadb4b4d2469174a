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
from hudi_format.base_file import BaseFileWriter
from hudi_format.writer import merge_handle
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


@pytest.mark.parametrize("evolve, batch_rows", [(False, None), (True, None), (False, 512), (True, 700)])
def test_merge_keeps_dictionary_columns_and_rows(tmp_path, monkeypatch, evolve, batch_rows):
    """``batch_rows``: the old file is merged that many rows at a time (updates fall on batch
    boundaries and in batches of their own); by default it fits one batch and is merged whole."""
    if batch_rows:
        monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", batch_rows)
        monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", batch_rows)
    path = str(tmp_path / "t")
    written = []   # what the streamed merge hands the new file's writer
    real_write = BaseFileWriter.write

    def spy(self, data, *args, **kwargs):
        written.append(data.schema)
        return real_write(self, data, *args, **kwargs)
    monkeypatch.setattr(BaseFileWriter, "write", spy)
    n = 3000
    first = _rows(range(n), 1, [("red", "green", "blue")[i % 3] for i in range(n)])
    hudi.write(path, first, operation="insert", **KEY)
    (old_file,) = _latest_base_files(path)
    assert "color" in dictionary_columns(pq.ParquetFile(old_file), ["color"])

    upd_ids = list(range(0, n, 7)) + list(range(n, n + 50))   # updates and inserts
    colors = [("violet", None, "red", "ochre")[i % 4] for i in range(len(upd_ids))]
    extra = list(range(len(upd_ids))) if evolve else None
    upsert = _rows(upd_ids, 2, colors, extra=extra)
    written.clear()
    hudi.write(path, upsert, operation="upsert", **KEY)
    # the merge's pieces: old rows with updates in place, batch by batch, then inserts (an old
    # file of one batch is merged whole)
    merged = written
    assert len(merged) == (-(-n // batch_rows) + 1 if batch_rows else 1) and all(pa.types.is_dictionary(s.field("color").type) for s in merged)
    assert all(s.field("id").type == pa.string() for s in merged)   # keys decoded

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


def test_streamed_merge_writes_row_groups_within_its_buffer(tmp_path, monkeypatch):
    """A streamed merge holds at most ``_MERGE_BUFFER_BYTES`` of rows before writing them as a
    row group (not a Hudi-sized one per merge running in parallel); the file it writes holds
    the same rows for us and for hudi-rs, and its key range and bloom filter cover every key."""
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 1000)
    monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 400)
    monkeypatch.setattr(merge_handle, "_MERGE_BUFFER_BYTES", 24_000)
    path = str(tmp_path / "t")
    n = 3000
    first = _rows(range(n), 1, [("red", "green")[i % 2] for i in range(n)])
    hudi.write(path, first, operation="insert", **KEY)
    (old_file,) = _latest_base_files(path)
    assert pq.ParquetFile(old_file).metadata.num_row_groups == 1
    upsert = _rows(list(range(1, n, 5)) + list(range(n, n + 30)), 2, ["blue"] * (len(range(1, n, 5)) + 30))
    hudi.write(path, upsert, operation="upsert", **KEY)

    (new_file,) = _latest_base_files(path)
    meta = pq.ParquetFile(new_file).metadata
    assert meta.num_rows == n + 30 and meta.num_row_groups > 3
    assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) < n
    expected = {r["id"]: r for r in first.to_pylist()}
    expected.update({r["id"]: r for r in upsert.to_pylist()})
    want = canonical_rows(pa.Table.from_pylist(list(expected.values())))
    cols = ["id", "ts", "city", "color"]
    assert canonical_rows(hudi.open_table(path).read(columns=cols)) == want
    assert canonical_rows(hudi_rs_read(path).select(cols)) == want
    footer = hudi.open_table(path)
    probe = pa.array([f"k{i:05d}" for i in (0, 1, n - 1, n + 29)])
    found = footer.lookup(probe)
    assert sorted(found.column("id").to_pylist()) == sorted(probe.to_pylist())


def test_failed_streamed_merge_leaves_the_table_as_it_was(tmp_path, monkeypatch):
    """A streamed merge that fails after writing row groups of its new file removes that file
    and the instant: both readers see the last commit, and the next upsert commits."""
    import os
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 100)
    monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 100)
    monkeypatch.setattr(merge_handle, "_MERGE_BUFFER_BYTES", 1)
    path = str(tmp_path / "t")
    first = _rows(range(1000), 1, ["red"] * 1000)
    hudi.write(path, first, operation="insert", **KEY)
    before = canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "color"]))
    files_before = sorted(os.listdir(f"{path}/a"))
    real, calls = merge_handle._write_merged, []

    def failing(*args, **kwargs):
        real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
    monkeypatch.setattr(merge_handle, "_write_merged", failing)
    with pytest.raises(Exception, match="disk full"):
        hudi.write(path, _rows(range(0, 1000, 3), 2, ["blue"] * 334), operation="upsert", **KEY)
    assert len(calls) == 3
    assert canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "color"])) == before
    assert canonical_rows(hudi_rs_read(path).select(["id", "ts", "city", "color"])) == before
    assert sorted(f for f in os.listdir(f"{path}/a") if f.endswith(".parquet")) == \
        [f for f in files_before if f.endswith(".parquet")]

    monkeypatch.setattr(merge_handle, "_write_merged", real)
    again = _rows(range(0, 1000, 3), 3, ["green"] * 334)
    hudi.write(path, again, operation="upsert", **KEY)
    expected = {r["id"]: r for r in first.to_pylist()}
    expected.update({r["id"]: r for r in again.to_pylist()})
    want = canonical_rows(pa.Table.from_pylist(list(expected.values())))
    assert canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "color"])) == want
    assert canonical_rows(hudi_rs_read(path).select(["id", "ts", "city", "color"])) == want
