"""The write stats a copy-on-write merge records: updates, inserts and deletes per file group.

Hudi's merge handle counts a record as an update when it replaces a stored record of the file,
as an insert when its key is new to the file, and a delete when a stored key is gone; a
record that loses to the stored one (event-time ordering) is neither.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline

OPTS = dict(record_key="id", ordering_field="ts", partition_by="part")


def _rows(ids: list[str], ts: int, part: str = "p1") -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array([ts] * len(ids), pa.int64()),
                     "part": [part] * len(ids), "v": [f"{i}-{ts}" for i in ids]})


def _last_stats(path: str) -> dict[str, tuple[int, int, int, int]]:
    storage = Storage(path)
    tl = Timeline.load(storage, TableConfig.load(storage))
    md = tl.metadata(tl.write_instants()[-1])
    return {p: tuple(sum(getattr(s, f) or 0 for s in stats)
                     for f in ("num_writes", "num_update_writes", "num_inserts", "num_deletes"))
            for p, stats in md.partition_to_write_stats.items()}


def test_cow_merge_counts_updates_inserts_and_deletes(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, _rows([f"k{i:03d}" for i in range(100)], 1), operation="insert", **OPTS)
    # 10 updates, 5 new keys, and an older version of k050 that loses to the stored one
    upd = pa.concat_tables([_rows([f"k{i:03d}" for i in range(10)], 2), _rows([f"n{i}" for i in range(5)], 2),
                            _rows(["k050"], 0)])
    hudi.write(path, upd, operation="upsert")
    assert _last_stats(path) == {"p1": (105, 10, 5, 0)}
    hudi.write(path, _rows(["k020", "k021", "k022", "missing"], 3), operation="delete")
    assert _last_stats(path) == {"p1": (102, 0, 0, 3)}
    rows = hudi.open_table(path).read()
    assert rows.num_rows == 102
    assert sorted(rows.filter(pa.compute.equal(rows.column("id"), "k050")).column("v").to_pylist()) == ["k050-1"]


def _file_bloom(path: str):
    from hudi_format.base_file import read_footer
    table = hudi.open_table(path)
    (s,) = table.file_slices()
    return read_footer(table.storage, s.base_file), pq_keys(path, s.base_file)


def pq_keys(path: str, base_file: str) -> list[str]:
    import pyarrow.parquet as pq
    return pq.read_table(f"{path}/{base_file}", columns=["_hoodie_record_key"]).column(0).to_pylist()


def test_cow_merge_bloom_filter_is_hudis(tmp_path):
    """A merge keeping every old key continues the old file's filter with the inserted keys:
    the filter Hudi's merge handle builds (old keys in file order, updates in place, then the
    inserts); a merge that drops keys builds it anew from the file's keys."""
    from hudi_format.bloom import new_bloom_filter
    bloom = {"hoodie.index.bloom.num_entries": "300", "hoodie.bloom.index.filter.dynamic.max.entries": "1000"}
    path = str(tmp_path / "t")
    hudi.write(path, _rows([f"k{i:04d}" for i in range(1000)], 1), operation="insert", options=bloom, **OPTS)
    _, old_keys = _file_bloom(path)
    hudi.write(path, pa.concat_tables([_rows([f"k{i:04d}" for i in range(0, 1000, 100)], 2),
                                       _rows([f"n{i}" for i in range(5)], 2)]), operation="upsert", options=bloom)
    footer, keys = _file_bloom(path)
    assert keys == old_keys + [f"n{i}" for i in range(5)]     # Hudi's order: updates in place
    expected = new_bloom_filter(300, 1e-9, "DYNAMIC_V0", 1000)
    expected.add_all(old_keys + [f"n{i}" for i in range(5)])
    assert footer.bloom_filter.serialize() == expected.serialize()
    assert footer.bloom_filter.num_rows == 4 and pa.compute.all(footer.bloom_filter.might_contain_all(keys)).as_py()
    hudi.write(path, _rows(["k0001", "n3"], 3), operation="delete", options=bloom)
    footer, keys = _file_bloom(path)
    rebuilt = new_bloom_filter(300, 1e-9, "DYNAMIC_V0", 1000)
    rebuilt.add_all(keys)
    assert len(keys) == 1003 and footer.bloom_filter.serialize() == rebuilt.serialize()


@pytest.mark.parametrize("rows,filter_type", [(1000, "DYNAMIC_V0"), (1000, "SIMPLE"), (140_000, "DYNAMIC_V0")])
def test_cow_merge_adding_no_key_writes_the_old_footer_again(tmp_path, monkeypatch, rows, filter_type):
    """A merge that only updates keeps every key and adds none: the old footer's bloom filter
    and min/max keys are written again as they are (not decoded and encoded), and are what
    Hudi's merge handle builds from the file's keys. Over 131,072 rows the merge is streamed.
    Once the bloom options change, the next merge builds the filter of the new options."""
    import hudi_format.base_file as base_file
    from hudi_format.bloom import new_bloom_filter
    kept = []
    monkeypatch.setattr(base_file.KeptIndex, "footer", lambda self, f=base_file.KeptIndex.footer: kept.append(1) or f(self))
    bloom = {"hoodie.index.bloom.num_entries": "300", "hoodie.bloom.index.filter.dynamic.max.entries": "1000",
             "hoodie.bloom.index.filter.type": filter_type,
             "hoodie.copyonwrite.record.size.estimate": "64"}   # one file group
    path = str(tmp_path / "t")
    ids = pa.compute.binary_join_element_wise("k", pa.compute.cast(pa.array(range(rows)), pa.string()), "")
    hudi.write(path, _rows(ids.to_pylist(), 1), operation="insert", options=bloom, **OPTS)
    old, old_keys = _file_bloom(path)
    hudi.write(path, _rows([f"k{i}" for i in range(0, rows, 97)], 2), operation="upsert", options=bloom)
    footer, keys = _file_bloom(path)
    assert kept and keys == old_keys
    assert footer.bloom_text == old.bloom_text and footer.bloom_type_code == old.bloom_type_code
    assert (footer.min_key, footer.max_key) == (old.min_key, old.max_key) == (min(keys), max(keys))
    expected = new_bloom_filter(300, 1e-9, filter_type, 1000)
    expected.add_all(keys)
    assert footer.bloom_text == expected.serialize()
    kept.clear()
    other = dict(bloom, **{"hoodie.index.bloom.num_entries": "400"})
    hudi.write(path, _rows(["k3"], 3), operation="upsert", options=other)
    footer, keys = _file_bloom(path)
    expected = new_bloom_filter(400, 1e-9, filter_type, 1000)
    expected.add_all(keys)
    assert not kept and footer.bloom_text == expected.serialize()


def test_cow_merge_keeps_repeated_keys_it_does_not_update(tmp_path):
    """An insert may store a key twice (no pre-combining); a later upsert of other keys copies
    those rows as stored, as Hudi's merge handle does; an upsert naming the repeated key leaves
    one row for it."""
    from tests.support.writemodel import hudi_rs_read
    path = str(tmp_path / "t")
    hudi.write(path, pa.concat_tables([_rows(["a", "b", "c"], 1), _rows(["b"], 1)]), operation="insert", **OPTS)
    hudi.write(path, _rows(["c", "d"], 2), operation="upsert")
    assert _last_stats(path) == {"p1": (5, 1, 1, 0)}
    rows = sorted(zip(*hudi.open_table(path).read(columns=["id", "v"]).to_pydict().values()))
    assert rows == [("a", "a-1"), ("b", "b-1"), ("b", "b-1"), ("c", "c-2"), ("d", "d-2")]
    theirs = hudi_rs_read(path)
    assert sorted(zip(theirs.column("id").to_pylist(), theirs.column("v").to_pylist())) == rows
    hudi.write(path, _rows(["b"], 3), operation="upsert")
    rows = sorted(zip(*hudi.open_table(path).read(columns=["id", "v"]).to_pydict().values()))
    assert rows == [("a", "a-1"), ("b", "b-3"), ("c", "c-2"), ("d", "d-2")]
