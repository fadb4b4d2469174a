"""Clustering: rewrite groups of small file groups into new, sorted, target-size file groups.

Schedule (Hudi's ``SparkSizeBasedClusteringPlanStrategy`` on ``PartitionAwareClusteringPlanStrategy``):
per partition, the latest slices whose base file is smaller than
``hoodie.clustering.plan.strategy.small.file.limit`` (log-only slices count as
``hoodie.parquet.max.file.size``) and that no pending compaction, log compaction or clustering
holds, biggest first, are packed into groups of at most ``...max.bytes.per.group`` bytes, at
most ``...max.num.groups`` groups; a group expects ``ceil(size / ...target.file.max.bytes)``
output file groups. A lone slice forms a group only when sorting or
``...single.group.clustering.enabled`` (default) asks for it. The plan
(``HoodieRequestedReplaceMetadata`` with a ``HoodieClusteringPlan``, operation ``CLUSTER``) is
written as ``<t>.clustering.requested`` (v8+) or ``<t>.replacecommit.requested`` (v6).

Run (``SparkSortAndSizeExecutionStrategy``): each group's slices are read merged (as a reader
would), sorted by the sort columns -- linearly, or along a Z-order or Hilbert curve
(``hoodie.layout.optimize.strategy``, see :mod:`.space_curves`) -- and cut into contiguous runs
written as new file groups ``<newFileId>_<token>_<t>.parquet`` of about the target size. Records
keep their commit time and sequence number (``hoodie.clustering.preserve.commit.metadata``,
default true); ``_hoodie_file_name`` names the new file. The instant completes as a
``replacecommit`` whose ``partitionToReplaceFileIds`` retires the input file groups.

Clustering aborts (``ServiceConflictError``, plan removed) if a planned file group was written
to after planning: completing would drop that write.
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..base_file import footer_bloom, parquet_format, unique_key_columns, with_file_name, write_base_file
from .. import parquet_codec
from ..config import TableConfig
from ..errors import FileMissingError, InvalidOptionError, UnsupportedFeatureError
from ..log import read_log_file
from ..options import option
from ..read.align import align_table
from ..read.merge import MergeSpec, merge_file_slice, read_base_file, record_keys
from ..seqno import commit_seqnos
from ..storage import Storage
from ..timeline import Instant, Timeline, TimelineWriter, WriteStat, commit_metadata
from ..timeline.instant import CLUSTERING, COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from ..timeline.plans import encode_with_schema, requested_replace_schema
from ..transaction import Transaction
from ..view import FileSlice, FileSystemView
from ..view.file_names import BaseFileName, parse_base_file_name
from ..writer.handles import new_file_id
from ..writer.new_table import as_list
from . import space_curves
from .common import (EXECUTION_STRATEGIES, PLAN_STRATEGIES, ServiceConflictError, TableState,
                     full_uri, in_flight_file_groups, is_clustering, new_instant_time,
                     pending_service_file_groups, pick_pending,
                     rel_in_partition, run_services, runtime, schema_extra, committed, snapshot_of,
                     slice_metrics, split_partitions, validate_service_options)

log = logging.getLogger(__name__)

CLUSTERING_PLAN_VERSION = 1
SORT_COLUMNS = "hoodie.clustering.plan.strategy.sort.columns"
LAYOUT_STRATEGY = "hoodie.layout.optimize.strategy"


def _sort_columns(sort_by: str | Sequence[str] | None, opts: Mapping[str, Any]) -> list[str]:
    value = sort_by if sort_by is not None else option(opts, SORT_COLUMNS)
    if value is None:
        return []
    if isinstance(value, str):
        return as_list(value)
    cols = [str(c).strip() for c in value]
    if any(not c for c in cols):
        raise InvalidOptionError(f"sort_by must name columns, got {value!r}")
    return cols


def _check_strategies(opts: Mapping[str, Any]) -> str:
    plan_cls = option(opts, "hoodie.clustering.plan.strategy.class")
    if plan_cls not in PLAN_STRATEGIES:
        raise UnsupportedFeatureError(f"option hoodie.clustering.plan.strategy.class: only the size-based "
                                      f"strategies {list(PLAN_STRATEGIES)} are supported, got {plan_cls!r}")
    exe_cls = option(opts, "hoodie.clustering.execution.strategy.class")
    if exe_cls not in EXECUTION_STRATEGIES:
        raise UnsupportedFeatureError(f"option hoodie.clustering.execution.strategy.class: only "
                                      f"{list(EXECUTION_STRATEGIES)} are supported, got {exe_cls!r}")
    if option(opts, "hoodie.layout.optimize.curve.build.method") != "direct":
        raise UnsupportedFeatureError("option hoodie.layout.optimize.curve.build.method: only 'direct' "
                                      "(map values onto the curve) is supported, not 'sample'")
    return space_curves.resolve_strategy(option(opts, LAYOUT_STRATEGY))


# -- trigger ----------------------------------------------------------------------------------


def clustering_due(timeline: Timeline, opts: Mapping[str, Any]) -> bool:
    """Inline/async scheduling waits for ``hoodie.clustering.inline.max.commits`` (or
    ``async.max.commits``) completed commits since the last clustering, as Hudi does."""
    last = [i.timestamp for i in timeline.instants if is_clustering(timeline, i)]
    since = max(last) if last else "0"
    commits = [i for i in timeline.completed
               if i.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT) and i.timestamp > since]
    if option(opts, "hoodie.clustering.inline"):
        need = option(opts, "hoodie.clustering.inline.max.commits")
    else:
        need = option(opts, "hoodie.clustering.async.max.commits")
    if len(commits) < need:
        log.info("clustering not due: %d commits since the last clustering, waiting for %d", len(commits), need)
        return False
    return True


# -- planning ---------------------------------------------------------------------------------


def _partition_regex(opts: Mapping[str, Any]) -> "re.Pattern[str] | None":
    pattern = option(opts, "hoodie.clustering.plan.strategy.partition.regex.pattern")
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidOptionError(f"option hoodie.clustering.plan.strategy.partition.regex.pattern: "
                                 f"invalid regex {pattern!r}: {exc}") from None


def _partitions(ts: TableState, opts: Mapping[str, Any]) -> list[str]:
    selected = split_partitions(option(opts, "hoodie.clustering.plan.strategy.partition.selected"))
    parts = selected if selected else ts.view.partitions()
    rx = _partition_regex(opts)
    return [p for p in parts if rx.fullmatch(p)] if rx is not None else parts


def check_options(opts: Mapping[str, Any]) -> None:
    """The clustering options whose values cannot work whatever the table holds (strategy
    classes, the partition regex), checked before a write whose inline clustering reads them."""
    _check_strategies(opts)
    _partition_regex(opts)


def _groups_for_partition(slices: list[FileSlice], opts: Mapping[str, Any],
                          single_group: bool) -> list[tuple[list[FileSlice], int]]:
    """``buildClusteringGroupsForPartition``: biggest slices first, packed up to max bytes."""
    default = option(opts, "hoodie.parquet.max.file.size")
    max_group = option(opts, "hoodie.clustering.plan.strategy.max.bytes.per.group")
    target = option(opts, "hoodie.clustering.plan.strategy.target.file.max.bytes")
    max_groups = option(opts, "hoodie.clustering.plan.strategy.max.num.groups")

    def size(s: FileSlice) -> int:
        return s.base_file_size if s.base_file else default

    groups: list[tuple[list[FileSlice], int]] = []
    current: list[FileSlice] = []
    total = 0
    for s in sorted(slices, key=lambda s: -size(s)):
        if current and total + size(s) > max_group:
            groups.append((current, math.ceil(total / target)))
            current, total = [], 0
            if len(groups) >= max_groups:
                break
        current.append(s)
        total += size(s)
    else:
        if current and (len(current) > 1 or single_group):
            groups.append((current, math.ceil(total / target)))
    return groups


def _slice_info(storage: Storage, s: FileSlice) -> dict:
    return {"dataFilePath": full_uri(storage, s.base_file) if s.base_file else "",
            "deltaFilePaths": [full_uri(storage, p) for p in s.log_files],
            "fileId": s.file_id, "partitionPath": s.partition_path,
            "bootstrapFilePath": "", "version": 1}


def schedule_clustering(storage: Storage, config: TableConfig, sort_by: str | Sequence[str] | None = None,
                        options: Mapping[str, Any] | None = None, *, instant_time: str | None = None,
                        check_trigger: bool | None = None) -> Instant | None:
    """Plan a clustering; ``None`` when no partition has file groups worth rewriting.

    ``sort_by`` (column names, or a comma-separated string) overrides
    ``hoodie.clustering.plan.strategy.sort.columns``. ``check_trigger`` (default: when
    ``hoodie.clustering.inline``/``schedule.inline``/``async.enabled`` is set) waits for
    enough commits since the last clustering.
    """
    opts = validate_service_options(options)
    return _schedule(storage, config, sort_by, opts, instant_time, check_trigger)[0]


def _schedule(storage: Storage, config: TableConfig, sort_by: str | Sequence[str] | None,
              opts: Mapping[str, Any], instant_time: str | None,
              check_trigger: bool | None) -> tuple[Instant | None, TableState | None]:
    """:func:`schedule_clustering`, and the snapshot it planned on (with the new instant)."""
    layout = _check_strategies(opts)
    cols = _sort_columns(sort_by, opts)
    ts_time = instant_time or new_instant_time(storage, config)
    ts = TableState(storage, config)   # listed after the instant time was issued
    if cols:
        schema = ts.schemas()[0]
        missing = [c for c in cols if schema.get_field_index(c) < 0]
        if missing:
            raise InvalidOptionError(f"cannot cluster by unknown column(s) {missing}; the table has "
                                     f"{', '.join(schema.names)}")
        for c in cols:
            if layout != space_curves.LINEAR and len(cols) > 1:
                space_curves._kind(schema.field(c).type)   # curve-mappable type, or a clear error
    inline = bool(option(opts, "hoodie.clustering.inline") or option(opts, "hoodie.clustering.schedule.inline")
                  or option(opts, "hoodie.clustering.async.enabled"))
    if (inline if check_trigger is None else check_trigger) and not clustering_due(ts.timeline, opts):
        return None, ts

    small = option(opts, "hoodie.clustering.plan.strategy.small.file.limit")
    single = bool(cols) or option(opts, "hoodie.clustering.plan.strategy.single.group.clustering.enabled")
    max_groups = option(opts, "hoodie.clustering.plan.strategy.max.num.groups")
    default = option(opts, "hoodie.parquet.max.file.size")
    parts = _partitions(ts, opts)
    by_part: dict[str, list[FileSlice]] = {p: [] for p in parts}
    slices = ts.latest_slices(parts)
    # writes in flight, by a timeline and markers listed after the files: a file listed had
    # its write's instant and marker made before it, so that write is seen (listed before
    # the files, a write could begin in between and its file enter the plan)
    after = TableState(storage, config)
    busy = set(pending_service_file_groups(after.timeline)) | in_flight_file_groups(after)
    candidates = [s for s in slices if (s.partition_path, s.file_id) not in busy
                  and (s.base_file_size if s.base_file else 0) < small]
    gone = _vanished(ts, candidates)      # listed again only where a candidate has log files
    for s in candidates:
        if (s.partition_path, s.file_id) not in gone:
            by_part[s.partition_path].append(s)
    groups = []
    for p in parts:
        groups += _groups_for_partition(by_part[p], opts, single)[:max_groups]
    groups = groups[:max_groups]
    if not groups:
        log.info("nothing to cluster in %s", storage.url)
        return None, ts

    params = {}
    if cols:
        params[SORT_COLUMNS] = ",".join(cols)
        if layout != space_curves.LINEAR:
            params[LAYOUT_STRATEGY] = layout
    plan = {
        "inputGroups": [{"slices": [_slice_info(storage, s) for s in slices],
                         "metrics": slice_metrics(slices, default),
                         "numOutputFileGroups": max(n, 1), "extraMetadata": None, "version": 1}
                        for slices, n in groups],
        "strategy": {"strategyClassName": option(opts, "hoodie.clustering.execution.strategy.class"),
                     "strategyParams": params, "version": 1},
        "extraMetadata": {}, "version": CLUSTERING_PLAN_VERSION,
        "preserveHoodieMetadata": bool(option(opts, "hoodie.clustering.preserve.commit.metadata")),
    }
    if config.version >= 8:
        plan["missingSchedulePartitions"] = []
    requested = {"operationType": "CLUSTER", "clusteringPlan": plan, "extraMetadata": {}, "version": 1}
    data = encode_with_schema(requested_replace_schema(config.version), requested)
    inst = TimelineWriter(storage, config).create_requested(CLUSTERING, ts_time, plan=data,
                                                             known_new=instant_time is None)
    log.info("scheduled clustering %s: %d groups, %d file groups", ts_time, len(groups),
             sum(len(g) for g, _ in groups))
    return inst, ts.advanced(inst)


# -- execution --------------------------------------------------------------------------------


def _planned_slices(group: Mapping[str, Any]) -> list[FileSlice]:
    out = []
    for s in group.get("slices") or ():
        part = s.get("partitionPath") or ""
        base = rel_in_partition(part, s.get("dataFilePath"))
        logs = tuple(rel_in_partition(part, p) for p in s.get("deltaFilePaths") or ())
        parsed = parse_base_file_name(posixpath.basename(base)) if base else None
        out.append(FileSlice(part, s.get("fileId"), parsed.instant_time if parsed else "", base, logs))
    return out


def _vanished(ts: TableState, slices: list[FileSlice]) -> set[tuple[str, str]]:
    """File groups with a listed log file that is gone now: a write that aborted after the
    slices were listed removed its files before its instant and markers, so it shows in
    neither; its group is left out of the plan (a plan naming a gone file aborts when run)."""
    fresh = FileSystemView(ts.storage, ts.config)
    names: dict[str, set[str]] = {}
    out = set()
    for s in slices:
        if not s.log_files:
            continue
        if s.partition_path not in names:
            names[s.partition_path] = {f.name for f in fresh.files_in(s.partition_path)}
        if any(posixpath.basename(x) not in names[s.partition_path] for x in s.log_files):
            out.add((s.partition_path, s.file_id))
    return out


def _check_unchanged(ts: TableState, planned: list[FileSlice], instant_time: str) -> dict:
    """Every input file group must still be exactly the slice that was planned, as far as
    committed writes go; returns the current slices by (partition, file id): the plan's
    carry no file sizes, these do.

    Version 6 names a log file after its slice, so storage lists the log file of a write
    still in flight (or one being rolled back) in the slice. That is no change: such a write
    cannot commit into a group under clustering (it fails its conflict check), and its
    rollback removes the file. A log file the plan does not name changes the group only if
    one of its blocks is of a committed instant (read from the blocks' headers, for those
    few files)."""
    current = {(s.partition_path, s.file_id): s for s in ts.latest_slices({p.partition_path for p in planned})}
    for p in planned:
        now = current.get((p.partition_path, p.file_id))
        if now is None:
            raise ServiceConflictError(f"clustering {instant_time}: file group {p.file_id} in "
                                       f"{p.partition_path!r} was replaced or removed since it was planned")
        changed = [] if (posixpath.basename(now.base_file) if now.base_file else None) == \
            (posixpath.basename(p.base_file) if p.base_file else None) else [now.base_file or p.base_file]
        planned_logs = {posixpath.basename(x) for x in p.log_files}
        now_logs = {posixpath.basename(x): x for x in now.log_files}
        changed += sorted(planned_logs - set(now_logs))
        changed += sorted(name for name, rel in now_logs.items()
                          if name not in planned_logs and _holds_committed_blocks(ts, rel))
        if changed:
            raise ServiceConflictError(
                f"clustering {instant_time}: file group {p.file_id} in {p.partition_path!r} was written "
                f"to after the clustering was planned ({', '.join(map(posixpath.basename, changed[:3]))}); "
                "completing it would drop that write, so the clustering is aborted (writers must not "
                "update file groups under pending clustering)")
    return current


def _holds_committed_blocks(ts: TableState, rel: str) -> bool:
    """Whether log file ``rel`` holds a block of an instant committed as of ``ts`` (gone: no)."""
    try:
        return any(b.instant_time is not None and ts.state.visible(b.instant_time)
                   for b in read_log_file(ts.storage, rel) if not b.is_corrupted)
    except FileMissingError:
        return False


def _bytes_per_row(sample: pa.Table, codec: str) -> float:
    part = sample.slice(0, min(sample.num_rows, 20_000))
    if part.num_rows == 0:
        return 1.0
    return max(parquet_codec.compressed_size(part, codec) / part.num_rows, 1.0)


def _read_group(ts: TableState, slices: list[FileSlice], schema: pa.Schema, spec: MergeSpec) -> pa.Table:
    pieces = []
    for s in slices:
        if s.log_files:
            t = merge_file_slice(ts.storage, s, schema, spec, ts.state.visible)
        elif s.base_file:
            t = read_base_file(ts.storage, s.base_file, schema.names)
        else:
            continue
        pieces.append(align_table(t, schema, ts.storage.uri(s.base_file or s.log_files[0])))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def _restamp(table: pa.Table, instant_time: str, task: int) -> pa.Table:
    """New commit time and sequence numbers (``preserve.commit.metadata=false``)."""
    n = table.num_rows
    seq = commit_seqnos(instant_time, task, 0, n)
    for name, col in (("_hoodie_commit_time", pa.repeat(pa.scalar(instant_time), n)),
                      ("_hoodie_commit_seqno", seq)):
        idx = table.schema.get_field_index(name)
        table = table.set_column(idx, table.schema.field(idx), col)
    return table


def _as_planned(planned: FileSlice, now: FileSlice | None) -> FileSlice:
    """The planned slice with the sizes of its files as listed now (the plan has none); a log
    file of a write in flight listed since (see :func:`_check_unchanged`) is not read."""
    if now is None:
        return planned
    names = {posixpath.basename(x) for x in planned.log_files}
    kept = [(x, n) for x, n in zip(now.log_files, now.log_file_sizes) if posixpath.basename(x) in names]
    return attrs.evolve(now, log_files=tuple(x for x, _ in kept), log_file_sizes=tuple(n for _, n in kept))


def _cluster_group(ts: TableState, spec: MergeSpec, schema: pa.Schema, avro: dict, instant_time: str,
                   group: Mapping[str, Any], first_task: int, params: Mapping[str, str],
                   opts: Mapping[str, Any], preserve: bool, written: list, current: Mapping) -> list[dict]:
    t0 = time.monotonic()
    slices = [_as_planned(s, current.get((s.partition_path, s.file_id))) for s in _planned_slices(group)]
    part = slices[0].partition_path if slices else ""
    data = _read_group(ts, slices, schema, spec)
    cols = _sort_columns(params.get(SORT_COLUMNS), {})
    layout = space_curves.resolve_strategy(params.get(LAYOUT_STRATEGY) or option(opts, LAYOUT_STRATEGY))
    if cols and data.num_rows:
        data = data.take(space_curves.sort_indices(data, cols, layout))
    codec = option(opts, "hoodie.parquet.compression.codec")
    target = option(opts, "hoodie.clustering.plan.strategy.target.file.max.bytes")
    est = _bytes_per_row(data, codec) * data.num_rows
    n_files = max(int(group.get("numOutputFileGroups") or 1), math.ceil(est / target), 1)
    n_files = min(n_files, max(data.num_rows, 1))
    stats = []
    bounds = [round(i * data.num_rows / n_files) for i in range(n_files + 1)]
    bloom = footer_bloom(opts)
    keyed = ts.config.populate_meta_fields and bloom is not None
    for i in range(n_files):
        t1 = time.monotonic()
        chunk = data.slice(bounds[i], bounds[i + 1] - bounds[i])
        task = first_task + i
        fid = new_file_id()
        name = BaseFileName(fid, f"{task}-1-{task}", instant_time, ts.config.base_file_extension).name
        rel = posixpath.join(part, name) if part else name
        if ts.config.populate_meta_fields:
            if not preserve:
                chunk = _restamp(chunk, instant_time, task)
            chunk = with_file_name(chunk, name)
        keys = pc.cast(record_keys(chunk, spec), pa.string()) if keyed else None
        written.append(rel)
        res = write_base_file(ts.storage, rel, chunk, avro, keys, bloom=bloom,
                              plain=unique_key_columns(spec.record_key_fields), **parquet_format(opts))
        stats.append(WriteStat(file_id=fid, path=rel, partition_path=part, prev_commit=None,
                                num_writes=chunk.num_rows, num_inserts=chunk.num_rows,
                                total_write_bytes=res.file_size,
                                runtime_stats=runtime(create=(time.monotonic() - t1) * 1000,
                                                      scan=(t1 - t0) * 1000 if i == 0 else 0)))
    return stats


def run_clustering(storage: Storage, config: TableConfig, instant: "Instant | str | None" = None,
                   options: Mapping[str, Any] | None = None) -> Instant:
    """Execute a pending clustering (the oldest if ``instant`` is None); return its completed
    ``replacecommit``. Raises ``ServiceConflictError`` (and removes the plan) when an input file
    group changed since planning."""
    opts = validate_service_options(options)
    _check_strategies(opts)
    return _run(TableState.load(storage, config), instant, opts)[0]


def _run(ts: TableState, instant: "Instant | str | None", opts: Mapping[str, Any]) -> tuple[Instant, TableState]:
    """:func:`run_clustering` on the operation's snapshot; also returns the table after it."""
    storage, config = ts.storage, ts.config
    inst = pick_pending(ts.timeline, CLUSTERING, instant)
    requested = ts.timeline.plan(inst)
    plan = requested.get("clusteringPlan") or {}
    groups = list(plan.get("inputGroups") or ())
    params = dict((plan.get("strategy") or {}).get("strategyParams") or {})
    preserve = plan.get("preserveHoodieMetadata")
    preserve = True if preserve is None else bool(preserve)
    planned = [s for g in groups for s in _planned_slices(g)]
    schema, avro, data_avro = ts.schemas()
    spec = MergeSpec.from_config(config)

    def leftovers() -> list[str]:
        out = []
        for part in {s.partition_path for s in planned}:
            out += [f.path for f in storage.list(part) if not f.is_dir
                    and f.name.endswith(f"_{inst.timestamp}{config.base_file_extension}")]
        return out

    def unchanged(now: Timeline) -> None:
        _check_unchanged(TableState(storage, config, now), planned, inst.timestamp)

    with Transaction.resume(storage, config, inst, opts, leftovers=leftovers) as txn:
        try:
            current = _check_unchanged(ts, planned, inst.timestamp)
            written = txn.written
            firsts, task = [], 0
            for g in groups:
                firsts.append(task)
                task += 10_000
            jobs = list(zip(groups, firsts))
            run = lambda j: _cluster_group(ts, spec, schema, avro, inst.timestamp, j[0], j[1], params,  # noqa: E731
                                           opts, preserve, written, current)
            workers = min(len(jobs), os.cpu_count() or 1)
            try:
                if workers > 1:
                    with ThreadPoolExecutor(workers) as pool:
                        results = list(pool.map(run, jobs))
                else:
                    results = [run(j) for j in jobs]
            except FileMissingError as exc:
                # A file of the plan went away: a write in flight when the plan was made (v6
                # names its log file after the slice) was rolled back, or a service removed
                # the file. Either way the plan no longer describes the table.
                raise ServiceConflictError(
                    f"clustering {inst.timestamp}: a file it planned to rewrite is gone ({exc}); the "
                    "write that made it was rolled back or the file group changed, so the clustering "
                    "is aborted and the next one plans afresh") from None
            stats = [s for r in results for s in r]
            replaced: dict[str, list[str]] = {}
            for s in planned:
                replaced.setdefault(s.partition_path, []).append(s.file_id)
            metadata = commit_metadata(stats, operation_type="CLUSTER", extra_metadata=schema_extra(data_avro),
                                       replaced_file_ids=replaced)
            # Under the table lock: a write that completed on an input file group since the
            # plan wins; the clustering is dropped rather than drop that write.
            done = txn.commit(metadata, unchanged)
        except ServiceConflictError:
            txn.abort(drop_plan=True)
            raise
    log.info("completed clustering %s: %d file groups -> %d", done.timestamp, len(planned), len(stats))
    return done, committed(ts, txn)


def cluster(storage: Storage, config: TableConfig, sort_by: str | Sequence[str] | None = None,
            options: Mapping[str, Any] | None = None) -> Instant | None:
    """Schedule a clustering and run it; ``None`` when there was nothing to cluster.
    Clusterings scheduled earlier and still pending run first."""
    return cluster_on(TableState.load(storage, config), sort_by, validate_service_options(options))[0]


def cluster_on(snapshot: TableState, sort_by: str | Sequence[str] | None,
               options: Mapping[str, Any]) -> tuple[Instant | None, TableState]:
    """:func:`cluster` on the operation's snapshot; also returns the table after it."""
    opts = validate_service_options(options)
    storage, config = snapshot.storage, snapshot.config
    snapshot = snapshot_of(storage, config, snapshot)
    _check_strategies(opts)
    return run_services(storage, opts, snapshot, CLUSTERING, lambda i, ts: _run(ts, i, opts),
                        lambda: _schedule(storage, config, sort_by, opts, None, None), "clustering")
