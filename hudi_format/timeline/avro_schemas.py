"""The Avro schemas of timeline payloads, and Avro container encode/decode as Hudi does it.

Hudi serialises plans and metadata (v8+: every payload; v6: all but commit metadata) as Avro
*container files* with the writer schema embedded and no codec. Readers therefore decode with
that embedded writer schema: Hudi adds fields over time (``logFilesFromFailedCommit`` in
rollback metadata, for instance) and the copies of the ``.avsc`` files here may lag behind.

The ``.avsc`` files are needed to *write* payloads. They carry Java-style comments and refer to
named types that other files define, so they are stripped, collected into one registry, and
expanded into self-contained schemas (each named type defined once, at first use), which is
what Java's ``Schema.toString()`` embeds and what Java's parser requires.
"""

from __future__ import annotations

import functools
import io
import json
from importlib import resources
from typing import Any

import fastavro

from ..errors import TimelineError
from ..schema import strip_json_comments

AVRO_MAGIC = b"Obj\x01"
NAMESPACE = "org.apache.hudi.avro.model"
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_NAMED = {"record", "error", "enum", "fixed"}


def strip_comments(text: str) -> str:
    """Remove ``/* */`` and ``//`` comments outside JSON strings (URLs in docs survive)."""
    return strip_json_comments(text)


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _collect(node: Any, namespace: str | None, into: dict[str, dict]) -> None:
    """Record every named type defined anywhere inside ``node`` (first definition wins)."""
    if isinstance(node, list):
        for item in node:
            _collect(item, namespace, into)
    elif isinstance(node, dict):
        t = node.get("type")
        if t in _NAMED:
            name = node["name"]
            ns = name.rsplit(".", 1)[0] if "." in name else node.get("namespace", namespace)
            into.setdefault(_full_name(name, ns), {**node, "namespace": ns})
            for f in node.get("fields", ()):
                _collect(f.get("type"), ns, into)
        elif t == "array":
            _collect(node.get("items"), namespace, into)
        elif t == "map":
            _collect(node.get("values"), namespace, into)
        elif isinstance(t, (dict, list)):
            _collect(t, namespace, into)


@functools.lru_cache(maxsize=1)
def raw_registry() -> dict[str, dict]:
    """All named types of the bundled ``.avsc`` files, by full name (comment-free JSON)."""
    registry: dict[str, dict] = {}
    files = sorted(p for p in resources.files("hudi_format").joinpath("avro").iterdir()
                   if p.name.endswith(".avsc"))
    for path in files:
        try:
            node = json.loads(strip_comments(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise TimelineError(f"bundled Avro schema {path.name} is not valid JSON: {exc}") from exc
        _collect(node, None, registry)
    return registry


def _resolve(name: str, namespace: str | None) -> str:
    registry = raw_registry()
    for candidate in (_full_name(name, namespace), name, f"{NAMESPACE}.{name}"):
        if candidate in registry:
            return candidate
    raise TimelineError(f"unknown Avro type {name!r} in the bundled Hudi schemas")


def _expand(node: Any, namespace: str | None, defined: set[str]) -> Any:
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        full = _resolve(node, namespace)
        if full in defined:
            return full
        return _expand(raw_registry()[full], namespace, defined)
    if isinstance(node, list):
        return [_expand(item, namespace, defined) for item in node]
    if not isinstance(node, dict):
        return node
    t = node.get("type")
    if t in _NAMED:
        name = node["name"]
        ns = name.rsplit(".", 1)[0] if "." in name else node.get("namespace", namespace)
        full = _full_name(name, ns)
        if full in defined:
            return full  # defined again in another file: refer to the first definition
        defined.add(full)
        out = {k: v for k, v in node.items() if k != "namespace"}
        out["name"] = full
        if "fields" in node:
            out["fields"] = [{**f, "type": _expand(f["type"], ns, defined)} for f in node["fields"]]
        return out
    if t == "array":
        return {**node, "items": _expand(node["items"], namespace, defined)}
    if t == "map":
        return {**node, "values": _expand(node["values"], namespace, defined)}
    if isinstance(t, (dict, list)) or (isinstance(t, str) and t not in _PRIMITIVES):
        return {**node, "type": _expand(t, namespace, defined)}
    return node


@functools.lru_cache(maxsize=None)
def schema_json(name: str) -> str:
    """Self-contained JSON of a Hudi Avro type (``HoodieCommitMetadata`` or its full name)."""
    return json.dumps(_expand(name, NAMESPACE, set()), separators=(",", ":"))


@functools.lru_cache(maxsize=None)
def parsed_schema(name: str) -> dict:
    """A fastavro-parsed, self-contained schema for the named Hudi type."""
    return fastavro.parse_schema(json.loads(schema_json(name)))


def is_avro_container(data: bytes) -> bool:
    return data[:4] == AVRO_MAGIC


def encode_avro(name: str, record: dict) -> bytes:
    """Serialise one record as an Avro container file, as Hudi writes timeline payloads."""
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_schema(name), [record], codec="null")
    return buf.getvalue()


def read_avro_container(data: bytes, source: str) -> tuple[dict, str]:
    """Decode the single record of a container file; return it and the writer schema's name."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = list(reader)
    except Exception as exc:  # fastavro raises a variety of errors on corrupt input
        raise TimelineError(f"{source}: cannot decode Avro payload: {exc}") from exc
    if not records:
        raise TimelineError(f"{source}: Avro payload holds no record")
    schema = reader.writer_schema or {}
    name = schema.get("name", "") if isinstance(schema, dict) else ""
    return records[0], name.rsplit(".", 1)[-1]


def decode_payload(data: bytes, source: str) -> dict:
    """Decode a timeline payload: an Avro container (v8+, v6 plans) or JSON (v6 commits).

    Raises ``TimelineError`` naming ``source`` for empty, corrupt or non-object content.
    """
    if not data:
        raise TimelineError(f"{source}: file is empty, expected instant metadata")
    if is_avro_container(data):
        return read_avro_container(data, source)[0]
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise TimelineError(f"{source}: neither Avro nor valid JSON metadata: {exc}") from exc
    if not isinstance(value, dict):
        raise TimelineError(f"{source}: metadata must be a JSON object, got {type(value).__name__}")
    return value
