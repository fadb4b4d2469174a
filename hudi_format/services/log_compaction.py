"""Log compaction (merge-on-read tables): stitch the log files of a file slice into one.

A minor compaction (Hudi's ``logcompaction`` action, RFC-48): the base file stays, the records
of the slice's log blocks are merged among themselves (latest version per key, as a reader
would merge them) and written as one new log file in the same file group, whose blocks carry the
``COMPACTED_BLOCK_TIMES`` header naming the instants they replace. The instant completes as a
``deltacommit`` (``operationType=LOG_COMPACT``).

Schedule (``HoodieLogCompactionPlanGenerator``): latest slices not under another pending service
with at least ``hoodie.log.compaction.blocks.threshold`` log files or log blocks; the plan is a
``HoodieCompactionPlan`` whose strategy names ``LogCompactionExecutionHelper``.

The new log file is named with the log compaction instant (v8+) or, in version 6, with the
slice's base instant and the next log version, so it sorts after the files it compacts. Reading
the slice with or without skipping the compacted blocks gives the same records: the new blocks
restate the merged outcome (deletes without an ordering value first, then the surviving records,
then deletes that win by ordering value), which merges idempotently over the originals.
"""

from __future__ import annotations

import logging
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..log import BlockType, HeaderKey, data_records, encode_data_blocks, encode_delete_block, write_log_file
from ..log.writer import next_log_version
from ..options import option
from ..read.align import align_table
from ..read.merge import (_HARD, _KEY, _ROW, _SEQ, MergeSpec, _data_aux, _delete_aux,
                          apply_hard_deletes, collect_log_blocks, last_per_key)
from ..storage import Storage
from ..timeline import Instant, Timeline, TimelineWriter, WriteStat, commit_metadata
from ..timeline.instant import COMMIT, DELTA_COMMIT, LOG_COMPACTION, REPLACE_COMMIT
from ..timeline.plans import compaction_plan_schema, encode_with_schema
from ..transaction import Transaction
from ..transaction.markers import create_marker
from ..view.file_names import LogFileName
from .common import (run_mor_service, TableState, attempt_log_files, new_instant_time, pick_pending,
                     rel_in_partition, schema_extra, committed, service_files,
                     validate_service_options)
from .compaction import (COMPACTION_PLAN_VERSION, _log_order, build_compaction_operations,
                         compaction_due)

log = logging.getLogger(__name__)

LOG_COMPACTION_EXECUTOR = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"


# -- merging log blocks among themselves ------------------------------------------------------


@attrs.frozen
class MergedLogs:
    """The outcome of a slice's log blocks, to be restated in order: ``hard_deletes`` (deletes
    without ordering value, which also remove the base file's record), then ``records``, then
    ``deletes`` that won by their ordering value; deletes as one table per ordering-value type
    (one delete block each)."""

    hard_deletes: list[pa.Table]
    records: pa.Table
    deletes: list[pa.Table]
    log_records: int
    keys: int


_SOURCE = "__ordering_type"


def _concat_deletes(tables: list[pa.Table]) -> tuple[pa.Table, list[pa.DataType]]:
    """The delete records of several blocks as one table, and the ordering-value types they
    came with: column ``__ordering_type`` indexes that list, so that each record is restated
    with its own type (Hudi and hudi-rs take only an ``IntWrapper`` 0 for "no ordering value":
    an int32 0 promoted to int64 would turn a delete that always wins into one that loses)."""
    kinds: list[pa.DataType] = []
    which = []
    for t in tables:
        typ = t.column("ordering_value").type
        if typ not in kinds:
            kinds.append(typ)
        which.append(np.full(t.num_rows, kinds.index(typ), np.int32))
    try:
        out = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        out = pa.concat_tables([t.set_column(2, "ordering_value", pc.cast(t.column(2), pa.string()))
                                for t in tables])
    return out.append_column(_SOURCE, pa.array(np.concatenate(which) if which else [], pa.int32())), kinds


def _delete_blocks(deletes: pa.Table, kinds: list[pa.DataType]) -> list[pa.Table]:
    """:func:`_concat_deletes`' rows back as one table per ordering-value type they came with."""
    out = []
    for i, typ in enumerate(kinds):
        part = deletes.filter(pc.equal(deletes.column(_SOURCE), i)).drop_columns([_SOURCE])
        if part.num_rows:
            col = part.column("ordering_value")
            if col.type != typ:
                col = pc.cast(col, typ)
            out.append(part.set_column(2, "ordering_value", col))
    return out


def merge_log_blocks(blocks: list, schema: pa.Schema, spec: MergeSpec) -> MergedLogs:
    """Merge data and delete blocks (in log order) exactly as ``read.merge`` does, keeping the
    delete markers a reader of base + logs needs."""
    spec = attrs.evolve(spec, ordering_fields=tuple(
        f for f in spec.ordering_fields if schema.get_field_index(f) >= 0))
    datas, dels, auxes = [], [], []
    rows = ndel = log_records = 0
    for seq, (block, recs) in enumerate(zip(blocks, data_records(blocks, arrow_schema=schema)), start=1):
        if block.block_type == BlockType.DELETE:
            keys = block.deleted_keys()
            log_records += keys.num_rows
            if not keys.num_rows:
                continue
            aux = _delete_aux(keys, seq, schema, spec)
            aux[_ROW] = pa.array(range(-1 - ndel, -1 - ndel - keys.num_rows, -1), pa.int64())
            auxes.append(pa.table(aux))
            dels.append(keys)
            ndel += keys.num_rows
        else:
            recs = align_table(recs, schema, f"{block.path}@{block.offset}")
            log_records += recs.num_rows
            if not recs.num_rows:
                continue
            auxes.append(pa.table(_data_aux(recs, seq, rows, spec)))
            datas.append(recs)
            rows += recs.num_rows
    data = pa.concat_tables(datas) if datas else schema.empty_table()
    deleted, kinds = _concat_deletes(dels or [pa.table({
        "record_key": pa.array([], pa.string()), "partition_path": pa.array([], pa.string()),
        "ordering_value": pa.array([], pa.int32())})])
    if not auxes:
        return MergedLogs([], data.slice(0, 0), [], log_records, 0)
    aux = pa.concat_tables(auxes, promote_options="permissive")
    hard_rows = pa.array([], pa.int64())
    if pc.any(aux.column(_HARD)).as_py():
        hard = aux.filter(aux.column(_HARD))
        last_hard = hard.group_by(_KEY).aggregate([(_SEQ, "max")])
        # the last hard delete of each key is restated first: it removes the base record
        marked = hard.join(last_hard, _KEY, join_type="inner")
        marked = marked.filter(pc.equal(marked.column(_SEQ), marked.column(f"{_SEQ}_max")))
        firsts = marked.group_by(_KEY).aggregate([(_ROW, "max")])
        hard_rows = firsts.column(f"{_ROW}_max").combine_chunks()
    winners = last_per_key(apply_hard_deletes(aux))
    win_rows = winners.column(_ROW)
    data_rows = pc.filter(win_rows, pc.greater_equal(win_rows, 0))
    records = data.take(pc.take(data_rows, pc.sort_indices(data_rows)))
    # deletes that won: those not already restated as the key's last hard delete
    del_won = pc.filter(win_rows, pc.less(win_rows, 0))
    del_won = pc.filter(del_won, pc.invert(pc.is_in(del_won, value_set=hard_rows)))

    def take_deletes(neg_rows) -> list[pa.Table]:
        idx = pc.subtract(pc.negate(neg_rows), 1)
        return _delete_blocks(deleted.take(pc.take(idx, pc.sort_indices(idx))), kinds)
    return MergedLogs(take_deletes(hard_rows), records, take_deletes(del_won), log_records, len(winners))


# -- scheduling -------------------------------------------------------------------------------


def _pending_writes_before(timeline: Timeline, instant_time: str) -> list[Instant]:
    return [i for i in timeline.pending
            if i.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT) and i.timestamp < instant_time]


def schedule_log_compaction(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                            *, instant_time: str | None = None,
                            check_trigger: bool | None = None) -> Instant | None:
    """Plan a log compaction (``<t>.logcompaction.requested``); ``None`` if nothing qualifies.

    Slices qualify with at least ``hoodie.log.compaction.blocks.threshold`` (5) log files or
    log blocks. ``check_trigger`` (default: when ``hoodie.log.compaction.inline`` is set)
    applies the compaction trigger strategy first. While a write older than the new instant is
    pending nothing is scheduled: its log blocks would land behind the compacted ones.
    """
    opts = validate_service_options(options)
    return _schedule(storage, config, opts, instant_time, check_trigger)[0]


def _schedule(storage: Storage, config: TableConfig, opts: Mapping[str, Any], instant_time: str | None,
              check_trigger: bool | None) -> tuple[Instant | None, TableState | None]:
    """:func:`schedule_log_compaction`, and the snapshot it planned on (with the new instant)."""
    if not config.is_mor:
        log.info("log compaction applies to MERGE_ON_READ tables only; %s is %s", storage.url, config.table_type)
        return None, None
    ts_time = instant_time or new_instant_time(storage, config)
    ts = TableState(storage, config)   # listed after the instant time was issued
    pending = _pending_writes_before(ts.timeline, ts_time)
    if pending:
        log.warning("not scheduling log compaction at %s: writes %s are still pending", ts_time,
                    ", ".join(i.timestamp for i in pending))
        return None, ts
    inline = option(opts, "hoodie.log.compaction.inline")
    if (inline if check_trigger is None else check_trigger) and \
            not compaction_due(ts.timeline, config, opts, ts_time):
        return None, ts
    threshold = max(option(opts, "hoodie.log.compaction.blocks.threshold"), 2)  # one block: nothing to stitch
    ops = build_compaction_operations(ts, ts_time, opts, min_log_blocks=threshold)
    if not ops:
        log.info("nothing to log-compact in %s", storage.url)
        return None, ts
    plan = {"operations": ops, "extraMetadata": {}, "version": COMPACTION_PLAN_VERSION,
            "strategy": {"compactorClassName": LOG_COMPACTION_EXECUTOR, "strategyParams": {}, "version": 1},
            "preserveHoodieMetadata": True}
    if config.version >= 8:
        plan["missingSchedulePartitions"] = []
    data = encode_with_schema(compaction_plan_schema(config.version), plan)
    inst = TimelineWriter(storage, config).create_requested(LOG_COMPACTION, ts_time, plan=data,
                                                             known_new=instant_time is None)
    log.info("scheduled log compaction %s of %d file slices", ts_time, len(ops))
    return inst, ts.advanced(inst)


# -- execution --------------------------------------------------------------------------------


def _log_compact_one(ts: TableState, spec: MergeSpec, schema: pa.Schema, avro: dict, instant_time: str,
                     op: dict, task: int, opts: Mapping[str, Any], written: list) -> dict | None:
    storage = ts.storage
    part = op.get("partitionPath") or ""
    fid = op["fileId"]
    logs = _log_order([rel_in_partition(part, f) for f in op.get("deltaFilePaths") or ()])
    blocks = collect_log_blocks(storage, tuple(logs), ts.state.visible)
    if not blocks:
        return None
    merged = merge_log_blocks(blocks, schema, spec)
    compacted = ",".join(sorted({b.instant_time for b in blocks if b.instant_time}))
    header = {HeaderKey.COMPACTED_BLOCK_TIMES: compacted}
    out = []
    for dels in merged.hard_deletes:
        out.append(encode_delete_block(dels, instant_time, extra_header=header))
    if merged.records.num_rows:
        out += encode_data_blocks(merged.records, avro, instant_time, extra_header=header,
                                  block_format=option(opts, "hoodie.logfile.data.block.format"),
                                  max_block_size=option(opts, "hoodie.logfile.data.block.max.size"),
                                  compression=option(opts, "hoodie.parquet.compression.codec"))
    for dels in merged.deletes:
        out.append(encode_delete_block(dels, instant_time, extra_header=header))
    if not out:
        return None
    token = f"{task}-1-{task}"
    # v8+: a log file named by the log compaction instant; v6: the slice's base instant
    log_instant = instant_time if ts.config.version >= 8 else op["baseInstantTime"]
    # a marker first (Hudi's APPEND marker): a run killed while writing is undone exactly
    version = next_log_version(storage, part, fid, log_instant)
    first = LogFileName(fid, log_instant, version, token).name
    create_marker(storage, instant_time, posixpath.join(part, first) if part else first, "APPEND")
    results = write_log_file(storage, part, fid, log_instant, out, token,
                             max_file_size=option(opts, "hoodie.logfile.max.size"))
    written.extend(r.path for r in results)
    size = sum(r.size for r in results)
    n_deletes = sum(d.num_rows for d in merged.hard_deletes + merged.deletes)
    return WriteStat(file_id=fid, path=results[-1].path, partition_path=part,
                      prev_commit=op.get("baseInstantTime"),
                      num_writes=merged.records.num_rows, num_deletes=n_deletes,
                      num_update_writes=merged.records.num_rows, total_write_bytes=size,
                      total_log_records=merged.log_records, total_log_files_compacted=len(logs),
                      total_log_size_compacted=int(op.get("metrics", {}).get("TOTAL_LOG_FILES_SIZE") or 0),
                      total_log_blocks=len(blocks),
                      log_files=[posixpath.basename(r.path) for r in results],
                      base_file=op.get("dataFilePath") or "", log_version=results[-1].version,
                      log_offset=0)


def run_log_compaction(storage: Storage, config: TableConfig, instant: "Instant | str | None" = None,
                       options: Mapping[str, Any] | None = None) -> Instant:
    """Execute a pending log compaction (the oldest if ``instant`` is None); return its
    completed ``deltacommit``."""
    opts = validate_service_options(options)
    return _run(TableState.load(storage, config), instant, opts)[0]


def _run(ts: TableState, instant: "Instant | str | None", opts: Mapping[str, Any]) -> tuple[Instant, TableState]:
    """:func:`run_log_compaction` on the operation's snapshot; also returns the table after it."""
    storage, config = ts.storage, ts.config
    inst = pick_pending(ts.timeline, LOG_COMPACTION, instant)
    ops = list(ts.timeline.plan(inst).get("operations") or ())
    schema, avro, data_avro = ts.schemas()
    spec = MergeSpec.from_config(config)

    def leftovers() -> list[str]:
        """What a killed attempt wrote: v8+ names its log files with the instant; v6 names
        them with the slice's base instant, so its markers and block headers tell."""
        if config.version >= 8:
            by_partition: dict[str, list[str]] = {}
            for o in ops:
                by_partition.setdefault(o.get("partitionPath") or "", []).append(o["fileId"])
            return [f for part, fids in by_partition.items()
                    for f in service_files(storage, part, fids, inst.timestamp)]
        groups = {(o.get("partitionPath") or "", o["fileId"]): o["baseInstantTime"] for o in ops}
        listed = [rel_in_partition(o.get("partitionPath") or "", f) for o in ops for f in o.get("deltaFilePaths") or ()]
        return attempt_log_files(storage, inst.timestamp, groups, listed)

    with Transaction.resume(storage, config, inst, opts, leftovers=leftovers) as txn:
        written = txn.written
        tasks = [(o, i) for i, o in enumerate(ops)]
        workers = min(len(tasks), os.cpu_count() or 1)
        run = lambda t: _log_compact_one(ts, spec, schema, avro, inst.timestamp, t[0], t[1], opts, written)  # noqa: E731
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                stats = list(pool.map(run, tasks))
        else:
            stats = [run(t) for t in tasks]
        metadata = commit_metadata([s for s in stats if s is not None], operation_type="LOG_COMPACT",
                                   compacted=True, extra_metadata=schema_extra(data_avro))
        done = txn.commit(metadata)
    log.info("completed log compaction %s", done.timestamp)
    return done, committed(ts, txn)


def log_compact(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None) -> Instant | None:
    """Run pending log compactions, schedule a new one and run it; ``None`` if nothing ran."""
    return log_compact_on(TableState.load(storage, config), validate_service_options(options))[0]


def log_compact_on(snapshot: TableState, options: Mapping[str, Any]) -> tuple[Instant | None, TableState]:
    """:func:`log_compact` on the operation's snapshot; also returns the table after it."""
    return run_mor_service(snapshot, options, LOG_COMPACTION, _run, _schedule, "log compaction")
