"""The conformance cases: read cases over the Apache Hudi fixture tables and over the tables
``generate.py`` writes, and the scripted write cases of ``write_cases/*.json``.

A read case names a table, a query (see ``adapters/base.py``) and the expected canonical rows;
``compare_columns`` restricts the comparison to those columns when the expectation does not know
every column (generated tables: the model does not know file names or sequence numbers).
Every case carries features (table type, version, log block format, key generator, query kind,
the service that shaped the table...) so that the report can say, per feature, what passes.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import fixtures
from .canonical import sort_expected

WRITE_CASES = Path(__file__).resolve().parent / "write_cases"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass
class ReadCase:
    id: str
    table: str                        # "fixture:<name>" or "generated:<name>"
    query: dict
    expected: list[dict]
    features: tuple[str, ...]
    compare_columns: list[str] | None = None
    note: str = ""


@dataclass
class WriteCase:
    id: str
    spec: dict
    features: tuple[str, ...]
    source: str = ""


@dataclass
class TableInfo:
    """Where a case's table comes from and what it exercises."""

    key: str
    features: tuple[str, ...]
    path: Path | None = None          # set once materialised
    error: str | None = None          # generation failed: its cases error out
    meta: dict[str, Any] = field(default_factory=dict)


# -- fixture tables ----------------------------------------------------------------------------
def _props_from_zip(name: str) -> dict[str, str]:
    with zipfile.ZipFile(fixtures.TABLES / f"{name}.zip") as zf:
        for m in zf.namelist():
            if m.endswith(".hoodie/hoodie.properties") and "/metadata/" not in m and not m.startswith("__MACOSX"):
                props = {}
                for line in zf.read(m).decode("utf-8", "replace").splitlines():
                    line = line.strip()
                    if line and not line.startswith(("#", "!")) and "=" in line:
                        k, v = line.split("=", 1)
                        props[k.strip()] = v.strip().replace("\\:", ":")
                return props
    return {}


def fixture_features(name: str, exp: dict) -> tuple[str, ...]:
    """Features of a fixture table, from its expected results, properties and name."""
    feats = ["fixture", "cow" if exp["table_type"] == "COPY_ON_WRITE" else "mor", f"v{exp['table_version']}"]
    parts = name.split("__")
    if len(parts) == 4:
        feats.append(f"{parts[2]}-log-blocks")
    props = _props_from_zip(name)
    keygen = (props.get("hoodie.table.keygenerator.type") or props.get("hoodie.table.keygenerator.class") or "").lower()
    if "timestamp" in keygen or "timebased" in name:
        feats.append("keygen-timestamp")
    elif "complex" in keygen or "complexkeygen" in name:
        feats.append("keygen-complex")
    elif "nonpartition" in keygen or not exp.get("partition_fields"):
        feats.append("non-partitioned")
    else:
        feats.append("keygen-simple")
    if props.get("hoodie.datasource.write.hive_style_partitioning") == "true" or "hivestyle" in name and "nonhive" not in name:
        feats.append("hive-style-partitions")
    if props.get("hoodie.populate.meta.fields") == "false" or "no_metafields" in name or "nometa" in name:
        feats.append("no-meta-fields")
    mdt = [p for p in (props.get("hoodie.table.metadata.partitions") or "").split(",") if p]
    if mdt:
        feats.append("metadata-table")
        if "record_index" in mdt:
            feats.append("record-index")
    actions = {i["action"] for i in exp.get("completed_write_instants", [])}
    if "replacecommit" in actions:
        feats.append("replacecommit")
    if "overwrite" in name:
        feats.append("insert-overwrite")
    if "rollback" in name:
        feats.append("rollback")
    if not exp.get("snapshot"):
        feats.append("empty-table")
    return tuple(feats)


def _as_of_value(exp: dict, ts: str) -> str:
    if exp["query_bounds_use"] == "completion_time":
        for inst in exp["completed_write_instants"]:
            if inst["timestamp"] == ts:
                return inst["completion_time"]
        raise KeyError(f"no completed instant {ts}")
    return ts


def _filter_case(exp: dict, rows: list[dict]) -> tuple[dict, list[dict]] | None:
    """A filter + projection query on a fixture snapshot, with rows computed from the
    expected snapshot: equality on a partition field (prunes), else inequality on the key."""
    if not rows:
        return None
    keys = [k for k in (exp.get("record_key_fields") or "").split(",") if k]
    parts = [p for p in (exp.get("partition_fields") or "").split(",") if p]
    candidates = [(p, "=") for p in parts] + [(k, "!=") for k in keys]
    for col, op in candidates:
        if col not in rows[0]:
            continue
        value = rows[0][col]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            continue
        if isinstance(value, str) and _ISO.match(value):
            continue  # a date/time in canonical form: the typed comparison is not ours to model
        columns = list(dict.fromkeys(keys + [col]))
        if any(c not in rows[0] for c in columns):
            continue
        keep = [r for r in rows if (r[col] == value) == (op == "=")]
        want = sort_expected([{c: r[c] for c in columns} for r in keep])
        return {"kind": "snapshot", "columns": columns, "filters": [[col, op, value]]}, want
    return None


def fixture_cases() -> tuple[list[TableInfo], list[ReadCase]]:
    tables, cases = [], []
    for name in fixtures.table_names():
        exp = fixtures.expected(name)
        feats = fixture_features(name, exp)
        key = f"fixture:{name}"
        tables.append(TableInfo(key, feats))
        cases.append(ReadCase(f"{name}/snapshot", key, {"kind": "snapshot"},
                              sort_expected(exp["snapshot"]), feats + ("snapshot",)))
        if exp.get("read_optimized") is not None:
            cases.append(ReadCase(f"{name}/read_optimized", key, {"kind": "read_optimized"},
                                  sort_expected(exp["read_optimized"]), feats + ("read-optimized",)))
        for ts, rows in exp.get("time_travel", {}).items():
            cases.append(ReadCase(f"{name}/as_of/{ts}", key, {"kind": "time_travel", "as_of": _as_of_value(exp, ts)},
                                  sort_expected(rows), feats + ("time-travel",)))
        for inc in exp.get("incremental", []):
            start, end = inc["start_exclusive"], inc["end_inclusive"]
            cases.append(ReadCase(f"{name}/incremental/{start}-{end}", key,
                                  {"kind": "incremental", "start": start, "end": end},
                                  sort_expected(inc["rows"]), feats + ("incremental",)))
        filt = _filter_case(exp, exp["snapshot"])
        if filt is not None:
            query, want = filt
            cases.append(ReadCase(f"{name}/filter_projection", key, query, want,
                                  feats + ("filters", "projection")))
    return tables, cases


# -- write cases --------------------------------------------------------------------------------
def write_case_features(spec: dict) -> tuple[str, ...]:
    table = spec.get("table") or {}
    feats = ["write", "cow" if str(table.get("table_type", "COPY_ON_WRITE")).upper() in ("COPY_ON_WRITE", "COW")
             else "mor", f"v{table.get('table_version', 8)}"]
    for step in spec.get("steps", []):
        if "write" in step:
            feats.append(step["write"].replace("_", "-"))
        elif "service" in step:
            feats.append({"compact": "compaction", "log_compact": "log-compaction", "cluster": "clustering",
                          "clean": "cleaning", "archive": "archival"}.get(step["service"], step["service"]))
    feats.extend(spec.get("features", []))
    return tuple(dict.fromkeys(feats))


def write_cases(directory: Path = WRITE_CASES) -> list[WriteCase]:
    out = []
    for path in sorted(directory.glob("*.json")):
        spec = json.loads(path.read_text())
        out.append(WriteCase(f"write/{path.stem}", spec, write_case_features(spec), str(path)))
    return out
