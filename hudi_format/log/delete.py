"""Delete block content -> an Arrow table of deleted keys.

Content (``HoodieDeleteBlock``): int version, int length, then ``length`` bytes. From version 3
the bytes are one Avro ``HoodieDeleteRecordList`` (binary encoding); versions 1-2 used Java
(Kryo) serialization, which only a JVM can read.

``orderingVal`` is a union of one-field wrapper records (``IntWrapper``, ``LongWrapper``, ...)
defined in ``HoodieMetadata.avsc``; the union order is fixed by the .avsc, so the schema is
assembled from Hudi's own files rather than retyped here.
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

from ..errors import LogFormatError, UnsupportedFeatureError
from ..schema import strip_json_comments

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
    fo = io.BytesIO(content[8:8 + length])
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
