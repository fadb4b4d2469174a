"""``hoodie.parquet.bloom.filter.enabled``: Hudi's switch for the record-key bloom filter in base
file footers (default on). Off, with an index that does not read it, no base file written by a
write, a streamed merge, a compaction or a clustering carries it (nor min/max keys); a bloom
index writes it anyway. A table written without it stays readable by hudi-rs, and a bloom index
used later still finds every key (a file without a filter is a candidate for every key)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.errors import InvalidOptionError
from hudi_format.writer import merge_handle
from writemodel import assert_both_read, latest_rows

KEY = dict(record_key="id", ordering_field="ts", partition_by="p")
OFF = {"hoodie.parquet.bloom.filter.enabled": "false"}
FOOTER_KEYS = ("org.apache.hudi.bloomfilter", "hoodie_min_record_key", "hoodie_max_record_key")


def _rows(ids, ts):
    ids = list(ids)
    return pa.table({"id": [f"k{i:05d}" for i in ids], "ts": pa.array([ts] * len(ids), pa.int64()),
                     "p": ["a" if i % 2 else "b" for i in ids], "v": [float(i * ts) for i in ids]})


def _footers(path):
    table = hudi.open_table(path)
    out = {}
    for s in table.file_slices():
        if s.base_file:
            meta = pq.ParquetFile(f"{path}/{s.base_file}").metadata.metadata or {}
            out[s.base_file] = {k.decode() for k in meta}
    assert out
    return out


def _expected(*batches):
    return latest_rows(*batches)


def _same_rows(path, want):
    assert_both_read(path, want, ["id", "ts", "p", "v"])


@pytest.mark.parametrize("streamed", [False, True])
def test_off_writes_no_bloom_filter_in_any_base_file(tmp_path, monkeypatch, streamed):
    if streamed:   # the merge of a big old file, batch by batch
        monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 50)
        monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 50)
    path = str(tmp_path / "t")
    first = _rows(range(400), 1)
    hudi.write(path, first, operation="insert", options=OFF, **KEY)
    upsert = _rows(list(range(0, 400, 7)) + list(range(400, 420)), 2)
    hudi.write(path, upsert, operation="upsert", options=OFF, **KEY)
    for name, keys in _footers(path).items():
        assert not keys & set(FOOTER_KEYS), name
        assert "parquet.avro.schema" in keys
    _same_rows(path, _expected(first, upsert))
    # clustering rewrites the files: still none
    assert hudi.open_table(path).cluster(options={**OFF, "hoodie.clustering.plan.strategy.small.file.limit":
                                                  str(1 << 30)}) is not None
    for name, keys in _footers(path).items():
        assert not keys & set(FOOTER_KEYS), name
    _same_rows(path, _expected(first, upsert))


def test_off_compaction_writes_no_bloom_filter(tmp_path):
    path = str(tmp_path / "t")
    first = _rows(range(200), 1)
    hudi.write(path, first, operation="insert", table_type="MERGE_ON_READ", options=OFF, **KEY)
    upsert = _rows(range(0, 200, 3), 2)
    hudi.write(path, upsert, operation="upsert", table_type="MERGE_ON_READ", options=OFF, **KEY)
    assert hudi.open_table(path).compact({**OFF, "hoodie.compact.inline.max.delta.commits": "1"}) is not None
    assert all(not s.log_files for s in hudi.open_table(path).file_slices())
    for name, keys in _footers(path).items():
        assert not keys & set(FOOTER_KEYS), name
    _same_rows(path, _expected(first, upsert))


@pytest.mark.parametrize("use_metadata", [False, True])
def test_a_bloom_index_writes_it_anyway_and_finds_keys_in_files_without_it(tmp_path, use_metadata):
    """``use_metadata``: the bloom index reads the metadata table's ``bloom_filters`` partition,
    which has no entry for a file without a filter, instead of the footers."""
    path = str(tmp_path / "t")
    mdt = {"hoodie.metadata.index.bloom.filter.enable": "true"} if use_metadata else {}
    first = _rows(range(300), 1)
    hudi.write(path, first, operation="insert", options={**OFF, **mdt}, **KEY)
    assert all(not keys & set(FOOTER_KEYS) for keys in _footers(path).values())
    bloom = {**OFF, **mdt, "hoodie.index.type": "BLOOM"}
    if use_metadata:
        bloom["hoodie.bloom.index.use.metadata"] = "true"
        assert "bloom_filters" in hudi.open_table(path).config.metadata_partitions
    upsert = _rows(list(range(0, 300, 5)) + list(range(300, 310)), 2)
    hudi.write(path, upsert, operation="upsert", options=bloom, **KEY)
    # every key found: updated in place, none written twice
    _same_rows(path, _expected(first, upsert))
    assert hudi.open_table(path).read(columns=["id"]).num_rows == 310
    # the merged files carry a filter over all of their keys, which the next bloom lookup uses
    assert all(set(FOOTER_KEYS) <= keys for keys in _footers(path).values())
    again = _rows(range(1, 300, 4), 3)
    hudi.write(path, again, operation="upsert", options=bloom, **KEY)
    _same_rows(path, _expected(first, upsert, again))
    assert hudi.open_table(path).read(columns=["id"]).num_rows == 310


def test_a_streamed_bulk_insert_honours_it_and_the_option_is_validated(tmp_path):
    path = str(tmp_path / "t")
    data = _rows(range(500), 1)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=64))
    hudi.write(path, reader, operation="bulk_insert", options=OFF, **KEY)
    assert all(not keys & set(FOOTER_KEYS) for keys in _footers(path).values())
    _same_rows(path, _expected(data))
    with pytest.raises(InvalidOptionError, match="hoodie.parquet.bloom.filter.enabled"):
        hudi.write(path, _rows(range(3), 2), operation="upsert",
                   options={"hoodie.parquet.bloom.filter.enabled": "sometimes"}, **KEY)
    _same_rows(path, _expected(data))
