"""The column-wise Avro codec of log data blocks against fastavro, value for value, byte for byte.

Random flat schemas (every supported kind, required or in a union with null on either side)
and random rows (nulls, empty and non-ASCII strings, negative and extreme longs, NaN and
infinities) are encoded by :func:`encode_rows` and by ``fastavro.schemaless_writer`` row by
row: the bytes must be identical. Decoding a block's content column-wise must give exactly
the rows fastavro reads back. Damaged content must raise :class:`LogFormatError`.
"""

from __future__ import annotations

import io
import json
import math
import struct

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hudi_format.avro_values import AvroArrowConverter
from hudi_format.errors import LogFormatError
from hudi_format.log.avro_columns import decode_columns, encode_rows, plan_for
from hudi_format.log.block import BlockType, HeaderKey, LogBlock
from hudi_format.log.data import _compiled, _decode_avro_rows
from hudi_format.log.encode import encode_avro_content, encode_data_blocks

CODEC = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

I32 = (-(1 << 31), (1 << 31) - 1)
I64 = (-(1 << 63), (1 << 63) - 1)
_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)
_VALUES = {
    "boolean": st.booleans(),
    "int": st.one_of(st.integers(*I32), st.sampled_from([I32[0], I32[1], 0, -1, 63, 64, -65])),
    "long": st.one_of(st.integers(*I64), st.integers(-300, 300),
                      st.sampled_from([I64[0], I64[1], 1 << 56, -(1 << 55), (1 << 62) + 1])),
    "float": st.floats(width=32, allow_nan=True, allow_infinity=True),
    "double": st.floats(allow_nan=True, allow_infinity=True),
    "string": st.one_of(_TEXT, st.just(""), st.text(min_size=100, max_size=300)),
    "bytes": st.binary(max_size=200),
    "fixed": st.binary(min_size=5, max_size=5),
    "enum": st.sampled_from(["A", "B", "ZED"]),
}


def _avro_type(kind: str, i: int):
    if kind == "fixed":
        return {"type": "fixed", "name": f"f{i}", "size": 5}
    if kind == "enum":
        return {"type": "enum", "name": f"e{i}", "symbols": ["A", "B", "ZED"]}
    return kind


@st.composite
def schemas_and_rows(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(_VALUES)), min_size=1, max_size=8))
    fields, makers = [], []
    for i, kind in enumerate(kinds):
        shape = draw(st.sampled_from(["required", "null first", "null last"]))
        t = _avro_type(kind, i)
        if shape == "null first":
            t = ["null", t]
        elif shape == "null last":
            t = [t, "null"]
        fields.append({"name": f"c{i}", "type": t})
        value = _VALUES[kind]
        makers.append(value if shape == "required" else st.one_of(st.none(), value))
    schema = {"type": "record", "name": "rec", "namespace": "test", "fields": fields}
    rows = draw(st.lists(st.tuples(*makers), max_size=40))
    return schema, [{f"c{i}": v for i, v in enumerate(r)} for r in rows]


def _fastavro_records(schema: dict, rows: list[dict]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(buf.getvalue())
    return out


def _storage_table(schema: dict, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=AvroArrowConverter(schema).storage_schema)


def _content(records: list[bytes]) -> bytes:
    return b"".join([struct.pack(">ii", 3, len(records))]
                    + [struct.pack(">i", len(r)) + r for r in records])


def _comparable(rows: list[dict]) -> list[dict]:
    """Floats by their bits, so NaN compares equal to itself."""
    def norm(v):
        if isinstance(v, float):
            return ("float", struct.pack("<d", v)) if not math.isnan(v) else ("nan",)
        return v
    return [{k: norm(v) for k, v in r.items()} for r in rows]


@CODEC
@given(schemas_and_rows())
def test_encode_rows_matches_fastavro_byte_for_byte(case):
    schema, rows = case
    plans = plan_for(schema)
    assert plans is not None
    ours = encode_rows(_storage_table(schema, rows), plans).to_pylist()
    assert ours == _fastavro_records(schema, rows)


@CODEC
@given(schemas_and_rows())
def test_decode_columns_matches_fastavro(case):
    schema, rows = case
    content = _content(_fastavro_records(schema, rows))
    conv = AvroArrowConverter(schema)
    table = decode_columns(content, plan_for(schema), conv.storage_schema, "test block")
    _, parsed = _compiled(json.dumps(schema))
    expected = _decode_avro_rows(content, parsed, "test block")
    assert table.schema == conv.storage_schema
    assert _comparable(table.to_pylist()) == _comparable(expected)


TRIP = {"type": "record", "name": "trip", "namespace": "hoodie.t", "fields": [
    {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": "long"},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
    {"name": "price", "type": ["null", {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.price",
                                        "size": 6, "logicalType": "decimal", "precision": 12, "scale": 2}]},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}},
    {"name": "fare", "type": ["null", "double"], "default": None},
]}


def _trip_table(n: int) -> pa.Table:
    import decimal
    return pa.table({
        "_hoodie_record_key": pa.array([None if i % 7 == 3 else f"k{i}-é" for i in range(n)]),
        "ts": pa.array([i * (-1) ** i * 10**12 for i in range(n)], pa.int64()),
        "at": pa.array([None if i % 5 == 0 else i * 1_000_003 for i in range(n)], pa.timestamp("us", tz="UTC")),
        "day": pa.array([None if i % 3 == 0 else i for i in range(n)], pa.int32()).cast(pa.date32()),
        "price": pa.array([decimal.Decimal(i * 37 - 500) / 100 for i in range(n)], pa.decimal128(12, 2)),
        "amount": pa.array([decimal.Decimal(-i * 10**9 - 1) / 1000 for i in range(n)], pa.decimal128(20, 3)),
        "fare": pa.array([float("nan") if i == 4 else i / 3 for i in range(n)], pa.float64()),
    })


def _block(content: bytes, schema: dict) -> LogBlock:
    return LogBlock(path="t.log", offset=0, length=len(content), block_type=BlockType.AVRO_DATA, version=1,
                    header={HeaderKey.SCHEMA: json.dumps(schema)}, footer={}, content_offset=0,
                    content_length=len(content), read=lambda o, k: content[o:o + k])


def test_logical_types_round_trip_like_the_fastavro_path():
    table = _trip_table(200)
    content = encode_avro_content(table, TRIP)
    records = _fastavro_records(AvroArrowConverter(TRIP).raw_schema,
                                _storage_rows(table))
    assert content == _content(records)
    ours = _block(content, TRIP).records()
    conv, parsed = _compiled(json.dumps(TRIP))
    old = conv.raw_to_arrow(_decode_avro_rows(content, parsed, "t"))
    assert ours.schema == old.schema == conv.arrow_schema
    assert _comparable(ours.to_pylist()) == _comparable(old.to_pylist())
    assert _comparable(ours.to_pylist()) == _comparable(table.to_pylist())


def _storage_rows(table: pa.Table) -> list[dict]:
    from hudi_format.avro_values import arrow_to_avro_records
    return arrow_to_avro_records(table, TRIP)


@pytest.mark.parametrize("slice_bytes", [256 << 20, 2000, 1])
def test_block_splitting_is_greedy_by_framed_size(slice_bytes, monkeypatch):
    """Blocks are cut as Hudi's greedy rule cuts them, also when the rows are encoded in
    several slices (large tables): a block may span slices."""
    monkeypatch.setattr("hudi_format.log.encode._ENCODE_SLICE_BYTES", slice_bytes)
    table = _trip_table(300)
    records = _fastavro_records(AvroArrowConverter(TRIP).raw_schema, _storage_rows(table))
    for limit in (1, 60, 500, 4096, 1 << 20):
        expected, group, size = [], [], 8   # the greedy rule of hoodie.logfile.data.block.max.size
        for rec in records:
            if group and size + 4 + len(rec) > limit:
                expected.append(group)
                group, size = [], 8
            group.append(rec)
            size += 4 + len(rec)
        expected.append(group)
        blocks = encode_data_blocks(table, TRIP, "1", max_block_size=limit)
        assert [len(b) for b in blocks] == [len(_block_bytes(g)) for g in expected]
        assert all(_content(g) in b for g, b in zip(expected, blocks))


def _block_bytes(group: list[bytes]) -> bytes:
    from hudi_format.log.encode import _data_header, encode_block
    return encode_block(BlockType.AVRO_DATA, _data_header(TRIP, "1", None, None), _content(group))


FLAT = {"type": "record", "name": "r", "fields": [{"name": "s", "type": ["null", "string"]},
                                                   {"name": "n", "type": "long"}]}


def _good() -> bytes:
    return _content(_fastavro_records(FLAT, [{"s": "abc", "n": 5}, {"s": None, "n": -1}]))


@pytest.mark.parametrize("damage,match", [
    (lambda c: c[:-1], "impossible length|ends"),
    (lambda c: c[:12] + b"\x04" + c[13:], "union branch"),                        # branch index 2
    (lambda c: c[:13] + b"\x7e" + c[14:], "past the end"),                        # string length 63
    (lambda c: c[:13] + b"\x01" + c[14:], "past the end|negative|does not match"),  # length -1
    (lambda c: c[:13] + b"\x04" + c[14:], "does not match"),                      # length 2 of 3
    (lambda c: c[:14] + b"\xff\xfe" + c[16:], "UTF-8|utf8|cannot be decoded"),
    (lambda c: c[:4] + struct.pack(">i", 5) + c[8:], "ends"),
])
def test_damaged_content_raises(damage, match):
    conv = AvroArrowConverter(FLAT)
    plans = plan_for(FLAT)
    assert decode_columns(_good(), plans, conv.storage_schema, "b").to_pylist() == \
        [{"s": "abc", "n": 5}, {"s": None, "n": -1}]
    with pytest.raises(LogFormatError, match=match):
        decode_columns(damage(_good()), plans, conv.storage_schema, "b")


def test_overlong_varint_raises():
    rec = b"\x00" + b"\xff" * 11 + b"\x01"
    with pytest.raises(LogFormatError, match="10 bytes|does not match"):
        decode_columns(_content([rec]), plan_for(FLAT), AvroArrowConverter(FLAT).storage_schema, "b")


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": "int"}}]},
    {"type": "record", "name": "r", "fields": [{"name": "u", "type": ["null", "int", "string"]}]},
    {"type": "record", "name": "r", "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}]},
])
def test_nested_schemas_use_the_general_decoder(schema):
    assert plan_for(schema) is None


@CODEC
@given(schemas_and_rows())
def test_small_blocks_take_the_record_path_to_the_same_table_and_bytes(case):
    """Blocks under :data:`COLUMNAR_DECODE_ROWS` records are decoded by fastavro record by
    record, tables under :data:`COLUMNAR_ENCODE_ROWS` rows encoded so (cheaper when small):
    each path gives the same Arrow table, and the same bytes, as the column-wise one."""
    from hudi_format.log import data, encode
    schema, rows = case
    table = _storage_table(schema, rows)
    conv = AvroArrowConverter(schema)
    arrow = conv.storage_to_arrow(table)
    schema_json = json.dumps(schema)
    saved = data.COLUMNAR_DECODE_ROWS, encode.COLUMNAR_ENCODE_ROWS
    try:
        got = {}
        for name, limit in (("rows", 10**9), ("columns", 0)):
            data.COLUMNAR_DECODE_ROWS = encode.COLUMNAR_ENCODE_ROWS = limit
            content = encode_avro_content(arrow, schema)
            got[name] = (content, data.decode_avro_block(content, schema_json, "b"))
    finally:
        data.COLUMNAR_DECODE_ROWS, encode.COLUMNAR_ENCODE_ROWS = saved
    assert got["rows"][0] == got["columns"][0] == _content(_fastavro_records(schema, rows))
    assert got["rows"][1].schema == got["columns"][1].schema == conv.arrow_schema
    assert _comparable(got["rows"][1].to_pylist()) == _comparable(got["columns"][1].to_pylist())
