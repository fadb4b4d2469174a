"""Serialising timeline plans and payloads as Avro, as Hudi's ``TimelineMetadataUtils`` does.

Every plan (compaction, log compaction, clustering, clean, rollback, restore) and every
non-commit metadata is an Avro container with its writer schema embedded and its maps in
``java.util.HashMap`` iteration order (Hudi builds them as HashMaps).

Compaction and clustering plans are written with the Avro schema Hudi itself embeds: for table
version 8+ Hudi 1.x's ``HoodieCompactionPlan`` (with ``strategy``, ``preserveHoodieMetadata`` and
``missingSchedulePartitions``) and ``HoodieRequestedReplaceMetadata`` (clustering groups with
``extraMetadata``, plans with ``missingSchedulePartitions``); for version 6 Hudi 0.14/0.15's,
which lack ``missingSchedulePartitions``. The bundled ``.avsc`` copies predate those fields, so
the schemas are built here from them by adding the fields with Hudi's defaults -- every reader
of either release resolves them (new fields have defaults; unknown writer fields are skipped).
The data table's services and the metadata table's own compaction both write them.
"""

from __future__ import annotations

import copy
import io
import json
from typing import Any, Mapping

import fastavro

from ..java_compat import java_hashmap_order
from .avro_schemas import encode_avro, schema_json

__all__ = ["avro_maps_in_java_order", "encode_plan", "encode_with_schema", "compaction_plan_schema",
           "requested_replace_schema"]


def avro_maps_in_java_order(schema: Any, datum: Any, named: dict[str, Any]) -> Any:
    """Reorder every Avro map in ``datum`` as a ``java.util.HashMap`` would iterate it."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):  # union: follow the branch the value fits
        if datum is None:
            return None
        for branch in schema:
            b = named.get(branch, branch) if isinstance(branch, str) else branch
            kind = b.get("type") if isinstance(b, dict) else b
            if (kind == "map" and isinstance(datum, Mapping)) or \
                    (kind == "record" and isinstance(datum, Mapping)) or \
                    (kind == "array" and isinstance(datum, (list, tuple))):
                return avro_maps_in_java_order(b, datum, named)
        return datum
    if not isinstance(schema, dict):
        return datum
    kind = schema.get("type")
    if kind == "record":
        named[schema["name"]] = schema
        named[schema["name"].rsplit(".", 1)[-1]] = schema
        if not isinstance(datum, Mapping):
            return datum
        out = dict(datum)
        for f in schema["fields"]:
            if f["name"] in out:
                out[f["name"]] = avro_maps_in_java_order(f["type"], out[f["name"]], named)
        return out
    if kind == "map" and isinstance(datum, Mapping):
        return {k: avro_maps_in_java_order(schema["values"], datum[k], named)
                for k in java_hashmap_order(datum)}
    if kind == "array" and isinstance(datum, (list, tuple)):
        return [avro_maps_in_java_order(schema["items"], x, named) for x in datum]
    if isinstance(kind, (dict, list)):
        return avro_maps_in_java_order(kind, datum, named)
    return datum


def encode_plan(schema_name: str, record: Mapping[str, Any]) -> bytes:
    """An Avro payload (plan or non-commit metadata) with its maps in Java HashMap order."""
    schema = json.loads(schema_json(schema_name))
    return encode_avro(schema_name, avro_maps_in_java_order(schema, dict(record), {}))


# -- plans with the schema of the table version's Hudi release ----------------------------------

_STR_MAP = ["null", {"type": "map", "values": "string"}]
_STR_LIST = ["null", {"type": "array", "items": "string"}]


def _record(schema: dict, name: str) -> dict:
    """The record ``name`` defined somewhere in ``schema`` (the bundled schemas define it)."""
    found = _find_record(schema, name)
    if found is None:
        raise KeyError(f"no record {name} in the Avro schema {schema.get('name')}")
    return found


def _find_record(node: Any, name: str) -> dict | None:
    if isinstance(node, dict):
        if node.get("type") == "record" and node.get("name", "").rsplit(".", 1)[-1] == name:
            return node
        for v in node.values():
            got = _find_record(v, name)
            if got is not None:
                return got
    elif isinstance(node, list):
        for v in node:
            got = _find_record(v, name)
            if got is not None:
                return got
    return None


def _add_field(record: dict, field: dict, after: str | None = None) -> None:
    names = [f["name"] for f in record["fields"]]
    if field["name"] in names:
        return
    at = names.index(after) + 1 if after in names else len(names)
    record["fields"].insert(at, field)


def compaction_plan_schema(table_version: int) -> dict:
    """``HoodieCompactionPlan`` as Hudi 1.x (v8+) or 0.14 (v6) writes it."""
    schema = copy.deepcopy(json.loads(schema_json("HoodieCompactionPlan")))
    strategy = json.loads(schema_json("HoodieCompactionStrategy"))
    _add_field(schema, {"name": "strategy", "type": ["null", strategy], "default": None})
    _add_field(schema, {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False})
    if table_version >= 8:
        _add_field(schema, {"name": "missingSchedulePartitions", "type": _STR_LIST, "default": None})
    return schema


def requested_replace_schema(table_version: int) -> dict:
    """``HoodieRequestedReplaceMetadata`` as Hudi 1.x (v8+) or 0.14 (v6) writes it."""
    schema = copy.deepcopy(json.loads(schema_json("HoodieRequestedReplaceMetadata")))
    group = _record(schema, "HoodieClusteringGroup")
    _add_field(group, {"name": "extraMetadata", "type": _STR_MAP, "default": None}, after="numOutputFileGroups")
    if table_version >= 8:
        plan = _record(schema, "HoodieClusteringPlan")
        _add_field(plan, {"name": "missingSchedulePartitions", "type": _STR_LIST, "default": None})
    return schema


def encode_with_schema(schema: dict, record: Mapping[str, Any]) -> bytes:
    """One record as an Avro container (no codec), maps in Java HashMap order, as Hudi does."""
    datum = avro_maps_in_java_order(schema, dict(record), {})
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(copy.deepcopy(schema)), [datum], codec="null")
    return buf.getvalue()
