"""Log block encoders and the log file writer, against Hudi-written logs and hudi-rs.

Truth: blocks Apache Hudi wrote (unit logs and the fixture tables' logs), which our encoders
must reproduce byte for byte from their decoded content; hudi-rs, which must read tables whose
log files we rewrote (and changed) to the fixtures' expected rows; and the framing rules of the
spec, which must make any cut of a written file read as its complete blocks only (those, and
splitting into blocks and files: test_log_file_writer.py).
"""

from __future__ import annotations

import decimal
import datetime as dt
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from canonical import canonical_rows, sort_expected
from conftest import FIXTURE_TABLES, TABLES, UNITS, expected
from hudi_format.errors import InvalidOptionError, SchemaError
from hudi_format.log import (BlockType, CommandType, HeaderKey, LogFileWriteResult,
                             encode_avro_data_block, encode_block, encode_delete_block,
                             encode_parquet_data_block, encode_rollback_block, read_log_file,
                             write_log_file)
from hudi_format.log.encode import encode_parquet_content
from hudi_format.avro_values import arrow_to_avro_records
from hudi_format.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hudi_format.storage import Storage
from hudi_format.view.file_names import parse_log_file_name

LOGS = UNITS / "log_files"
TOKEN = "1-2-3"


def _unit_log(name: str) -> tuple[Storage, str, bytes]:
    (path,) = [p for p in (LOGS / name).iterdir() if ".log." in p.name]
    return Storage(str(LOGS / name)), path.name, path.read_bytes()


def _reencode(block, header_order=None) -> bytes:
    """Our encoding of a decoded Hudi block (same content, instant, schema, header order)."""
    if block.block_type == BlockType.AVRO_DATA:
        return encode_avro_data_block(block.records(), block.schema_json, block.instant_time,
                                      header_order=header_order)
    if block.block_type == BlockType.PARQUET_DATA:
        return encode_parquet_data_block(block.records(), block.schema_json, block.instant_time,
                                         header_order=header_order)
    if block.block_type == BlockType.DELETE:
        return encode_delete_block(block.deleted_keys(), block.instant_time,
                                   avro_schema=block.schema_json, header_order=header_order)
    if block.block_type == BlockType.COMMAND:
        assert block.command_type == CommandType.ROLLBACK_BLOCK
        return encode_rollback_block(block.instant_time, block.target_instant_time,
                                     header_order=header_order)
    raise AssertionError(f"unexpected {block.block_type}")


def _decode(data: bytes, tmp_path: Path, name: str = ".f1-0_20250101000000000.log.1_0-0-0"):
    path = tmp_path / "decode" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return list(read_log_file(Storage(str(path.parent)), name))


# -- byte-exact re-encoding of Hudi-written blocks -------------------------------------------------
@pytest.mark.parametrize("unit,btype", [("valid_log_avro_data", BlockType.AVRO_DATA),
                                        ("valid_log_delete", BlockType.DELETE),
                                        ("valid_log_rollback", BlockType.COMMAND)])
def test_unit_blocks_reencode_byte_for_byte(unit, btype):
    storage, rel, raw = _unit_log(unit)
    (block,) = list(read_log_file(storage, rel))
    assert block.block_type == btype
    ours = _reencode(block, header_order=list(block.header))
    assert ours == raw[block.offset:block.offset + block.length]


@pytest.mark.parametrize("unit", ["valid_log_avro_data", "valid_log_delete", "valid_log_rollback",
                                  "valid_log_parquet_data"])
def test_default_header_order_is_ascending_keys(unit, tmp_path):
    """Hudi's header order is a HashMap's (varies per JVM run); ours is ascending key order."""
    storage, rel, raw = _unit_log(unit)
    (block,) = list(read_log_file(storage, rel))
    ours = _reencode(block)
    (back,) = _decode(ours, tmp_path)
    assert list(back.header) == sorted(block.header)
    assert back.header == block.header and back.footer == {} == block.footer
    if block.block_type != BlockType.PARQUET_DATA:
        # same bytes as Hudi's block with its header entries sorted
        assert ours == encode_block(block.block_type, dict(sorted(block.header.items())),
                                    block.content())
        assert len(ours) == block.length


def _tables_with_logs() -> list[str]:
    out = []
    for name in FIXTURE_TABLES:
        with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
            if any(".log" in m.rsplit("/", 1)[-1] and "__MACOSX" not in m for m in zf.namelist()):
                out.append(name)
    return out


def _log_paths(root: Path):
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.startswith(".") and parse_log_file_name(f) is not None:
                yield Path(dirpath) / f


@pytest.mark.parametrize("name", [n for n in _tables_with_logs() if "__parquet__" not in n])
def test_fixture_table_blocks_reencode_byte_for_byte(name, fixture_tables):
    """Every Avro data, delete and rollback block of the fixture tables, metadata table included."""
    root = fixture_tables(name)
    checked = 0
    for path in _log_paths(root):
        raw = path.read_bytes()
        for block in read_log_file(Storage(str(path.parent)), path.name):
            if block.block_type not in (BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND):
                continue
            original = raw[block.offset:block.offset + block.length]
            assert _reencode(block, header_order=list(block.header)) == original, \
                (path.relative_to(root), block.offset)
            if block.block_type == BlockType.AVRO_DATA:
                # a parsed schema is written back as the same compact JSON Avro Java writes
                assert encode_avro_data_block(block.records(), json.loads(block.schema_json),
                                              block.instant_time,
                                              header_order=list(block.header)) == original
            checked += 1
    assert checked > 0


def _parquet_layout(content: bytes):
    f = pq.ParquetFile(pa.BufferReader(content))
    s, md = f.schema, f.metadata
    columns = [(s.column(i).path, s.column(i).physical_type, str(s.column(i).logical_type),
                s.column(i).max_definition_level, s.column(i).max_repetition_level)
               for i in range(len(s))]
    codecs = {md.row_group(g).column(i).compression
              for g in range(md.num_row_groups) for i in range(len(s))}
    return columns, codecs


def _parquet_blocks(fixture_tables):
    storage, rel, _ = _unit_log("valid_log_parquet_data")
    yield from read_log_file(storage, rel)
    for name in FIXTURE_TABLES:
        if "__parquet__" in name:
            root = fixture_tables(name)
            for path in _log_paths(root):
                if ".hoodie" not in path.relative_to(root).parts:
                    yield from read_log_file(Storage(str(path.parent)), path.name)


def test_parquet_blocks_reencode_to_the_same_rows_and_layout(fixture_tables, tmp_path):
    """parquet-mr's bytes (created_by, page layout) differ; rows and column layout must not."""
    n = 0
    for block in _parquet_blocks(fixture_tables):
        if block.block_type != BlockType.PARQUET_DATA:
            continue
        ours = _reencode(block, header_order=list(block.header))
        (back,) = _decode(ours, tmp_path)
        assert back.block_type == BlockType.PARQUET_DATA and back.header == block.header
        assert list(back.header) == list(block.header)
        assert back.records().equals(block.records())
        # same physical/logical types and nesting as Hudi's Spark writer, GZIP as by default
        assert _parquet_layout(back.content()) == _parquet_layout(block.content())
        assert _parquet_layout(back.content())[1] == {"GZIP"}
        n += 1
    assert n >= 5


# -- writing files and reading them back ---------------------------------------------------------
RICH = pa.schema([
    pa.field("key", pa.string(), nullable=False),
    pa.field("i", pa.int32()), pa.field("l", pa.int64()), pa.field("f", pa.float32()),
    pa.field("d", pa.float64()), pa.field("b", pa.bool_()), pa.field("bin", pa.binary()),
    pa.field("dec", pa.decimal128(10, 2)), pa.field("big", pa.decimal128(38, 6)),
    pa.field("date", pa.date32()), pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("ts_ms", pa.timestamp("ms", tz="UTC")), pa.field("local_ts", pa.timestamp("us")),
    pa.field("t", pa.time64("us")),
    pa.field("st", pa.struct([pa.field("a", pa.string()), pa.field("n", pa.decimal128(5, 1))])),
    pa.field("arr", pa.list_(pa.field("element", pa.struct([pa.field("x", pa.int64())])))),
    pa.field("m", pa.map_(pa.string(), pa.field("value", pa.float64()))),
])
UTC = dt.timezone.utc


def _rich_rows() -> pa.Table:
    rows = [
        {"key": "k1", "i": 1, "l": -(2 ** 40), "f": 1.5, "d": 3.14159, "b": True, "bin": b"\x00\xff",
         "dec": decimal.Decimal("12345678.90"), "big": decimal.Decimal("-12345678901234567890.123456"),
         "date": dt.date(2024, 2, 29), "ts": dt.datetime(2024, 1, 15, 20, 20, 0, 123456, tzinfo=UTC),
         "ts_ms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
         "local_ts": dt.datetime(2024, 1, 1, 0, 0, 1), "t": dt.time(23, 59, 59, 999999),
         "st": {"a": "x", "n": decimal.Decimal("-0.5")}, "arr": [{"x": 1}, {"x": None}, None],
         "m": [("a", 1.0), ("b", None)]},
        {"key": "k2", "i": None, "l": None, "f": None, "d": None, "b": None, "bin": None,
         "dec": decimal.Decimal("-0.01"), "big": None, "date": None, "ts": None, "ts_ms": None,
         "local_ts": None, "t": None, "st": None, "arr": None, "m": None},
        {"key": "ünïcødé ✓", "i": -(2 ** 31), "l": 2 ** 63 - 1, "f": -0.0, "d": float("inf"),
         "b": False, "bin": b"", "dec": decimal.Decimal("-99999999.99"),
         "big": decimal.Decimal("99999999999999999999999999999999.999999"),
         "date": dt.date(1, 1, 1), "ts": dt.datetime(1900, 1, 1, tzinfo=UTC),
         "ts_ms": dt.datetime(2262, 1, 1, tzinfo=UTC), "local_ts": dt.datetime(1970, 1, 1),
         "t": dt.time(0), "st": {"a": None, "n": None}, "arr": [], "m": []},
    ]
    return pa.Table.from_pylist(rows, schema=RICH)


RICH_AVRO = arrow_to_avro_schema(RICH, "rich_record", "hoodie.rich")


def test_avro_schema_of_rich_rows_maps_back_to_the_same_arrow_schema():
    assert avro_to_arrow_schema(RICH_AVRO) == RICH


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_written_data_blocks_read_back_equal(fmt, tmp_path):
    table = _rich_rows()
    encode = encode_avro_data_block if fmt == "avro" else encode_parquet_data_block
    block = encode(table, RICH_AVRO, "20250101000000001")
    storage = Storage(str(tmp_path))
    (res,) = write_log_file(storage, "p=1", "fg-0", "20250101000000000", [block], TOKEN)
    assert res == LogFileWriteResult("p=1/.fg-0_20250101000000000.log.1_1-2-3", 1, len(block), 1)
    (back,) = list(read_log_file(storage, res.path))
    assert back.block_type == (BlockType.AVRO_DATA if fmt == "avro" else BlockType.PARQUET_DATA)
    assert back.header == {HeaderKey.INSTANT_TIME: "20250101000000001",
                           HeaderKey.SCHEMA: json.dumps(RICH_AVRO, separators=(",", ":"))}
    assert back.records().equals(table)
    assert back.records().to_pylist() == table.to_pylist()


def test_avro_records_match_avro_java_encodings():
    """Avro decimals: ``fixed`` sign-extended, ``bytes`` minimal (BigInteger.toByteArray)."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "fx", "type": {"type": "fixed", "name": "fixed", "size": 5,
                                "logicalType": "decimal", "precision": 10, "scale": 0}},
        {"name": "by", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "m", "type": {"type": "map", "values": "int"}}]}
    values = [0, 127, 128, -128, -129, 255, -256, 9999999999]
    java = [b"\x00", b"\x7f", b"\x00\x80", b"\x80", b"\xff\x7f", b"\x00\xff", b"\xff\x00",
            b"\x02\x54\x0b\xe3\xff"]
    table = pa.table({"fx": pa.array([decimal.Decimal(v) for v in values], pa.decimal128(10, 0)),
                      "by": pa.array([decimal.Decimal(v) for v in values], pa.decimal128(10, 0)),
                      "ts": pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)] * 8,
                                     pa.timestamp("us", tz="UTC")),
                      "m": pa.array([[("k", 1)]] * 8, pa.map_(pa.string(), pa.int32()))})
    rows = arrow_to_avro_records(table, schema)
    assert [r["by"] for r in rows] == java
    assert [r["fx"] for r in rows] == [v.to_bytes(5, "big", signed=True) for v in values]
    assert {r["ts"] for r in rows} == {1000} and rows[0]["m"] == {"k": 1}


@pytest.mark.parametrize("arrow_type,values,kind_type", [
    (pa.int32(), [7, None, -1], pa.int32()),
    (pa.int64(), [2 ** 40, 0, None], pa.int64()),
    (pa.string(), ["b", None, "a"], pa.string()),
    (pa.float64(), [1.25, None, -2.0], pa.float64()),
    (pa.float32(), [1.5, None, 0.0], pa.float32()),
    (pa.bool_(), [True, False, None], pa.bool_()),
    (pa.binary(), [b"\x01", None, b""], pa.binary()),
    (pa.date32(), [dt.date(2024, 1, 1), None, dt.date(1969, 12, 31)], pa.date32()),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, 1, tzinfo=UTC), None,
                                    dt.datetime(1960, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    (pa.decimal128(10, 2), [decimal.Decimal("1.25"), None, decimal.Decimal("-3.00")],
     pa.decimal128(30, 15)),
])
def test_delete_block_ordering_values_round_trip(arrow_type, values, kind_type, tmp_path):
    keys = pa.table({"record_key": ["a", "b", "c"], "partition_path": ["p", None, ""],
                     "ordering_value": pa.array(values, arrow_type)})
    (back,) = _decode(encode_delete_block(keys, "20250101000000000"), tmp_path)
    assert back.block_type == BlockType.DELETE
    assert back.header == {HeaderKey.INSTANT_TIME: "20250101000000000"}  # no SCHEMA unless given
    got = back.deleted_keys()
    assert got.column("record_key").to_pylist() == ["a", "b", "c"]
    assert got.column("partition_path").to_pylist() == ["p", None, ""]
    assert got.column("ordering_value").type == kind_type
    want = pa.array(values, arrow_type).cast(kind_type).to_pylist()
    assert got.column("ordering_value").to_pylist() == want


def test_delete_block_bytes_follow_hudi_wrappers():
    """Avro bytes of HoodieDeleteRecordList, worked out from the spec and HoodieMetadata.avsc."""
    keys = pa.table({"record_key": ["k"], "partition_path": ["p"],
                     "ordering_value": pa.array([decimal.Decimal(1)], pa.decimal128(5, 0))})
    block = encode_delete_block(keys, "1")
    content = block[-(8 + 4 + 25):-(8 + 4)]
    payload = (b"\x02"                          # array block of 1 item
               b"\x02\x02k" b"\x02\x02p"          # recordKey, partitionPath: union branch 1
               b"\x12"                          # orderingVal branch 9 = DecimalWrapper
               b"\x0e\x03\x8d\x7e\xa4\xc6\x80\x00"  # 1 at scale 15 = 10**15, 7 bytes
               b"\x00")                         # end of array
    assert content == struct.pack(">ii", 3, len(payload)) + payload
    assert len(payload) == 17
    no_ordering = encode_delete_block(pa.table({"record_key": ["k"], "partition_path": ["p"]}), "1")
    assert b"\x02\x02\x02k\x02\x02p\x00\x00" in no_ordering


def test_rollback_block_layout(tmp_path):
    block = encode_rollback_block("20250126040936578", "20250126040826878")
    (back,) = _decode(block, tmp_path)
    assert back.block_type == BlockType.COMMAND and back.command_type == CommandType.ROLLBACK_BLOCK
    assert list(back.header) == [HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME,
                                 HeaderKey.COMMAND_BLOCK_TYPE]
    assert back.target_instant_time == "20250126040826878" and back.content_length == 0
    assert len(block) == 105  # as long as Hudi's rollback block with the same instants
    size, = struct.unpack(">q", block[6:14])
    assert size == len(block) - 14 and struct.unpack(">q", block[-8:])[0] == size + 6


def test_extra_headers_and_bad_header_orders():
    b = encode_avro_data_block(_rich_rows(), RICH_AVRO, "1",
                               extra_header={HeaderKey.BLOCK_IDENTIFIER: "0", HeaderKey.IS_PARTIAL: "false"},
                               header_order=[HeaderKey.IS_PARTIAL, HeaderKey.SCHEMA,
                                             HeaderKey.INSTANT_TIME, HeaderKey.BLOCK_IDENTIFIER])
    assert struct.unpack(">iii", b[22:34]) == (4, int(HeaderKey.IS_PARTIAL), 5)
    with pytest.raises(InvalidOptionError, match="header_order"):
        encode_rollback_block("1", "0", header_order=[HeaderKey.INSTANT_TIME])
    with pytest.raises(InvalidOptionError, match="INSTANT_TIME"):
        encode_avro_data_block(_rich_rows(), RICH_AVRO, "1", extra_header={HeaderKey.INSTANT_TIME: "2"})


def test_rows_that_do_not_fit_the_schema_are_refused():
    table = _rich_rows()
    with pytest.raises(SchemaError, match="not in the Avro schema"):
        encode_avro_data_block(table.append_column("zzz", pa.array([1, 2, 3])), RICH_AVRO, "1")
    with pytest.raises(SchemaError, match="key"):
        encode_avro_data_block(table.set_column(0, "key", pa.array(["a", None, "c"])), RICH_AVRO, "1")
    with pytest.raises(SchemaError, match="key"):
        encode_parquet_data_block(table.drop_columns(["key"]), RICH_AVRO, "1")
    with pytest.raises(SchemaError, match="ordering"):
        encode_delete_block(pa.table({"record_key": ["a"], "partition_path": ["p"],
                                      "ordering_value": pa.array([[1]])}), "1")
    with pytest.raises(SchemaError, match="record_key"):
        encode_delete_block(pa.table({"key": ["a"], "partition_path": ["p"]}), "1")


def test_missing_nullable_columns_are_written_as_null(tmp_path):
    table = _rich_rows().select(["key", "dec"])
    (back,) = _decode(encode_avro_data_block(table, RICH_AVRO, "1"), tmp_path)
    got = back.records()
    assert got.column_names == RICH.names
    assert got.column("dec").equals(table.column("dec"))
    assert got.column("st").null_count == 3 and got.column("ts").null_count == 3


# -- hudi-rs reads tables whose log files we wrote -------------------------------------------------
def _copy_table(fixture_tables, name: str, tmp_path: Path) -> Path:
    dst = tmp_path / "table"
    shutil.copytree(fixture_tables(name), dst)
    return dst


def _only_data_log(root: Path) -> Path:
    (path,) = [p for p in _log_paths(root) if ".hoodie" not in p.relative_to(root).parts]
    return path


def _replace_log(root: Path, path: Path, blocks: list[bytes]) -> None:
    """Swap a Hudi-written log file for ours: same name, same version, same write token."""
    name = parse_log_file_name(path.name)
    partition = path.parent.relative_to(root).as_posix()
    partition = "" if partition == "." else partition
    path.unlink()
    (res,) = write_log_file(Storage(str(root)), partition, name.file_id, name.instant_time, blocks,
                            name.write_token, version=name.version)
    assert (root / res.path) == path


def _hudi_rs_rows(root: Path) -> list[dict]:
    table = HudiTableBuilder.from_base_uri(str(root)).build()
    return canonical_rows(pa.Table.from_batches(table.read()))


def _data_column(block) -> str:
    """A string column the test can change without touching keys, partitions or ordering."""
    for candidate in ("rider", "name", "txn_type"):
        if candidate in block.records().column_names:
            return candidate
    raise AssertionError("no column to change")


@pytest.mark.parametrize("name", ["quickstart_trips_table__mor__avro__v6_trips_8i1u",
                                  "sample_table__mor__parquet__v6_nonpartitioned",
                                  "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle",
                                  "sample_table__mor__parquet__v6_complexkeygen_hivestyle"])
def test_hudi_rs_reads_data_blocks_we_wrote(name, fixture_tables, tmp_path):
    root = _copy_table(fixture_tables, name, tmp_path)
    path = _only_data_log(root)
    (block,) = list(read_log_file(Storage(str(path.parent)), path.name))
    assert block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA)
    encode = encode_avro_data_block if block.block_type == BlockType.AVRO_DATA \
        else encode_parquet_data_block
    want = sort_expected(expected(name)["snapshot"])

    # 1. the same records re-encoded by us: hudi-rs returns the expected snapshot
    _replace_log(root, path, [encode(block.records(), block.schema_json, block.instant_time)])
    assert _hudi_rs_rows(root) == want

    # 2. changed records: hudi-rs must show our values, so it really decoded our block
    records = block.records()
    column = _data_column(block)
    changed = records.set_column(records.schema.get_field_index(column), column,
                                 pa.array(["written by hudi_format"] * records.num_rows))
    _replace_log(root, path, [encode(changed, block.schema_json, block.instant_time)])
    keys = set(records.column("_hoodie_record_key").to_pylist())
    rows = [dict(r, **{column: "written by hudi_format"}) if r["_hoodie_record_key"] in keys else r
            for r in expected(name)["snapshot"]]
    assert _hudi_rs_rows(root) == sort_expected(rows) != want


@pytest.mark.parametrize("name", ["quickstart_trips_table__mor__avro__v6_trips_8i3d"])
def test_hudi_rs_reads_delete_blocks_we_wrote(name, fixture_tables, tmp_path):
    root = _copy_table(fixture_tables, name, tmp_path)
    path = _only_data_log(root)
    (block,) = list(read_log_file(Storage(str(path.parent)), path.name))
    assert block.block_type == BlockType.DELETE
    keys = block.deleted_keys()
    snapshot = expected(name)["snapshot"]

    _replace_log(root, path, [encode_delete_block(keys, block.instant_time,
                                                  avro_schema=block.schema_json)])
    assert _hudi_rs_rows(root) == sort_expected(snapshot)

    # one more key of the same file group deleted by our block: hudi-rs drops that row too
    file_id = parse_log_file_name(path.name).file_id
    victim = next(r for r in snapshot if r["_hoodie_file_name"].startswith(file_id))
    more = pa.concat_tables([keys, pa.table({
        "record_key": [victim["_hoodie_record_key"]],
        "partition_path": [victim["_hoodie_partition_path"]],
        "ordering_value": pa.array([0], keys.schema.field("ordering_value").type)})])
    _replace_log(root, path, [encode_delete_block(more, block.instant_time,
                                                  avro_schema=block.schema_json)])
    assert _hudi_rs_rows(root) == sort_expected([r for r in snapshot if r is not victim])


def test_hudi_rs_reads_a_v9_table_with_our_avro_and_delete_blocks(fixture_tables, tmp_path):
    name = "sample_table__mor__avro__v9_timebasedkeygen_nonhivestyle"
    root = _copy_table(fixture_tables, name, tmp_path)
    kinds = []
    for path in [p for p in _log_paths(root) if ".hoodie" not in p.relative_to(root).parts]:
        blocks = list(read_log_file(Storage(str(path.parent)), path.name))
        ours = []
        for b in blocks:
            kinds.append(b.block_type)
            ours.append(_reencode(b))  # default (ascending) header order
        _replace_log(root, path, ours)
    assert sorted(kinds) == [BlockType.DELETE, BlockType.AVRO_DATA]
    assert _hudi_rs_rows(root) == sort_expected(expected(name)["snapshot"])


def test_parquet_content_of_an_empty_table_is_a_valid_parquet_file():
    content = encode_parquet_content(_rich_rows().slice(0, 0), RICH_AVRO)
    assert pq.read_table(pa.BufferReader(content)).num_rows == 0


def test_enum_uuid_fixed_and_bytes_decimal_fields_round_trip(tmp_path):
    schema = {"type": "record", "name": "e", "namespace": "hoodie.e", "fields": [
        {"name": "color", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}]},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "raw", "type": {"type": "fixed", "name": "Raw", "size": 3}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}}]}
    table = pa.table({
        "color": ["GREEN", None, "RED"],
        "id": ["0b5e1f7e-2d7b-4a55-9a8e-2b1f3f6e7a10"] * 3,
        "raw": pa.array([b"abc", b"\x00\x00\x00", b"xyz"], pa.binary(3)),
        "amount": pa.array([decimal.Decimal("-1.0000"), decimal.Decimal("1234567890123456.7890"),
                            decimal.Decimal(0)], pa.decimal128(20, 4)),
        "tags": [["a"], [], ["b", "c"]]})
    (back,) = _decode(encode_avro_data_block(table, schema, "1"), tmp_path)
    got = back.records()
    assert got.to_pylist() == table.to_pylist()
    assert back.schema_json == json.dumps(schema, separators=(",", ":"))
    with pytest.raises(SchemaError):
        encode_avro_data_block(table.set_column(0, "color", pa.array(["BLUE", None, "RED"])), schema, "1")


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_sliced_and_chunked_tables_are_written_as_their_rows(fmt, tmp_path):
    rich = _rich_rows()
    encode = encode_avro_data_block if fmt == "avro" else encode_parquet_data_block
    for table in (rich.slice(1, 2), pa.concat_tables([rich, rich, rich]).slice(2, 5),
                  pa.concat_tables([rich.slice(2), rich.slice(0, 1)])):
        (back,) = _decode(encode(table, RICH_AVRO, "1"), tmp_path)
        assert back.records().to_pylist() == table.to_pylist()
