"""Cleaning: delete file slices no reader needs any more, as Apache Hudi's cleaner does.

Two steps, each its own timeline state, so a crash anywhere is finished by the next clean:

1. ``schedule_clean`` plans (``CleanPlanner``/``CleanPlanActionExecutor``): it picks the
   *earliest commit to retain* and the file slices to delete per policy, and writes them as
   ``<ts>.clean.requested`` (``HoodieCleanerPlan``). Nothing is scheduled when nothing would be
   deleted, or when fewer than ``hoodie.clean.max.commits`` commits happened since the last clean.
2. ``run_clean`` executes (``CleanActionExecutor``): ``clean.inflight``, the deletes (a file
   already gone counts as a failed delete, as in Hudi), then the completed ``clean`` with
   ``HoodieCleanMetadata``. A pending plan is simply executed again.

Policies (``hoodie.cleaner.policy``), per file group of the file-system view (slices of
committed instants only; files of pending writes are never touched):

- ``KEEP_LATEST_COMMITS`` (default): with more than ``hoodie.cleaner.commits.retained`` (10)
  completed commits, the earliest commit to retain is the N-th latest (never after the earliest
  pending commit). A slice is deleted when its base instant is before it, unless it is the
  latest slice or the latest slice before that commit (what a reader pinned to the earliest
  retained commit reads).
- ``KEEP_LATEST_BY_HOURS``: the same with the earliest commit to retain being the first one
  requested within ``hoodie.cleaner.hours.retained`` (24) hours of now.
- ``KEEP_LATEST_FILE_VERSIONS``: keep the ``hoodie.cleaner.fileversions.retained`` (3) latest
  slices of each file group.

Never deleted: slices holding a file named by a savepoint, slices a pending compaction or log
compaction reads or writes into (base instant at or after the operation's), and slices a pending
clustering plan reads. File groups retired by a replacecommit are deleted whole once the
replacecommit is before the earliest commit to retain (file versions policy: at once).
"""

from __future__ import annotations

import logging
import posixpath
import time
from typing import Any, Callable, Iterable, Mapping

from ..config import TableConfig
from ..options import values
from ..errors import InvalidOptionError, TimelineError
from ..read.snapshot import ReadState
from ..storage import Storage
from ..timeline import Instant, State, Timeline
from ..timeline.clock import format_epoch_millis
from ..timeline.writer import TimelineWriter
from ..transaction import ServiceBusyError, Transaction
from ..transaction.snapshot import TableSnapshot
from .common import run_pending_then_new
from ..view import FileSlice, FileSystemView

log = logging.getLogger(__name__)

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS)

#: Hudi's option keys this module reads (declared in hudi_format.options)
OPTION_KEYS: tuple[str, ...] = (
    "hoodie.clean.automatic", "hoodie.cleaner.policy", "hoodie.cleaner.commits.retained",
    "hoodie.cleaner.fileversions.retained", "hoodie.cleaner.hours.retained",
    "hoodie.clean.trigger.strategy", "hoodie.clean.max.commits")

CLEAN_PLAN_VERSION = 2  # CleanPlanner.LATEST_CLEAN_PLAN_VERSION
CLEAN_METADATA_VERSION = 2  # CleanMetadataV2MigrationHandler.VERSION
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"  # CleanerUtils.SAVEPOINTED_TIMESTAMPS
WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")
# commits-and-compaction timeline: whose pending instants bound the earliest commit to retain
_COMMITS_AND_COMPACTION = WRITE_ACTIONS + ("compaction", "logcompaction", "clustering")


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- what the planner needs from the timeline -------------------------------------------------
def _by_request_time(instants: Iterable[Instant]) -> list[Instant]:
    return sorted(instants, key=lambda i: (i.timestamp, i.action))


def completed_commits(timeline: Timeline) -> list[Instant]:
    """Completed commits, deltacommits and replacecommits by request time (Hudi's order)."""
    return _by_request_time(i for i in timeline.instants if i.is_completed and i.action in WRITE_ACTIONS)


def earliest_commit_to_retain(timeline: Timeline, policy: str, commits_retained: int,
                              hours_retained: int, now_ms: int | None = None,
                              cutoff: str | None = None) -> Instant | None:
    """``CleanerUtils.getEarliestCommitToRetain`` over the active timeline (by hours: the first
    commit requested at or after ``cutoff``, default ``hours_retained`` before now)."""
    completed = completed_commits(timeline)
    if policy == KEEP_LATEST_COMMITS:
        if len(completed) <= commits_retained:
            return None
        nth = completed[len(completed) - commits_retained]
        pending = _by_request_time(i for i in timeline.pending if i.action in _COMMITS_AND_COMPACTION)
        if pending and nth.timestamp > pending[0].timestamp:
            before = [i for i in completed if i.timestamp < pending[0].timestamp]
            return before[-1] if before else None
        return nth
    if policy == KEEP_LATEST_BY_HOURS:
        if cutoff is None:
            now = _now_ms() if now_ms is None else now_ms
            cutoff = format_epoch_millis(now - hours_retained * 3_600_000, timeline.config.timeline_timezone)
        return next((i for i in completed if i.timestamp >= cutoff), None)
    return None


def savepointed_files(timeline: Timeline) -> tuple[list[str], set[str]]:
    """(savepoint times, names of every file they pin)."""
    times, names = [], set()
    for sp in timeline.completed:
        if sp.action != "savepoint":
            continue
        times.append(sp.timestamp)
        meta = timeline.raw_metadata(sp)
        for part in (meta.get("partitionMetadata") or {}).values():
            names.update(part.get("savepointDataFile") or ())
    return sorted(times), names


def _pending_service_guards(timeline: Timeline) -> tuple[dict[tuple[str, str], str], set[str]]:
    """Pending compaction / log compaction / clustering: ((partition, file id) -> earliest base
    instant a compaction operation works on, names of files any of the plans reads)."""
    guards: dict[tuple[str, str], str] = {}
    files: set[str] = set()

    def guard(partition, file_id, base):
        key = (partition or "", file_id)
        if base and (key not in guards or base < guards[key]):
            guards[key] = base

    for inst in timeline.pending:
        if inst.action not in ("compaction", "logcompaction", "clustering", "replacecommit"):
            continue
        try:
            plan = timeline.plan(inst)
        except TimelineError:
            continue
        for op in plan.get("operations") or ():
            guard(op.get("partitionPath"), op.get("fileId"), op.get("baseInstantTime"))
            files.update(posixpath.basename(p) for p in [op.get("dataFilePath"), *(op.get("deltaFilePaths") or ())] if p)
        for group in ((plan.get("clusteringPlan") or {}).get("inputGroups") or ()):
            for sl in group.get("slices") or ():
                paths = [sl.get("dataFilePath"), *(sl.get("deltaFilePaths") or ())]
                files.update(posixpath.basename(p) for p in paths if p)
    return guards, files


def _replaced_file_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> request time of the completed replacecommit that retired it."""
    out: dict[tuple[str, str], str] = {}
    for inst in completed_commits(timeline):
        if inst.action != "replacecommit":
            continue
        for pf in timeline.metadata(inst).replaced_file_ids:
            out.setdefault(pf, inst.timestamp)
    return out


# -- planning ----------------------------------------------------------------------------------
def _slice_files(s: FileSlice) -> list[str]:
    return ([s.base_file] if s.base_file else []) + list(s.log_files)


def _is_pinned(s: FileSlice, pinned: set[str]) -> bool:
    return any(posixpath.basename(f) in pinned for f in _slice_files(s))


class _Planner:
    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline, opts: Mapping[str, Any]):
        self.storage, self.config, self.timeline = storage, config, timeline
        self.policy = opts["hoodie.cleaner.policy"]
        self.commits_retained = opts["hoodie.cleaner.commits.retained"]
        self.versions_retained = opts["hoodie.cleaner.fileversions.retained"]
        self.hours_retained = opts["hoodie.cleaner.hours.retained"]
        if self.policy == KEEP_LATEST_FILE_VERSIONS and self.versions_retained < 1:
            raise InvalidOptionError("hoodie.cleaner.fileversions.retained must be at least 1")
        if self.commits_retained < 0 or self.hours_retained < 0:
            raise InvalidOptionError("hoodie.cleaner.commits.retained / hours.retained must not be negative")
        self.completed = completed_commits(timeline)
        self.ectr = earliest_commit_to_retain(timeline, self.policy, self.commits_retained, self.hours_retained)
        self.savepoint_times, self.pinned = savepointed_files(timeline)
        self.guards, guarded_files = _pending_service_guards(timeline)
        self.pinned = self.pinned | guarded_files
        self.replaced = _replaced_file_groups(timeline)
        self.state = ReadState(config, timeline)
        self.view = FileSystemView(storage, config)

    def _needed_for_pending(self, s: FileSlice) -> bool:
        base = self.guards.get((s.partition_path, s.file_id))
        return base is not None and s.base_instant >= base

    def partition_plan(self, partition: str) -> tuple[bool, list[str]]:
        """(delete the partition?, paths to delete) for one partition."""
        key_time = self.state.completion_time if self.config.version >= 8 else None
        groups = self.view.file_groups(partition, self.state.visible, key_time)
        live = [g for g in groups if (partition, g.file_id) not in self.replaced]
        retired = [g for g in groups if (partition, g.file_id) in self.replaced]
        by_commits = self.policy != KEEP_LATEST_FILE_VERSIONS
        if by_commits:
            retained = 0 if self.policy == KEEP_LATEST_BY_HOURS else self.commits_retained
            if self.ectr is None or len(self.completed) <= retained:
                return False, []
        deletes: list[str] = []
        for g in retired:  # whole replaced file groups, once their replacecommit is old enough
            if by_commits and not self.replaced[(partition, g.file_id)] < self.ectr.timestamp:
                continue
            for s in g.slices:
                if not _is_pinned(s, self.pinned) and not self._needed_for_pending(s):
                    deletes += _slice_files(s)
        for g in live:
            newest_first = list(reversed(g.slices))
            if by_commits:
                deletes += self._by_commits(newest_first)
            else:
                deletes += self._by_versions(g, newest_first)
        delete_partition = False
        if not live and retired:
            doomed = set(deletes)
            leftover = [f for f in self.storage.list(partition) if not f.is_dir
                        and not f.name.startswith(".hoodie_partition_metadata") and f.path not in doomed]
            later_replace = by_commits and any(
                p == partition and t >= self.ectr.timestamp for (p, _), t in self.replaced.items())
            delete_partition = not leftover and not later_replace
        return delete_partition, deletes

    def _by_commits(self, slices: list[FileSlice]) -> list[str]:
        if not slices:
            return []
        ectr = self.ectr.timestamp
        last_version = slices[0].base_instant
        before = next((s.base_instant for s in slices if s.base_instant < ectr), None)
        out = []
        for s in slices:
            if _is_pinned(s, self.pinned) or s.base_instant in (last_version, before):
                continue
            if not self._needed_for_pending(s) and s.base_instant < ectr:
                out += _slice_files(s)
        return out

    def _by_versions(self, g, slices: list[FileSlice]) -> list[str]:
        keep = self.versions_retained
        candidates = [s for s in slices if not self._needed_for_pending(s)]
        if (g.partition_path, g.file_id) in self.guards:
            keep -= 1  # the slice the pending compaction works on counts as one version
        out = []
        for s in candidates[max(keep, 0):]:
            if not _is_pinned(s, self.pinned):
                out += _slice_files(s)
        return out

    def plan(self) -> dict:
        ops: dict[str, list[dict]] = {}
        to_delete: list[str] = []
        if self.policy == KEEP_LATEST_FILE_VERSIONS or self.ectr is not None:
            for partition in self.view.partitions():
                drop, paths = self.partition_plan(partition)
                if paths:
                    ops[partition] = [{"filePath": self._plan_path(p), "isBootstrapBaseFile": False}
                                      for p in paths]
                if drop:
                    to_delete.append(partition)
        ectr = None if self.ectr is None else {
            "timestamp": self.ectr.timestamp, "action": self.ectr.action, "state": State.COMPLETED.name}
        extra = {SAVEPOINTED_TIMESTAMPS: ",".join(self.savepoint_times)} if self.savepoint_times else {}
        return {"earliestInstantToRetain": ectr,
                "lastCompletedCommitTimestamp": self.completed[-1].timestamp if self.completed else "",
                "policy": self.policy, "filesToBeDeletedPerPartition": {},
                "version": CLEAN_PLAN_VERSION, "filePathsToBeDeletedPerPartition": ops,
                "partitionsToBeDeleted": to_delete, "extraMetadata": extra}

    def _plan_path(self, rel: str) -> str:
        """Absolute path as Hudi records it (``file:/...`` for local tables)."""
        if self.storage.is_local:
            return "file:" + self.storage.full(rel)
        return self.storage.uri(rel)


def _plan_has_work(plan: Mapping[str, Any]) -> bool:
    ops = plan.get("filePathsToBeDeletedPerPartition") or {}
    return bool(plan.get("partitionsToBeDeleted")) or any(ops.values())


def _commits_since_last_clean(timeline: Timeline) -> int:
    cleans = [i for i in timeline.completed if i.action == "clean"]
    commits = completed_commits(timeline)
    if not cleans:
        return len(commits)
    last = max(cleans, key=lambda i: i.timestamp)
    try:
        since = timeline.raw_metadata(last).get("lastCompletedCommitTimestamp") or ""
    except TimelineError:
        return len(commits)
    return sum(1 for i in commits if i.timestamp > since)


def build_clean_plan(storage: Storage, config: TableConfig, timeline: Timeline | None = None,
                     options: Mapping[str, Any] | None = None) -> dict:
    """The ``HoodieCleanerPlan`` a clean scheduled now would write (possibly with no work)."""
    opts = values(options, OPTION_KEYS)
    timeline = timeline if timeline is not None else Timeline.load(storage, config)
    return _Planner(storage, config, timeline, opts).plan()


def nothing_to_clean(timeline: Timeline, options: Mapping[str, Any] | None = None) -> bool:
    """Whether a clean scheduled on ``timeline`` would plan nothing, decided from the timeline
    alone: fewer commits than ``hoodie.clean.max.commits`` since the last clean, or a policy
    retaining by commits (or hours) with no commit old enough to clean before. (A pending
    clean is the caller's to check.)"""
    opts = values(options, OPTION_KEYS)
    try:
        if _commits_since_last_clean(timeline) < opts["hoodie.clean.max.commits"]:
            return True
        policy = opts["hoodie.cleaner.policy"]
        return policy != KEEP_LATEST_FILE_VERSIONS and earliest_commit_to_retain(
            timeline, policy, opts["hoodie.cleaner.commits.retained"], opts["hoodie.cleaner.hours.retained"]) is None
    except TimelineError:
        return False   # undecided: the planner decides under the lock


def schedule_clean(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                   *, timeline: Timeline | None = None,
                   instant_time: Callable[[], str | None] | None = None) -> Instant | None:
    """Plan a clean: ``<ts>.clean.requested`` with its ``HoodieCleanerPlan``; ``None`` when the
    trigger (``hoodie.clean.max.commits`` commits since the last clean) is not met or nothing
    would be deleted. ``timeline``: the caller's listing, taken under the table lock.
    ``instant_time()``: the clean's time (``None``: plan none), asked only once the plan has
    work (a clock round costs requests and a skew wait on object stores); default: a new time
    from the table's clock."""
    opts = values(options, OPTION_KEYS)
    timeline = timeline if timeline is not None else Timeline.load(storage, config)
    if _commits_since_last_clean(timeline) < opts["hoodie.clean.max.commits"]:
        return None
    plan = _Planner(storage, config, timeline, opts).plan()
    if not _plan_has_work(plan):
        log.info("nothing to clean in %s", storage.url)
        return None
    ts = instant_time() if instant_time is not None else None
    if instant_time is not None and ts is None:
        return None
    return TimelineWriter(storage, config).create_requested("clean", ts, plan=plan)


# -- execution -------------------------------------------------------------------------------
def _relative(storage: Storage, partition: str, path: str) -> str:
    """The table-relative path of a planned file (plans hold absolute paths)."""
    for prefix in ("file:" + storage.full(""), storage.uri(""), storage.full("")):
        prefix = prefix.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix):]
    name = posixpath.basename(path)
    return posixpath.join(partition, name) if partition else name


def _execute(storage: Storage, plan: Mapping[str, Any]) -> tuple[dict[str, dict], int]:
    policy = plan.get("policy") or KEEP_LATEST_COMMITS
    dropped = list(plan.get("partitionsToBeDeleted") or ())
    partitions: dict[str, dict] = {}
    deleted = 0
    ops = plan.get("filePathsToBeDeletedPerPartition") or {}
    if not ops and plan.get("filesToBeDeletedPerPartition"):  # version 1 plans: file names only
        ops = {p: [{"filePath": posixpath.join(p, n) if p else n} for n in names]
               for p, names in plan["filesToBeDeletedPerPartition"].items()}
    for partition, infos in ops.items():
        meta = {"partitionPath": partition, "policy": policy, "deletePathPatterns": [],
                "successDeleteFiles": [], "failedDeleteFiles": [],
                "isPartitionDeleted": partition in dropped}
        for info in infos or ():
            path = info.get("filePath")
            if not path:
                continue
            rel = _relative(storage, partition, path)
            name = posixpath.basename(rel)
            meta["deletePathPatterns"].append(name)
            ok = False
            try:
                if storage.exists(rel):
                    storage.delete(rel)
                    ok = True
            except Exception as exc:  # noqa: BLE001 - recorded as a failed delete, as Hudi does
                log.warning("could not delete %s: %s", storage.uri(rel), exc)
            (meta["successDeleteFiles"] if ok else meta["failedDeleteFiles"]).append(name)
            deleted += ok
        partitions[partition] = meta
    for partition in dropped:
        try:
            if partition and storage.exists(partition):
                storage.fs.rm(storage.full(partition), recursive=True)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not delete partition %s: %s", storage.uri(partition), exc)
    return partitions, deleted


def run_clean(storage: Storage, config: TableConfig, instant: Instant | str | None = None,
              options: Mapping[str, Any] | None = None) -> Instant:
    """Execute a pending clean (``instant``, default the earliest pending one): move it to
    inflight, delete its files, complete it with ``HoodieCleanMetadata``."""
    timeline = Timeline.load(storage, config)
    pending = [i for i in timeline.pending if i.action == "clean"]
    if instant is None:
        if not pending:
            raise InvalidOptionError(f"no pending clean on the timeline of {storage.url}")
        target = min(pending, key=lambda i: i.timestamp)
    else:
        ts = instant.timestamp if isinstance(instant, Instant) else str(instant)
        target = next((i for i in pending if i.timestamp == ts), None)
        if target is None and any(i.timestamp == ts and i.action == "clean" for i in timeline.completed):
            # listed pending by the caller, completed since by another process: nothing to do
            raise ServiceBusyError(f"clean {ts} of {storage.url} was completed by another process")
        if target is None:
            raise InvalidOptionError(f"{ts} is not a pending clean on the timeline of {storage.url}")
    start = time.time()
    plan = timeline.plan(target)
    # 0.x writes the plan again into the inflight file; 1.x leaves it empty
    data = storage.read_bytes(timeline.file_path(target, State.REQUESTED)) \
        if config.version < 8 and target.state is State.REQUESTED else None
    with Transaction.resume(storage, config, target, options, inflight_data=data) as txn:
        partitions, deleted = _execute(storage, plan)
        ectr = plan.get("earliestInstantToRetain") or {}
        extra = dict(plan.get("extraMetadata") or {})
        metadata = {"startCleanTime": target.timestamp,
                    "timeTakenInMillis": int((time.time() - start) * 1000),
                    "totalFilesDeleted": deleted,
                    "earliestCommitToRetain": ectr.get("timestamp") or "",
                    "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp") or "",
                    "partitionMetadata": partitions, "version": CLEAN_METADATA_VERSION,
                    "bootstrapPartitionMetadata": {}, "extraMetadata": extra or None}
        done = txn.commit(metadata)
    log.info("clean %s deleted %d files", done, deleted)
    return done


def clean(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None, *,
          snapshot: TableSnapshot | None = None, locked: bool = False,
          when_idle: Callable[[Timeline], Any] | None = None,
          instant_time: Callable[[Timeline], str | None] | None = None) -> Instant | None:
    """Finish any pending clean, then schedule and run a new one; the last completed clean
    instant, or ``None`` when there was nothing to do.

    One clean at a time, as Hudi: a clean another live process runs is skipped, and no new
    clean is planned (under the table lock) while one is pending. ``snapshot``: the
    operation's (load once), its timeline used while this process changed nothing since; the plan
    is made on a fresh listing under the lock unless ``locked`` (the caller holds a lock no
    other process changes this table without: the metadata table under its data table's).
    ``when_idle(listing)`` runs under that same lock hold, on that listing, when no clean is
    planned (inline archival then needs no listing of its own). ``instant_time(listing)``: the
    new clean's time (``None``: plan none), for a table whose instants another table's clock
    issues (the metadata table's)."""
    timeline = Timeline.current(storage, config, snapshot.timeline if snapshot is not None else None)
    pending = sorted((i for i in timeline.pending if i.action == "clean"), key=lambda i: i.timestamp)
    if not pending and not locked and nothing_to_clean(timeline, options):
        return None   # decided on the operation's view: no lock, no listing (a round trip each)

    def schedule() -> Instant | None:
        now = Timeline.current(storage, config, timeline) if locked else Timeline.load(storage, config)
        if any(i.action == "clean" for i in now.pending):
            return None
        planned = schedule_clean(storage, config, options, timeline=now,
                                 instant_time=None if instant_time is None else lambda: instant_time(now))
        if planned is None and when_idle is not None:
            when_idle(now)
        return planned

    return run_pending_then_new(storage, options or {}, pending, lambda i: run_clean(storage, config, i, options),
                                schedule, "clean")


__all__ = ["OPTION_KEYS", "schedule_clean", "run_clean", "clean", "build_clean_plan",
           "earliest_commit_to_retain", "KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS",
           "KEEP_LATEST_BY_HOURS"]
