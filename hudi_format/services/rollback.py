"""Rollback: undo one instant, pending or the latest completed one, as Apache Hudi lays it out.

Order of work, so a crash at any point leaves the table readable at its last commit and the next
writer able to finish the job: (1) a ``rollback`` instant with its plan (HoodieRollbackPlan);
(2) a completed target loses its completed file first, which hides its data at once; (3) its
base files and (v8) log files are deleted, and for v6 log files, whose names do not say which
instant wrote them, a rollback command block is appended to the file group instead; (4) the
rollback completes with HoodieRollbackMetadata; (5) the target's remaining instant files go.
Every step is idempotent: a pending rollback found later (by ``rollback()`` of the same target
or by a write's recovery) is taken over and executed again from its plan under its own instant
time, and the metadata table's rollback of that instant is resumed or skipped if complete.

A restore is the same, for every instant after a savepoint, under one ``restore`` instant; it
lives here because a write's recovery finishes a killed restore before anything else.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections import defaultdict
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import ConcurrentWriteError, HudiError, InvalidOptionError, TimelineError
from ..log import BlockType, encode_rollback_block, read_log_file, write_log_file
from ..metadata.init import delete_metadata_table
from ..options import option
from ..storage import Storage
from ..timeline import Instant, State, Timeline
from ..timeline.instant import WRITE_TIMELINE_ACTIONS
from ..view.file_names import parse_base_file_name, parse_log_file_name
from ..transaction import ServiceBusyError, Transaction
from ..transaction.heartbeat import heartbeat_expired, heartbeat_path
from ..transaction.snapshot import TableSnapshot
from ..transaction.locks import TableLock
from ..transaction.markers import delete_markers, read_markers

log = logging.getLogger(__name__)

WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")
# Table services whose pending instants go back to "requested" instead of away.
_REPLANNABLE = ("compaction", "clustering", "logcompaction")


def _all_data_files(storage: Storage) -> list[str]:
    return [f.path for f in storage.walk_files("", skip_dirs=(".hoodie",))]


def _files_of(storage: Storage, config: TableConfig, timeline: Timeline, target: Instant) -> list[tuple[str, str]]:
    """``(path, io type)`` of every data file ``target`` wrote: markers first, else the commit
    metadata, else a scan for file names carrying the instant (and v6 log blocks)."""
    markers = read_markers(storage, target.timestamp)
    if markers:
        return markers
    if target.state is State.COMPLETED and target.action in WRITE_ACTIONS:
        out = []
        for stats in timeline.metadata(target).partition_to_write_stats.values():
            for st in stats:
                if st.path:
                    out.append((st.path, "APPEND" if parse_log_file_name(posixpath.basename(st.path)) else "CREATE"))
        return out
    ts = target.timestamp
    out = []
    for path in _all_data_files(storage):
        name = posixpath.basename(path)
        bf = parse_base_file_name(name)
        if bf is not None and bf.instant_time == ts:
            out.append((path, "CREATE"))
            continue
        lf = parse_log_file_name(name)
        if lf is None:
            continue
        if config.version >= 8 and lf.instant_time == ts:
            out.append((path, "CREATE"))
        elif config.version < 8 and lf.instant_time <= ts:
            if any(b.instant_time == ts for b in read_log_file(storage, path)):
                out.append((path, "APPEND"))
    return out


def build_plan(storage: Storage, config: TableConfig, timeline: Timeline, target: Instant) -> dict:
    requests: dict[tuple[str, str], dict] = {}
    for path, io_type in _files_of(storage, config, timeline, target):
        partition, name = posixpath.split(path)
        parsed = parse_base_file_name(name) or parse_log_file_name(name)
        file_id = parsed.file_id if parsed else None
        req = requests.setdefault((partition, file_id), {
            "partitionPath": partition, "fileId": file_id, "latestBaseInstant": None,
            "filesToBeDeleted": [], "logBlocksToBeDeleted": None})
        lf = parse_log_file_name(name)
        if io_type == "APPEND" and config.version < 8 and lf is not None:
            req["latestBaseInstant"] = lf.instant_time
            req["logBlocksToBeDeleted"] = dict(req["logBlocksToBeDeleted"] or {})
            req["logBlocksToBeDeleted"][path] = storage.size(path) if storage.exists(path) else 0
        else:
            req["filesToBeDeleted"].append(path)
    if config.version < 8:
        _add_orphaned_logs(storage, timeline, target, requests)
    return {"instantToRollback": {"commitTime": target.timestamp, "action": target.action},
            "RollbackRequests": list(requests.values()), "version": 1}


def _add_orphaned_logs(storage: Storage, timeline: Timeline, target: Instant,
                       requests: dict[tuple[str, str], dict]) -> None:
    """v6: delete the log files of the slices ``target`` started (their names carry its time as
    base instant) when they hold nothing but blocks of undone instants, as Hudi's listing-based
    rollback deletes them. Left behind, they outlive the slice: the storage view folds them into
    the previous slice while a bootstrapped metadata table omits them (their base instant is not
    committed), so the two listings disagree. A log holding a block of a completed or pending
    instant stays (a pending compaction's slice carries later writes' data)."""
    ts = target.timestamp
    for partition in sorted({p for p, _ in requests}):
        try:
            entries = storage.list(partition)
        except HudiError:
            continue
        for f in entries:
            lf = None if f.is_dir else parse_log_file_name(f.name)
            if lf is None or lf.instant_time != ts or not _only_undone_blocks(storage, timeline, ts, f.path):
                continue
            req = requests.setdefault((partition, lf.file_id), {
                "partitionPath": partition, "fileId": lf.file_id, "latestBaseInstant": None,
                "filesToBeDeleted": [], "logBlocksToBeDeleted": None})
            blocks = dict(req["logBlocksToBeDeleted"] or {})
            if f.path in blocks:   # deleted whole: no command block needed (nor a new log of ts)
                del blocks[f.path]
                req["logBlocksToBeDeleted"] = blocks or None
                if not blocks:
                    req["latestBaseInstant"] = None
            if f.path not in req["filesToBeDeleted"]:
                req["filesToBeDeleted"].append(f.path)


def _only_undone_blocks(storage: Storage, timeline: Timeline, target: str, path: str) -> bool:
    """Whether every block of log file ``path`` belongs to ``target`` or to an instant neither
    completed nor pending (rolled back), a command block judged by the instant it undoes."""
    try:
        blocks = read_log_file(storage, path)
    except (HudiError, OSError):
        return False
    pending = {i.timestamp for i in timeline.pending}

    def undone(ts: str | None) -> bool:
        return ts == target or (ts is not None and ts not in pending and not timeline.is_completed(ts))

    return bool(blocks) and all(
        not b.is_corrupted and undone(b.target_instant_time if b.block_type == BlockType.COMMAND else b.instant_time)
        for b in blocks)


def execute_plan(storage: Storage, config: TableConfig, plan: Mapping[str, Any], rollback_time: str) -> dict:
    """Carry out a rollback plan (idempotent) and return its HoodieRollbackMetadata."""
    start = time.time()
    target = plan["instantToRollback"]["commitTime"]
    partitions: dict[str, dict] = defaultdict(lambda: {"successDeleteFiles": [], "failedDeleteFiles": [],
                                                       "rollbackLogFiles": None})
    deleted = 0
    for req in plan.get("RollbackRequests") or []:
        part = req["partitionPath"]
        meta = partitions[part]
        meta["partitionPath"] = part
        for path in req.get("filesToBeDeleted") or []:
            try:
                existed = storage.exists(path)
                storage.delete(path)
                meta["successDeleteFiles"].append(path)
                deleted += int(existed)
            except Exception:  # noqa: BLE001 - reported in the metadata, as Hudi does
                meta["failedDeleteFiles"].append(path)
        if req.get("logBlocksToBeDeleted"):
            done = _rollback_block_files(storage, part, req["fileId"], req["latestBaseInstant"],
                                         rollback_time, target)
            if not done:   # once: a resumed run finds the block its killed attempt wrote
                block = encode_rollback_block(rollback_time, target)
                results = write_log_file(storage, part, req["fileId"], req["latestBaseInstant"], [block],
                                         "0-0-0")
                done = {r.path: r.size for r in results}
            # every file group of the partition adds its own (Hudi's ``mergeRollbackStat``)
            meta["rollbackLogFiles"] = {**(meta["rollbackLogFiles"] or {}), **done}
    return {"startRollbackTime": rollback_time, "timeTakenInMillis": int((time.time() - start) * 1000),
            "totalFilesDeleted": deleted, "commitsRollback": [target],
            "partitionMetadata": {p: dict(m) for p, m in partitions.items()}, "version": 1,
            "instantsRollback": [dict(plan["instantToRollback"])]}


def _rollback_block_files(storage: Storage, partition: str, file_id: str, base_instant: str,
                          rollback_time: str, target: str) -> dict[str, int]:
    """Log files of the file group already holding the command block that ``rollback_time``
    appends to undo ``target`` (written by an attempt killed before it completed)."""
    out: dict[str, int] = {}
    try:
        entries = storage.list(partition)
    except HudiError:
        return out
    for f in entries:
        lf = None if f.is_dir else parse_log_file_name(f.name)
        if lf is None or lf.file_id != file_id or lf.instant_time != base_instant:
            continue
        try:
            blocks = read_log_file(storage, f.path)
        except (HudiError, OSError):
            continue
        if any(b.block_type == BlockType.COMMAND and b.instant_time == rollback_time
               and b.target_instant_time == target for b in blocks):
            out[f.path] = storage.size(f.path)
    return out


def _hide(storage: Storage, timeline: Timeline, target: Instant) -> None:
    """Make a completed target invisible by removing its completed file first."""
    files = timeline.files_of(target)
    done = files.get(State.COMPLETED)
    if done is not None:
        storage.delete(f"{timeline.timeline_dir}/{done}")


def _drop_instant_files(storage: Storage, timeline: Timeline, target: Instant,
                        keep_requested: bool | None = None) -> None:
    """Remove the target's instant files (a rolled-back service plan stays requested, unless
    ``keep_requested`` is False: a restore removes later plans too), markers and heartbeat."""
    try:
        files = timeline.files_of(target)
    except TimelineError:
        return
    if keep_requested is None:
        keep_requested = target.action in _REPLANNABLE
    for state, name in files.items():
        if keep_requested and state is State.REQUESTED:
            continue
        storage.delete(f"{timeline.timeline_dir}/{name}")
    delete_markers(storage, target.timestamp)
    storage.delete(heartbeat_path(target.timestamp))


def rollback(storage: Storage, config: TableConfig, instant: str | Instant,
             options: Mapping[str, Any] | None = None) -> Instant:
    """Roll back ``instant``: a pending one, or the latest completed write."""
    timeline = Timeline.load(storage, config)
    ts = instant.timestamp if isinstance(instant, Instant) else str(instant)
    pending = _pending_rollback_of(timeline, ts)
    if pending is not None:   # a killed rollback of it: finish that one (Hudi reuses its plan)
        done = _resume(storage, config, timeline, pending, options)
        if done is not None:
            return done
        timeline = Timeline.load(storage, config)
    matches = [i for i in timeline.instants if i.timestamp == ts and i.action not in ("rollback", "clean", "restore")]
    if not matches:
        raise InvalidOptionError(f"no instant {ts} to roll back on the timeline of {storage.url}")
    target = matches[0]
    if target.state is State.COMPLETED:
        later = [i for i in timeline.write_instants() if i.timestamp != ts and
                 (i.completion_time or i.timestamp) > (target.completion_time or target.timestamp)]
        if later:
            raise InvalidOptionError(f"{ts} is not the latest commit ({len(later)} completed after it); "
                                     f"use restore to go back further")
        if any(s.timestamp == ts and s.action == "savepoint" for s in timeline.completed):
            raise InvalidOptionError(f"{ts} is savepointed; delete the savepoint first")
        _keep_archived_commits_visible(timeline, target, storage.url)
        _keep_replaced_rows(storage, timeline, target)
        _keep_previous_versions(storage, timeline, target)
    plan = build_plan(storage, config, timeline, target)
    with Transaction.begin(storage, config, "rollback", options, plan=plan, undo_on_abort=False) as txn:
        return _finish(storage, timeline, txn, plan, target)


def _keep_archived_commits_visible(timeline: Timeline, target: Instant, where: str) -> None:
    """Refuse to roll back the last instant of the active write timeline while the archive
    holds completed commits. Readers (Hudi's, hudi-rs, ours) take the data of instants before
    the first active write instant as archived and committed; with none left they take none,
    and the rows of every archived commit would vanish from the table."""
    if any(i.action in WRITE_TIMELINE_ACTIONS and i.timestamp != target.timestamp for i in timeline.instants):
        return
    archived = timeline.archived().write_instants()
    if archived:
        raise InvalidOptionError(
            f"cannot roll back {target.timestamp} of {where}: it is the last commit on the active timeline "
            f"and {len(archived)} earlier commits are archived, whose rows no reader would see once it "
            f"is gone (readers count archived commits from the first active one); undo its changes "
            f"with a new write instead")


def _file_versions(storage: Storage, partition: str) -> set[tuple[str, str]]:
    """``(file id, instant)`` of every base and log file listed in ``partition``."""
    out = set()
    for f in storage.list(partition or ""):
        parsed = None if f.is_dir else (parse_base_file_name(f.name) or parse_log_file_name(f.name))
        if parsed is not None:
            out.add((parsed.file_id, parsed.instant_time))
    return out


def _keep_replaced_rows(storage: Storage, timeline: Timeline, target: Instant) -> None:
    """Refuse to roll back a replacecommit (clustering, insert_overwrite, delete_partition)
    whose replaced file groups the cleaner has removed: rolling it back makes them live again,
    and with no file left their rows would be gone, with the replacing groups' rows too."""
    if target.action != "replacecommit":
        return
    try:
        replaced = timeline.metadata(target).partition_to_replace_file_ids
    except HudiError:
        return
    for partition, file_ids in replaced.items():
        if not file_ids:
            continue
        present = {fid for fid, _ in _file_versions(storage, partition)}
        gone = [fid for fid in file_ids if fid not in present]
        if gone:
            raise InvalidOptionError(
                f"cannot roll back {target.timestamp} of {storage.url}: the cleaner has removed file "
                f"groups it replaced (e.g. {partition}/{gone[0]}), whose rows a rollback would make "
                f"live again with no file to read them from; undo its changes with a new write instead")


def _keep_previous_versions(storage: Storage, timeline: Timeline, target: Instant) -> None:
    """Refuse to roll back a commit that rewrote base files (a COW merge, a compaction) whose
    previous versions the cleaner has removed: the rollback deletes the new versions, and the
    rows earlier commits wrote to those file groups would go with them (rolling back the
    commits after it let the cleaner drop what this one replaced)."""
    try:
        stats = timeline.metadata(target).partition_to_write_stats
    except HudiError:
        return
    listed: dict[str, set[tuple[str, str]]] = {}
    for partition, written in stats.items():
        for st in written:
            prev = st.prev_commit
            if not prev or prev == target.timestamp or not st.path or parse_base_file_name(
                    posixpath.basename(st.path)) is None:
                continue
            if partition not in listed:   # (a log-only slice's instant is its log files')
                listed[partition] = _file_versions(storage, partition)
            if (st.file_id, prev) not in listed[partition]:
                raise InvalidOptionError(
                    f"cannot roll back {target.timestamp} of {storage.url}: the cleaner has removed the "
                    f"file versions it rewrote (e.g. {partition}/{st.file_id} as of {prev}), whose rows "
                    f"from earlier commits a rollback would lose; restore a savepoint or undo its "
                    f"changes with a new write instead")


def _finish(storage: Storage, timeline: Timeline, txn: Transaction, plan: Mapping[str, Any],
            target: Instant | None) -> Instant:
    """Carry out a rollback instant (new or resumed) and commit it; on failure it stays
    pending and is finished from its plan by the next writer."""
    if target is not None and target.state is State.COMPLETED:
        _hide(storage, timeline, target)
    metadata = execute_plan(storage, txn.config, plan, txn.instant_time)
    done = txn.commit(metadata)
    if target is not None:
        _drop_instant_files(storage, timeline, target)
    log.info("rolled back %s with %s", plan["instantToRollback"], done)
    return done


def resume_pending_rollbacks(storage: Storage, config: TableConfig,
                             options: Mapping[str, Any] | None = None) -> list[Instant]:
    """Finish rollbacks that a crashed process planned but did not complete (one that a live
    process is running is left to it)."""
    timeline = Timeline.load(storage, config)
    out = []
    for inst in timeline.pending:
        if inst.action != "rollback":
            continue
        try:
            done = _resume(storage, config, timeline, inst, options)
        except ServiceBusyError as exc:
            log.info("not resuming rollback %s: %s", inst.timestamp, exc)
            continue
        if done is not None:
            out.append(done)
    return out


def _target_of(timeline: Timeline, plan: Mapping[str, Any]) -> Instant | None:
    target_ts = plan["instantToRollback"]["commitTime"]
    return next((i for i in timeline.instants if i.timestamp == target_ts
                 and i.action not in ("rollback", "clean", "restore")), None)


def _pending_rollback_of(timeline: Timeline, ts: str) -> Instant | None:
    for inst in timeline.pending:
        if inst.action == "rollback":
            try:
                plan = timeline.plan(inst)
            except HudiError:
                continue
            if plan and (plan.get("instantToRollback") or {}).get("commitTime") == ts:
                return inst
    return None


def _resume(storage: Storage, config: TableConfig, timeline: Timeline, inst: Instant,
            options: Mapping[str, Any] | None) -> Instant | None:
    """Finish the pending rollback ``inst`` from its plan, under its own instant time (raises
    ``ServiceBusyError`` while a live process runs it). ``None`` if it has no plan."""
    plan = timeline.plan(inst)
    if not plan:
        return None
    txn = Transaction.resume(storage, config, inst, options, undo_on_abort=False)
    with txn:
        return _finish(storage, timeline, txn, plan, _target_of(timeline, plan))


# -- restore: every instant after a savepoint rolled back under one restore instant ------------
# (here rather than in ``savepoint``: a write's recovery finishes a killed restore too)

NOT_RESTORED = ("rollback", "clean", "restore", "savepoint")


def restore_plan(timeline: Timeline, savepoint_ts: str) -> dict:
    """HoodieRestorePlan: every instant after the savepoint (but rollbacks, cleans, restores and
    savepoints), newest first."""
    targets = sorted((i for i in timeline.instants if i.timestamp > savepoint_ts and i.action not in NOT_RESTORED),
                     key=lambda i: i.timestamp, reverse=True)
    return {"instantsToRollback": [{"commitTime": t.timestamp, "action": t.action} for t in targets],
            "version": 2, "savepointToRestoreTimestamp": savepoint_ts}


def run_restore(storage: Storage, config: TableConfig, txn: Transaction, plan: Mapping[str, Any]) -> Instant:
    """Roll back, newest first, each instant of a restore ``plan`` still on the timeline, then
    commit the restore (the metadata hook drops the metadata table). Every step is idempotent,
    so a restore killed anywhere is finished by running this again on its instant."""
    start = time.time()
    if config.metadata_partitions:
        # The restore drops the metadata table when it commits; dropping it first (un-declared
        # in one atomic rewrite) makes readers list storage while files are deleted below, so a
        # restore killed half-way never leaves a listing naming files already gone.
        config = delete_metadata_table(storage, config)
    per_instant: dict[str, list[dict]] = {}
    for entry in plan.get("instantsToRollback") or ():
        ts = entry["commitTime"]
        # afresh: the plan of each target must see the later targets already undone
        timeline = Timeline.load(storage, config)
        target = next((i for i in timeline.instants if i.timestamp == ts and i.action not in NOT_RESTORED), None)
        if target is None:   # rolled back by a run that was killed afterwards
            per_instant[ts] = []
            continue
        rb_plan = build_plan(storage, config, timeline, target)
        if target.state is State.COMPLETED:
            _hide(storage, timeline, target)
        per_instant[ts] = [execute_plan(storage, config, rb_plan, txn.instant_time)]
        _drop_instant_files(storage, timeline, target, keep_requested=False)
    targets = [e["commitTime"] for e in plan.get("instantsToRollback") or ()]
    metadata = {"startRestoreTime": txn.instant_time, "timeTakenInMillis": int((time.time() - start) * 1000),
                "instantsToRollback": targets, "hoodieRestoreMetadata": per_instant, "version": 1,
                "restoreInstantInfo": list(plan.get("instantsToRollback") or ()), "extraMetadata": None}
    return txn.commit(metadata)


def resume_pending_restores(storage: Storage, config: TableConfig,
                            options: Mapping[str, Any] | None = None) -> list[Instant]:
    """Finish restores a killed process left pending, from their plans (Hudi resumes a pending
    restore rather than starting another). ``ServiceBusyError`` while a live process runs one."""
    timeline = Timeline.load(storage, config)
    out = []
    for inst in [i for i in timeline.pending if i.action == "restore"]:
        plan = timeline.plan(inst)
        txn = Transaction.resume(storage, config, inst, options, undo_on_abort=False)
        with txn:
            out.append(run_restore(storage, config, txn, plan))
        log.info("finished the interrupted restore %s", inst.timestamp)
    return out


def rollback_failed_writes(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                           *, snapshot: TableSnapshot | None = None,
                           timeline: Timeline | None = None) -> list[Instant]:
    """Roll back pending writes whose writer is gone (no live heartbeat); finish pending rollbacks.

    Writes whose heartbeat is alive belong to a concurrent writer and are left alone.
    ``snapshot``: the operation's (its timeline decides whether there is anything to do; a
    caller holding only a ``timeline`` may pass that); loaded here when neither is given. The
    timeline is listed again under the lock before anything is undone.
    """
    opts = dict(options or {})
    if option(opts, "hoodie.cleaner.policy.failed.writes") == "NEVER":
        return []
    interval = option(opts, "hoodie.client.heartbeat.interval_in_ms")
    misses = option(opts, "hoodie.client.heartbeat.tolerable.misses")
    def failed(timeline: Timeline) -> list[Instant]:
        return [i for i in timeline.pending
                if i.action in WRITE_ACTIONS and not (i.action == "replacecommit" and _is_clustering(timeline, i))
                and heartbeat_expired(storage, i.timestamp, interval, misses)]

    if snapshot is not None:
        timeline = snapshot.timeline
    if timeline is None:
        timeline = Timeline.load(storage, config)
    if not failed(timeline) and not any(i.action in ("rollback", "restore") for i in timeline.pending):
        return []
    # Under the table lock, so that two writers never undo the same instant, and re-checked
    # there: the instant may have completed, or its writer may have beaten in the meantime.
    with TableLock(storage, opts):
        # A pending restore first: writes wait until it is done (its hidden targets must not
        # be rolled back one by one, nor new data land in between).
        try:
            done = resume_pending_restores(storage, config, opts)
        except ServiceBusyError as exc:
            raise ConcurrentWriteError(f"{storage.url} is being restored by another process; "
                                       f"write once it finished ({exc})") from exc
        done += resume_pending_rollbacks(storage, config, opts)
        for inst in failed(Timeline.load(storage, config)):
            if not any(i.timestamp == inst.timestamp for i in Timeline.load(storage, config).pending):
                continue  # its writer removed it meanwhile (a write that lost a conflict aborts
                # without the lock)
            log.warning("rolling back failed write %s", inst)
            done.append(rollback(storage, config, inst.timestamp, opts))
    return done


def _is_clustering(timeline: Timeline, inst: Instant) -> bool:
    try:
        plan = timeline.plan(inst)
    except Exception:  # noqa: BLE001
        return False
    return bool(plan.get("clusteringPlan"))
