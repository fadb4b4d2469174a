"""Consecutive Avro data blocks decoded together (``log.data.decode_avro_blocks``) against each
decoded alone (the model): random runs of blocks of two schemas, flat and nested, of every
size (empty, record by record, column-wise, over the join limit), version 1 blocks without a
count, and a damaged block in the middle, whose error must still name that block."""

from __future__ import annotations

import json
import random
import struct

import pyarrow as pa
import pytest

from hudi_format.errors import LogFormatError
from hudi_format.log import data as D
from hudi_format.log.encode import encode_avro_content

FLAT = json.dumps({"type": "record", "name": "r", "fields": [
    {"name": "id", "type": "string"}, {"name": "ts", "type": "long"},
    {"name": "x", "type": ["null", "double"], "default": None}]})
OTHER = json.dumps({"type": "record", "name": "r", "fields": [
    {"name": "id", "type": "string"}, {"name": "ts", "type": "long"}]})
NESTED = json.dumps({"type": "record", "name": "r", "fields": [
    {"name": "id", "type": "string"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]})


def _rows(schema: str, n: int, start: int) -> pa.Table:
    cols = {"id": [f"k{start + i}" for i in range(n)]}
    names = [f["name"] for f in json.loads(schema)["fields"]]
    if "ts" in names:
        cols["ts"] = [start + i for i in range(n)]
    if "x" in names:
        cols["x"] = [None if i % 3 == 0 else i / 2 for i in range(n)]
    if "tags" in names:
        cols["tags"] = [[f"t{i}"] for i in range(n)]
    return pa.table(cols)


def _block(rng: random.Random, start: int) -> tuple[bytes, str, str]:
    schema = rng.choice([FLAT, FLAT, FLAT, OTHER, NESTED])
    n = rng.choice([0, 1, 7, 150, 260, 900])
    content = encode_avro_content(_rows(schema, n, start), schema)
    if rng.random() < 0.1:          # version 1: no record count, records up to the end
        content = struct.pack(">i", 1) + content[8:]
    return content, schema, f"block@{start}"


@pytest.mark.parametrize("seed", range(40))
def test_joined_blocks_decode_as_each_alone(seed, monkeypatch):
    rng = random.Random(seed)
    if rng.random() < 0.3:          # blocks over the join limit stay alone
        monkeypatch.setattr(D, "JOIN_BELOW_ROWS", 200)
    items = [_block(rng, 1000 * i) for i in range(rng.choice([1, 2, 5, 12]))]
    got = D.decode_avro_blocks(items)
    want = [D.decode_avro_block(*item) for item in items]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.equals(w), (g, w)


def test_a_damaged_block_in_a_run_is_named():
    items = [(encode_avro_content(_rows(FLAT, 300, 1000 * i), FLAT), FLAT, f"block {i}") for i in range(5)]
    content = bytearray(items[2][0])
    content[12] = 0x7F          # the first record's key: a negative string length (framing intact)
    items[2] = (bytes(content), FLAT, "block 2")
    with pytest.raises(LogFormatError, match="block 2"):
        D.decode_avro_blocks(items)
    with pytest.raises(LogFormatError, match="block 2"):
        D.decode_avro_block(*items[2])


def test_trailing_bytes_keep_a_block_out_of_the_run():
    """A block whose stated records end before its content is decoded alone (as before): joined,
    its trailing bytes would be read as the next block's records."""
    items = [(encode_avro_content(_rows(FLAT, 300, 1000 * i), FLAT), FLAT, f"block {i}") for i in range(3)]
    first = items[0][0]
    record = first[8:12 + struct.unpack(">i", first[8:12])[0]]     # a whole framed record, which
    items[1] = (items[1][0] + record, FLAT, "block 1")              # would decode as one if joined
    got = D.decode_avro_blocks(items)
    assert [t.num_rows for t in got] == [300, 300, 300]
    assert all(g.equals(D.decode_avro_block(*i)) for g, i in zip(got, items))


@pytest.mark.parametrize("run_bytes", [64 << 20, 40_000, 1_000])
def test_data_records_of_a_log_file(tmp_path, monkeypatch, run_bytes):
    """``log.data_records`` of a log file's blocks (two schemas, a Parquet block, delete blocks
    between) equals each block's ``records`` (``None`` for a delete block), whatever the runs
    are cut at."""
    from hudi_format.log import block as B, data_records, encode_avro_data_block, encode_delete_block, read_log_file
    from hudi_format.log import encode_parquet_data_block
    from hudi_format.storage import Storage
    monkeypatch.setattr(B, "JOIN_RUN_BYTES", run_bytes)
    rng = random.Random(run_bytes)
    parts = []
    for i in range(12):
        kind = rng.random()
        if kind < 0.1:
            parts.append(encode_delete_block(pa.table({"record_key": [f"k{i}"], "partition_path": ["p"]}),
                                             "20240101000000000"))
        elif kind < 0.2:
            parts.append(encode_parquet_data_block(_rows(OTHER, 50, 1000 * i), OTHER, "20240101000000000"))
        else:
            schema = FLAT if kind < 0.8 else OTHER
            parts.append(encode_avro_data_block(_rows(schema, rng.choice([3, 150, 400]), 1000 * i), schema,
                                                "20240101000000000"))
    name = ".f1_20240101000000000.log.1_0-1-1"
    (tmp_path / name).write_bytes(b"".join(parts))
    blocks = list(read_log_file(Storage(str(tmp_path)), name))
    target = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("x", pa.float64())])
    for schema in (None, target):
        got = data_records(blocks, schema)
        want = [None if b.block_type == B.BlockType.DELETE else b.records(schema) for b in blocks]
        assert [g if g is None else g.to_pylist() for g in got] == [w if w is None else w.to_pylist() for w in want]
