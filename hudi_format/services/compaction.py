"""Compaction (merge-on-read tables): merge a file slice's log files into a new base file.

Two steps, as Hudi's ``ScheduleCompactionActionExecutor`` and ``RunCompactionActionExecutor``:

1. **Schedule**: pick the latest file slices that have log files (not already in a pending
   compaction, log compaction or clustering), order and bound them by the compaction strategy
   (``hoodie.compaction.strategy``, default ``LogFileSizeBasedCompactionStrategy``) and write
   ``<t>.compaction.requested`` holding a ``HoodieCompactionPlan`` (one operation per slice:
   base file name, log file names, metrics). For v8+ tables only log files whose delta commit
   completed before ``t`` are planned; later ones belong to the new slice (non-blocking
   concurrency control). For v6 tables, as Hudi 0.x, no write may be pending before ``t``.
2. **Run**: move the instant to inflight, merge each planned slice exactly as a reader does
   (records keep their ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``), write
   ``<fileId>_<token>_<t>.parquet`` with ``_hoodie_file_name`` set to the new file, and complete
   the instant as a ``commit`` (``compacted=true``, ``operationType=COMPACT``).

Readers never wait: until the commit completes the new base files belong to no completed
instant and are invisible, and log files written meanwhile fold into the slice being compacted.
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..base_file import (continued_bloom, footer_bloom, footer_of, parquet_format, unique_key_columns,
                         with_file_name, write_base_file)
from ..chunks import one_array
from ..config import TableConfig
from ..errors import CorruptFileError, HudiError, TimelineError
from ..log import BlockType, data_records
from ..membership import is_in
from ..options import option
from ..read.align import align_table
from ..read.merge import MergeSpec, merge_pieces, collect_log_blocks, record_keys
from ..read.parquet import open_base_file
from ..storage import Storage
from ..timeline import Instant, TimelineWriter, WriteStat, commit_metadata
from ..timeline.instant import COMMIT, COMPACTION, DELTA_COMMIT, REPLACE_COMMIT
from ..timeline.plans import compaction_plan_schema, encode_with_schema
from ..view import FileSlice
from ..view.file_names import BaseFileName, parse_log_file_name
from ..transaction import Transaction
from .common import (run_mor_service, ServiceConflictError, TableState, committed, compaction_strategy, new_instant_time,
                     in_flight_file_groups, parse_instant_seconds, pending_instants, pending_service_file_groups,
                     pick_pending, rel_in_partition, runtime, schema_extra, service_files,
                     slice_metrics, validate_service_options)

log = logging.getLogger(__name__)

#: ``CompactionUtils.LATEST_COMPACTION_METADATA_VERSION``: operations name files, not full paths
COMPACTION_PLAN_VERSION = 2


# -- trigger ----------------------------------------------------------------------------------


def _inline(opts: Mapping[str, Any]) -> bool:
    return bool(option(opts, "hoodie.compact.inline") or option(opts, "hoodie.compact.schedule.inline"))


def compaction_due(timeline, config: TableConfig, opts: Mapping[str, Any], instant_time: str) -> bool:
    """Hudi's ``CompactionTriggerStrategy`` (``hoodie.compact.inline.trigger.strategy``).

    Delta commits are counted since the latest completed compaction (``commit``; v8+ also
    ``replacecommit``), or -- ``NUM_COMMITS_AFTER_LAST_REQUEST`` -- since the latest compaction
    request, pending or not; elapsed time runs from that instant (or the first delta commit).
    """
    strategy = option(opts, "hoodie.compact.inline.trigger.strategy")
    max_commits = option(opts, "hoodie.compact.inline.max.delta.commits")
    max_seconds = option(opts, "hoodie.compact.inline.max.delta.seconds")
    v8 = config.version >= 8
    deltas = [i for i in timeline.completed if i.action == DELTA_COMMIT]
    if strategy == "NUM_COMMITS_AFTER_LAST_REQUEST":
        requests = [i.timestamp for i in timeline.instants
                    if i.action == COMPACTION or (i.action == COMMIT and i.is_completed)]
        last = max(requests) if requests else None
        count = len([d for d in deltas if last is None or d.timestamp > last])
        ref = last
    else:
        done = {COMMIT, REPLACE_COMMIT} if v8 else {COMMIT}
        compactions = [i for i in timeline.completed if i.action in done]
        last = compactions[-1].timestamp if compactions else None
        if last is None:
            count = len(deltas)
        elif v8:
            count = len([d for d in deltas if (d.completion_time or d.timestamp) > last])
        else:
            count = len([d for d in deltas if d.timestamp > last])
        ref = last
    if ref is None:
        ref = deltas[0].timestamp if deltas else None
    by_num = count >= max_commits
    by_time = ref is not None and parse_instant_seconds(instant_time) - parse_instant_seconds(ref) >= max_seconds
    due = {"NUM_COMMITS": by_num, "NUM_COMMITS_AFTER_LAST_REQUEST": by_num, "TIME_ELAPSED": by_time,
           "NUM_AND_TIME": by_num and by_time, "NUM_OR_TIME": by_num or by_time}[strategy]
    if not due:
        log.info("compaction not due (%s): %d delta commits since %s", strategy, count, ref)
    return due


# -- planning ---------------------------------------------------------------------------------


def _order_and_filter(ops: list[dict], opts: Mapping[str, Any]) -> list[dict]:
    """The compaction strategy: LogFileSizeBased (filter by log size threshold, biggest logs
    first), LogFileNumBased (by log file count), then bounded by ``hoodie.compaction.target.io``
    (MB); UnBounded takes all."""
    kind = compaction_strategy(opts)
    if kind == "all":
        return ops
    if kind == "size":
        threshold = option(opts, "hoodie.compaction.logfile.size.threshold")
        ops = [o for o in ops if o["metrics"]["TOTAL_LOG_FILES_SIZE"] >= threshold]
        ops = sorted(ops, key=lambda o: -int(o["metrics"]["TOTAL_LOG_FILES_SIZE"]))
    elif kind == "num":
        threshold = option(opts, "hoodie.compaction.logfile.num.threshold")
        ops = [o for o in ops if o["metrics"]["TOTAL_LOG_FILES"] >= threshold]
        ops = sorted(ops, key=lambda o: -int(o["metrics"]["TOTAL_LOG_FILES"]))
    remaining = option(opts, "hoodie.compaction.target.io")
    out = []
    for o in ops:                       # BoundedIOCompactionStrategy
        remaining -= int(o["metrics"]["TOTAL_IO_MB"])
        out.append(o)
        if remaining <= 0:
            break
    return out


def _check_nothing_pending_before(timeline, instant_time: str) -> None:
    """Table version 6 (Hudi 0.x) with a single writer: a compaction must be later than every
    pending write. With optimistic concurrency (our default), Hudi schedules it anyway -- else
    busy writers starve it: the plan leaves out the groups writes in flight are writing to, and
    an earlier write that reaches a group it compacts only afterwards fails its conflict check
    (``transaction.conflicts``: its log files carry the old slice's name)."""
    for inst in timeline.pending:
        if inst.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT) and inst.timestamp < instant_time:
            raise TimelineError(f"cannot schedule compaction at {instant_time}: write {inst} is still "
                                "pending; complete or roll it back first (table version 6 requires the "
                                "earliest pending write to be later than the compaction)")


def build_compaction_operations(ts: TableState, instant_time: str, opts: Mapping[str, Any],
                                min_log_blocks: int = 0) -> list[dict]:
    """One ``HoodieCompactionOperation`` per eligible latest slice (unordered, unfiltered)."""
    config = ts.config
    v8 = config.version >= 8
    busy = pending_service_file_groups(ts.timeline)
    default_size = option(opts, "hoodie.parquet.max.file.size")
    ops = []
    for s in ts.latest_slices():
        if (s.partition_path, s.file_id) in busy:
            continue
        logs = list(zip(s.log_files, s.log_file_sizes))
        if v8:
            # only delta commits completed before the compaction instant belong to this slice
            base_done = ts.completion_time(s.base_instant) if s.base_file else None
            if base_done is not None and base_done > instant_time:
                continue
            kept = []
            for path, size in logs:
                lf = parse_log_file_name(posixpath.basename(path))
                done = ts.completion_time(lf.instant_time) if lf else None
                if done is not None and done < instant_time:
                    kept.append((path, size))
            logs = kept
        if not logs:
            continue
        planned = FileSlice(s.partition_path, s.file_id, s.base_instant, s.base_file,
                            tuple(p for p, _ in logs), s.base_file_size, tuple(z for _, z in logs))
        if min_log_blocks and len(logs) < min_log_blocks and \
                _count_blocks(ts, planned) < min_log_blocks:
            continue
        ops.append({
            "baseInstantTime": s.base_instant,
            "deltaFilePaths": [posixpath.basename(p) for p, _ in logs],
            "dataFilePath": s.base_file_name,
            "fileId": s.file_id,
            "partitionPath": s.partition_path,
            "metrics": slice_metrics([planned], default_size),
            "bootstrapFilePath": None,
        })
    return ops


def _count_blocks(ts: TableState, s: FileSlice) -> int:
    return len(collect_log_blocks(ts.storage, s.log_files, ts.state.visible))


def schedule_compaction(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                        *, instant_time: str | None = None, check_trigger: bool | None = None) -> Instant | None:
    """Plan a compaction: write ``<t>.compaction.requested``; ``None`` if nothing to compact.

    ``check_trigger`` (default: only when ``hoodie.compact.inline`` or
    ``hoodie.compact.schedule.inline`` is set, i.e. when called after a write) applies the
    trigger strategy first; on-demand calls compact whatever has log files.
    """
    opts = validate_service_options(options)
    return _schedule(storage, config, opts, instant_time, check_trigger)[0]


def _schedule(storage: Storage, config: TableConfig, opts: Mapping[str, Any], instant_time: str | None,
              check_trigger: bool | None) -> tuple[Instant | None, TableState | None]:
    """:func:`schedule_compaction`, and the snapshot it planned on (with the new instant)."""
    if not config.is_mor:
        log.info("compaction applies to MERGE_ON_READ tables only; %s is %s", storage.url, config.table_type)
        return None, None
    compaction_strategy(opts)  # validate before any I/O
    ts_time = instant_time or new_instant_time(storage, config)
    # listed after the instant time was issued (and under the table lock, when scheduled by
    # compact()): every instant with an earlier time that can still complete is seen
    ts = TableState(storage, config)
    if config.version < 8 and option(opts, "hoodie.write.concurrency.mode") == "SINGLE_WRITER":
        _check_nothing_pending_before(ts.timeline, ts_time)
    if (_inline(opts) if check_trigger is None else check_trigger) and \
            not compaction_due(ts.timeline, config, opts, ts_time):
        return None, ts
    ops = build_compaction_operations(ts, ts_time, opts)
    if config.version < 8 and ops:
        # writes in flight name their new log files after the slice, so the plan would take
        # them in, and a failed write's removal of them would leave a plan that never runs:
        # their groups wait (markers, read after the listing above, name them)
        busy = in_flight_file_groups(ts)
        ops = [o for o in ops if ((o.get("partitionPath") or ""), o.get("fileId")) not in busy]
    ops = _order_and_filter(ops, opts)
    if not ops:
        log.info("nothing to compact in %s", storage.url)
        return None, ts
    plan = {"operations": ops, "extraMetadata": {}, "version": COMPACTION_PLAN_VERSION,
            "strategy": None, "preserveHoodieMetadata": False}
    if config.version >= 8:
        plan["missingSchedulePartitions"] = []
    data = encode_with_schema(compaction_plan_schema(config.version), plan)
    # a time the clock just issued is newer than any completed instant: no listing to check
    inst = TimelineWriter(storage, config).create_requested(COMPACTION, ts_time, plan=data,
                                                             known_new=instant_time is None)
    log.info("scheduled compaction %s of %d file slices", ts_time, len(ops))
    return inst, ts.advanced(inst)


# -- execution --------------------------------------------------------------------------------


def _log_order(paths: list[str]) -> list[str]:
    def key(p):
        lf = parse_log_file_name(posixpath.basename(p))
        return lf.sort_key() if lf else (p,)
    return sorted(paths, key=key)


def _check_unplanned_logs(ts: TableState, ops: list[dict]) -> None:
    """v6: data appended to a planned slice after the plan (log files named with the old base
    instant) would vanish behind the new base file; refuse to complete instead."""
    wanted = {(o.get("partitionPath") or "", o["fileId"]): o for o in ops}
    for s in ts.latest_slices({p for p, _ in wanted}):
        op = wanted.get((s.partition_path, s.file_id))
        if op is None:
            continue
        planned = set(op.get("deltaFilePaths") or ())
        extra = []
        for path in s.log_files:
            lf = parse_log_file_name(posixpath.basename(path))
            if lf and lf.instant_time == op["baseInstantTime"] and posixpath.basename(path) not in planned:
                extra.append(path)
        if extra and collect_log_blocks(ts.storage, tuple(extra), ts.state.visible):
            raise ServiceConflictError(
                f"file group {s.file_id} in {s.partition_path!r} received writes after its compaction was "
                f"planned ({', '.join(posixpath.basename(p) for p in extra)}); on table version 6 a "
                "writer must add log files of a file group under pending compaction to the new slice "
                "(log files named with the compaction instant), else completing the compaction would "
                "drop those writes")


def _compact_one(ts: TableState, spec: MergeSpec, schema: pa.Schema, avro: dict, instant_time: str,
                 op: dict, task: int, opts: Mapping[str, Any], written: list) -> dict:
    storage = ts.storage
    t0 = time.monotonic()
    part = op.get("partitionPath") or ""
    fid = op["fileId"]
    base_rel = rel_in_partition(part, op.get("dataFilePath"))
    logs = _log_order([rel_in_partition(part, f) for f in op.get("deltaFilePaths") or ()])

    pieces: list = []
    deletes: list = []
    old = schema.empty_table()
    footer = None      # the old base file's: its bloom filter may go on in the new one
    if base_rel:
        where = storage.uri(base_rel)
        with open_base_file(storage, base_rel) as reader:
            footer = footer_of(reader.pf.metadata, 0, where)
            try:
                stored = reader.read(schema.names)
            except (pa.ArrowException, OSError, ValueError) as exc:
                raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc
        old = align_table(stored, schema, where)
    pieces.append(old)
    blocks = collect_log_blocks(storage, tuple(logs), ts.state.visible)
    log_records = 0
    log_keys = []
    for block, recs in zip(blocks, data_records(blocks, arrow_schema=schema)):
        if block.block_type == BlockType.DELETE:
            keys = block.deleted_keys()
            deletes.append((len(pieces), keys))
            pieces.append(None)
            log_records += keys.num_rows
            log_keys.append(pc.cast(keys.column("record_key"), pa.string()))
        else:
            recs = align_table(recs, schema, f"{storage.uri(block.path)}@{block.offset}")
            pieces.append(recs)
            log_records += recs.num_rows
            log_keys.append(pc.cast(record_keys(recs, spec), pa.string()))
    t_scan = time.monotonic()
    merged = merge_pieces(pieces, deletes, schema, spec) if blocks else old

    token = f"{task}-{1}-{task}"
    name = BaseFileName(fid, token, instant_time, ts.config.base_file_extension).name
    rel = posixpath.join(part, name) if part else name
    if ts.config.populate_meta_fields:
        merged = with_file_name(merged, name)
    bloom = footer_bloom(opts)
    keyed = ts.config.populate_meta_fields and bloom is not None
    old_keys = pc.cast(record_keys(old, spec), pa.string())
    new_keys = pc.cast(record_keys(merged, spec), pa.string())
    touched = pa.chunked_array(log_keys, pa.string()) if log_keys else pa.chunked_array([], pa.string())
    updated, inserted_keys, deleted = record_changes(old_keys, new_keys, touched)
    inserted = len(inserted_keys)
    # no record gone: the old filter goes on (as Hudi's merge would fill it: the old file's
    # keys in order, then the inserted), copied as is when none came (0.44 of 2.85 s of CPU
    # hashed every key again, 1M rows with 10% updated)
    seeded = continued_bloom(bloom, footer, old.num_rows, merged.num_rows, inserted, deleted) if keyed else None
    written.append(rel)
    res = write_base_file(storage, rel, merged, avro, new_keys if keyed else None,
                          bloom=bloom if seeded is None else seeded,
                          bloom_keys=None if seeded is None else inserted_keys,
                          plain=unique_key_columns(spec.record_key_fields), **parquet_format(opts))
    t_done = time.monotonic()
    log_size = int(op.get("metrics", {}).get("TOTAL_LOG_FILES_SIZE") or 0)
    stat = WriteStat(file_id=fid, path=rel, partition_path=part, prev_commit=op.get("baseInstantTime"),
                      num_writes=merged.num_rows, num_deletes=deleted, num_update_writes=updated,
                      num_inserts=inserted, total_write_bytes=res.file_size,
                      total_log_records=log_records, total_log_files_compacted=len(logs),
                      total_log_size_compacted=log_size,
                      total_updated_records_compacted=len(pc.unique(touched)) if len(touched) else 0,
                      total_log_blocks=len(blocks),
                      runtime_stats=runtime(scan=(t_scan - t0) * 1000, upsert=(t_done - t_scan) * 1000),
                      prev_base_file=op.get("dataFilePath"), total_log_read_time_ms=int((t_scan - t0) * 1000))
    return stat


def _count(mask) -> int:
    return int(pc.sum(mask).as_py() or 0)


def record_changes(old_keys, new_keys, touched) -> tuple[int, pa.Array, int]:
    """``(updated, inserted keys, deleted)`` of a compaction: new rows whose key the old base
    file has and the log blocks wrote, the keys of new rows it lacks (in the new rows' order),
    old rows whose key is gone. Only keys the logs wrote (``touched``) can change, so when every
    other old row is still there (as many untouched rows before as after; they come from the
    base file alone, once each) they are taken among the touched rows, probing with their few
    keys: hashing the ~100k keys of a file group into a value set, three times, was a fifth of
    the compaction (0.58 of 2.85 s of CPU for 1M rows with 10% updated). Otherwise, from every key."""
    old_keys, new_keys = one_array(old_keys), one_array(new_keys)
    few = pc.unique(one_array(touched))
    old_hit, new_hit = one_array(is_in(old_keys, few)), one_array(is_in(new_keys, few))
    n_old, n_new = _count(old_hit), _count(new_hit)
    if len(old_keys) - n_old == len(new_keys) - n_new:
        old_t, new_t = old_keys.filter(old_hit), new_keys.filter(new_hit)
        inserted = new_t.filter(pc.invert(pc.is_in(new_t, value_set=old_t)))
        return len(new_t) - len(inserted), inserted, n_old - _count(pc.is_in(old_t, value_set=new_t))
    in_old = pc.is_in(new_keys, value_set=old_keys)
    return (_count(pc.and_(in_old, new_hit)), new_keys.filter(pc.invert(in_old)),
            len(old_keys) - _count(pc.is_in(old_keys, value_set=new_keys)))


def run_compaction(storage: Storage, config: TableConfig, instant: "Instant | str | None" = None,
                   options: Mapping[str, Any] | None = None) -> Instant:
    """Execute a pending compaction (the oldest if ``instant`` is None); return its ``commit``.

    Raises ``TimelineError`` when there is no such pending compaction and
    ``ServiceConflictError`` when a planned slice was written to in a way the plan cannot
    absorb (v6 log files appended to the old slice); the plan then stays requested.
    """
    opts = validate_service_options(options)
    return _run(TableState.load(storage, config), instant, opts)[0]


def _run(ts: TableState, instant: "Instant | str | None", opts: Mapping[str, Any]) -> tuple[Instant, TableState]:
    """:func:`run_compaction` on the operation's snapshot ``ts``; also returns the table after it."""
    storage, config = ts.storage, ts.config
    inst = pick_pending(ts.timeline, COMPACTION, instant)
    plan = ts.timeline.plan(inst)
    ops = list(plan.get("operations") or ())
    if config.version < 8:
        _check_unplanned_logs(ts, ops)
    schema, avro, data_avro = ts.schemas()
    spec = MergeSpec.from_config(config)

    def leftovers() -> list[str]:
        """Base files a killed attempt wrote (listed only when taking over an inflight run)."""
        by_partition: dict[str, list[str]] = {}
        for o in ops:
            by_partition.setdefault(o.get("partitionPath") or "", []).append(o["fileId"])
        return [p for part, fids in by_partition.items()
                for p in service_files(storage, part, fids, inst.timestamp)
                if not posixpath.basename(p).startswith(".")]   # base files only

    with Transaction.resume(storage, config, inst, opts, leftovers=leftovers) as txn:
        written = txn.written
        workers = min(len(ops), os.cpu_count() or 1)
        tasks = [(o, i) for i, o in enumerate(ops)]
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                stats = list(pool.map(lambda t: _compact_one(ts, spec, schema, avro, inst.timestamp,
                                                             t[0], t[1], opts, written), tasks))
        else:
            stats = [_compact_one(ts, spec, schema, avro, inst.timestamp, o, i, opts, written)
                     for o, i in tasks]
        metadata = commit_metadata(stats, operation_type="COMPACT", compacted=True,
                                   extra_metadata=schema_extra(data_avro))
        # v6: a log file added to a planned slice after planning would vanish behind the new
        # base file; checked again under the table lock, against what completed meanwhile
        check = (lambda now: _check_unplanned_logs(TableState(storage, config, now), ops)) \
            if config.version < 8 else None
        done = txn.commit(metadata, check)
    log.info("completed compaction %s: %d new base files", done.timestamp, len(stats))
    return done, committed(ts, txn)


def compact(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None) -> Instant | None:
    """Schedule a compaction and run it; ``None`` when there was nothing to compact.

    Pending compactions scheduled earlier are run first (oldest first), as Hudi's inline
    compaction does; the instant returned is the last one completed.
    """
    return compact_on(TableState.load(storage, config), validate_service_options(options))[0]


def compact_on(snapshot: TableState, options: Mapping[str, Any]) -> tuple[Instant | None, TableState]:
    """:func:`compact` on the operation's snapshot (an inline compaction gets its write's);
    returns the last compaction completed and the table after it."""
    return run_mor_service(snapshot, options, COMPACTION, _run, _schedule, "compaction")


def pending_compaction_base_instants(storage: Storage, config: TableConfig,
                                     timeline=None) -> dict[tuple[str, str], str]:
    """``(partition, file_id) -> compaction instant`` of every file group in a pending compaction.

    A writer of a table version 6 must name the log files it adds to such a file group with that
    instant (the base instant of the slice the compaction creates), as Hudi 0.x's
    ``HoodieAppendHandle`` does; v8+ writers name log files by their own instant and need nothing.
    """
    from ..timeline import Timeline
    timeline = timeline if timeline is not None else Timeline.load(storage, config)
    out = {}
    for inst in pending_instants(timeline, COMPACTION):
        try:
            plan = timeline.plan(inst)
        except HudiError as exc:
            log.warning("cannot read the plan of %s: %s", inst, exc)
            continue
        for op in plan.get("operations") or ():
            out[(op.get("partitionPath") or "", op.get("fileId"))] = inst.timestamp
    return out
