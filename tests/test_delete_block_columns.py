"""Delete blocks of many keys are encoded and decoded column-wise: byte for byte what fastavro
writes from Hudi's ``HoodieDeleteRecordList`` schema, and read back as fastavro reads them.

The reference here builds every record as a Python dict with the wrapper Hudi's
``wrapValueIntoAvro`` picks for the value's type and lets fastavro encode it; decoding is
compared with the library's record-by-record reader (fastavro) on the very same bytes,
damaged ones included.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import random
import struct

import fastavro
import pyarrow as pa
import pytest

from hudi_format.errors import LogFormatError
from hudi_format.log import delete as D
from hudi_format.log.encode import encode_delete_content

_NS = "org.apache.hudi.avro.model."
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _wrapped(t: pa.DataType, v):
    """The (wrapper, value) fastavro takes for one ordering value of Arrow type ``t``."""
    if v is None:
        return None
    if pa.types.is_boolean(t):
        return (_NS + "BooleanWrapper", {"value": v})
    if t in (pa.int8(), pa.int16(), pa.int32()):
        return (_NS + "IntWrapper", {"value": v})
    if pa.types.is_integer(t):
        return (_NS + "LongWrapper", {"value": v})
    if pa.types.is_float32(t):
        return (_NS + "FloatWrapper", {"value": v})
    if pa.types.is_float64(t):
        return (_NS + "DoubleWrapper", {"value": v})
    if pa.types.is_string(t):
        return (_NS + "StringWrapper", {"value": v})
    if pa.types.is_binary(t):
        return (_NS + "BytesWrapper", {"value": v})
    if pa.types.is_date(t):
        return (_NS + "DateWrapper", {"value": (v - dt.date(1970, 1, 1)).days})
    if pa.types.is_timestamp(t):
        return (_NS + "TimestampMicrosWrapper", {"value": (v - _EPOCH) // dt.timedelta(microseconds=1)})
    if pa.types.is_time(t):
        return (_NS + "TimeMicrosWrapper", {"value": v})
    if pa.types.is_decimal(t):
        return (_NS + "DecimalWrapper", {"value": v})
    raise AssertionError(t)


def _reference(keys: list, parts: list, ordering: list, t: pa.DataType | None) -> bytes:
    records = [{"recordKey": k, "partitionPath": p, "orderingVal": _wrapped(t, v) if t is not None else None}
               for k, p, v in zip(keys, parts, ordering)]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, D.delete_record_list_schema(), {"deleteRecordList": records})
    return buf.getvalue()


def _key(rng: random.Random) -> str:
    alphabet = "abcXYZ0123456789-_/é中😀"
    length = rng.choice([0, 1, 5, 12, 36, 63, 64, 200]) if rng.random() < 0.98 else 9000
    return "".join(rng.choice(alphabet) for _ in range(length))


_ORDERING = [
    (pa.int32(), lambda r: r.randint(-2 ** 31, 2 ** 31 - 1)),
    (pa.int64(), lambda r: r.choice([0, 1, -1, 2 ** 40, -2 ** 63, 2 ** 63 - 1, r.randint(-10 ** 6, 10 ** 6)])),
    (pa.float32(), lambda r: r.choice([0.0, 1.5, -2.25])),
    (pa.float64(), lambda r: r.uniform(-1e9, 1e9)),
    (pa.string(), lambda r: _key(r)[:20]),
    (pa.binary(), lambda r: bytes(r.randrange(256) for _ in range(r.randrange(0, 9)))),
    (pa.bool_(), lambda r: r.random() < 0.5),
    (pa.date32(), lambda r: dt.date(1970, 1, 1) + dt.timedelta(days=r.randint(-40000, 40000))),
    (pa.timestamp("us", tz="UTC"), lambda r: _EPOCH + dt.timedelta(microseconds=r.randint(-2 ** 50, 2 ** 50))),
    (pa.time64("us"), lambda r: r.randint(0, 86_400_000_000 - 1)),
    (pa.decimal128(30, 15), lambda r: decimal.Decimal(r.randint(-10 ** 20, 10 ** 20)).scaleb(-15)),
    (None, None),
]


def _case(seed: int) -> tuple[pa.Table, bytes]:
    rng = random.Random(seed)
    n = rng.choice([128, 129, 500, 1500])
    keys = [_key(rng) if rng.random() > 0.02 else None for _ in range(n)]
    layout = rng.choice(["one", "one", "empty", "many", "nulls", "marker in keys"])
    parts = {"one": ["city=sf/2024"] * n, "empty": [""] * n, "many": [rng.choice(["a", "bb", "c/d"]) for _ in range(n)],
             "nulls": [rng.choice(["p", None]) for _ in range(n)], "marker in keys": ["city-1"] * n}[layout]
    if layout == "marker in keys":   # the bytes of the partition field inside some keys
        keys = [k if i % 7 else f"x\x02\x0ccity-1{i}" for i, k in enumerate(keys)]
    t, make = _ORDERING[seed % len(_ORDERING)]
    ordering = [make(rng) if rng.random() > 0.1 else None for _ in range(n)] if make else [None] * n
    if t is not None and rng.random() < 0.2:
        ordering = [None] * n
    columns = {"record_key": pa.array(keys, pa.string()), "partition_path": pa.array(parts, pa.string())}
    if t is not None:
        columns["ordering_value"] = pa.array(ordering, t)
    return pa.table(columns), _reference(keys, parts, ordering, t)


@pytest.mark.parametrize("seed", range(14))
def test_many_deletes_encode_and_decode_as_fastavro_does(seed):
    table, want = _case(seed)
    content = encode_delete_content(table)
    assert content[8:] == want
    assert struct.unpack(">ii", content[:8]) == (3, len(want))
    got = D.decode_delete_block(content, "block")
    assert got.equals(D._decode_records(want, "block"))
    assert got.column("record_key").equals(table.column("record_key"))
    assert got.column("partition_path").equals(table.column("partition_path"))


def test_each_decoder_path_is_taken_and_agrees():
    """One partition path: found by its bytes; several, or keys holding those bytes: walked;
    mixed ordering-value kinds: fastavro."""
    n = 300
    keys = [f"key-{i}" for i in range(n)]
    one = _reference(keys, ["p1"] * n, list(range(n)), pa.int64())
    assert D._by_partition(D.ColumnDecoder(one, "b"), one, 2, n) is not None
    for path in ("p" * 100, "é" * 70):   # its length a two-byte varint, not UTF-8 on its own
        long = _reference(keys, [path] * n, list(range(n)), pa.int64())
        got = D._by_partition(D.ColumnDecoder(long, "b"), long, 2, n)
        assert got is not None and got.equals(D._decode_records(long, "b"))
    many = _reference(keys, [f"p{i % 3}" for i in range(n)], list(range(n)), pa.int64())
    assert D._by_partition(D.ColumnDecoder(many, "b"), many, 2, n) is None
    assert D._decode_columns(many, "b").equals(D._decode_records(many, "b"))
    marked = _reference([k + "\x02\x04p1" for k in keys], ["p1"] * n, list(range(n)), pa.int64())
    assert D._by_partition(D.ColumnDecoder(marked, "b"), marked, 2, n) is None
    assert D._decode_columns(marked, "b").equals(D._decode_records(marked, "b"))
    # as many occurrences of the bytes as records, but one inside a key, one record without them
    swapped = _reference([k if i != 5 else k + "\x02\x04p1" for i, k in enumerate(keys)],
                         ["p1" if i != 9 else "p2" for i in range(n)], list(range(n)), pa.int64())
    assert D._by_partition(D.ColumnDecoder(swapped, "b"), swapped, 2, n) is None
    assert D._decode_columns(swapped, "b").equals(D._decode_records(swapped, "b"))
    records = [{"recordKey": k, "partitionPath": "p", "orderingVal": _wrapped(pa.int32() if i % 2 else pa.int64(), i)}
               for i, k in enumerate(keys)]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, D.delete_record_list_schema(), {"deleteRecordList": records})
    mixed = buf.getvalue()
    assert D._decode_columns(mixed, "b") is None
    content = struct.pack(">ii", 3, len(mixed)) + mixed
    assert D.decode_delete_block(content, "b").column("ordering_value").type == pa.int64()


@pytest.mark.parametrize("seed", range(4))
def test_damaged_deletes_decode_as_fastavro_does_or_fail_clearly(seed):
    """Truncated or flipped bytes: where fastavro reads the payload, the column-wise decoder
    reads the same table; where it cannot, a LogFormatError names the block."""
    table, payload = _case(seed * 3)
    rng = random.Random(seed)
    for _ in range(60):
        damaged = bytearray(payload)
        if rng.random() < 0.3:
            damaged = damaged[:rng.randrange(1, len(payload))]
        else:
            for _ in range(rng.choice([1, 2, 5])):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        damaged = bytes(damaged)
        content = struct.pack(">ii", 3, len(damaged)) + damaged
        try:
            want = D._decode_records(damaged, "block 7")
        except LogFormatError:
            with pytest.raises(LogFormatError, match="block 7"):
                D.decode_delete_block(content, "block 7")
            assert D._decode_columns(damaged, "block 7") is None
            continue
        assert D.decode_delete_block(content, "block 7").equals(want)
