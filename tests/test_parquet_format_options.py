"""Hudi's Parquet settings reach every base file a table operation writes: the row group size
(``hoodie.parquet.block.size``), the data page size (``hoodie.parquet.page.size``) and dictionary
encoding (``hoodie.parquet.dictionary.enabled``), for inserts (whole and streamed), COW merges
(whole and streamed), compaction and clustering. The tables stay readable by hudi-rs with the
same rows; a non-positive size is refused before anything is written."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.errors import InvalidOptionError
from hudi_format.writer import merge_handle
from writemodel import assert_both_read, latest_rows

KEY = dict(record_key="id", ordering_field="ts", partition_by="p")
SMALL = {"hoodie.parquet.block.size": str(64 * 1024), "hoodie.parquet.page.size": "4096",
         "hoodie.parquet.dictionary.enabled": "false"}
COLS = ["id", "ts", "p", "v", "city"]


def _rows(ids, ts):
    ids = list(ids)
    return pa.table({"id": [f"k{i:06d}" for i in ids], "ts": pa.array([ts] * len(ids), pa.int64()),
                     "p": ["a" if i % 2 else "b" for i in ids], "v": [float(i * ts) for i in ids],
                     "city": [f"c{i % 7}" for i in ids]})


def _expected(*batches):
    return latest_rows(*batches)


def _same_rows(path, want):
    assert_both_read(path, want, COLS)


def _base_files(path):
    table = hudi.open_table(path)
    files = [f"{path}/{s.base_file}" for s in table.file_slices() if s.base_file]
    assert files
    return files


def _check_small(path, min_files_with_groups=1):
    """Every base file has row groups of about 64 KB of Arrow rows, 4 KB pages and no
    dictionary (the city column repeats 7 values: a dictionary writer would use one)."""
    multi = 0
    for f in _base_files(path):
        md = pq.ParquetFile(f).metadata
        multi += md.num_row_groups > 1
        for g in range(md.num_row_groups):
            city = md.row_group(g).column(md.schema.names.index("city"))
            assert not city.has_dictionary_page, f
            assert "PLAIN_DICTIONARY" not in city.encodings and "RLE_DICTIONARY" not in city.encodings
            # pages of ~4 KB: many data pages in a column chunk of this size
            assert md.row_group(g).num_rows <= 64 * 1024 // 8, f
    assert multi >= min_files_with_groups


def _check_default(path):
    for f in _base_files(path):
        md = pq.ParquetFile(f).metadata
        assert md.num_row_groups == 1, f
        city = md.row_group(0).column(md.schema.names.index("city"))
        assert city.has_dictionary_page, f


def test_defaults_write_one_dictionary_encoded_row_group(tmp_path):
    path = str(tmp_path / "t")
    first = _rows(range(5000), 1)
    hudi.write(path, first, operation="insert", **KEY)
    _check_default(path)


@pytest.mark.parametrize("streamed", [False, True])
def test_insert_and_cow_merge_honour_the_parquet_options(tmp_path, monkeypatch, streamed):
    if streamed:   # the merge of a big old file, batch by batch
        monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 100)
        monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 700)
    path = str(tmp_path / "t")
    first = _rows(range(6000), 1)
    hudi.write(path, first, operation="insert", options=SMALL, **KEY)
    _check_small(path, 2)
    upsert = _rows(list(range(0, 6000, 11)) + list(range(6000, 6100)), 2)
    hudi.write(path, upsert, operation="upsert", options=SMALL, **KEY)
    _check_small(path, 2)
    _same_rows(path, _expected(first, upsert))


def test_streamed_insert_honours_the_parquet_options(tmp_path):
    path = str(tmp_path / "t")
    first = _rows(range(6000), 1)
    reader = pa.RecordBatchReader.from_batches(first.schema, first.to_batches(max_chunksize=1000))
    hudi.write(path, reader, operation="insert", options=SMALL, **KEY)
    _check_small(path, 2)
    _same_rows(path, _expected(first))


def test_compaction_and_clustering_honour_the_parquet_options(tmp_path):
    path = str(tmp_path / "t")
    first = _rows(range(6000), 1)
    hudi.write(path, first, operation="insert", table_type="MERGE_ON_READ", **KEY)
    _check_default(path)
    upsert = _rows(range(0, 6000, 5), 2)
    hudi.write(path, upsert, operation="upsert", table_type="MERGE_ON_READ", **KEY)
    assert hudi.open_table(path).compact(options=SMALL) is not None
    _check_small(path, 2)
    _same_rows(path, _expected(first, upsert))
    assert hudi.open_table(path).cluster(options={**SMALL, "hoodie.clustering.plan.strategy.small.file.limit":
                                                  str(1 << 30)}) is not None
    _check_small(path, 2)
    _same_rows(path, _expected(first, upsert))


@pytest.mark.parametrize("key", ["hoodie.parquet.block.size", "hoodie.parquet.page.size"])
def test_a_non_positive_size_is_refused_before_writing(tmp_path, key):
    path = str(tmp_path / "t")
    hudi.write(path, _rows(range(100), 1), operation="insert", **KEY)
    before = sorted(os.listdir(f"{path}/.hoodie"))
    with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
        hudi.write(path, _rows(range(50), 2), operation="upsert", options={key: "0"}, **KEY)
    assert sorted(os.listdir(f"{path}/.hoodie")) == before
    _same_rows(path, _expected(_rows(range(100), 1)))
