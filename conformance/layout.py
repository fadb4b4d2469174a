"""Validate the layout of a table an engine wrote: what another engine needs to find and read it.

On top of the invariants ``hudi-format validate`` checks (properties and checksum, timeline
files and Avro-decodable metadata against Hudi's schemas, latest slices readable, partition
metadata, no duplicate keys), a written table must use Hudi's exact names: base files
``<uuid>-<n>_<token>_<instant>.parquet``, log files ``.<uuid>-<n>_<instant>.log.<v>_<token>``,
17-digit instant times, the timeline folder of its version (``.hoodie/timeline/`` for v8+,
``.hoodie/`` for v6) with ``<requested>_<completed>.<action>`` names for completed v8+ instants,
and ``hoodie.properties`` saying the type, version and keys the script asked for.
"""

from __future__ import annotations

import re
from pathlib import Path

from hudi_format.cli.validate import ERROR, validate_table

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d+"
_BASE = re.compile(rf"^{_UUID}_\d+-\d+-\d+_\d{{17}}\.parquet$")
_LOG = re.compile(rf"^\.{_UUID}_\d{{17}}\.log\.\d+_\d+-\d+-\d+$")
_V8_INSTANT = re.compile(r"^\d{17}(_\d{17})?\.[a-z]+(\.(requested|inflight))?$")
_V6_INSTANT = re.compile(r"^\d{17}(\.[a-z]+)?(\.(requested|inflight))?$")


def _props(path: Path) -> dict[str, str]:
    out = {}
    for line in (path / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return list(value)


def validate_layout(path: Path | str, spec: dict | None = None) -> list[str]:
    """Problems (as text) with the table at ``path``; ``spec`` is the write case it came from."""
    path = Path(path)
    problems = [str(p) for p in validate_table(str(path)) if p.severity == ERROR]
    props_file = path / ".hoodie" / "hoodie.properties"
    if not props_file.exists():
        return problems + ["no .hoodie/hoodie.properties"]
    props = _props(path)
    version = int(props.get("hoodie.table.version", "0"))
    table = (spec or {}).get("table") or {}
    if table:
        want_type = str(table.get("table_type", "COPY_ON_WRITE")).upper()
        want_type = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(want_type, want_type)
        if props.get("hoodie.table.type") != want_type:
            problems.append(f"hoodie.table.type is {props.get('hoodie.table.type')}, the script asked for {want_type}")
        if version != int(table.get("table_version") or 8):
            problems.append(f"hoodie.table.version is {version}, the script asked for {table.get('table_version') or 8}")
        keys = _as_list(table.get("record_key"))
        if keys and _as_list(props.get("hoodie.table.recordkey.fields")) != keys:
            problems.append(f"hoodie.table.recordkey.fields is {props.get('hoodie.table.recordkey.fields')}, expected {keys}")
        parts = _as_list(table.get("partition_by"))
        have_parts = _as_list(props.get("hoodie.table.partition.fields"))
        if [p.split(":")[0] for p in have_parts] != parts:
            problems.append(f"hoodie.table.partition.fields is {props.get('hoodie.table.partition.fields')}, expected {parts}")
    if version >= 8:
        tdir = path / ".hoodie" / "timeline"
        if not tdir.is_dir():
            problems.append("a v8+ table without .hoodie/timeline/")
        pattern = _V8_INSTANT
        stray = [p.name for p in (path / ".hoodie").iterdir()
                 if p.is_file() and re.match(r"^\d{14,17}[._]", p.name)]
        if stray:
            problems.append(f"v8+ instant files outside .hoodie/timeline/: {stray[:3]}")
    else:
        tdir = path / ".hoodie"
        pattern = _V6_INSTANT
    if tdir.is_dir():
        for f in tdir.iterdir():
            if f.is_file() and not f.name.startswith(("hoodie.properties", ".")) and not pattern.match(f.name):
                problems.append(f"timeline file {f.name} does not follow the v{version} naming")
            if version >= 8 and f.is_file() and pattern.match(f.name) and "_" not in f.name \
                    and not f.name.endswith((".requested", ".inflight")):
                problems.append(f"completed v8+ instant {f.name} lacks its completion time")
    for f in path.rglob("*"):
        rel = f.relative_to(path)
        if not f.is_file() or rel.parts[0] == ".hoodie" or f.name.startswith(".hoodie_partition_metadata"):
            continue
        if f.name.endswith(".parquet") and not _BASE.match(f.name):
            problems.append(f"base file {rel} does not follow <uuid>-<n>_<token>_<instant>.parquet")
        elif ".log." in f.name and not _LOG.match(f.name):
            problems.append(f"log file {rel} does not follow .<uuid>-<n>_<instant>.log.<version>_<token>")
        elif not f.name.endswith(".parquet") and ".log." not in f.name:
            problems.append(f"unexpected file {rel} in the table")
    return problems
