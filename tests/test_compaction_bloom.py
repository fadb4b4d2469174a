"""The footer a compaction writes: the old base file's bloom filter goes on when no record left
the file group (copied as it is when none came, the new keys added after the old ones when some
did), and is built afresh otherwise; in every case it holds each key of the new file, its bytes
are those of a filter filled with the old file's keys in file order and then the new ones (the
order Hudi's merge handle adds them in), and its min/max keys are the file's. Read back by hudi-rs."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.base_file import BLOOM_FILTER_KEY, MAX_RECORD_KEY, MIN_RECORD_KEY, bloom_filter_from_options
from hudi_format.bloom import BloomFilter
from writemodel import hudi_rs_read, make_rows

# small bloom filters (dynamic: several rows once full) so the order keys come in matters
OPTS = {"hoodie.index.bloom.num_entries": "40", "hoodie.bloom.index.filter.dynamic.max.entries": "400",
        "hoodie.parquet.small.file.limit": str(100 << 20)}


def _write(path, rows, op="upsert"):
    return hudi.write(str(path), rows, operation=op, record_key="id", ordering_field="ts", partition_by="p",
                      table_type="MERGE_ON_READ", options=OPTS)


def _footers(path) -> dict[str, tuple[dict, list[str]]]:
    """file id -> (footer key-value metadata, the file's record keys in file order)."""
    out = {}
    for s in hudi.open_table(str(path)).file_slices():
        f = pq.ParquetFile(f"{path}/{s.base_file}")
        meta = {k.decode(): v.decode() for k, v in f.metadata.metadata.items()}
        out[s.file_id] = (meta, f.read(columns=["_hoodie_record_key"]).column(0).to_pylist())
    return out


@pytest.mark.parametrize("change", ["updates", "inserts", "deletes"])
def test_compaction_continues_the_old_bloom_filter(tmp_path, change):
    path = tmp_path / "t"
    _write(path, make_rows(range(300), 1), op="insert")      # 100 keys a file: 3 rows of 40
    before = _footers(path)
    if change == "updates":
        _write(path, make_rows(range(0, 300, 2), 2))      # half of each file's keys
    elif change == "inserts":        # into the small file groups' logs
        _write(path, make_rows(list(range(0, 300, 7)) + list(range(500, 530)), 2))
    else:
        hudi.write(str(path), make_rows(range(0, 300, 5), 2).select(["id", "ts", "p"]), operation="delete")
    assert any(s.log_files for s in hudi.open_table(str(path)).file_slices())
    expected = hudi.open_table(str(path)).read()
    assert hudi.open_table(str(path)).compact(OPTS) is not None
    after = _footers(path)
    for fid, (meta, keys) in after.items():
        old_meta, old_keys = before[fid]
        bloom = BloomFilter.deserialize(meta[BLOOM_FILTER_KEY], meta.get("hoodie_bloom_filter_type_code"))
        assert all(bloom.might_contain(k) for k in keys)
        assert (meta[MIN_RECORD_KEY], meta[MAX_RECORD_KEY]) == (min(keys), max(keys))
        # what Hudi's merge handle fills: the old file's keys as they were, then the new ones
        survivors = [k for k in old_keys if k in set(keys)]
        order = survivors + [k for k in keys if k not in set(old_keys)]
        fresh = bloom_filter_from_options(OPTS)
        fresh.add_all(pa.array(order, pa.string()))
        if change == "deletes" and len(survivors) < len(old_keys):
            continue      # rebuilt over the new file's rows (their order here is the merge's)
        assert meta[BLOOM_FILTER_KEY] == fresh.serialize(), fid
        if change == "updates":
            assert meta[BLOOM_FILTER_KEY] == old_meta[BLOOM_FILTER_KEY]     # copied as it was
    got = hudi.open_table(str(path)).read()
    assert sorted(got.column("id").to_pylist()) == sorted(expected.column("id").to_pylist())
    assert sorted(hudi_rs_read(str(path)).column("id").to_pylist()) == sorted(expected.column("id").to_pylist())


def test_bloom_index_finds_every_key_after_compaction(tmp_path):
    """An upsert tagged by the bloom index after the compaction updates, never duplicates."""
    path = tmp_path / "t"
    _write(path, make_rows(range(300), 1), op="insert")
    _write(path, make_rows(list(range(0, 300, 4)) + list(range(600, 620)), 2))
    hudi.open_table(str(path)).compact(OPTS)
    hudi.write(str(path), make_rows(range(0, 310), 3), operation="upsert",
               options={**OPTS, "hoodie.index.type": "BLOOM"})
    ids = hudi.open_table(str(path)).read().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 330
