"""Delete blocks: ``HoodieDeleteBlock`` content <-> an Arrow table of deleted keys, column-wise.

Content: int version, int length, then ``length`` bytes. From version 3 the bytes are one Avro
``HoodieDeleteRecordList`` (binary encoding): an array of ``HoodieDeleteRecord``, whose
``recordKey`` and ``partitionPath`` are ``[null, string]`` and whose ``orderingVal`` is a union
of null and one-field wrapper records (``IntWrapper``, ``LongWrapper``, ...; a wrapper's bytes
are its value's). Versions 1-2 used Java (Kryo) serialization, which only a JVM can read. The
union order is fixed by the .avsc, so the schema is assembled from Hudi's own files rather than
retyped here.

Through fastavro that union of records costs ~20 us a record: a delete of a million keys spent
seconds encoding its blocks, and every read of those file groups until compaction as long
decoding them. So every field of every record is encoded, and decoded, with Arrow compute
(:mod:`.avro_columns`), byte for byte what fastavro and Avro Java write. Encoding picks a
column's wrapper from its Arrow type, as Hudi's ``wrapValueIntoAvro`` picks it from the Java
value (:func:`wrapper_values`). Decoding has the one sequential step the format forces: records
are not length-prefixed, so where record ``i + 1`` starts is known only once record ``i`` is
read; :func:`_starts` walks the records reading only what moves the cursor (a union tag, a
one-byte string length: ~1 us a record), then each field is decoded for all records at once.
Content that decoder does not take (an array in several blocks, an ``ArrayWrapper``, a column
mixing ordering-value kinds, damaged bytes) is read by fastavro, which decides what it means.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from ..avro_values import decimal_to_twos_complement, restore_logical
from ..errors import LogFormatError, SchemaError, UnsupportedFeatureError
from ..schema import strip_json_comments
from ..varint import avro_long, decode_varint
from .avro_columns import ColumnDecoder, FieldPlan, binary_data, encode_rows, row_offsets

__all__ = ["decode_delete_block", "encode_record_list", "wrapper_values", "delete_record_list_schema"]

_NS = "org.apache.hudi.avro.model."
# wrapper -> Arrow type of its unwrapped value when a whole column has that one kind
_KIND_TYPES = {
    "BooleanWrapper": pa.bool_(), "IntWrapper": pa.int32(), "LongWrapper": pa.int64(),
    "FloatWrapper": pa.float32(), "DoubleWrapper": pa.float64(), "BytesWrapper": pa.binary(),
    "StringWrapper": pa.string(), "DateWrapper": pa.date32(), "LocalDateWrapper": pa.date32(),
    "DecimalWrapper": pa.decimal128(30, 15), "TimeMicrosWrapper": pa.time64("us"),
    "TimestampMicrosWrapper": pa.timestamp("us", tz="UTC"),
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
# wrapper -> the Avro type of its ``value`` field (what is stored)
_STORED = {"BooleanWrapper": "boolean", "IntWrapper": "int", "LongWrapper": "long", "FloatWrapper": "float",
           "DoubleWrapper": "double", "BytesWrapper": "bytes", "StringWrapper": "string", "DateWrapper": "int",
           "DecimalWrapper": "bytes", "TimeMicrosWrapper": "long", "TimestampMicrosWrapper": "long"}
_STORED_TYPES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                 "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
# fewer records go through fastavro, faster there: the column-wise codec's ~0.4 ms of Arrow calls
# whatever the count against fastavro's ~5 us a record (measured: even near 100 records)
_COLUMNS_FROM = 128
_KEY = FieldPlan("recordKey", "string", null_index=0)
_PARTITION = FieldPlan("partitionPath", "string", null_index=0)
# how the walk moves past an ordering value, by its wrapper's stored type: > 0 a fixed size,
# -1 a varint, -2 a length-prefixed string or bytes
_MOVE = {"boolean": 1, "float": 4, "double": 8, "int": -1, "long": -1, "bytes": -2, "string": -2}


# -- the schema --------------------------------------------------------------------------------
def _load_avsc(name: str) -> Any:
    text = (resources.files("hudi_format") / "avro" / name).read_text(encoding="utf-8")
    return json.loads(strip_json_comments(text))


def _collect_named(s: Any, out: dict) -> None:
    if isinstance(s, list):
        for b in s:
            _collect_named(b, out)
    elif isinstance(s, dict):
        if s.get("type") == "record" and isinstance(s.get("name"), str):
            full = s["name"] if "." in s["name"] else f"{s.get('namespace', '')}.{s['name']}".lstrip(".")
            out.setdefault(full, s)
        for key in ("type", "items", "values"):
            if key in s and not isinstance(s[key], str):
                _collect_named(s[key], out)
        for f in s.get("fields") or []:
            _collect_named(f.get("type"), out)


def _inline(s: Any, defs: dict, defined: set) -> Any:
    """Replace the first reference to each wrapper name by its definition."""
    if isinstance(s, str):
        if s in defs and s not in defined:
            defined.add(s)
            return _inline(defs[s], defs, defined)
        return s
    if isinstance(s, list):
        return [_inline(b, defs, defined) for b in s]
    if isinstance(s, dict):
        out = dict(s)
        for key in ("type", "items", "values"):
            if key in out:
                out[key] = _inline(out[key], defs, defined)
        if isinstance(s.get("fields"), list):
            out["fields"] = [dict(f, type=_inline(f.get("type"), defs, defined)) for f in s["fields"]]
        return out
    return s


@lru_cache(maxsize=1)
def delete_record_list_schema():
    """fastavro-parsed ``HoodieDeleteRecordList`` with its wrapper types inlined."""
    defs: dict = {}
    _collect_named(_load_avsc("HoodieMetadata.avsc"), defs)
    wrappers = {k: v for k, v in defs.items() if k.startswith(_NS) and k.endswith("Wrapper")}
    schema = _inline(_load_avsc("HoodieDeleteRecordList.avsc"), wrappers, set())
    return fastavro.parse_schema(schema)


@lru_cache(maxsize=1)
def _branches() -> tuple[str, ...]:
    """``orderingVal``'s union, wrapper names in branch order (0: null), from Hudi's .avsc."""
    record = delete_record_list_schema()["fields"][0]["type"]["items"]
    union = next(f["type"] for f in record["fields"] if f["name"] == "orderingVal")
    return tuple((b if isinstance(b, str) else b["name"]).rsplit(".", 1)[-1] for b in union)


@lru_cache(maxsize=1)
def _moves() -> tuple[int | None, ...]:
    """For each byte value, how the walk moves past an ordering value of that union tag
    (zig-zag branch index); ``None``: not a wrapper this decoder takes."""
    out: list[int | None] = [None] * 256
    for i, name in enumerate(_branches()):
        if name in _STORED:
            out[2 * i] = _MOVE[_STORED[name]]
    return tuple(out)


# -- encoding, column-wise --------------------------------------------------------------------
def wrapper_values(col: pa.ChunkedArray | pa.Array) -> tuple[str | None, pa.Array]:
    """(wrapper record name, Avro values as stored) of an ordering-value column, as Hudi's
    ``wrapValueIntoAvro`` wraps them; ``None`` for a column of nulls only."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_dictionary(t):
        arr, t = arr.dictionary_decode(), t.value_type
    try:
        return _wrapped(arr, t)
    except (pa.ArrowException, ValueError) as exc:
        raise SchemaError(f"ordering values of Arrow type {t} cannot be wrapped for a delete block: {exc}") from exc


def _wrapped(arr: pa.Array, t: pa.DataType) -> tuple[str | None, pa.Array]:
    if pa.types.is_null(t):
        return None, arr
    if pa.types.is_boolean(t):
        return "BooleanWrapper", arr
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "IntWrapper", arr.cast(pa.int32())
    if pa.types.is_integer(t):
        return "LongWrapper", arr.cast(pa.int64())
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "FloatWrapper", arr.cast(pa.float32())
    if pa.types.is_float64(t):
        return "DoubleWrapper", arr
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "StringWrapper", arr.cast(pa.string())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_binary_view(t):
        return "BytesWrapper", arr.cast(pa.binary())
    if pa.types.is_date(t):
        return "DateWrapper", arr.cast(pa.date32()).cast(pa.int32())
    if pa.types.is_timestamp(t):
        return "TimestampMicrosWrapper", arr.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
    if pa.types.is_time(t):
        return "TimeMicrosWrapper", arr.cast(pa.time64("us")).cast(pa.int64())
    if pa.types.is_decimal(t):   # decimal(30, 15) as minimal two's-complement bytes
        return "DecimalWrapper", decimal_to_twos_complement(arr.cast(pa.decimal128(30, 15)), pa.binary())
    raise SchemaError(f"ordering values of Arrow type {t} have no Hudi value wrapper")


def encode_record_list(keys: pa.Array, partitions: pa.Array, ordering: pa.Array | pa.ChunkedArray | None) -> bytes:
    """The Avro ``HoodieDeleteRecordList`` of these deletes (string keys and partition paths,
    null allowed; ``ordering``: the ordering values, ``None`` for none)."""
    n = len(keys)
    kind, stored = wrapper_values(ordering) if ordering is not None else (None, pa.nulls(n))
    if n < _COLUMNS_FROM:
        return _record_list_row_wise(keys, partitions, kind, stored)
    branch = _branches().index(kind) if kind is not None else 1
    plans = (_KEY, _PARTITION, FieldPlan("orderingVal", _STORED.get(kind or "", "int"), null_index=0, branch=branch))
    records = encode_rows(pa.table({"recordKey": keys, "partitionPath": partitions, "orderingVal": stored}), plans)
    # one array block (count, items) then the empty block that ends the array, as Avro writes it
    return avro_long(n) + binary_data(records) + b"\x00"


def _record_list_row_wise(keys: pa.Array, partitions: pa.Array, kind: str | None, stored: pa.Array) -> bytes:
    """:func:`encode_record_list` through fastavro, for the few records it encodes faster."""
    wrapper = _NS + kind if kind else None
    records = [{"recordKey": k, "partitionPath": p, "orderingVal": None if v is None else (wrapper, {"value": v})}
               for k, p, v in zip(keys.to_pylist(), partitions.to_pylist(), stored.to_pylist())]
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, delete_record_list_schema(), {"deleteRecordList": records})
    except Exception as exc:  # fastavro raises several kinds on bad values
        raise SchemaError(f"delete keys cannot be encoded: {exc}") from exc
    return buf.getvalue()


# -- decoding, column-wise ---------------------------------------------------------------------
def _string_end(b: bytes, p: int) -> int:
    """Where the string or bytes whose (zig-zag) length starts at ``p`` ends."""
    length, p = decode_varint(b, p)
    if length & 1:
        raise IndexError("a negative length")
    return p + (length >> 1)


def _past_string(b: bytes, p: int) -> int:
    """Where the ``[null, string]`` field at ``p`` ends (``IndexError``: not such a field)."""
    t = b[p]
    if t == 2:
        x = b[p + 1]   # a short string's length is one byte
        return p + 2 + (x >> 1) if x < 0x80 and not x & 1 else _string_end(b, p + 1)
    if t == 0:
        return p + 1
    raise IndexError("not a union tag of [null, string]")


def _starts(b: bytes, p: int, count: int) -> tuple[list[int], int] | None:
    """Where each of ``count`` records from ``p`` on starts, and where the last one ends;
    ``None`` where a record is not one this decoder takes, or does not parse."""
    moves = _moves()
    starts = [0] * count
    try:
        for i in range(count):
            starts[i] = p
            p = _past_string(b, _past_string(b, p))   # recordKey, partitionPath
            t = b[p]                     # orderingVal: null or a wrapper
            p += 1
            if t:
                move = moves[t]
                if move is None:
                    return None
                if move > 0:
                    p += move
                elif move == -1:
                    while b[p] & 0x80:
                        p += 1
                    p += 1
                else:
                    p = _string_end(b, p)
        if b[p] != 0:                    # the array's closing empty block
            return None
    except (IndexError, ValueError):     # past the end, an overlong varint
        return None
    return starts, p


def _decode_columns(payload: bytes, where: str) -> pa.Table | None:
    """The deletes of a ``HoodieDeleteRecordList`` read column-wise, or ``None`` when it is not
    one array block of records this decoder takes (fastavro reads those)."""
    try:
        raw, p = decode_varint(payload, 0)
    except (IndexError, ValueError):
        return None
    count = (raw >> 1) ^ -(raw & 1)
    if count < _COLUMNS_FROM or count > len(payload):
        return None
    dec = ColumnDecoder(payload, where)
    try:
        table = _by_partition(dec, payload, p, count)
        if table is not None:
            return table
        found = _starts(payload, p, count)
        if found is None:
            return None
        starts, end = found
        pos = pa.array(starts, pa.int64())
        limit = pa.concat_arrays([pos.slice(1), pa.array([end], pa.int64())])
        keys, pos = dec.nullable(_KEY, pos, limit, pa.string())
        partitions, pos = dec.nullable(_PARTITION, pos, limit, pa.string())
        ordering, pos = _ordering(dec, pos, limit)
    except (pa.ArrowInvalid, LogFormatError):   # invalid UTF-8, an impossible value
        return None
    if ordering is None or not pc.all(pc.equal(pos, limit)).as_py():
        return None
    return pa.table({"record_key": keys, "partition_path": partitions, "ordering_value": ordering})


def _by_partition(dec: ColumnDecoder, b: bytes, p: int, count: int) -> pa.Table | None:
    """The records read without the walk, when every one has the first one's partition path
    (Hudi writes a file group's deletes, which share its partition): the bytes of that field
    (tag, length, path) then occur once per record, and Arrow finds them all. From each
    occurrence the ordering value after it is decoded, which gives where the next record
    starts; each key must then end exactly at its record's occurrence. Those checks make the
    result the record-by-record parse's, so anything else (a key holding those bytes, another
    partition path) returns ``None`` and the records are walked."""
    try:
        q = _past_string(b, p)
        if b[q] != 2:
            return None
        end = _string_end(b, q + 1)
        text = b[q:end]
        path = pa.scalar(b[end - decode_varint(b, q + 1)[0] // 2:end].decode("utf-8"), pa.string())
    except (IndexError, ValueError):     # past the end, an overlong varint, not UTF-8
        return None
    region = pa.array([b[p:]], pa.large_binary())
    if pc.count_substring(region, text)[0].as_py() != count:
        return None
    pieces = pc.list_flatten(pc.split_pattern(region, text))
    gaps = pc.binary_length(pieces.slice(0, count)).cast(pa.int64())
    # occurrence j starts after pieces 0..j and j earlier occurrences
    marks = pc.add(pc.cumulative_sum(gaps), pc.add(row_offsets(count, len(text)), p))
    nxt = pa.concat_arrays([marks.slice(1), pa.array([len(b) - 1], pa.int64())])
    ordering, ends = _ordering(dec, pc.add(marks, len(text)), nxt)
    if ordering is None or b[ends[count - 1].as_py()] != 0:
        return None
    starts = pa.concat_arrays([pa.array([p], pa.int64()), ends.slice(0, count - 1)])
    keys, key_ends = dec.nullable(_KEY, starts, marks, pa.string())
    if not pc.all(pc.equal(key_ends, marks)).as_py():
        return None
    return pa.table({"record_key": keys, "partition_path": pa.repeat(path, count), "ordering_value": ordering})


def _ordering(dec: ColumnDecoder, pos: pa.Array, limit: pa.Array) -> tuple[pa.Array | None, pa.Array]:
    """The ordering values when all are null or of one wrapper kind (``None`` otherwise)."""
    tags = [t for t in pc.unique(pc.take(dec.bytes, pos)).to_pylist() if t]
    if not tags:
        return pa.nulls(len(pos)), pc.add(pos, 1)
    if len(tags) > 1 or _moves()[tags[0]] is None:   # kinds mixed, an ArrayWrapper, a bad tag
        return None, pos
    name = _branches()[tags[0] >> 1]
    stored = _STORED[name]
    plan = FieldPlan("orderingVal", stored, null_index=0, branch=tags[0] >> 1)
    values, pos = dec.nullable(plan, pos, limit, _STORED_TYPES[stored])
    try:
        out = restore_logical(values, _KIND_TYPES[name])
        if name in ("DecimalWrapper", "TimeMicrosWrapper"):   # digits past decimal(30, 15), a time
            out.validate(full=True)                           # outside the day: fastavro decides
    except (pa.ArrowInvalid, SchemaError):
        return None, pos
    return out, pos


# -- decoding, record by record (what the column-wise decoder does not take) --------------------
def _unwrap(value: Any) -> tuple[str | None, Any]:
    """(wrapper kind, plain value) of a decoded ``orderingVal``."""
    if value is None:
        return None, None
    if isinstance(value, tuple):  # (record name, fields) thanks to return_record_name
        name, rec = value
        kind = name.rsplit(".", 1)[-1]
        if kind == "ArrayWrapper":
            items = (rec or {}).get("wrappedValues") or []
            return kind, [_unwrap(v) for v in items]
        return kind, (rec or {}).get("value")
    return type(value).__name__, value


def _render(kind: str | None, value: Any) -> str | None:
    """A stable string for an ordering value when a column mixes several kinds."""
    if kind is None or value is None:
        return None
    if kind == "ArrayWrapper":
        return "[" + ", ".join("null" if v is None else str(_render(k, v)) for k, v in value) + "]"
    if kind in ("DateWrapper", "LocalDateWrapper") and isinstance(value, int):
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=value)).isoformat()
    if kind == "TimestampMicrosWrapper" and isinstance(value, int):
        return (_EPOCH + datetime.timedelta(microseconds=value)).isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _ordering_column(pairs: list[tuple[str | None, Any]]) -> pa.Array:
    kinds = {k for k, v in pairs if k is not None and v is not None}
    values = [v if k is not None else None for k, v in pairs]
    if not kinds:
        return pa.nulls(len(pairs))
    if len(kinds) == 1 and next(iter(kinds)) in _KIND_TYPES:
        return pa.array(values, _KIND_TYPES[next(iter(kinds))])
    if kinds <= {"IntWrapper", "LongWrapper"}:
        # one column: Hudi's default ordering value (an IntWrapper 0) becomes null, which means
        # the same to a merge, so that it is not mistaken for a LongWrapper 0
        return pa.array([None if k == "IntWrapper" and v == 0 else v for k, v in pairs], pa.int64())
    if kinds <= {"FloatWrapper", "DoubleWrapper"}:
        return pa.array(values, pa.float64())
    return pa.array([_render(k, v) for k, v in pairs], pa.string())


def decode_delete_block(content: bytes, where: str) -> pa.Table:
    """Deleted keys: ``record_key`` and ``partition_path`` (string), ``ordering_value``.

    ``ordering_value`` has the natural Arrow type of the values when they are all of one kind
    (e.g. int64 for ``LongWrapper``), else their string rendering; null where absent.
    """
    if len(content) < 8:
        raise LogFormatError(f"{where}: content too short for a delete block")
    version, length = struct.unpack_from(">ii", content, 0)
    if version < 3:
        raise UnsupportedFeatureError(
            f"{where}: delete block version {version} uses Java (Kryo) serialization, "
            "which is not supported; compact the file group with Hudi to rewrite it")
    if length < 0 or 8 + length > len(content):
        raise LogFormatError(f"{where}: delete block payload length {length} exceeds the content")
    payload = content[8:8 + length]
    table = _decode_columns(payload, where)
    return table if table is not None else _decode_records(payload, where)


def _decode_records(payload: bytes, where: str) -> pa.Table:
    """:func:`decode_delete_block`'s payload read by fastavro, record by record."""
    fo = io.BytesIO(payload)
    try:
        decoded = fastavro.schemaless_reader(fo, delete_record_list_schema(), None,
                                             return_record_name=True)
    except Exception as exc:  # fastavro raises many kinds on damaged bytes
        raise LogFormatError(f"{where}: delete records cannot be decoded: {exc}") from exc
    records = decoded.get("deleteRecordList") or []
    keys = [r.get("recordKey") for r in records]
    partitions = [r.get("partitionPath") for r in records]
    ordering = _ordering_column([_unwrap(r.get("orderingVal")) for r in records])
    return pa.table({"record_key": pa.array(keys, pa.string()),
                     "partition_path": pa.array(partitions, pa.string()),
                     "ordering_value": ordering})
