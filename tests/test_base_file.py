"""Parquet base files: footers read from Hudi-written files, and files we write read back.

Truth: the fixture tables' base files, written by Apache Hudi (their footers, types and rows),
and hudi-rs, an independent reader that must read the files we write with the rows pyarrow
reads. Every fixture base file is rewritten by us from its own rows and Avro schema; the copy
must carry the same bloom filter string, min/max keys and footer keys as Hudi's original.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiFileGroupReader

from conftest import FIXTURE_TABLES
from damage import garble_footer_name
from hudi_format.base_file import (BaseFileWriter, BaseFileWriteResult, parquet_options_from_hoodie,
                                   read_footer, write_base_file)
from hudi_format.bloom import DynamicBloomFilter, SimpleBloomFilter, new_bloom_filter
from hudi_format.config import parse_properties
from hudi_format.errors import CorruptFileError, HudiError, InvalidOptionError, SchemaError
from hudi_format.schema import arrow_to_avro_schema
from hudi_format.storage import Storage

HUDI_KEYS = {"org.apache.hudi.bloomfilter", "hoodie_bloom_filter_type_code",
             "hoodie_min_record_key", "hoodie_max_record_key"}


def base_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet")
                  if ".hoodie" not in p.relative_to(root).parts)


def kv_of(path) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}


def leaf_types(path) -> dict[str, tuple[str, str]]:
    """Leaf columns by path with list wrappers dropped (Hudi writes 2-level lists, we 3-level)."""
    schema = pq.read_metadata(path).schema
    out = {}
    for i in range(len(schema)):
        col = schema.column(i)
        parts = [p for p in col.path.split(".") if p not in ("array", "list", "element")]
        out[".".join(parts)] = (col.physical_type, str(col.logical_type))
    return out


class CountingStorage(Storage):
    """Records every read, to prove footers come from ranged reads only."""

    def __init__(self, url):
        super().__init__(url)
        self.ranges: list[tuple[int, int]] = []
        self.full_reads = 0

    def read_range(self, rel, start, length):
        self.ranges.append((start, length))
        return super().read_range(rel, start, length)

    def read_bytes(self, rel):
        self.full_reads += 1
        return super().read_bytes(rel)

    def open(self, rel, mode="rb", **kw):
        if "r" in mode:
            self.full_reads += 1
        return super().open(rel, mode, **kw)


# -- every fixture base file: footer, rewrite, hudi-rs ----------------------------------------
@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_fixture_footers_and_rewrites(fixture_tables, tmp_path, name):
    src = fixture_tables(name)
    files = base_files(src)
    if not files:
        pytest.skip("table has no base files")
    root = tmp_path / "t"
    shutil.copytree(src, root)
    props = parse_properties((root / ".hoodie" / "hoodie.properties").read_text())
    meta_fields = props.get("hoodie.populate.meta.fields", "true") == "true"
    storage = Storage(str(root))
    reader = HudiFileGroupReader(str(root))
    for rel in files:
        kv = kv_of(root / rel)
        md = pq.read_metadata(root / rel)
        footer = read_footer(storage, rel)
        # footer as Hudi wrote it
        assert footer.num_rows == md.num_rows
        assert footer.metadata == kv
        assert footer.file_size == os.path.getsize(root / rel)
        assert footer.min_key == kv.get("hoodie_min_record_key")
        assert footer.max_key == kv.get("hoodie_max_record_key")
        assert footer.arrow_schema == pq.read_schema(root / rel).remove_metadata()
        if "parquet.avro.schema" in kv:
            assert footer.avro_schema == json.loads(kv["parquet.avro.schema"])
            avro = kv["parquet.avro.schema"]
        else:   # Spark row-writer files carry a Spark schema instead
            assert footer.avro_schema is None
            avro = arrow_to_avro_schema(footer.arrow_schema, "r", "hoodie.r")
        if meta_fields:
            assert isinstance(footer.bloom_filter, DynamicBloomFilter)
            assert footer.bloom_filter.serialize() == kv["org.apache.hudi.bloomfilter"]
        else:
            assert footer.bloom_filter is None and footer.min_key is None

        # our copy of the file: same rows, same schema, under a new file id
        table = pq.read_table(root / rel)
        instant = Path(rel).name.rsplit("_", 1)[1].split(".")[0]
        new_rel = str(Path(rel).parent / f"{uuid.uuid4()}-0_0-0-0_{instant}.parquet").lstrip("./")
        res = write_base_file(storage, new_rel, table, avro,
                              "_hoodie_record_key" if meta_fields else None)
        ours = kv_of(root / new_rel)
        assert res == BaseFileWriteResult(new_rel, os.path.getsize(root / new_rel), md.num_rows,
                                          kv.get("hoodie_min_record_key"), kv.get("hoodie_max_record_key"))
        assert {k: v for k, v in ours.items() if k in HUDI_KEYS} == \
               {k: v for k, v in kv.items() if k in HUDI_KEYS}
        assert ours["writer.model.name"] == "avro"
        if "parquet.avro.schema" in kv:
            assert set(ours) == set(kv)
            assert ours["parquet.avro.schema"] == kv["parquet.avro.schema"]        # verbatim
            assert leaf_types(root / new_rel) == leaf_types(root / rel)
        back = read_footer(storage, new_rel)
        assert (back.min_key, back.max_key, back.num_rows) == (footer.min_key, footer.max_key, md.num_rows)
        if meta_fields:
            assert back.bloom_filter == footer.bloom_filter

        ours_rows = pq.read_table(root / new_rel)
        assert ours_rows.to_pylist() == table.to_pylist()
        assert pq.read_metadata(root / new_rel).row_group(0).column(0).compression == "GZIP" \
            if md.num_rows else True
        batch = reader.read_file_slice_from_paths(new_rel, [])
        assert batch.num_rows == md.num_rows
        if md.num_rows:
            assert batch.schema == ours_rows.schema
            assert batch.to_pylist() == ours_rows.to_pylist()


def test_no_meta_fields_footer_has_hudis_keys(fixture_tables, tmp_path):
    src = fixture_tables("sample_table__cow__v8_simplekeygen_hivestyle_no_metafields")
    rel = base_files(src)[0]
    kv = kv_of(src / rel)
    storage = Storage(str(tmp_path))
    write_base_file(storage, "p/f.parquet", pq.read_table(src / rel), kv["parquet.avro.schema"])
    assert set(kv_of(tmp_path / "p/f.parquet")) == set(kv) == {"parquet.avro.schema", "writer.model.name"}


# -- layout and options -----------------------------------------------------------------------
AVRO = {"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": [
    {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
    {"name": "id", "type": "long"},
    {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
    {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-millis"}], "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
    {"name": "amount", "type": ["null", {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.amount",
                                         "size": 7, "logicalType": "decimal", "precision": 15, "scale": 2}],
     "default": None},
    {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "default": None},
    {"name": "attrs", "type": ["null", {"type": "map", "values": ["null", "long"]}], "default": None},
]}


def sample(n: int, offset: int = 0) -> pa.Table:
    import datetime as dt
    return pa.table({
        "_hoodie_record_key": [f"key-{i + offset:06d}" for i in range(n)],
        "id": list(range(offset, offset + n)),
        "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i) for i in range(n)],
        "local": [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)],
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 300) for i in range(n)],
        "amount": [Decimal(i) / 100 for i in range(n)],
        "tags": [[f"t{i}", None] for i in range(n)],
        "attrs": pa.array([[("a", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
    })


def test_types_laid_out_as_parquet_avro_does(tmp_path):
    storage = Storage(str(tmp_path))
    write_base_file(storage, "f.parquet", sample(10), AVRO, "_hoodie_record_key")
    schema = pq.read_metadata(tmp_path / "f.parquet").schema
    cols = {schema.column(i).path: schema.column(i) for i in range(len(schema))}
    assert cols["id"].max_definition_level == 0                       # "long": REQUIRED
    assert cols["_hoodie_record_key"].max_definition_level == 1
    assert "isAdjustedToUTC=true" in str(cols["ts"].logical_type)
    assert cols["ts"].physical_type == "INT64" and "microseconds" in str(cols["ts"].logical_type)
    assert "isAdjustedToUTC=false" in str(cols["local"].logical_type)
    assert "milliseconds" in str(cols["local"].logical_type)
    assert cols["day"].physical_type == "INT32" and str(cols["day"].logical_type) == "Date"
    assert cols["amount"].physical_type == "FIXED_LEN_BYTE_ARRAY" and cols["amount"].length == 7
    assert str(cols["amount"].logical_type) == "Decimal(precision=15, scale=2)"
    assert cols["attrs.key_value.key"].max_definition_level == 2      # map keys required
    got = pq.read_table(tmp_path / "f.parquet")
    assert got.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert got.column("amount").to_pylist()[3] == Decimal("0.03")


def test_required_columns_and_schema_mismatch(tmp_path):
    storage = Storage(str(tmp_path))
    bad = sample(5).set_column(1, "id", pa.array([1, None, 3, 4, 5], pa.int64()))
    with pytest.raises(SchemaError, match="id"):
        write_base_file(storage, "a.parquet", bad, AVRO, "_hoodie_record_key")
    with pytest.raises(SchemaError, match="missing"):
        write_base_file(storage, "b.parquet", sample(5).drop_columns(["day"]), AVRO, "_hoodie_record_key")
    with pytest.raises(SchemaError, match="unexpected"):
        write_base_file(storage, "c.parquet", sample(5).append_column("x", pa.array([1] * 5)), AVRO,
                        "_hoodie_record_key")
    with pytest.raises(HudiError, match="record keys"):
        write_base_file(storage, "d.parquet", sample(5), AVRO, pa.array(["a", "b"]))
    with pytest.raises(HudiError, match="null"):
        write_base_file(storage, "e.parquet", sample(3), AVRO, pa.array(["a", None, "c"]))
    assert list(tmp_path.iterdir()) == []                             # nothing left behind


def test_compression_and_hoodie_options(tmp_path):
    storage = Storage(str(tmp_path))
    for codec, expect in (("snappy", "SNAPPY"), ("uncompressed", "UNCOMPRESSED"), ("ZSTD", "ZSTD")):
        write_base_file(storage, f"{codec}.parquet", sample(5), AVRO, None, compression=codec)
        assert pq.read_metadata(tmp_path / f"{codec}.parquet").row_group(0).column(1).compression == expect
    with pytest.raises(InvalidOptionError, match="lzo"):
        write_base_file(storage, "x.parquet", sample(5), AVRO, None, compression="lzo")
    opts = parquet_options_from_hoodie({"hoodie.parquet.compression.codec": "snappy",
                                        "hoodie.parquet.block.size": "2048", "hoodie.parquet.page.size": "512",
                                        "hoodie.parquet.dictionary.enabled": "false", "other": "x"})
    assert opts == {"compression": "snappy", "block_size": 2048, "page_size": 512, "dictionary": False}
    res = write_base_file(storage, "o.parquet", sample(2000), AVRO, "_hoodie_record_key", **opts)
    md = pq.read_metadata(tmp_path / "o.parquet")
    assert md.num_row_groups > 1 and md.num_rows == res.num_rows == 2000


def test_bloom_options_dict(tmp_path):
    storage = Storage(str(tmp_path))
    write_base_file(storage, "s.parquet", sample(50), AVRO, "_hoodie_record_key",
                    bloom={"hoodie.bloom.index.filter.type": "SIMPLE", "hoodie.index.bloom.num_entries": "1000",
                           "hoodie.index.bloom.fpp": "0.001", "unrelated": "x"})
    kv = kv_of(tmp_path / "s.parquet")
    assert "hoodie_bloom_filter_type_code" not in kv          # Hudi writes it for DYNAMIC only
    footer = read_footer(storage, "s.parquet")
    assert isinstance(footer.bloom_filter, SimpleBloomFilter)
    expect = new_bloom_filter(1000, 0.001, "SIMPLE")
    expect.add_all(sample(50).column("_hoodie_record_key"))
    assert footer.bloom_filter.serialize() == expect.serialize()
    with pytest.raises(InvalidOptionError, match="num_entries"):
        write_base_file(storage, "t.parquet", sample(5), AVRO, "_hoodie_record_key",
                        bloom={"hoodie.index.bloom.num_entries": "many"})


def test_streamed_writes_equal_one_write(tmp_path):
    storage = Storage(str(tmp_path))
    whole = pa.concat_tables([sample(700), sample(900, offset=700)])
    one = write_base_file(storage, "one.parquet", whole, AVRO, "_hoodie_record_key")
    with BaseFileWriter(storage, "many.parquet", AVRO, block_size=16 * 1024) as w:
        for start in range(0, whole.num_rows, 250):
            part = whole.slice(start, 250)
            w.write(part, part.column("_hoodie_record_key"))
    reader = pa.RecordBatchReader.from_batches(whole.schema, whole.to_batches(max_chunksize=100))
    read = write_base_file(storage, "reader.parquet", reader, AVRO, "_hoodie_record_key", block_size=16 * 1024)
    assert pq.read_metadata(tmp_path / "many.parquet").num_row_groups > 1
    for name, res in (("many.parquet", None), ("reader.parquet", read)):
        assert pq.read_table(tmp_path / name).equals(pq.read_table(tmp_path / "one.parquet"))
        a, b = kv_of(tmp_path / name), kv_of(tmp_path / "one.parquet")
        assert a == b
    assert (one.min_key, one.max_key) == ("key-000000", "key-001599") == (read.min_key, read.max_key)


def test_failed_write_leaves_no_file(tmp_path):
    storage = Storage(str(tmp_path))
    with pytest.raises(SchemaError):
        with BaseFileWriter(storage, "p/f.parquet", AVRO, block_size=1024) as w:
            w.write(sample(200), "_hoodie_record_key")
            assert (tmp_path / "p/f.parquet").exists()                # already streaming
            w.write(sample(5).drop_columns(["id"]), "_hoodie_record_key")
    assert not (tmp_path / "p/f.parquet").exists()


def test_java_string_order_for_min_max(tmp_path):
    # Java compares UTF-16 code units: U+10000 (D800 DC00) sorts before U+E000, unlike code points
    storage = Storage(str(tmp_path))
    t = sample(3).set_column(0, "_hoodie_record_key", pa.array(["\ue000x", "\U00010000", "\ud7ff"]))
    res = write_base_file(storage, "f.parquet", t, AVRO, "_hoodie_record_key")
    assert (res.min_key, res.max_key) == ("\ud7ff", "\ue000x")
    t = sample(2).set_column(0, "_hoodie_record_key", pa.array(["\ue000x", "\U00010000"]))
    res = write_base_file(storage, "g.parquet", t, AVRO, "_hoodie_record_key")
    assert (res.min_key, res.max_key) == ("\U00010000", "\ue000x")
    assert read_footer(storage, "g.parquet").min_key == "\U00010000"


# -- footer reads -----------------------------------------------------------------------------
def test_footer_is_read_with_ranged_reads_only(tmp_path):
    storage = Storage(str(tmp_path))
    big = pa.table({"_hoodie_record_key": [uuid.uuid4().hex for _ in range(60_000)],
                    "id": list(range(60_000))})
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "_hoodie_record_key", "type": "string"}, {"name": "id", "type": "long"}]}
    write_base_file(storage, "big.parquet", big, avro, "_hoodie_record_key", compression="uncompressed",
                    bloom={"hoodie.index.bloom.num_entries": "400000"})       # ~2.2 MB footer
    size = os.path.getsize(tmp_path / "big.parquet")
    counting = CountingStorage(str(tmp_path))
    footer = read_footer(counting, "big.parquet")
    assert counting.full_reads == 0 and len(counting.ranges) == 2
    md_len = size - counting.ranges[1][0] - 8
    assert counting.ranges[1] == (size - md_len - 8, md_len + 8)
    assert counting.ranges[0] == (size - (1 << 20), 1 << 20)          # one speculative 1 MiB tail
    assert md_len > 2_000_000 and size - md_len > 2_000_000            # big footer, big data
    assert sum(n for _, n in counting.ranges) < size
    assert footer.num_rows == 60_000 and footer.bloom_filter.might_contain(big.column(0)[7].as_py())
    small = CountingStorage(str(tmp_path))
    write_base_file(storage, "small.parquet", sample(5), AVRO, None)
    read_footer(small, "small.parquet")
    assert len(small.ranges) == 1 and small.full_reads == 0


def test_memory_filesystem(tmp_path):
    storage = Storage(f"memory://base-file-{uuid.uuid4().hex}/table")
    res = write_base_file(storage, "part=1/f.parquet", sample(20), AVRO, "_hoodie_record_key")
    assert res.file_size == storage.size("part=1/f.parquet")
    footer = read_footer(storage, "part=1/f.parquet")
    assert (footer.min_key, footer.max_key, footer.num_rows) == ("key-000000", "key-000019", 20)
    with storage.open("part=1/f.parquet") as f:
        assert pq.read_table(f).num_rows == 20


def test_corrupt_files(tmp_path):
    storage = Storage(str(tmp_path))
    write_base_file(storage, "f.parquet", sample(20), AVRO, "_hoodie_record_key")
    data = (tmp_path / "f.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[:-100])
    (tmp_path / "tiny.parquet").write_bytes(b"PAR1")
    (tmp_path / "len.parquet").write_bytes(data[:-8] + (10**8).to_bytes(4, "little") + b"PAR1")
    (tmp_path / "junk.parquet").write_bytes(data[:4] + b"\0" * (len(data) - 12) + data[-8:])
    # a column name in the footer whose first byte is no longer UTF-8 (found by the fuzz test)
    (tmp_path / "name.parquet").write_bytes(garble_footer_name(data, b"_hoodie_record_key"))
    for name in ("cut", "tiny", "len", "junk", "name"):
        with pytest.raises(CorruptFileError, match=name):
            read_footer(storage, f"{name}.parquet")


@pytest.mark.parametrize("key", ["id", "id,city"])
def test_unique_columns_are_written_without_a_dictionary(tmp_path, key):
    """Record keys and sequence numbers are unique: a dictionary for them only overflows and
    falls back to plain after it was built. A single record-key field is unique too; a field of
    a complex key alone is not, and keeps its dictionary. Every writer of base files does this
    (insert, COW merge, clustering, compaction)."""
    import hudi_format as hudi

    n = 3000
    data = pa.table({"id": [f"k{i:06d}" for i in range(n)], "city": [f"c{i % 2}" for i in range(n)],
                     "ts": list(range(n)), "rider": [f"r{i % 5}" for i in range(n)]})
    path = str(tmp_path / "t")
    kw = dict(record_key=key.split(","), ordering_field="ts", partition_by="city", table_type="MERGE_ON_READ")
    hudi.write(path, data, operation="insert", **kw)
    hudi.write(path, data.slice(0, 100), operation="upsert", **kw)
    table = hudi.open_table(path)
    assert table.compact()
    table = hudi.open_table(path)
    assert table.cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": 10**9})
    files = [f for f in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in f.parts]
    assert len(files) >= 6   # two inserts, two compacted, two clustered
    for f in files:
        md = pq.read_metadata(f).row_group(0)
        enc = {md.column(i).path_in_schema: md.column(i).encodings for i in range(md.num_columns)}
        assert "RLE_DICTIONARY" not in enc["_hoodie_record_key"] + enc["_hoodie_commit_seqno"], f
        assert ("RLE_DICTIONARY" in enc["id"]) == (key != "id"), (f, enc["id"])
        assert "RLE_DICTIONARY" in enc["rider"], f
    from writemodel import hudi_rs_read
    ours = hudi.open_table(path).read(columns=list(data.column_names))
    assert ours.num_rows == n
    theirs = hudi_rs_read(path).select(data.column_names)
    assert sorted(theirs.to_pylist(), key=lambda r: r["id"]) == sorted(ours.to_pylist(), key=lambda r: r["id"])
