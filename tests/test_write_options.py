"""Writes across key generators, partition styles, log block formats, indexes, meta-field
settings and schema evolution, each read back by hudi-rs and by our reader."""

from __future__ import annotations

import datetime as dt

import os

import pyarrow as pa
import pytest

import hudi_format as hudi
from writemodel import Model, check_all, make_rows


def _seq(path, model, **kw):
    instants = []

    def write(op, data):
        instants.append(hudi.write(path, data, operation=op, **kw))
        model.apply(op, data, len(instants) - 1)
        check_all(path, model, instants)

    return write


@pytest.mark.parametrize("version", [8, 6])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("keygen", ["complex", "nonpartitioned", "hive", "urlencoded"])
def test_key_generators(tmp_path, table_type, keygen, version):
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
              table_version=version, options={})
    if keygen == "complex":
        kw.update(record_key=["id", "region"], partition_by=["p", "region"])
    elif keygen == "nonpartitioned":
        kw.update(partition_by=None)
    elif keygen == "hive":
        kw["options"] = {"hoodie.datasource.write.hive_style_partitioning": "true"}
    else:
        kw["options"] = {"hoodie.datasource.write.partitionpath.urlencode": "true"}
    path = str(tmp_path / "t")
    model = Model(version >= 8)
    write = _seq(path, model, **kw)
    parts = ("a b", "c/d", "e") if keygen == "urlencoded" else ("a", "b", "c")
    write("insert", make_rows(range(30), ts=1, partitions=parts))
    write("upsert", make_rows(range(20, 40), ts=2, seed=1, partitions=parts))
    write("delete", make_rows(range(0, 5), ts=0, partitions=parts))
    table = hudi.open_table(path)
    paths = set(table.read(columns=["_hoodie_partition_path"]).column(0).to_pylist())
    expected_paths = {"complex": {f"{p}/r{i}" for p in "abc" for i in (0, 1)},
                      "nonpartitioned": {""}, "hive": {"p=a", "p=b", "p=c"},
                      "urlencoded": {"a b", "c%2Fd", "e"}}[keygen]   # escapePathName keeps spaces
    assert paths == expected_paths
    if keygen == "complex":
        key = table.read(columns=["_hoodie_record_key"], filters=[("id", "=", "k00020")]).column(0)[0].as_py()
        assert key == "id:k00020,region:r0"


def test_timestamp_key_generator(tmp_path):
    path = str(tmp_path / "t")
    opts = {"hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"}
    data = pa.table({"id": ["x", "y"], "ts": [1, 1], "ms": [1705311000000, 1705400000000]})
    hudi.write(path, data, record_key="id", ordering_field="ts", partition_by="ms", options=opts)
    table = hudi.open_table(path)
    assert table.config.keygen_type == "TIMESTAMP"
    got = sorted(table.read(columns=["_hoodie_partition_path"]).column(0).to_pylist())
    assert got == ["2024/01/15", "2024/01/16"]
    from hudi import HudiTableBuilder
    rs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    assert sorted(rs.column("_hoodie_partition_path").to_pylist()) == got


@pytest.mark.parametrize("version", [8, 6])
def test_parquet_log_blocks(tmp_path, version):
    path = str(tmp_path / "t")
    model = Model(version >= 8)
    write = _seq(path, model, record_key="id", ordering_field="ts", partition_by="p",
                 table_type="MERGE_ON_READ", table_version=version,
                 options={"hoodie.logfile.data.block.format": "parquet"})
    write("insert", make_rows(range(20), ts=1))
    write("upsert", make_rows(range(10, 30), ts=2, seed=1))
    from hudi_format.log import BlockType, read_log_file
    table = hudi.open_table(path)
    logs = [f for s in table.file_slices() for f in s.log_files]
    assert logs and all(b.block_type == BlockType.PARQUET_DATA
                        for f in logs for b in read_log_file(table.storage, f))


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_BLOOM", "GLOBAL_SIMPLE"])
def test_indexes_tag_the_same_records(tmp_path, index):
    path = str(tmp_path / "t")
    model = Model(True)
    write = _seq(path, model, record_key="id", ordering_field="ts", partition_by="p",
                 options={"hoodie.index.type": index, "hoodie.parquet.small.file.limit": "0"})
    write("insert", make_rows(range(0, 40), ts=1))
    write("insert", make_rows(range(40, 80), ts=1))
    write("upsert", make_rows(range(35, 45), ts=2, seed=1))


def test_bloom_index_opens_only_candidate_files(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": "BLOOM", "hoodie.parquet.small.file.limit": "0"}
    for start in range(0, 100, 20):   # five file groups in one partition
        hudi.write(path, make_rows(range(start, start + 20), ts=1, partitions=("a",)),
                   record_key="id", ordering_field="ts", partition_by="p", options=opts)
    import hudi_format.read.merge as merge
    opened = []
    real = merge.read_base_file
    monkeypatch.setattr(merge, "read_base_file",
                        lambda s, p, c=None, size=None, **kw: opened.append(p) or real(s, p, c, size, **kw))
    hudi.write(path, make_rows([3, 4], ts=2, seed=1, partitions=("a",)), record_key="id",
               ordering_field="ts", partition_by="p", options=opts)
    tagged = [p for p in opened if p.endswith(".parquet")]
    # one file group holds keys 3 and 4: only it is read to tag (and then merged)
    assert len({p.split("/")[-1].split("_")[0] for p in tagged}) == 1


def test_without_meta_fields(tmp_path):
    path = str(tmp_path / "t")
    model = Model(True)
    data = make_rows(range(20), ts=1)
    hudi.write(path, data, record_key="id", ordering_field="ts", partition_by="p",
               options={"hoodie.populate.meta.fields": "false"})
    hudi.write(path, make_rows(range(10, 25), ts=2, seed=1), record_key="id", ordering_field="ts",
               partition_by="p", options={"hoodie.populate.meta.fields": "false"})
    model.apply("insert", data, 0)
    model.apply("upsert", make_rows(range(10, 25), ts=2, seed=1), 1)
    table = hudi.open_table(path)
    assert not table.config.populate_meta_fields and "_hoodie_record_key" not in table.schema().names
    from writemodel import data_rows, hudi_rs_read, model_rows
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


def test_schema_evolution_add_column_and_widen(tmp_path):
    path = str(tmp_path / "t")
    base = pa.table({"id": ["a", "b"], "ts": [1, 1], "n": pa.array([1, 2], pa.int32()), "p": ["x", "x"]})
    hudi.write(path, base, record_key="id", ordering_field="ts", partition_by="p")
    evolved = pa.table({"id": ["c"], "ts": [2], "n": pa.array([3], pa.int64()), "p": ["x"], "extra": ["new"]})
    hudi.write(path, evolved)
    table = hudi.open_table(path)
    assert table.schema().field("n").type == pa.int64() and table.schema().field("extra").type == pa.string()
    got = sorted(table.read(columns=["id", "n", "extra"]).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": "a", "n": 1, "extra": None}, {"id": "b", "n": 2, "extra": None},
                   {"id": "c", "n": 3, "extra": "new"}]
    from writemodel import hudi_rs_read
    rs = sorted(hudi_rs_read(path).select(["id", "n", "extra"]).to_pylist(), key=lambda r: r["id"])
    assert rs == got


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_batch_lacking_table_columns_fails_unless_nulls_are_asked_for(tmp_path, table_type):
    """Hudi's default: an upsert of fewer columns than the table has would blank the others in
    every record it touches, so it fails and writes nothing; with
    ``hoodie.write.set.null.for.missing.columns=true`` they are written as nulls."""
    path = str(tmp_path / "t")
    full = pa.table({"id": ["a", "b"], "ts": [1, 1], "n": [1, 2], "note": ["keep", "me"], "p": ["x", "x"]})
    hudi.write(path, full, record_key="id", ordering_field="ts", partition_by="p", table_type=table_type)
    before = sorted(os.listdir(os.path.join(path, "x")))
    partial = pa.table({"id": ["a"], "ts": [2], "n": [10], "p": ["x"]})
    with pytest.raises(hudi.SchemaError, match="'note'.*hoodie.write.set.null.for.missing.columns"):
        hudi.write(path, partial)
    assert sorted(os.listdir(os.path.join(path, "x"))) == before
    table = hudi.open_table(path)
    assert len(table.timeline.completed) == 1 and table.timeline.pending == []
    hudi.write(path, partial, options={"hoodie.write.set.null.for.missing.columns": "true"})
    got = sorted(hudi.open_table(path).read(columns=["id", "n", "note"]).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": "a", "n": 10, "note": None}, {"id": "b", "n": 2, "note": "me"}]
    # deletes need the keys alone; the soft-delete flag is an instruction, not a column to keep
    hudi.write(path, pa.table({"id": ["b"], "p": ["x"]}), operation="delete")
    flagged = full.append_column("_hoodie_is_deleted", pa.array([False, True]))
    hudi.write(path, flagged)
    hudi.write(path, full)
    assert sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist()) == ["a", "b"]


def test_naive_timestamps_and_large_strings_are_normalised(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array(["a"], pa.large_string()), "ts": [1],
                     "at": pa.array([dt.datetime(2024, 5, 1, 12, 0)], pa.timestamp("ns"))})
    hudi.write(path, data, record_key="id", ordering_field="ts")
    table = hudi.open_table(path)
    assert table.schema().field("id").type == pa.string()
    assert table.read(columns=["at"]).column(0)[0].as_py() == dt.datetime(2024, 5, 1, 12, 0)


@pytest.mark.parametrize("update_path", ["true", "false"])
def test_global_index_moves_records_between_partitions(tmp_path, update_path):
    path = str(tmp_path / "t")
    opts = {"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.simple.index.update.partition.path": update_path}
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", options=opts)
    hudi.write(path, pa.table({"id": ["a", "b"], "ts": [1, 1], "p": ["x", "x"], "v": [1, 2]}), **kw)
    hudi.write(path, pa.table({"id": ["a"], "ts": [2], "p": ["y"], "v": [10]}), **kw)
    from writemodel import hudi_rs_read
    for got in (hudi.open_table(path).read(), hudi_rs_read(path)):
        rows = sorted((r["id"], r["_hoodie_partition_path"], r["v"]) for r in got.to_pylist())
        if update_path == "true":
            assert rows == [("a", "y", 10), ("b", "x", 2)]
        else:  # the record stays in its partition and takes the update there
            assert [r[0] for r in rows] == ["a", "b"] and rows[0][2] == 10 and rows[0][1] == "x"
