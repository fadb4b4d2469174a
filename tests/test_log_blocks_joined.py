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
