"""``Table.lookup(keys)``: records by key through the record index (or bloom filters), opening
only the file groups that hold them."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import FIXTURE_TABLES, expected, has_metadata_table
from hudi_format.metadata import record_index
from hudi_format.storage import Storage
from hudi_format.view.file_names import parse_base_file_name, parse_log_file_name
from test_metadata_reader import _add_bloom_partition

META = [n for n in FIXTURE_TABLES if n.endswith("_meta")]
# fixtures without a metadata table: lookups fall back to the base files' footer blooms
PLAIN = [n for n in FIXTURE_TABLES if n.startswith("sample_table__") and "_v9_txns_" in n
         and n.endswith("_nometa")]


def _opened(monkeypatch, root) -> list[str]:
    """Data files (not under .hoodie) read through the table's storage."""
    seen: list[str] = []
    root = str(root)
    for method in ("open", "open_input", "read_bytes", "read_range"):   # open_input: base files
        real = getattr(Storage, method)

        def spy(self, rel, *args, _real=real, **kwargs):
            if self.full(rel).startswith(root) and not rel.startswith(".hoodie") \
                    and "/.hoodie/" not in self.full(rel):
                seen.append(os.path.basename(rel))
            return _real(self, rel, *args, **kwargs)
        monkeypatch.setattr(Storage, method, spy)
    return seen


def _file_id(file_name: str) -> str:
    return (parse_base_file_name(file_name) or parse_log_file_name(file_name)).file_id


def _slice_files(table, file_ids) -> set[str]:
    return {os.path.basename(f) for s in table.file_slices() if s.file_id in file_ids
            for f in ([s.base_file] if s.base_file else []) + list(s.log_files)}


def _pick(rows, n):
    """Keys from different file groups where possible."""
    by_group = {}
    for r in sorted(rows, key=lambda r: r["_hoodie_record_key"]):
        by_group.setdefault(_file_id(r["_hoodie_file_name"]), r)
    picked = list(by_group.values())[:n]
    return picked


@pytest.mark.parametrize("name", META)
def test_lookup_via_record_index(fixture_tables, name, monkeypatch):
    path = fixture_tables(name)
    rows = expected(name)["snapshot"]
    table = hudi.open_table(path)
    table.file_slices()  # list once, outside the counted part
    picked = _pick(rows, 2)
    keys = [r["_hoodie_record_key"] for r in picked] + ["NO-SUCH-KEY", picked[0]["_hoodie_record_key"]]
    groups = {_file_id(r["_hoodie_file_name"]) for r in picked}
    opened = _opened(monkeypatch, path)
    got = table.lookup(keys)
    assert canonical_rows(got) == sort_expected(picked)
    assert got.schema == table.schema()
    assert set(opened) and set(opened) <= _slice_files(table, groups)
    # the other file groups were never opened
    others = {_file_id(r["_hoodie_file_name"]) for r in rows} - groups
    assert not set(opened) & _slice_files(table, others)


@pytest.mark.parametrize("threaded", [True, False])
@pytest.mark.parametrize("name", META)
def test_lookup_every_key_and_columns(fixture_tables, name, threaded, monkeypatch):
    # the record index's file groups read on threads (many keys) or one after another (few)
    monkeypatch.setattr(record_index, "THREADED_FROM", 0 if threaded else 10**9)
    rows = expected(name)["snapshot"]
    table = hudi.open_table(fixture_tables(name))
    keys = pa.array([r["_hoodie_record_key"] for r in rows])
    assert canonical_rows(table.lookup(keys)) == sort_expected(rows)
    got = table.lookup([rows[0]["_hoodie_record_key"]], columns=["txn_id", "amount"])
    assert got.column_names == ["txn_id", "amount"]
    assert canonical_rows(got) == [{"txn_id": rows[0]["txn_id"], "amount": rows[0]["amount"]}]


@pytest.mark.parametrize("name", META)
def test_lookup_missing_keys_reads_nothing(fixture_tables, name, monkeypatch):
    path = fixture_tables(name)
    table = hudi.open_table(path)
    table.file_slices()
    opened = _opened(monkeypatch, path)
    got = table.lookup(["NO-SUCH-KEY", "ALSO-MISSING"])
    assert got.num_rows == 0 and got.schema == table.schema()
    assert opened == []
    assert table.lookup([]).num_rows == 0


@pytest.mark.parametrize("name", META[:1] + [n for n in META if "mor" in n][:1])
def test_lookup_via_metadata_bloom_filters(fixture_tables, name, tmp_path, monkeypatch):
    """Without a record index, the bloom_filters partition rules out file groups."""
    path = tmp_path / "t"
    shutil.copytree(fixture_tables(name), path)
    _add_bloom_partition(path)
    props = (path / ".hoodie/hoodie.properties").read_text()
    (path / ".hoodie/hoodie.properties").write_text(props.replace("record_index,", ""))
    table = hudi.open_table(path)
    assert "record_index" not in table.config.metadata_partitions
    rows = expected(name)["snapshot"]
    (target,) = _pick(rows, 1)
    slices = table.file_slices()
    opened = _opened(monkeypatch, path)
    got = table.lookup([target["_hoodie_record_key"], "NO-SUCH-KEY"])
    assert canonical_rows(got) == sort_expected([target])
    # base-only slices whose bloom filter says no were not opened
    base_only = [s for s in slices if not s.log_files]
    skipped = [s for s in base_only if s.base_file_name not in opened]
    assert skipped, "the bloom filters should rule out some base files"
    assert all(not s.base_file_name.startswith(_file_id(target["_hoodie_file_name"])) for s in skipped)


@pytest.mark.parametrize("name", PLAIN)
def test_lookup_without_metadata_table(fixture_tables, name):
    rows = expected(name)["snapshot"]
    table = hudi.open_table(fixture_tables(name))
    assert table.metadata_table is None
    picked = _pick(rows, 3)
    got = table.lookup([r["_hoodie_record_key"] for r in picked] + ["NO-SUCH-KEY"])
    assert canonical_rows(got) == sort_expected(picked)


@pytest.mark.parametrize("name", META[:1])
def test_lookup_ignores_disabled_metadata(fixture_tables, name, monkeypatch):
    rows = expected(name)["snapshot"]
    table = hudi.open_table(fixture_tables(name), options={"hoodie.metadata.enable": False})
    picked = _pick(rows, 2)
    assert canonical_rows(table.lookup([r["_hoodie_record_key"] for r in picked])) == sort_expected(picked)


def test_lookup_reads_only_row_groups_that_may_hold_the_keys(tmp_path, monkeypatch):
    """A base file of sorted keys in several row groups: only the row groups whose key
    statistics cover a wanted key are decoded; keys of any Arrow string-like input work."""
    import pyarrow.parquet as pq
    from hudi_format import base_file
    real_init = base_file.BaseFileWriter.__init__

    def small_row_groups(self, *args, **kwargs):  # table writes keep the 120 MiB default
        real_init(self, *args, **{**kwargs, "block_size": 16 * 1024})
    monkeypatch.setattr(base_file.BaseFileWriter, "__init__", small_row_groups)
    path = str(tmp_path / "t")
    n = 20000
    data = pa.table({"id": [f"k{i:06d}" for i in range(n)], "ts": [1] * n, "v": list(range(n))})
    hudi.write(path, data, operation="bulk_insert", record_key="id", ordering_field="ts",
               options={"hoodie.metadata.record.index.enable": "true"})
    table = hudi.open_table(path)
    (s,) = table.file_slices()
    meta = pq.ParquetFile(os.path.join(path, s.base_file)).metadata
    assert meta.num_row_groups > 4
    key_col = [meta.schema.column(i).path for i in range(meta.num_columns)].index("_hoodie_record_key")
    bounds = [(meta.row_group(i).column(key_col).statistics.min, meta.row_group(i).column(key_col).statistics.max)
              for i in range(meta.num_row_groups)]
    read = []
    real = pq.ParquetFile.read_row_groups

    def spy(self, row_groups, *args, **kwargs):
        read.append(list(row_groups))
        return real(self, row_groups, *args, **kwargs)
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    keys = ["k000005", "k019990", "k000007", "nope"]
    got = table.lookup(pa.chunked_array([pa.array(keys, pa.large_string())]), columns=["id", "v"])
    assert sorted(got.column("id").to_pylist()) == ["k000005", "k000007", "k019990"]
    assert sorted(got.column("v").to_pylist()) == [5, 7, 19990]
    holding = [i for i, (lo, hi) in enumerate(bounds) if any(lo <= k <= hi for k in keys)]
    assert read == [holding] and holding[0] == 0 and len(holding) == 2
    assert table.lookup([b"k000009", None, "k000009"]).column("v").to_pylist() == [9]


@pytest.mark.parametrize("key, reads_meta_key", [
    ("id", False),     # the simple key generator's one string field is the key
    ("n", True),       # an int key's string form is Hudi's: the meta column holds it
    ("id,n", True)])   # complex keys ("id:..,n:..") only the meta column holds
def test_lookup_filters_on_the_column_holding_the_key(tmp_path, monkeypatch, key, reads_meta_key):
    """A lookup reads the record key from the key field itself when that field is the key (one
    string column fewer to decode), else from ``_hoodie_record_key``; the rows are the same,
    base-file-only slices and slices with log files alike."""
    path = str(tmp_path / "t")
    n = 400
    data = pa.table({"id": [f"k{i:04d}" for i in range(n)], "n": list(range(n)), "ts": [1] * n,
                     "p": ["a", "b"] * (n // 2), "v": [float(i) for i in range(n)]})
    opts = {"hoodie.metadata.record.index.enable": "true"}
    hudi.write(path, data, operation="insert", record_key=key, ordering_field="ts", partition_by="p",
               table_type="MERGE_ON_READ", options=opts)
    # an update of some keys: their file groups get log files, the others stay base-only
    updated = data.filter(pc.equal(data.column("p"), "a")).slice(0, 5)   # keys 0, 2, .., 8
    hudi.write(path, updated.set_column(4, "v", pa.array([-1.0] * 5)), operation="upsert",
               record_key=key, ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ", options=opts)
    table = hudi.open_table(path)
    assert any(s.log_files for s in table.file_slices()) and any(not s.log_files for s in table.file_slices())
    from hudi_format.read import point
    columns_read = []   # the columns read from base-file-only slices
    real = point._base_rows

    def spy(storage, task, *args, **kwargs):
        columns_read.append(list(task.read_schema.names))
        return real(storage, task, *args, **kwargs)
    monkeypatch.setattr(point, "_base_rows", spy)
    picks = [3, 4, 150, 399]
    wanted = [f"k{i:04d}" for i in picks] if key == "id" else \
        [str(i) for i in picks] if key == "n" else [f"id:k{i:04d},n:{i}" for i in picks]
    got = table.lookup(wanted, columns=["id", "v"])
    assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == \
        [(f"k{i:04d}", -1.0 if i in (0, 2, 4, 6, 8) else float(i)) for i in picks]
    assert columns_read, "a base-file-only slice is read by its row groups that may hold a key"
    assert any("_hoodie_record_key" in c for c in columns_read) == reads_meta_key


RI_OPTS = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
           "hoodie.clean.automatic": "false"}


@pytest.mark.parametrize("change", ["cluster", "delete", "move"])
def test_a_held_table_looks_up_its_own_snapshot_while_others_commit(tmp_path, change):
    """A table held while another writer commits is a snapshot: ``lookup`` answers as of it,
    as ``read`` does. The record index is newer then (clustering placed the keys in file groups
    the snapshot does not have; a delete or a move dropped or moved their entries), so it is
    not used for that snapshot: the keys are found through the bloom filters instead (the
    lookup returned no row for keys the snapshot holds)."""
    path = str(tmp_path / "t")
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", options=RI_OPTS)
    for i in range(3):
        hudi.write(path, pa.table({"id": [f"k{i}{j}" for j in range(3)], "ts": [1] * 3, "p": ["a"] * 3,
                                   "v": [i] * 3}), **kw)
    held = hudi.open_table(path)
    held.schema()        # the snapshot is loaded; the metadata table is not read yet
    keys = ["k00", "k21"]
    want = hudi.open_table(path).read(columns=["id", "v"], filters=[("id", "in", keys)]).sort_by("id").to_pylist()
    assert len(want) == 2
    if change == "cluster":
        hudi.open_table(path).cluster(options=dict(RI_OPTS, **{
            "hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}))
    elif change == "delete":
        hudi.write(path, pa.table({"id": keys, "p": ["a", "a"]}), operation="delete", options=RI_OPTS)
    else:
        hudi.write(path, pa.table({"id": keys, "ts": [2, 2], "p": ["b", "b"], "v": [9, 9]}),
                   options=dict(RI_OPTS, **{"hoodie.record.index.update.partition.path": "true"}))
    assert held.lookup(keys, columns=["id", "v"]).sort_by("id").to_pylist() == want
    fresh = hudi.open_table(path)
    assert fresh.lookup(keys, columns=["id", "v"]).sort_by("id").to_pylist() == \
        fresh.read(columns=["id", "v"], filters=[("id", "in", keys)]).sort_by("id").to_pylist()


@pytest.mark.parametrize("version", [6, 8])
def test_a_fresh_table_uses_the_record_index_after_its_metadata_compaction(tmp_path, monkeypatch, version):
    """The metadata table compacts inside a commit, under a new instant time (version 8) or
    one named after that commit (version 6): a table opened after it is not behind its
    metadata table, and lookups go through the record index."""
    from hudi_format.metadata.reader import MetadataTable
    path = str(tmp_path / "t")
    opts = dict(RI_OPTS, **{"hoodie.metadata.compact.max.delta.commits": "2"})
    for i in range(3):
        hudi.write(path, pa.table({"id": [f"k{i}"], "ts": [1], "p": ["a"], "v": [i]}), record_key="id",
                   ordering_field="ts", partition_by="p", options=opts, table_version=version)
    table = hudi.open_table(path)
    mdt = MetadataTable(table.storage, table.config, table.timeline)
    assert any(i.action == "commit" for i in mdt.mdt_timeline.completed), "the test needs a compaction"
    assert not mdt.ahead_of_timeline()
    calls = []
    real = MetadataTable.record_index
    monkeypatch.setattr(MetadataTable, "record_index", lambda self, keys: calls.append(1) or real(self, keys))
    assert table.lookup(["k2"], columns=["id", "v"]).to_pylist() == [{"id": "k2", "v": 2}]
    assert calls


WITH_METADATA_TABLE = [n for n in FIXTURE_TABLES if has_metadata_table(n)]


def test_fixtures_with_a_metadata_table_are_found():
    assert len(WITH_METADATA_TABLE) >= 10


@pytest.mark.parametrize("name", WITH_METADATA_TABLE)
def test_tables_apache_hudi_wrote_are_not_behind_their_metadata_table(fixture_tables, name):
    """Apache Hudi's metadata tables (versions 6, 8 and 9; compactions, rollbacks) are never
    ahead of the data timeline they were written with, so lookups on them use the index."""
    from hudi_format.metadata.reader import MetadataTable
    try:
        table = hudi.open_table(str(fixture_tables(name)))
    except hudi.HudiError:
        pytest.skip("a table this SDK does not open (Lance base files)")
    mdt = MetadataTable(table.storage, table.config, table.timeline)
    assert mdt.exists
    assert not mdt.ahead_of_timeline()
