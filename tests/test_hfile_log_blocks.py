"""HFile data blocks in log files (the metadata table's log blocks), read and written.

Truth: the metadata-table logs of the v9 fixture tables (written by Hudi 1.1), their base
HFiles, and hudi-rs listing a table whose metadata log we re-encoded.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile

import pyarrow as pa
import pytest

from conftest import FIXTURE_TABLES, TABLES
from hudi_format.errors import InvalidOptionError, LogFormatError, SchemaError
from hudi_format.hfile import HFileReader
from hudi_format.log import BlockType, HeaderKey, read_log_file
from hudi_format.log.data import decode_hfile_rows
from hudi_format.log.encode import (encode_block, encode_hfile_content, encode_hfile_data_block,
                                    HFILE_LOG_BLOCK_SIZE)
from hudi_format.avro_values import AvroArrowConverter
from hudi_format.schema import parse_avro_schema
from hudi_format.storage import Storage

# MetadataPartitionType record types by metadata partition
RECORD_TYPES = {"files": {1, 2}, "column_stats": {3}, "record_index": {5}, "partition_stats": {6}}
PAYLOAD_FIELD = {2: "filesystemMetadata", 1: "filesystemMetadata", 3: "ColumnStatsMetadata",
                 5: "recordIndexMetadata", 6: "ColumnStatsMetadata"}


def _has_metadata_logs(name):
    with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
        return any("/.hoodie/metadata/" in m and ".log." in m for m in zf.namelist())


META_TABLES = [n for n in FIXTURE_TABLES if "_v9_" in n and _has_metadata_logs(n)]
REFERENCE = "/work/shared/reference/avro/HoodieMetadata.avsc"


@pytest.fixture(scope="module")
def metadata_arrow_schema():
    """Arrow form of Hudi's ``HoodieMetadataRecord`` (a newer revision than the fixtures')."""
    from pathlib import Path

    path = Path(REFERENCE)
    if not path.exists():  # the schema also ships with the package
        path = Path(__file__).resolve().parents[1] / "hudi_format" / "avro" / "HoodieMetadata.avsc"
    return AvroArrowConverter(path.read_text()).arrow_schema


def _metadata(root):
    return Storage(str(root / ".hoodie" / "metadata"))


def _logs(st, partition=None):
    out = []
    for d in st.list(""):
        if d.is_dir and not d.name.startswith(".") and (partition is None or d.name == partition):
            out += [f.path for f in st.list(d.path) if ".log." in f.name]
    return sorted(out)


def _hfile_blocks(st, partition=None):
    for rel in _logs(st, partition):
        for block in read_log_file(st, rel):
            if block.block_type == BlockType.HFILE_DATA:
                yield rel, block


@pytest.mark.parametrize("name", META_TABLES)
def test_every_metadata_log_hfile_block_decodes(name, fixture_tables, metadata_arrow_schema):
    st = _metadata(fixture_tables(name))
    blocks = 0
    for rel, block in _hfile_blocks(st):
        partition = rel.split("/")[0]
        table = block.records()
        hfile = HFileReader.from_bytes(block.content(), rel)
        keys = [k.decode() for k in hfile.keys()]
        assert table.num_rows == hfile.num_entries == len(keys) > 0, rel
        assert table.column("key").to_pylist() == keys  # restored from the HFile keys
        schema = parse_avro_schema(block.schema_json)
        assert table.column_names == [f["name"] for f in schema["fields"]]
        assert json.loads(hfile.avro_schema) == schema  # Hudi also puts it in the file info
        aligned = block.records(metadata_arrow_schema)  # read with the metadata schema
        assert aligned.schema.equals(metadata_arrow_schema)
        for col in ("key", "type", "filesystemMetadata", "ColumnStatsMetadata", "recordIndexMetadata"):
            assert aligned.column(col).equals(table.column(col)), (rel, col)
        types = set(table.column("type").to_pylist())
        if partition in RECORD_TYPES:
            assert types <= RECORD_TYPES[partition], (rel, types)
        for rec in table.slice(0, 50).to_pylist():
            assert rec[PAYLOAD_FIELD.get(rec["type"], "key")] is not None
            stats = rec.get("ColumnStatsMetadata")
            if stats and stats["minValue"] is not None:  # a general union: one member set
                assert sum(v is not None for v in stats["minValue"].values()) == 1
        blocks += 1
    assert blocks > 0


@pytest.mark.parametrize("name", META_TABLES)
def test_reencoded_blocks_hold_hudis_exact_records(name, fixture_tables):
    """Our encoder turns the decoded rows back into Hudi's keys and Avro bytes, byte for byte."""
    st = _metadata(fixture_tables(name))
    mem = Storage("memory://hfile-log-blocks/" + name)
    for rel, block in _hfile_blocks(st):
        table = block.records()
        theirs = HFileReader.from_bytes(block.content(), rel)
        ours = HFileReader.from_bytes(encode_hfile_content(table, block.schema_json), rel)
        assert list(ours.items()) == list(theirs.items()), rel
        assert ours.compression == theirs.compression == "GZ"
        assert ours.file_info[b"schema"] == block.schema_json.encode()
        raw = encode_hfile_data_block(table, block.schema_json, block.instant_time)
        mem.write_bytes("x.log", raw)
        (again,) = list(read_log_file(mem, "x.log"))
        assert again.block_type == BlockType.HFILE_DATA and raw[18:22] == b"\x00\x00\x00\x04"
        assert again.instant_time == block.instant_time and again.schema_json == block.schema_json
        assert again.records().equals(table)
    mem.delete("x.log")


@pytest.mark.parametrize("name", [n for n in META_TABLES if "txns" in n and "meta" in n])
def test_log_keys_agree_with_compacted_base_hfiles(name, fixture_tables):
    """A compacted base HFile holds no key, and no file, that its file group's logs never had."""
    st = _metadata(fixture_tables(name))
    checked = 0
    for partition in ("files", "column_stats", "partition_stats", "record_index"):
        for base in [f.path for f in st.list(partition) if f.name.endswith(".hfile")]:
            m = re.match(r".*/(.+-\d{4}-\d+)_[^_]+_(\d{17})\.hfile$", base)
            group, instant = m.group(1), m.group(2)
            if instant == "0" * 17:
                continue
            base_reader = HFileReader(st, base)
            log_keys, log_files = set(), set()
            for rel, block in _hfile_blocks(st, partition):
                if f"/.{group}_" in rel and block.instant_time <= instant:
                    t = block.records()
                    log_keys |= {k.encode() for k in t.column("key").to_pylist()}
                    if partition == "files":
                        log_files |= {(r["key"], f) for r in t.to_pylist()
                                      for f, _ in r["filesystemMetadata"] or []}
            assert set(base_reader.keys()) <= log_keys, base
            if partition == "files":
                rows = decode_hfile_rows(st.read_bytes(base), base_reader.avro_schema, base)
                assert [k for k, _ in rows] == [r["key"].encode() for _, r in rows]
                base_files = {(r["key"], f) for _, r in rows for f in r["filesystemMetadata"] or {}}
                assert base_files <= log_files and base_files
            checked += 1
    assert checked >= 3


SCHEMA = {"type": "record", "name": "R", "namespace": "t", "fields": [
    {"name": "key", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "u", "type": ["null", {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
                           {"type": "record", "name": "B", "fields": [{"name": "b", "type": "string"}]}],
     "default": None}]}


def _sample(n=5):
    return pa.table({"key": [f"k{i:03d}" for i in reversed(range(n))], "n": list(range(n))})


def test_encode_hfile_data_block_layout():
    table = _sample(300)
    raw = encode_hfile_data_block(table, SCHEMA, "20240101000000000")
    st = Storage("memory://hfile-log-layout")
    st.write_bytes("l.log", raw)
    (block,) = list(read_log_file(st, "l.log"))
    assert block.block_type == BlockType.HFILE_DATA
    assert block.header == {HeaderKey.INSTANT_TIME: "20240101000000000",
                            HeaderKey.SCHEMA: json.dumps(SCHEMA, separators=(",", ":"))}
    hfile = HFileReader.from_bytes(block.content())
    keys = list(hfile.keys())
    assert keys == sorted(keys) and len(keys) == 300  # sorted by key, as Hudi writes them
    assert hfile.compression == "GZ" and hfile.trailer.comparator_class_name.endswith("HoodieHBaseKVComparator")
    assert all(v[:1] == b"\x00" for _, v in hfile.items())  # the key field blanked to ""
    out = block.records()
    assert out.column("key").to_pylist() == sorted(table.column("key").to_pylist())
    assert out.column("u").null_count == 300
    none = HFileReader.from_bytes(encode_hfile_content(table, SCHEMA, compression="NONE"))
    assert none.compression == "NONE" and list(none.items()) == list(hfile.items())
    assert HFILE_LOG_BLOCK_SIZE == 1 << 20
    st.delete("l.log")


def test_encode_hfile_general_unions_and_integer_keys():
    table = pa.table({"key": ["b", "a", "c"], "n": [1, 2, 3],
                      "u": pa.array([{"member0": {"a": 7}, "member1": None},
                                     {"member0": None, "member1": {"b": "x"}}, None],
                                    pa.struct([("member0", pa.struct([("a", pa.int32())])),
                                               ("member1", pa.struct([("b", pa.string())]))]))})
    content = encode_hfile_content(table, SCHEMA)
    block = encode_block(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: "1",
                                                HeaderKey.SCHEMA: json.dumps(SCHEMA)}, content)
    st = Storage("memory://hfile-log-unions")
    st.write_bytes("u.log", block)
    (b,) = list(read_log_file(st, "u.log"))
    rows = b.records().to_pylist()
    assert [r["key"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["u"] == {"member0": None, "member1": {"b": "x"}}
    assert rows[1]["u"] == {"member0": {"a": 7}, "member1": None} and rows[2]["u"] is None
    # without a key column Hudi keys records by their position, right-aligned
    no_key = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}
    keys = list(HFileReader.from_bytes(encode_hfile_content(pa.table({"n": list(range(12))}), no_key)).keys())
    assert keys == sorted(f"{i:>4}".encode() for i in range(12))  # ceil(ln 12) + 1 = 4
    st.delete("u.log")


def test_encode_hfile_refuses_bad_keys():
    with pytest.raises(InvalidOptionError, match="repeats"):
        encode_hfile_content(pa.table({"key": ["a", "a"], "n": [1, 2]}), SCHEMA)
    with pytest.raises(SchemaError, match="nulls"):
        encode_hfile_content(pa.table({"key": ["a", None], "n": [1, 2]}), SCHEMA)
    with pytest.raises(SchemaError):
        encode_hfile_content(pa.table({"key": ["a"], "n": [1], "zzz": [1]}), SCHEMA)


def test_damaged_hfile_block_is_a_log_format_error():
    raw = encode_hfile_data_block(_sample(), SCHEMA, "1")
    st = Storage("memory://hfile-log-damaged")
    content_at = raw.index(b"DATABLK*")
    bad = bytearray(raw)
    bad[content_at + 33 + 10 + 20] ^= 0xFF  # inside the deflate stream of the data block
    st.write_bytes("d.log", bytes(bad))
    (block,) = list(read_log_file(st, "d.log"))
    with pytest.raises(LogFormatError, match=r"HFILE_DATA block at offset 0 of \S*d.log.*decompress"):
        block.records()
    st.delete("d.log")


def _rs_slices(base):
    import hudi

    b = hudi.HudiTableBuilder.from_base_uri(str(base)).with_hudi_option("hoodie.metadata.enable", "true")
    return sorted((s.partition_path, s.file_id, s.base_file_relative_path(),
                   tuple(s.log_files_relative_paths())) for s in b.build().get_file_slices())


def test_hudi_rs_lists_the_table_from_our_metadata_log(fixture_tables, tmp_path):
    """Re-encode the files partition's newest log (HFile blocks by us); hudi-rs agrees."""
    root = tmp_path / "t"
    shutil.copytree(fixture_tables("sample_table__cow__v9_txns_simple_meta"), root)
    st = _metadata(root)
    expected = _rs_slices(root)
    rel = _logs(st, "files")[-1]
    original = st.read_bytes(rel)
    blocks = list(read_log_file(st, rel))
    assert [b.block_type for b in blocks] == [BlockType.HFILE_DATA]

    def rewrite(transform):
        out = b""
        for b in blocks:
            table = transform(b.records())
            out += encode_hfile_data_block(table, b.schema_json, b.instant_time,
                                           header_order=list(b.header))
        st.write_bytes(rel, out)
        return out

    ours = rewrite(lambda t: t)
    assert ours != original
    assert _rs_slices(root) == expected
    # drop the newest file of one partition: hudi-rs no longer lists that file slice
    table = blocks[0].records()
    partition = next(k for k in table.column("key").to_pylist() if k.startswith("region="))
    newest = next(r for r in table.to_pylist() if r["key"] == partition)["filesystemMetadata"][0][0]
    rewrite(lambda t: t.filter(pa.compute.not_equal(t.column("key"), partition)))
    changed = _rs_slices(root)
    assert changed != expected
    assert any(s[2].endswith(newest) for s in expected)
    assert not any(s[2].endswith(newest) for s in changed)
    st.write_bytes(rel, original)
    assert _rs_slices(root) == expected
