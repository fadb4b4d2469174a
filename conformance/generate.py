"""Tables the fixtures lack, generated at run time, and the scripts that make them.

A script is the JSON of ``write_cases/*.json``: a table spec and a list of steps (writes and
table services). ``run_script`` executes one with an engine while the fixture-independent model
(``model.py``) follows along; ``derive_read_cases`` turns the model's states into read cases:
snapshot, time travel to every surviving commit, incremental between commits, read-optimized
after a full compaction, filters + projection and lookups. The generated tables are written by
``hudi_format`` (the suite's reference writer) and read by the engine under test; the write
cases are executed by the engine under test and read back by the reference readers.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from .adapters.base import Engine
from .cases import ReadCase, TableInfo, write_case_features
from .model import Model, arrow_schema, arrow_type, expected_rows, rows_to_arrow

log = logging.getLogger(__name__)

META = ["_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path"]
_WRITES = ("insert", "upsert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table",
           "delete_partition")


@dataclass
class Commit:
    step: int
    operation: str
    instant: dict
    bound: str                 # what time travel / incremental bounds use: completion (v8+) or request time
    schema: pa.Schema          # the union of the data schemas written so far
    alive: bool = True
    after_clean: bool = True   # no clean ran after it (its files are all still there)


@dataclass
class ScriptResult:
    spec: dict
    path: str
    model: Model
    schema: pa.Schema
    commits: list[Commit] = field(default_factory=list)
    compacted: bool = False    # the last step(s) after the last write compacted every file group
    services: list[tuple[str, dict | None]] = field(default_factory=list)


def _table(spec: dict) -> dict:
    return spec.get("table") or {}


def _version(spec: dict) -> int:
    return int(_table(spec).get("table_version") or 8)


def _option(spec: dict, key: str, default: Any = None) -> Any:
    return (_table(spec).get("options") or {}).get(key, default)


def partition_field(spec: dict) -> str | None:
    parts = _table(spec).get("partition_by")
    if isinstance(parts, list):
        return parts[0] if parts else None
    return parts or None


def _hive(spec: dict) -> bool:
    return str(_option(spec, "hoodie.datasource.write.hive_style_partitioning", "false")).lower() == "true"


def partition_path(spec: dict, value: Any) -> str:
    pf = partition_field(spec)
    if not pf:
        return ""
    return f"{pf}={value}" if _hive(spec) else str(value)


def _evolve(schema: pa.Schema, step: dict) -> pa.Schema:
    """The data schema after a step's ``add_columns`` / ``widen``."""
    fields = list(schema)
    for name, typ in step.get("widen", {}).items():
        i = schema.get_field_index(name)
        fields[i] = pa.field(name, arrow_type(typ))
    for name, typ in step.get("add_columns", []):
        fields.append(pa.field(name, arrow_type(typ)))
    return pa.schema(fields)


def _step_rows(step: dict, schema: pa.Schema) -> pa.Table:
    spec = step.get("rows")
    if spec is None:
        return schema.empty_table()
    items = spec if isinstance(spec, list) else [spec]
    tables = []
    for item in items:
        extra = item.get("set") if isinstance(item, dict) else None
        t = rows_to_arrow(item, schema) if isinstance(item, dict) else rows_to_arrow([item], schema)
        if extra:
            for col, value in extra.items():
                i = t.schema.get_field_index(col)
                t = t.set_column(i, schema.field(col), pa.array([value] * t.num_rows, schema.field(col).type))
        tables.append(t)
    return pa.concat_tables(tables)


def run_script(engine: Engine, path: str, spec: dict) -> ScriptResult:
    """Execute ``spec`` on ``engine`` at ``path``, the model following every step."""
    table = _table(spec)
    index = str(_option(spec, "hoodie.index.type", "SIMPLE")).upper()
    pf = partition_field(spec)
    keys = table.get("record_key") or "id"
    model = Model(key=keys if isinstance(keys, str) else keys[0], partition=pf,
                  event_time=True, ordering=table.get("ordering_field") or "ts",
                  global_index=index.startswith("GLOBAL") or index == "RECORD_INDEX")
    schema = arrow_schema(spec.get("schema"))
    result = ScriptResult(spec, path, model, schema)
    v8 = _version(spec) >= 8
    savepoints: dict[int, str] = {}
    for n, raw in enumerate(spec["steps"]):
        step = copy.deepcopy(raw)
        if "write" in step:
            op = step["write"]
            if op not in _WRITES:
                raise ValueError(f"step {n}: unknown write operation {op!r}")
            schema = _evolve(schema, step)
            data = _step_rows(step, schema)
            options = dict(step.get("options") or {})
            parts = [partition_path(spec, v) for v in step.get("partitions", [])]
            if op == "delete_partition" and parts:
                options["hoodie.datasource.write.partitions.to.delete"] = ",".join(parts)
            wstep = {"table": table, "operation": op, "options": options}
            instant = engine.write(path, data, wstep)
            if instant is None:
                raise RuntimeError(f"step {n}: {op} returned no instant")
            model.apply(op, data, len(result.commits), partitions=step.get("partitions", []))
            bound = instant.get("completion_time") if v8 else instant["timestamp"]
            result.commits.append(Commit(n, op, instant, bound or instant["timestamp"], schema))
            result.compacted = False
            # keep instants apart: time travel needs distinct bounds
            time.sleep(0.002)
        elif "service" in step:
            name = step["service"]
            sstep = {"service": name, "options": step.get("options"), "sort_by": step.get("sort_by")}
            target = step.get("target")
            alive = [c for c in result.commits if c.alive]
            if target is not None:
                commit = result.commits[target] if not isinstance(target, str) else None
                sstep["instant"] = commit.instant["timestamp"] if commit else target
            elif name in ("rollback", "savepoint", "restore"):
                sstep["instant"] = alive[-1].instant["timestamp"]
            out = engine.service(path, sstep)
            result.services.append((name, out))
            if name == "rollback":
                done = next(c for c in result.commits if c.instant["timestamp"] == sstep["instant"])
                done.alive = False
                prev = [i for i, c in enumerate(result.commits) if c.alive]
                model.revert_to(prev[-1] if prev else None)
            elif name == "savepoint":
                savepoints[n] = sstep["instant"]
            elif name == "restore":
                idx = next(i for i, c in enumerate(result.commits) if c.instant["timestamp"] == sstep["instant"])
                for c in result.commits[idx + 1:]:
                    c.alive = False
                model.revert_to(idx)
            elif name == "clean":
                for c in result.commits:
                    c.after_clean = False
            elif name == "compact":
                result.compacted = True
            time.sleep(0.002)
        else:
            raise ValueError(f"step {n}: neither a write nor a service: {step}")
    result.schema = schema
    if str(_option(spec, "hoodie.clean.automatic", "true")).lower() == "true":
        retained = int(_option(spec, "hoodie.cleaner.commits.retained", 10))
        writes = [c for c in result.commits if c.alive]
        if len(writes) > retained:
            for c in writes[:len(writes) - retained]:
                c.after_clean = False
    return result


def _meta(result: ScriptResult, state_writer: dict, include: bool) -> dict | None:
    if not include:
        return None
    out = {}
    for k, c in state_writer.items():
        key = k[1] if isinstance(k, tuple) else k
        out[k] = {"_hoodie_commit_time": result.commits[c].instant["timestamp"], "_hoodie_record_key": str(key)}
    return out


def _with_partition(result: ScriptResult, rows: dict, meta: dict | None) -> dict | None:
    if meta is None:
        return None
    pf = result.model.partition
    for k, m in meta.items():
        m["_hoodie_partition_path"] = partition_path(result.spec, rows[k][pf]) if pf else ""
    return meta


def derive_read_cases(result: ScriptResult, table_key: str, features: tuple[str, ...],
                      prefix: str) -> list[ReadCase]:
    """Read cases whose rows the model knows, for the table ``run_script`` produced."""
    spec, model = result.spec, result.model
    with_meta = str(_option(spec, "hoodie.populate.meta.fields", "true")).lower() == "true"
    cases: list[ReadCase] = []
    schema = result.schema

    def rows_for(state_rows: dict, state_writer: dict, sch: pa.Schema) -> tuple[list[dict], list[str]]:
        meta = _with_partition(result, state_rows, _meta(result, state_writer, with_meta))
        cols = (META if with_meta else []) + sch.names
        return expected_rows(state_rows, schema, cols, meta), cols

    want, cols = rows_for(model.rows, model.writer, schema)
    cases.append(ReadCase(f"{prefix}/snapshot", table_key, {"kind": "snapshot"}, want, features + ("snapshot",), cols))
    if result.compacted and _table(spec).get("table_type", "").upper().startswith("MERGE"):
        cases.append(ReadCase(f"{prefix}/read_optimized", table_key, {"kind": "read_optimized"}, want,
                              features + ("read-optimized",), cols,
                              note="after a full compaction base files hold every row"))
    alive = [(i, c) for i, c in enumerate(result.commits) if c.alive]
    prev_bound = "0"
    latest = alive[-1][0] if alive else None
    all_valid = True
    for i, c in alive:
        valid = c.after_clean or i == latest
        rows, writer = model.history[i]
        if valid:
            want, cols = rows_for(rows, writer, c.schema)
            cases.append(ReadCase(f"{prefix}/as_of/{i}", table_key, {"kind": "time_travel", "as_of": c.bound},
                                  want, features + ("time-travel",), cols))
            changed = {k: r for k, r in rows.items() if writer.get(k) == i}
            want, cols = rows_for(changed, {k: i for k in changed}, c.schema)
            cases.append(ReadCase(f"{prefix}/incremental/{i}", table_key,
                                  {"kind": "incremental", "start": prev_bound, "end": c.bound},
                                  want, features + ("incremental",), cols))
        else:
            all_valid = False
        prev_bound = c.bound
    if alive and all_valid and len(alive) > 1:
        want, cols = rows_for(model.rows, model.writer, schema)
        cases.append(ReadCase(f"{prefix}/incremental/all", table_key,
                              {"kind": "incremental", "start": "0", "end": alive[-1][1].bound},
                              want, features + ("incremental",), cols))
    pf = model.partition
    if pf and "n" in schema.names and model.rows:
        some = sorted({r[pf] for r in model.rows.values()})[0]
        keep = {k: r for k, r in model.rows.items() if r[pf] == some and r["n"] > 10}
        cols = ["id", pf, "n"]
        cases.append(ReadCase(f"{prefix}/filter_projection", table_key,
                              {"kind": "snapshot", "columns": cols, "filters": [[pf, "=", some], ["n", ">", 10]]},
                              expected_rows(keep, schema, cols), features + ("filters", "projection"), cols))
    if spec.get("lookup"):
        keys = spec["lookup"]
        keep = {k: r for k, r in model.rows.items() if r[model.key] in keys}
        meta = _with_partition(result, keep, _meta(result, {k: model.writer[k] for k in keep}, with_meta))
        cols = (META if with_meta else []) + schema.names
        cases.append(ReadCase(f"{prefix}/lookup", table_key, {"kind": "lookup", "keys": keys},
                              expected_rows(keep, schema, cols, meta), features + ("lookup",), cols))
    return cases


# -- the generated tables ------------------------------------------------------------------------
def _ids(lo, hi, ts, seed=0, **kw):
    return {"ids": [lo, hi], "ts": ts, "seed": seed, **kw}


def _table_spec(ttype: str, version: int, **options) -> dict:
    return {"table_type": ttype, "table_version": version, "record_key": "id", "ordering_field": "ts",
            "partition_by": "p", "options": {k.replace("__", "."): v for k, v in options.items()}}


COW, MOR = "COPY_ON_WRITE", "MERGE_ON_READ"
_NO_CLEAN = {"hoodie.clean.automatic": "false"}

GENERATED: dict[str, dict] = {
    "bloom_index_cow_v8": {
        "features": ["bloom-index"],
        "table": {**_table_spec(COW, 8), "options": {"hoodie.index.type": "BLOOM"}},
        "steps": [{"write": "insert", "rows": _ids(0, 40, 1)},
                  {"write": "upsert", "rows": _ids(30, 60, 2, 1)},
                  {"write": "delete", "rows": _ids(0, 6, 9)}],
    },
    "global_bloom_mor_v6": {
        "features": ["global-bloom-index", "partition-path-update"],
        "table": {**_table_spec(MOR, 6), "options": {"hoodie.index.type": "GLOBAL_BLOOM"}},
        "steps": [{"write": "insert", "rows": _ids(0, 30, 1)},
                  {"write": "upsert", "rows": _ids(10, 20, 2, 1, pshift=1)},
                  {"write": "upsert", "rows": _ids(25, 35, 3, 2)}],
    },
    "record_index_mor_v8": {
        "features": ["record-index", "metadata-table"],
        "table": {**_table_spec(MOR, 8), "options": {"hoodie.index.type": "RECORD_INDEX",
                                                      "hoodie.metadata.record.index.enable": "true"}},
        "steps": [{"write": "insert", "rows": _ids(0, 40, 1)},
                  {"write": "upsert", "rows": _ids(20, 50, 2, 1)},
                  {"write": "delete", "rows": _ids(0, 3, 9)}],
        "lookup": ["k00001", "k00005", "k00025", "k00045", "k09999"],
    },
    "clustering_cow_v8": {
        "features": ["clustering", "replacecommit"],
        "table": _table_spec(COW, 8),
        "steps": [{"write": "insert", "rows": _ids(0, 15, 1)},
                  {"write": "insert", "rows": _ids(15, 30, 1, 1)},
                  {"write": "upsert", "rows": _ids(10, 20, 2, 2)},
                  {"service": "cluster", "sort_by": ["n"]}],
    },
    "clustering_mor_v6": {
        "features": ["clustering", "replacecommit"],
        "table": _table_spec(MOR, 6),
        "steps": [{"write": "insert", "rows": _ids(0, 15, 1)},
                  {"write": "insert", "rows": _ids(15, 30, 1, 1)},
                  {"service": "cluster"},
                  {"write": "upsert", "rows": _ids(5, 12, 2, 2)}],
    },
    "compaction_mor_v8": {
        "features": ["compaction"],
        "table": _table_spec(MOR, 8),
        "steps": [{"write": "insert", "rows": _ids(0, 30, 1)},
                  {"write": "upsert", "rows": _ids(10, 20, 2, 1)},
                  {"write": "delete", "rows": _ids(0, 3, 9)},
                  {"service": "compact"}],
    },
    "log_compaction_parquet_blocks_mor_v8": {
        "features": ["log-compaction", "parquet-log-blocks"],
        "table": {**_table_spec(MOR, 8), "options": {"hoodie.logfile.data.block.format": "parquet"}},
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "rows": _ids(0, 10, 2, 1)},
                  {"write": "upsert", "rows": _ids(5, 15, 3, 2)},
                  {"write": "upsert", "rows": _ids(8, 12, 4, 3)},
                  {"service": "log_compact", "options": {"hoodie.log.compaction.blocks.threshold": "2"}}],
    },
    "cleaning_cow_v8": {
        "features": ["cleaning"],
        "table": {**_table_spec(COW, 8), "options": {"hoodie.clean.automatic": "false",
                                                     "hoodie.cleaner.commits.retained": "1"}},
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "rows": _ids(0, 20, 2, 1)},
                  {"write": "upsert", "rows": _ids(0, 20, 3, 2)},
                  {"write": "upsert", "rows": _ids(5, 10, 4, 3)},
                  {"service": "clean", "options": {"hoodie.cleaner.commits.retained": "1"}}],
    },
    "archived_history_cow_v8": {
        "features": ["archived-timeline"],
        "table": {**_table_spec(COW, 8), "options": {**_NO_CLEAN, "hoodie.cleaner.commits.retained": "1",
                                                     "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                                     "hoodie.archive.automatic": "false",
                                                     # archival never passes the metadata table's
                                                     # latest compaction
                                                     "hoodie.metadata.compact.max.delta.commits": "1"}},
        "steps": [{"write": "insert", "rows": _ids(0, 10, 1)}]
        + [{"write": "upsert", "rows": _ids(i * 3, i * 3 + 5, i + 2, i + 1)} for i in range(6)]
        + [{"service": "archive", "options": {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                              "hoodie.cleaner.commits.retained": "1"}}],
    },
    "archived_history_mor_v6": {
        "features": ["archived-timeline"],
        "table": {**_table_spec(MOR, 6), "options": {**_NO_CLEAN, "hoodie.cleaner.commits.retained": "1",
                                                     "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                                     "hoodie.archive.automatic": "false",
                                                     # archival never passes the metadata table's
                                                     # latest compaction
                                                     "hoodie.metadata.compact.max.delta.commits": "1"}},
        "steps": [{"write": "insert", "rows": _ids(0, 10, 1)}]
        + [{"write": "upsert", "rows": _ids(i * 3, i * 3 + 5, i + 2, i + 1)} for i in range(6)]
        + [{"service": "archive", "options": {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                              "hoodie.cleaner.commits.retained": "1"}}],
    },
    "schema_evolution_cow_v8": {
        "features": ["schema-evolution"],
        "table": _table_spec(COW, 8),
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "add_columns": [["extra", "string"]], "widen": {"n": "int64"},
                   "rows": _ids(10, 30, 2, 1, set={"extra": "added"})}],
    },
    "schema_evolution_mor_v8": {
        "features": ["schema-evolution"],
        "table": _table_spec(MOR, 8),
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "add_columns": [["extra", "string"]], "widen": {"n": "int64"},
                   "rows": _ids(10, 30, 2, 1, set={"extra": "added"})}],
    },
    "rollback_blocks_mor_v6": {
        "features": ["rollback", "rollback-command-blocks"],
        "requires": ["rollback-command-block"],
        "table": _table_spec(MOR, 6),
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "rows": _ids(0, 10, 2, 1)},
                  {"write": "upsert", "rows": _ids(5, 15, 3, 2)},
                  {"service": "rollback", "target": -1}],
    },
    "rollback_mor_v8": {
        "features": ["rollback"],
        "table": _table_spec(MOR, 8),
        "steps": [{"write": "insert", "rows": _ids(0, 20, 1)},
                  {"write": "upsert", "rows": _ids(0, 10, 2, 1)},
                  {"write": "upsert", "rows": _ids(5, 15, 3, 2)},
                  {"service": "rollback", "target": -1}],
    },
    "metadata_hfile_log_blocks_mor_v8": {
        "features": ["metadata-table", "hfile-log-blocks"],
        "requires": ["metadata-hfile-log-blocks"],
        "table": {**_table_spec(MOR, 8), "options": {"hoodie.metadata.enable": "true",
                                                     "hoodie.metadata.index.column.stats.enable": "true"}},
        "steps": [{"write": "insert", "rows": _ids(0, 30, 1)},
                  {"write": "upsert", "rows": _ids(10, 40, 2, 1)},
                  {"write": "insert", "rows": _ids(40, 50, 3, 2)}],
    },
    "event_time_ordering_mor_v8": {
        "features": ["event-time-merge"],
        "table": {**_table_spec(MOR, 8), "options": {"hoodie.record.merge.mode": "EVENT_TIME_ORDERING"}},
        "steps": [{"write": "insert", "rows": _ids(0, 20, 5)},
                  {"write": "upsert", "rows": [_ids(0, 10, 3, 1), _ids(10, 20, 7, 2)]}],
    },
    "overwrite_delete_partition_cow_v8": {
        "features": ["insert-overwrite", "delete-partition", "replacecommit", "hive-style-partitions"],
        "table": {**_table_spec(COW, 8), "options": {"hoodie.datasource.write.hive_style_partitioning": "true"}},
        "steps": [{"write": "insert", "rows": _ids(0, 30, 1)},
                  {"write": "insert_overwrite", "rows": _ids(100, 106, 2, 1)},
                  {"write": "delete_partition", "partitions": ["c"]}],
    },
    "nonpartitioned_bulk_insert_cow_v6": {
        "features": ["non-partitioned", "bulk-insert"],
        "table": {**_table_spec(COW, 6), "partition_by": None},
        "steps": [{"write": "bulk_insert", "rows": _ids(0, 25, 1)},
                  {"write": "upsert", "rows": _ids(20, 30, 2, 1)}],
    },
}


def _check_requirement(path: Path, what: str) -> str | None:
    from hudi_format.log import BlockType, read_log_file
    from hudi_format.storage import Storage
    storage = Storage(str(path))
    if what == "rollback-command-block":
        for info in storage.walk_files("", skip_dirs=(".hoodie",)):
            if ".log." in info.name:
                if any(b.block_type == BlockType.COMMAND for b in read_log_file(storage, info.path)):
                    return None
        return "no rollback command block was written"
    if what == "metadata-hfile-log-blocks":
        for info in storage.walk_files(".hoodie/metadata", skip_dirs=(".hoodie",)):
            if ".log." in info.name:
                if any(b.block_type == BlockType.HFILE_DATA for b in read_log_file(storage, info.path)):
                    return None
        return "the metadata table has no HFile log blocks"
    return f"unknown requirement {what}"


def generate_tables(root: Path, names: list[str] | None = None,
                    progress: Callable[[str], None] | None = None) -> tuple[list[TableInfo], list[ReadCase]]:
    """Write every generated table under ``root`` with hudi_format; their infos and cases."""
    from .adapters.hudi_format import HudiFormatEngine
    engine = HudiFormatEngine()
    infos, cases = [], []
    for name, spec in GENERATED.items():
        if names is not None and name not in names:
            continue
        if progress:
            progress(name)
        feats = ("generated",) + write_case_features(spec)[1:]
        feats = tuple(f for f in feats if f not in ("insert", "upsert"))
        key = f"generated:{name}"
        info = TableInfo(key, feats)
        path = root / name
        try:
            result = run_script(engine, str(path), spec)
            for req in spec.get("requires", []):
                problem = _check_requirement(path, req)
                if problem:
                    raise RuntimeError(f"generation did not produce what the cases need: {problem}")
            info.path = path
            cases.extend(derive_read_cases(result, key, feats, f"{name}"))
        except Exception as exc:  # noqa: BLE001 - reported as errors of this table's cases
            log.exception("generating %s failed", name)
            info.error = f"generating the table failed: {type(exc).__name__}: {exc}"
            cases.append(ReadCase(f"{name}/snapshot", key, {"kind": "snapshot"}, [], feats + ("snapshot",)))
        infos.append(info)
    return infos, cases
