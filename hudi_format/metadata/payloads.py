"""The records of the metadata table (``HoodieMetadataRecord``) and how they merge.

Every record of every metadata partition is one ``HoodieMetadataRecord`` (the schema in
``avro/HoodieMetadata.avsc``) keyed by a string (see :mod:`.keys`); which of its optional
members is set depends on the partition:

=============  ==========================  ===================================================
partition      member                      content
=============  ==========================  ===================================================
files          ``filesystemMetadata``      file name -> ``{size, isDeleted}`` (partition list:
                                           partition name -> ``{0, isDeleted}``)
column_stats   ``ColumnStatsMetadata``     one column of one file: min/max (wrapped), counts
bloom_filters  ``BloomFilterMetadata``     a base file's serialized bloom filter
record_index   ``recordIndexMetadata``     record key -> partition + file id (+ instant)
=============  ==========================  ===================================================

Records in log blocks are deltas. ``merge`` combines an older and a newer record of one key as
``HoodieMetadataPayload.preCombine`` does: file lists merge (new files added, the larger size
kept, deleted files dropped), the other partitions take the newer record, and a deleted entry
(``isDeleted``) removes the key. Record-index deletes are delete-block keys, not records.

Encoding: the Avro value of a record is written with the schema Hudi writes in HFile blocks
(the five ``_hoodie_*`` meta fields, all null, then the record) and its ``key`` field blank --
the key lives in the HFile cell. :data:`SCHEMA_JSON` is that schema as Java's
``Schema.toString`` prints it (``avro.java.string`` on every string of the generated record),
byte for byte what Hudi 1.x puts in block headers and HFile file info.

Column statistics values are wrapped as Hudi 1.0 (column stats index version 1) wraps them:
``BooleanWrapper``/``IntWrapper``/``LongWrapper``/``FloatWrapper``/``DoubleWrapper``/
``StringWrapper``/``BytesWrapper`` by physical value, dates as ``DateWrapper`` (epoch days),
decimals as ``DecimalWrapper`` (upcast to ``decimal(30, 15)``), timestamps as their raw long.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import io
import json
from typing import Any, Iterable, Mapping

import attrs
import fastavro

from ..timeline.avro_schemas import strip_comments
from ..varint import avro_long
from . import keys as K

__all__ = [
    "SCHEMA_JSON", "DATA_SCHEMA_JSON", "parsed_schema", "encode_value", "decode_value",
    "files_record", "partition_list_record", "column_stats_record", "bloom_filter_record",
    "record_index_record", "encode_record_index_value", "wrap_stat_value", "unwrap_stat_value",
    "merge", "is_deleted", "instant_millis", "java_schema_string",
]

_NS = "org.apache.hudi.avro.model."
_META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                "_hoodie_partition_path", "_hoodie_file_name")
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
# members of the record newer than every Hudi release we write for (1.0 writes v8, and 1.x
# writes v6 tables with its own schema); dropped from the written schema
_NEWER_MEMBERS = ("VectorIndexMetadata",)


# -- the schema, as Java prints it --------------------------------------------------------------
def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def java_schema_string(node: Any, namespace: str = "", defined: set | None = None,
                       java_strings: bool = True) -> str:
    """``Schema.toString()`` of an Avro schema given as JSON: keys in Java's order, named
    types spelled once then referenced by (short) name, namespaces printed only where they
    change, and -- for generated classes (``java_strings``) -- ``"avro.java.string":"String"``
    on strings and maps."""
    defined = set() if defined is None else defined
    if isinstance(node, str):
        if node in _PRIMITIVES:
            if node == "string" and java_strings:
                return '{"type":"string","avro.java.string":"String"}'
            return _j(node)
        full = node if "." in node else (f"{namespace}.{node}" if namespace else node)
        ns, _, short = full.rpartition(".")
        return _j(short if ns == namespace else full)
    if isinstance(node, list):
        return "[" + ",".join(java_schema_string(m, namespace, defined, java_strings) for m in node) + "]"
    kind = node["type"]
    if kind == "record":
        name = node["name"]
        ns = name.rpartition(".")[0] if "." in name else node.get("namespace", namespace)
        short = name.rpartition(".")[2]
        full = f"{ns}.{short}" if ns else short
        if full in defined:
            return _j(short if ns == namespace else full)
        defined.add(full)
        parts = ['"type":"record"', '"name":' + _j(short)]
        if ns != namespace:
            parts.append('"namespace":' + _j(ns))
        if "doc" in node:
            parts.append('"doc":' + _j(node["doc"]))
        fields = []
        for f in node["fields"]:
            fp = ['"name":' + _j(f["name"]), '"type":' + java_schema_string(f["type"], ns, defined, java_strings)]
            if "doc" in f:
                fp.append('"doc":' + _j(f["doc"]))
            if "default" in f:
                fp.append('"default":' + _j(f["default"]))
            fields.append("{" + ",".join(fp) + "}")
        parts.append('"fields":[' + ",".join(fields) + "]")
        return "{" + ",".join(parts) + "}"
    if kind == "map":
        out = '{"type":"map","values":' + java_schema_string(node["values"], namespace, defined, java_strings)
        return out + (',"avro.java.string":"String"}' if java_strings else "}")
    if kind == "array":
        return '{"type":"array","items":' + java_schema_string(node["items"], namespace, defined, java_strings) + "}"
    if kind in _PRIMITIVES:
        extra = {k: v for k, v in node.items() if k != "type"}
        if kind == "string" and java_strings:
            extra = {"avro.java.string": "String", **extra}
        return _j(kind) if not extra else _j({"type": kind, **extra})
    return java_schema_string(kind, namespace, defined, java_strings)


def _reference_record() -> dict:
    from importlib import resources

    text = (resources.files("hudi_format") / "avro" / "HoodieMetadata.avsc").read_text("utf-8")
    record = json.loads(strip_comments(text))
    record["fields"] = [f for f in record["fields"] if f["name"] not in _NEWER_MEMBERS]
    return record


def _schemas() -> tuple[str, str]:
    data = java_schema_string(_reference_record())
    meta = ",".join('{"name":"%s","type":["null","string"],"doc":"","default":null}' % n
                    for n in _META_FIELDS)
    return data.replace('"fields":[', '"fields":[' + meta + ",", 1), data


#: the writer schema of every metadata record Hudi 1.x writes (meta fields first)
SCHEMA_JSON, DATA_SCHEMA_JSON = _schemas()


@functools.lru_cache(maxsize=1)
def parsed_schema():
    return fastavro.parse_schema(json.loads(SCHEMA_JSON))


@functools.lru_cache(maxsize=16)
def _parsed(schema_text: str):
    return fastavro.parse_schema(json.loads(schema_text))


# -- records -------------------------------------------------------------------------------------
def _record(key: str, rtype: int, **members) -> dict:
    rec = {n: None for n in _META_FIELDS}
    rec.update({"key": key, "type": rtype, "filesystemMetadata": None, "BloomFilterMetadata": None,
                "ColumnStatsMetadata": None, "recordIndexMetadata": None,
                "SecondaryIndexMetadata": None})
    rec.update(members)
    return rec


def partition_list_record(partitions: Iterable[str], deleted: bool = False) -> dict:
    """``__all_partitions__``: the partitions added (or, ``deleted``, dropped) by a commit."""
    return _record(K.RECORDKEY_PARTITION_LIST, K.TYPE_PARTITION_LIST, filesystemMetadata={
        K.partition_identifier(p): {"size": 0, "isDeleted": bool(deleted)} for p in partitions})


def files_record(partition: str, added: Mapping[str, int] | None = None,
                 deleted: Iterable[str] = ()) -> dict:
    """A partition's file list delta: files added (name -> size) and deleted (names)."""
    fs = {name: {"size": int(size), "isDeleted": False} for name, size in (added or {}).items()}
    for name in deleted:
        fs[name] = {"size": 0, "isDeleted": True}
    return _record(K.files_key(partition), K.TYPE_FILE_LIST, filesystemMetadata=fs)


def bloom_filter_record(partition: str, file_name: str, instant_time: str, type_code: str,
                        serialized: bytes | str, deleted: bool = False) -> dict:
    if isinstance(serialized, str):
        serialized = serialized.encode("utf-8")
    return _record(K.bloom_filter_key(partition, file_name), K.TYPE_BLOOM_FILTER,
                   BloomFilterMetadata={"type": type_code, "timestamp": instant_time,
                                        "bloomFilter": serialized, "isDeleted": bool(deleted)})


def column_stats_record(partition: str, file_name: str, column: str, *, min_value: Any = None,
                        max_value: Any = None, value_count: int = 0, null_count: int = 0,
                        total_size: int = 0, total_uncompressed_size: int = 0,
                        deleted: bool = False) -> dict:
    """One column's statistics of one file; values already wrapped (:func:`wrap_stat_value`)."""
    return _record(K.column_stats_key(partition, file_name, column), K.TYPE_COLUMN_STATS,
                   ColumnStatsMetadata={
                       "fileName": file_name, "columnName": column,
                       "minValue": min_value, "maxValue": max_value,
                       "valueCount": int(value_count), "nullCount": int(null_count),
                       "totalSize": int(total_size), "totalUncompressedSize": int(total_uncompressed_size),
                       "isDeleted": bool(deleted), "isTightBound": False, "valueType": None})


def instant_millis(instant_time: str, timezone: str = "LOCAL") -> int:
    """``HoodieMetadataPayload.parseRecordIndexInstantTime``: the instant as epoch millis
    (in the table's timeline timezone); -1 for instants that are not dates."""
    ts = str(instant_time)
    try:
        base = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S")
        ms = int(ts[14:17] or 0) if len(ts) >= 17 else 0
    except ValueError:
        return -1
    if str(timezone).upper() == "UTC":
        base = base.replace(tzinfo=_dt.timezone.utc)
    else:
        base = base.astimezone()  # local wall time
    return int(base.timestamp()) * 1000 + ms


def record_index_record(record_key: str, partition: str, file_id: str, instant_ms: int) -> dict:
    info = {"partitionName": partition, "instantTime": int(instant_ms), "position": None}
    info.update(K.encode_record_index_file_id(file_id))
    return _record(K.record_index_key(record_key), K.TYPE_RECORD_INDEX, recordIndexMetadata={
        "partitionName": info["partitionName"], "fileIdHighBits": info["fileIdHighBits"],
        "fileIdLowBits": info["fileIdLowBits"], "fileIndex": info["fileIndex"],
        "fileId": info["fileId"], "instantTime": info["instantTime"],
        "fileIdEncoding": info["fileIdEncoding"], "position": None})


# -- column statistics values ---------------------------------------------------------------------
_DECIMAL_SCALE = 15  # DecimalWrapper's decimal(30, 15)


def wrap_stat_value(value: Any, kind: str) -> tuple[str, dict] | None:
    """A min/max value as Hudi 1.0 wraps it for ``kind`` (``bool``, ``int``, ``long``,
    ``float``, ``double``, ``string``, ``bytes``, ``date``, ``decimal``, ``timestamp``)."""
    if value is None:
        return None
    if kind == "bool":
        return (_NS + "BooleanWrapper", {"value": bool(value)})
    if kind == "int":
        return (_NS + "IntWrapper", {"value": int(value)})
    if kind in ("long", "timestamp"):
        if isinstance(value, _dt.datetime):
            raise TypeError("timestamps are wrapped as their raw long value")
        return (_NS + "LongWrapper", {"value": int(value)})
    if kind == "float":
        return (_NS + "FloatWrapper", {"value": float(value)})
    if kind == "double":
        return (_NS + "DoubleWrapper", {"value": float(value)})
    if kind == "string":
        return (_NS + "StringWrapper", {"value": str(value)})
    if kind == "bytes":
        return (_NS + "BytesWrapper", {"value": bytes(value)})
    if kind == "date":
        days = (value - _dt.date(1970, 1, 1)).days if isinstance(value, _dt.date) else int(value)
        return (_NS + "DateWrapper", {"value": days})
    if kind == "decimal":
        d = decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-_DECIMAL_SCALE))
        return (_NS + "DecimalWrapper", {"value": d})
    raise ValueError(f"cannot wrap a column statistics value of kind {kind!r}")


def unwrap_stat_value(wrapped: Any) -> Any:
    """The plain value of a wrapped min/max (as :func:`decode_value` returns it)."""
    if wrapped is None:
        return None
    if isinstance(wrapped, tuple):
        name, body = wrapped
    elif isinstance(wrapped, Mapping):
        name, body = wrapped.get("-type", ""), wrapped
    else:
        return wrapped
    value = body.get("value") if isinstance(body, Mapping) else body
    if str(name).endswith("DateWrapper") and isinstance(value, int):
        return _dt.date(1970, 1, 1) + _dt.timedelta(days=value)
    return value


# -- encoding ------------------------------------------------------------------------------------
def encode_value(record: Mapping[str, Any]) -> bytes:
    """The Avro bytes Hudi stores as an HFile cell value: the record with a blank ``key``."""
    buf = io.BytesIO()
    rec = dict(record)
    rec["key"] = ""
    fastavro.schemaless_writer(buf, parsed_schema(), rec)
    return buf.getvalue()


def decode_value(value: bytes, key: str, schema_text: str | None = None) -> dict:
    """A record from its cell value (written with ``schema_text``, by default ours)."""
    schema = parsed_schema() if schema_text in (None, SCHEMA_JSON) else _parsed(schema_text)
    rec = fastavro.schemaless_reader(io.BytesIO(value), schema, return_record_name=True,
                                     return_record_name_override=True)
    rec["key"] = key
    return rec


def _avro_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return avro_long(len(raw)) + raw


# meta fields null (5), key "", type 5 (zigzag 10), files/bloom/colstats null, union branch 1
_RLI_PREFIX = b"\x00" * 5 + b"\x00" + b"\x0a" + b"\x00\x00\x00" + b"\x02"


def encode_record_index_value(partition: str, file_id: str, instant_ms: int) -> bytes:
    """Fast path of ``encode_value(record_index_record(...))`` (record index writes are large)."""
    info = K.encode_record_index_file_id(file_id)
    return b"".join((
        _RLI_PREFIX,
        b"\x02", _avro_string(partition),               # partitionName: ["null", string]
        b"\x02", avro_long(info["fileIdHighBits"]),       # ["null", long]
        b"\x02", avro_long(info["fileIdLowBits"]),        # ["null", long]
        b"\x02", avro_long(info["fileIndex"]),            # ["null", int]
        b"\x02", _avro_string(info["fileId"]),          # ["null", string]
        b"\x02", avro_long(int(instant_ms)),              # instantTime: ["null", long]
        avro_long(info["fileIdEncoding"]),                # int
        b"\x00",                                        # position: null
        b"\x00",                                        # SecondaryIndexMetadata: null
    ))


# -- merging ---------------------------------------------------------------------------------------
def is_deleted(record: Mapping[str, Any]) -> bool:
    """A tombstone: a bloom filter or column stats entry marked deleted."""
    for member in ("BloomFilterMetadata", "ColumnStatsMetadata"):
        m = record.get(member)
        if m is not None:
            return bool(m.get("isDeleted"))
    return False


def _fs_map(record: Mapping[str, Any]) -> dict:
    fs = record.get("filesystemMetadata")
    if fs is None:
        return {}
    if isinstance(fs, list):  # Arrow-style key/value pairs
        fs = dict(fs)
    return dict(fs)


def merge(older: Mapping[str, Any] | None, newer: Mapping[str, Any]) -> dict:
    """``newer`` applied on top of ``older`` (same key), as Hudi's payload combines them."""
    if older is None:
        return dict(newer)
    if newer.get("type") in (K.TYPE_PARTITION_LIST, K.TYPE_FILE_LIST) and \
            older.get("type") == newer.get("type"):
        combined = _fs_map(older)
        for name, info in _fs_map(newer).items():
            if info.get("isDeleted"):
                combined.pop(name, None)
                combined[name] = {"size": 0, "isDeleted": True}
            else:
                prev = combined.get(name)
                size = int(info.get("size") or 0)
                if prev is not None and not prev.get("isDeleted"):
                    size = max(size, int(prev.get("size") or 0))
                combined[name] = {"size": size, "isDeleted": False}
        out = dict(newer)
        out["filesystemMetadata"] = combined
        return out
    return dict(newer)


def compacted(record: Mapping[str, Any]) -> dict | None:
    """A merged record as a compacted base file keeps it: deleted files dropped from file
    lists, tombstones gone (``None``)."""
    if is_deleted(record):
        return None
    if record.get("type") in (K.TYPE_PARTITION_LIST, K.TYPE_FILE_LIST):
        out = dict(record)
        out["filesystemMetadata"] = {n: i for n, i in _fs_map(record).items() if not i.get("isDeleted")}
        return out
    return dict(record)


# -- deltas of a deltacommit ------------------------------------------------------------------
@attrs.define
class Delta:
    """What one metadata partition gets in one deltacommit: records by key, or (the record
    index) change rows, written as an engine's workers write them."""

    upserts: dict = attrs.field(factory=dict)   # key -> encoded value (bytes)
    changes: Any = None   # record_index: rows of key_changes.CHANGES_SCHEMA

    def __bool__(self) -> bool:
        return bool(self.upserts) or (self.changes is not None and self.changes.num_rows > 0)


def records_delta(records: Iterable[dict]) -> Delta:
    merged: dict[str, dict] = {}
    for rec in records:
        merged[rec["key"]] = merge(merged.get(rec["key"]), rec)
    return Delta({k: encode_value(r) for k, r in merged.items()})
