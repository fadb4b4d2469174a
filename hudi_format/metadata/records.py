"""``HoodieMetadataRecord`` payloads: decoding, merging (``HoodieMetadataPayload.preCombine``)
and typed views of what each partition stores.

A metadata record is an Avro record (the schema travels with each HFile and log block) with a
``key``, a ``type`` (see :mod:`.keys`) and one payload field set according to the type. Several
versions of one key (base file, then log blocks in order) fold into one with :func:`combine`:

* file lists: union of the maps, newer entries win, sizes only grow, and a tombstone
  (``isDeleted``) removes an earlier entry (or stays, when there is none, so that a later
  merge with the base file still removes it); listing drops tombstones at the end;
* column stats: a tombstone or a tight bound replaces; otherwise min of mins, max of maxes,
  counts summed;
* bloom filters, record index, secondary index: the newer record wins.

A delete (an ``EmptyHoodieRecordPayload``, written as a delete block) removes the key.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from functools import lru_cache
from typing import Any, Iterable, Iterator

import attrs
import fastavro
import pyarrow as pa

from ..errors import CorruptFileError
from . import keys as K

__all__ = ["decode_record", "decode_entries", "combine", "FileEntry", "ColumnStats",
           "BloomFilterEntry", "files_of", "column_stats_of", "bloom_filter_of",
           "record_location_of", "stats_scalar"]


@lru_cache(maxsize=64)
def _parsed(schema_json: str):
    return fastavro.parse_schema(json.loads(schema_json))


def decode_record(value: bytes, schema_json: str, where: str = "") -> dict:
    """One Avro-encoded metadata record. Unions of several wrapper records (column stats
    min/max) come back as ``(type name, record)`` so that the stored type is known."""
    try:
        return fastavro.schemaless_reader(io.BytesIO(value), _parsed(schema_json), None,
                                          return_named_type=True,
                                          return_named_type_override=True)
    except Exception as exc:  # fastavro raises many kinds on damaged bytes
        raise CorruptFileError(f"{where}: metadata record cannot be decoded: {exc}") from exc


def decode_entries(entries: Iterable[tuple[bytes, bytes]], schema_json: str,
                   where: str = "") -> Iterator[tuple[str, dict]]:
    """``(key, record)`` for HFile ``(key, value)`` cells; the record's ``key`` is restored
    from the HFile key (Hudi leaves it empty in the value)."""
    for k, v in entries:
        key = k.decode("utf-8")
        rec = decode_record(v, schema_json, where)
        if not rec.get("key"):
            rec["key"] = key
        yield key, rec


# -- merging ------------------------------------------------------------------------------------
def _combine_files(older: dict, newer: dict) -> dict:
    out = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        old = out.get(name)
        if old is None:
            out[name] = info
        elif info.get("isDeleted"):
            if old.get("isDeleted"):
                out[name] = info
            else:
                del out[name]
        else:
            out[name] = {"size": max(info.get("size") or 0, old.get("size") or 0), "isDeleted": False}
    rec = dict(newer)
    rec["filesystemMetadata"] = out
    return rec


def _unwrap(value) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return value[1].get("value")
    if isinstance(value, dict):
        return value.get("value")
    return value


def _combine_stats(older: dict, newer: dict, field: str = "ColumnStatsMetadata") -> dict:
    prev, new = older.get(field), newer.get(field)
    if prev is None or new is None or new.get("isDeleted") or prev.get("isDeleted") \
            or new.get("isTightBound"):
        return newer
    merged = dict(new)
    pmin, nmin = prev.get("minValue"), new.get("minValue")
    pmax, nmax = prev.get("maxValue"), new.get("maxValue")
    try:
        if _unwrap(pmin) is not None and (_unwrap(nmin) is None or _unwrap(pmin) < _unwrap(nmin)):
            merged["minValue"] = pmin
        if _unwrap(pmax) is not None and (_unwrap(nmax) is None or _unwrap(pmax) > _unwrap(nmax)):
            merged["maxValue"] = pmax
    except TypeError:  # values of different wrapper types: keep no bound rather than a wrong one
        merged["minValue"] = merged["maxValue"] = None
    for count in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        a, b = prev.get(count), new.get(count)
        merged[count] = None if a is None and b is None else (a or 0) + (b or 0)
    rec = dict(newer)
    rec[field] = merged
    return rec


def combine(older: dict | None, newer: dict | None) -> dict | None:
    """Fold ``newer`` onto ``older`` (``None``: absent or deleted) as Hudi's payload does."""
    if newer is None or older is None:
        return newer
    t = newer.get("type")
    if t in (K.TYPE_PARTITION_LIST, K.TYPE_FILE_LIST):
        return _combine_files(older, newer)
    if t in (K.TYPE_COLUMN_STATS, K.TYPE_PARTITION_STATS):
        return _combine_stats(older, newer)
    return newer


# -- typed views --------------------------------------------------------------------------------
@attrs.frozen
class FileEntry:
    name: str
    size: int
    is_deleted: bool


def files_of(record: dict | None, include_deleted: bool = False) -> list[FileEntry]:
    """File (or partition) entries of a ``files`` record, by name; tombstones dropped."""
    if record is None:
        return []
    out = []
    for name, info in sorted((record.get("filesystemMetadata") or {}).items()):
        deleted = bool(info.get("isDeleted"))
        if deleted and not include_deleted:
            continue
        out.append(FileEntry(name, int(info.get("size") or 0), deleted))
    return out


@attrs.frozen
class ColumnStats:
    """Stats of one column of one file (or partition, for ``partition_stats``).

    ``min_value``/``max_value`` are the raw stored values; ``min_type``/``max_type`` the
    wrapper record names (``StringWrapper``, ``LongWrapper``, ...); ``value_type`` the
    ``HoodieValueTypeInfo`` ordinal (1.x) and ``type_info`` its additional info
    (``"precision,scale"`` for decimals).
    """

    file_name: str | None
    column: str | None
    min_value: Any
    max_value: Any
    min_type: str | None
    max_type: str | None
    null_count: int | None
    value_count: int | None
    is_deleted: bool
    is_tight_bound: bool = False
    value_type: int | None = None
    type_info: str | None = None

    @property
    def all_null(self) -> bool:
        return (self.value_count is not None and self.null_count is not None
                and self.value_count > 0 and self.null_count >= self.value_count)


def _wrapper(value) -> tuple[str | None, Any]:
    if value is None:
        return None, None
    if isinstance(value, tuple) and len(value) == 2:
        name, rec = value
        short = name.rsplit(".", 1)[-1] if isinstance(name, str) else None
        return short, rec.get("value") if isinstance(rec, dict) else rec
    if isinstance(value, dict):
        return None, value.get("value")
    return None, value


def column_stats_of(record: dict | None, field: str = "ColumnStatsMetadata") -> ColumnStats | None:
    if record is None:
        return None
    cs = record.get(field)
    if cs is None:
        return None
    min_type, min_value = _wrapper(cs.get("minValue"))
    max_type, max_value = _wrapper(cs.get("maxValue"))
    vt = cs.get("valueType") or {}
    return ColumnStats(cs.get("fileName"), cs.get("columnName"), min_value, max_value,
                       min_type, max_type, cs.get("nullCount"), cs.get("valueCount"),
                       bool(cs.get("isDeleted")), bool(cs.get("isTightBound")),
                       vt.get("typeOrdinal"), vt.get("additionalInfo"))


@attrs.frozen
class BloomFilterEntry:
    type_code: str
    timestamp: str
    data: bytes
    is_deleted: bool

    def filter(self):
        from ..bloom import BloomFilter
        return BloomFilter.deserialize(self.data, self.type_code)


def bloom_filter_of(record: dict | None) -> BloomFilterEntry | None:
    if record is None:
        return None
    bf = record.get("BloomFilterMetadata")
    if bf is None:
        return None
    return BloomFilterEntry(bf.get("type") or "", bf.get("timestamp") or "",
                            bytes(bf.get("bloomFilter") or b""), bool(bf.get("isDeleted")))


def record_location_of(record: dict | None) -> K.RecordIndexLocation | None:
    if record is None:
        return None
    info = record.get("recordIndexMetadata")
    if info is None:
        return None
    return K.RecordIndexLocation(info.get("partitionName") or "",
                                 K.decode_record_index_file_id(info), info.get("instantTime"))


# -- stats as Arrow scalars ---------------------------------------------------------------------
# HoodieValueTypeInfo ordinals (Hudi 1.x ValueType) that change how a stored value is read.
_VT_DECIMAL = 10
_VT_TS_UNITS = {15: "ms", 16: "us", 17: "ns", 18: "ms", 19: "us", 20: "ns"}
_EPOCH = dt.date(1970, 1, 1)


def stats_scalar(stats: ColumnStats, which: str, type_: pa.DataType) -> pa.Scalar | None:
    """``min``/``max`` of ``stats`` as a scalar of the column's Arrow type, or ``None`` when
    the stored value cannot be read as that type with certainty (then nothing is pruned)."""
    value = stats.min_value if which == "min" else stats.max_value
    wrapper = stats.min_type if which == "min" else stats.max_type
    if value is None:
        return None
    try:
        if pa.types.is_string(type_) or pa.types.is_large_string(type_):
            if isinstance(value, (bytes, bytearray)):
                value = bytes(value).decode("utf-8")
            return pa.scalar(value, type_) if isinstance(value, str) else None
        if pa.types.is_boolean(type_):
            return pa.scalar(value, type_) if isinstance(value, bool) else None
        if pa.types.is_integer(type_):
            if isinstance(value, bool) or not isinstance(value, int):
                return None
            return pa.scalar(value, pa.int64()).cast(type_)
        if pa.types.is_floating(type_):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            return pa.scalar(float(value), pa.float64()).cast(type_)
        if pa.types.is_date32(type_) or pa.types.is_date64(type_):
            if isinstance(value, dt.date):
                return pa.scalar(value, pa.date32()).cast(type_)
            if isinstance(value, int) and not isinstance(value, bool):
                return pa.scalar(_EPOCH + dt.timedelta(days=value), pa.date32()).cast(type_)
            return None
        if pa.types.is_timestamp(type_):
            if isinstance(value, dt.datetime):
                return pa.scalar(value).cast(type_)
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            unit = _VT_TS_UNITS.get(stats.value_type)
            if unit is None:
                unit = "us" if wrapper == "TimestampMicrosWrapper" else type_.unit
            return pa.scalar(value, pa.timestamp(unit, type_.tz)).cast(type_)
        if pa.types.is_decimal(type_):
            if isinstance(value, decimal.Decimal):
                return pa.scalar(value).cast(type_)
            if isinstance(value, (bytes, bytearray)):
                if stats.value_type != _VT_DECIMAL and wrapper != "DecimalWrapper":
                    return None
                scale = type_.scale
                if stats.type_info and "," in stats.type_info:
                    scale = int(stats.type_info.split(",")[1])
                unscaled = int.from_bytes(bytes(value), "big", signed=True)
                return pa.scalar(decimal.Decimal(unscaled).scaleb(-scale)).cast(type_)
            return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError, OverflowError):
        return None
    return None
