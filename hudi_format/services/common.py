"""What compaction, log compaction and clustering share: options, table state,
pending-service bookkeeping and the run/abort protocol of a service instant. Their plans are
serialised by :mod:`hudi_format.timeline.plans`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import posixpath
from typing import Any, Callable, Iterable, Mapping


from ..config import TableConfig
from ..errors import HudiError, InvalidOptionError, StorageError, TimelineError
from ..options import SERVICE_SCOPES, option, specs, validate
from ..options.services import SIZE_BASED_PLAN, SORT_AND_SIZE_EXECUTION
from ..storage import Storage
from ..timeline import Instant, Timeline
from ..timeline.instant import CLUSTERING, WRITE_ACTIONS
from ..transaction import ServiceBusyError, table_lock
from ..transaction.snapshot import TableSnapshot, is_clustering, plan_file_groups
from ..view import FileSlice
from ..view.file_names import parse_base_file_name, parse_log_file_name

log = logging.getLogger(__name__)


class ServiceConflictError(HudiError):
    """A table service cannot complete: the file groups it rewrites changed since it was
    planned (a concurrent write), so completing it would lose data."""


# -- options ----------------------------------------------------------------------------------

COMPACTION_STRATEGIES = {
    "LogFileSizeBasedCompactionStrategy": "size",
    "LogFileNumBasedCompactionStrategy": "num",
    "BoundedIOCompactionStrategy": "io",
    "UnBoundedCompactionStrategy": "all",
}
PLAN_STRATEGIES = (SIZE_BASED_PLAN,
                   "org.apache.hudi.client.clustering.plan.strategy.JavaSizeBasedClusteringPlanStrategy",
                   "org.apache.hudi.client.clustering.plan.strategy.FlinkSizeBasedClusteringPlanStrategy")
EXECUTION_STRATEGIES = (SORT_AND_SIZE_EXECUTION,
                        "org.apache.hudi.client.clustering.run.strategy.JavaSortAndSizeExecutionStrategy")

#: The table-service options (declared in :mod:`hudi_format.options.services`): key -> spec.
SERVICE_OPTIONS = specs("service")


def validate_service_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check and parse ``options`` for a table service: service keys and everything a write
    takes (a service writes files and commits like a write); anything else is an error."""
    return validate(options, SERVICE_SCOPES, what="table service")


def compaction_strategy(opts: Mapping[str, Any]) -> str:
    """``hoodie.compaction.strategy`` (class name, with or without package) -> size|num|io|all."""
    value = str(option(opts, "hoodie.compaction.strategy")).strip()
    short = value.rsplit(".", 1)[-1]
    if short not in COMPACTION_STRATEGIES:
        raise InvalidOptionError(f"option hoodie.compaction.strategy: unsupported strategy {value!r}; "
                                 f"use one of {sorted(COMPACTION_STRATEGIES)}")
    return COMPACTION_STRATEGIES[short]


# -- table state ------------------------------------------------------------------------------

#: One consistent look at a table (the operation's snapshot, loaded once and passed down).
TableState = TableSnapshot


def new_instant_time(storage: Storage, config: TableConfig) -> str:
    from ..timeline.clock import InstantClock
    return InstantClock(storage, config).new_instant_time()


def parse_instant_seconds(ts: str) -> float:
    """Seconds of an instant time ``yyyyMMddHHmmss[SSS]`` (naive: only differences matter)."""
    base = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S")
    millis = int(ts[14:17] or 0) if len(ts) > 14 else 0
    return base.timestamp() + millis / 1000.0


# -- pending services -------------------------------------------------------------------------


def pending_service_file_groups(timeline: Timeline) -> dict[tuple[str, str], Instant]:
    """File groups in pending compaction, log compaction or clustering -> that instant.

    No service may plan a file group that another pending service will rewrite.
    """
    return TableSnapshot(timeline.storage, timeline.config, timeline).pending_services


def in_flight_file_groups(ts: TableState) -> set[tuple[str, str]]:
    """File groups that writes in flight (pending commits and delta commits, by the markers
    they leave before each file) are writing to.

    A clustering that plans such a group makes that write fail at its commit, or is aborted
    by it; and in table version 6 the plan can name the write's log file (named after its
    slice, not its writer), which the write's rollback then deletes under the clustering.
    A marker is created before its file, so a write that has not reached a file group yet
    cannot be seen; the commit-time conflict checks still settle that race."""
    from ..transaction.markers import read_markers
    out: set[tuple[str, str]] = set()
    for inst in ts.timeline.pending:
        if inst.action not in WRITE_ACTIONS or is_clustering(ts.timeline, inst):
            continue
        for data, _ in read_markers(ts.storage, inst.timestamp):
            part, name = posixpath.split(data)
            parsed = parse_base_file_name(name) or parse_log_file_name(name)
            if parsed is not None:
                out.add((part, parsed.file_id))
    return out


def pending_instants(timeline: Timeline, action: str) -> list[Instant]:
    """Pending instants of a service (``compaction``, ``logcompaction`` or ``clustering``),
    oldest first."""
    if action == CLUSTERING:
        return [i for i in timeline.pending if is_clustering(timeline, i)]
    return [i for i in timeline.pending if i.action == action]


def pick_pending(timeline: Timeline, action: str, instant: "Instant | str | None") -> Instant:
    pending = pending_instants(timeline, action)
    if instant is None:
        if not pending:
            raise TimelineError(f"no pending {action} on the timeline of this table")
        return pending[0]
    ts = instant.timestamp if isinstance(instant, Instant) else str(instant)
    for inst in pending:
        if inst.timestamp == ts:
            return inst
    done = timeline.get(ts)
    if done is not None and done.is_completed:
        raise TimelineError(f"{action} {ts} is already completed")
    raise TimelineError(f"no pending {action} at instant {ts}")


def slice_metrics(slices: Iterable[FileSlice], default_base_size: int) -> dict[str, float]:
    """``FileSliceMetricUtils.addFileSliceCommonMetrics`` (the five keys Hudi 1.1 records)."""
    num_logs = total_log = read = write = 0
    for s in slices:
        num_logs += len(s.log_files)
        total_log += sum(size for size in s.log_file_sizes if size >= 0)
        base = s.base_file_size if s.base_file else 0
        read += base
        write += base if base > 0 else default_base_size
    mb = 1024 * 1024
    read_mb = (read + total_log) // mb
    write_mb = write // mb
    return {"TOTAL_LOG_FILES": float(num_logs), "TOTAL_IO_MB": float(read_mb + write_mb),
            "TOTAL_IO_READ_MB": float(read_mb), "TOTAL_LOG_FILES_SIZE": float(total_log),
            "TOTAL_IO_WRITE_MB": float(write_mb)}


def full_uri(storage: Storage, rel: str) -> str:
    """The absolute path Hudi records in clustering plans (``file:/...`` for local tables)."""
    uri = storage.uri(rel)
    if "://" not in uri and not uri.startswith("file:") and uri.startswith("/"):
        return "file:" + uri
    return uri


def rel_in_partition(partition: str, path: str | None) -> str | None:
    """A plan's file reference (name or full path) as a path relative to the table."""
    if not path:
        return None
    name = posixpath.basename(path)
    return posixpath.join(partition, name) if partition else name


# -- running a service instant ----------------------------------------------------------------
# Every service instant commits through ``hudi_format.transaction.Transaction`` (claim with
# ``resume``, commit under the table lock with the metadata hook, or abort).


def run_pending_then_new(storage: Storage, opts: Mapping[str, Any], pending: Iterable[Instant],
                         run: Callable[[Instant], Instant], schedule: Callable[[], Instant | None],
                         what: str) -> Instant | None:
    """Run each pending instant of a service, then schedule a new one and run it; returns the
    last instant completed. Scheduling happens under the table lock (as Hudi's), so concurrent
    processes never plan the same work; an instant another live process runs is skipped."""
    done = None
    for inst in pending:
        try:
            done = run(inst)
        except ServiceBusyError as exc:
            log.info("skipping %s: %s", what, exc)
    with table_lock(storage, opts):
        inst = schedule()
    if inst is not None:
        try:
            done = run(inst)
        except ServiceBusyError as exc:
            log.info("skipping %s: %s", what, exc)
    return done


def snapshot_of(storage: Storage, config: TableConfig, snapshot: TableSnapshot | None) -> TableSnapshot:
    """The operation's snapshot: the caller's (still current for this process, else listed
    again) or, for a service called on its own, one loaded now."""
    return snapshot.current() if snapshot is not None else TableSnapshot.load(storage, config)


def committed(ts: TableSnapshot, txn: Any) -> TableSnapshot:
    """The table after the service transaction ``txn`` committed: its timeline as listed under
    the commit's lock (plus the completed instant) and its config as reloaded there."""
    return ts.advanced(txn.done, txn.timeline, config=txn.config)


ServiceStep = Callable[[Instant, TableSnapshot], "tuple[Instant, TableSnapshot]"]


def run_services(storage: Storage, opts: Mapping[str, Any], snapshot: TableSnapshot, action: str,
                 run: ServiceStep, schedule: Callable[[], "tuple[Instant | None, TableSnapshot | None]"],
                 what: str) -> tuple[Instant | None, TableSnapshot]:
    """:func:`run_pending_then_new` on the operation's snapshot: the pending instants are those
    of ``snapshot``, each run starts from the table the previous one left, and the new instant
    runs on the snapshot its scheduling listed (under the table lock, after its time was
    issued). Returns the last instant completed and the table after it."""
    done = None
    for inst in pending_instants(snapshot.timeline, action):
        try:
            done, snapshot = run(inst, snapshot)
        except ServiceBusyError as exc:
            log.info("skipping %s: %s", what, exc)
    with table_lock(storage, opts):
        inst, scheduled = schedule()
    if inst is not None and scheduled is not None:
        try:
            done, snapshot = run(inst, scheduled)
        except ServiceBusyError as exc:
            log.info("skipping %s: %s", what, exc)
    return done, snapshot


def run_mor_service(snapshot: TableSnapshot, options: Mapping[str, Any], action: str,
                    run: Callable[[TableSnapshot, Instant, dict[str, Any]], "tuple[Instant, TableSnapshot]"],
                    schedule: Callable[..., "tuple[Instant | None, TableSnapshot | None]"],
                    what: str) -> tuple[Instant | None, TableSnapshot]:
    """The shape of compaction and log compaction on an operation's snapshot: options checked,
    nothing to do on a Copy-on-Write table, else :func:`run_services` with the service's own
    ``run(snapshot, instant, opts)`` and ``schedule(storage, config, opts, None, None)``."""
    opts = validate_service_options(options)
    storage, config = snapshot.storage, snapshot.config
    snapshot = snapshot_of(storage, config, snapshot)
    if not config.is_mor:
        return None, snapshot
    return run_services(storage, opts, snapshot, action, lambda i, ts: run(ts, i, opts),
                        lambda: schedule(storage, config, opts, None, None), what)


def service_files(storage: Storage, partition: str, file_ids: Iterable[str], instant_time: str) -> list[str]:
    """Files of ``file_ids`` in ``partition`` named with ``instant_time`` (an earlier attempt's)."""
    ids = set(file_ids)
    out = []
    try:
        entries = storage.list(partition)
    except StorageError:
        return out
    for f in entries:
        if f.is_dir:
            continue
        bf = parse_base_file_name(f.name)
        if bf is not None and bf.file_id in ids and bf.instant_time == instant_time:
            out.append(f.path)
            continue
        lf = parse_log_file_name(f.name)
        if lf is not None and lf.file_id in ids and lf.instant_time == instant_time:
            out.append(f.path)
    return out


def attempt_log_files(storage: Storage, instant_time: str, groups: Mapping[tuple[str, str], str],
                      listed: Iterable[str] = ()) -> list[str]:
    """Log files an earlier attempt of the service instant ``instant_time`` wrote into the file
    groups ``(partition, file_id) -> base instant`` (v6, where log files carry the slice's base
    instant, not the writer's): those its markers name (even a file cut short), and any other
    log file of the group, not in ``listed``, whose blocks carry the instant (a file the log
    writer rolled over to)."""
    from ..log import read_log_file
    from ..transaction.markers import read_markers
    out = [p for p, _ in read_markers(storage, instant_time)]
    skip = set(listed) | set(out)
    by_partition: dict[str, dict[str, str]] = {}
    for (part, fid), base in groups.items():
        by_partition.setdefault(part, {})[fid] = base
    for part, fids in by_partition.items():
        try:
            entries = storage.list(part)
        except StorageError:
            continue
        for f in entries:
            lf = None if f.is_dir else parse_log_file_name(f.name)
            if lf is None or fids.get(lf.file_id) != lf.instant_time or f.path in skip:
                continue
            try:
                if any(b.instant_time == instant_time for b in read_log_file(storage, f.path)):
                    out.append(f.path)
            except (HudiError, OSError) as exc:
                log.warning("cannot read %s while looking for an earlier attempt's files: %s", f.path, exc)
    return out


def schema_extra(data_avro: dict) -> dict[str, str]:
    return {"schema": json.dumps(data_avro, separators=(",", ":"))}


def runtime(scan: int = 0, upsert: int = 0, create: int = 0) -> dict[str, int]:
    return {"totalScanTime": int(scan), "totalUpsertTime": int(upsert), "totalCreateTime": int(create)}


def split_partitions(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


__all__ = ["SERVICE_OPTIONS", "ServiceConflictError", "validate_service_options", "is_clustering", "plan_file_groups",
           "TableState", "pending_service_file_groups", "pending_instants", "snapshot_of", "committed",
           "run_services"]
