"""Archival: move old instants out of the active timeline, as Hudi's ``HoodieTimelineArchiver``.

When the active timeline holds more than ``hoodie.keep.max.commits`` (30) completed commits
(commits, deltacommits, replacecommits), the oldest are archived until ``hoodie.keep.min.commits``
(20) remain, together with the completed cleans and rollbacks requested before the newest
archived commit. Archived instants go to the LSM history (v8+) or the archived log (v6), see
:mod:`hudi_format.timeline.history_writer`; then their files leave the active timeline, pending
states first and completed files in ascending order, so readers never see a hole.

Never archived (the *earliest instant to retain* is the earliest of these):

- anything from the earliest pending write, compaction or clustering on (the completed commit
  before it bounds the archive, so the timeline has no gap around it);
- MOR tables: the delta commits a ``NUM_COMMITS`` compaction trigger still needs to count
  (``hoodie.compact.inline.max.delta.commits``), back to the last compaction;
- a replacecommit or clustering whose replaced files the last clean has not yet deleted (from
  the last clean's earliest commit to retain; without a clean, from the first replacecommit);
- the last clean's earliest commit to retain itself and everything after it;
- the first savepoint and everything after it (``hoodie.archive.beyond.savepoint`` archives past
  savepoints but never a savepointed commit); savepoint instants themselves stay active;
- a data table with a metadata table: everything the metadata table's latest compaction does
  not cover (v8+: commits completed after it; v6: requested after it), and nothing at all
  before its first compaction, because the metadata table's log blocks count only for instants
  on the data table's active timeline;
- a metadata table: everything from its data table's first active commit or first pending
  instant on (rollbacks of those need their metadata-table deltacommits), and every
  deltacommit its latest compaction did not fold into base files (one that completed after
  the compaction was planned, though requested before it): readers and the next compaction
  trust a metadata log block only while its deltacommit is on an active timeline, so
  archiving it would silently drop what it recorded (a clean's deletions, a commit's files);
- a replacecommit whose replaced file groups still have files in storage or in the metadata
  table's listing (a clean that could not delete them): without it on the timeline readers
  would serve those file groups again beside the ones that replaced them.

MERGE_ON_READ log files of archived delta commits stay readable and compactable: readers and
services treat an instant older than the active timeline as completed and take its completion
time from the archive when they need it (see ``read.snapshot.ReadState``), as Hudi does.

As in Hudi's ``ArchivalUtils``, min/max are raised when the cleaner's own retention
(``hoodie.cleaner.*``) needs more commits than ``hoodie.keep.min.commits`` keeps.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError, TimelineError
from ..options import values
from ..storage import Storage
from ..timeline import Instant, InstantClock, State, Timeline
from ..timeline.history_writer import ActiveAction, LSMTimelineWriter, write_v6_archive
from ..transaction import is_metadata_storage
from ..transaction.snapshot import TableSnapshot
from .cleaning import completed_commits, earliest_commit_to_retain

log = logging.getLogger(__name__)

#: Hudi's option keys this module reads (declared in hudi_format.options)
OPTION_KEYS: tuple[str, ...] = (
    "hoodie.archive.automatic", "hoodie.keep.min.commits", "hoodie.keep.max.commits",
    "hoodie.archive.beyond.savepoint", "hoodie.timeline.compaction.batch.size",
    "hoodie.timeline.compaction.target.file.max.bytes", "hoodie.commits.archival.batch",
    "hoodie.compact.inline.max.delta.commits", "hoodie.compact.inline.trigger.strategy",
    # the cleaner's retention bounds archival too (ArchivalUtils.getMinAndMaxInstantsToKeep)
    "hoodie.cleaner.policy", "hoodie.cleaner.commits.retained", "hoodie.cleaner.hours.retained")

WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit")
_WRITE_TIMELINE = WRITE_ACTIONS + ("compaction", "logcompaction", "clustering")


def _hours_before(ts: str, hours: int) -> str | None:
    """``ts`` minus ``hours``, in the same (table) time zone, as an instant time."""
    import datetime as _dt
    try:
        t = _dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S") - _dt.timedelta(hours=hours)
    except ValueError:
        return None
    return t.strftime("%Y%m%d%H%M%S") + ts[14:17].ljust(3, "0")


def min_max_to_keep(timeline: Timeline, opts: Mapping[str, Any]) -> tuple[int, int]:
    """``hoodie.keep.min/max.commits``, raised to what the cleaner's retention needs."""
    lo, hi = opts["hoodie.keep.min.commits"], opts["hoodie.keep.max.commits"]
    if lo < 1 or hi <= lo:
        raise InvalidOptionError(f"hoodie.keep.max.commits ({hi}) must be greater than "
                                 f"hoodie.keep.min.commits ({lo}), which must be at least 1")
    completed = completed_commits(timeline)
    cutoff = None
    if completed and opts["hoodie.cleaner.policy"] == "KEEP_LATEST_BY_HOURS":
        # measured back from the latest commit, as ArchivalUtils does
        cutoff = _hours_before(completed[-1].timestamp, opts["hoodie.cleaner.hours.retained"])
    ectr = earliest_commit_to_retain(timeline, opts["hoodie.cleaner.policy"],
                                     opts["hoodie.cleaner.commits.retained"],
                                     opts["hoodie.cleaner.hours.retained"], cutoff=cutoff)
    if ectr is not None:
        needed = sum(1 for i in completed if i.timestamp > ectr.timestamp) + 2
        if lo < needed:
            # a warning for a setting below the cleaner's; a pending write or service pinning
            # the cleaner's retention (every commit since it is kept while it runs) is no news
            misset = opts["hoodie.cleaner.policy"] == "KEEP_LATEST_COMMITS" and \
                lo <= opts["hoodie.cleaner.commits.retained"]
            log.log(logging.WARNING if misset else logging.DEBUG,
                    "hoodie.keep.min.commits=%d keeps fewer commits than the cleaner retains; "
                    "using min %d, max %d", lo, needed, needed + hi - lo)
            lo, hi = needed, needed + hi - lo
    return lo, hi


def _last_clean(timeline: Timeline) -> tuple[Instant | None, dict, dict]:
    cleans = sorted((i for i in timeline.completed if i.action == "clean"), key=lambda i: i.timestamp)
    if not cleans:
        return None, {}, {}
    last = cleans[-1]
    try:
        return last, timeline.raw_metadata(last), timeline.plan(last)
    except TimelineError:
        return last, {}, {}


def _earliest_for_compaction(timeline: Timeline, max_delta: int) -> Instant | None:
    """``CompactionUtils.getEarliestInstantToRetainForCompaction``."""
    commits = sorted((i for i in timeline.completed if i.action in ("commit", "replacecommit")),
                     key=lambda i: i.timestamp)
    deltas = sorted((i for i in timeline.instants if i.action == "deltacommit"), key=lambda i: i.timestamp)
    if commits:
        last = commits[-1]
        deltas = [d for d in deltas if d.timestamp > last.timestamp]
        ref = last
    elif deltas:
        ref = deltas[0]
    else:
        return None
    if max_delta > 0 and len(deltas) >= max_delta:
        return deltas[len(deltas) - max_delta]
    return ref


def _earliest_for_clustering(timeline: Timeline, plan: Mapping[str, Any], clean: Instant | None) -> Instant | None:
    """``ClusteringUtils.getEarliestInstantToRetainForClustering``."""
    replaces = sorted((i for i in timeline.instants if i.action in ("replacecommit", "clustering")),
                      key=lambda i: i.timestamp)
    if not replaces:
        return None
    if clean is None:
        return replaces[0]
    ectr = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
    savepoints = [s for s in ((plan.get("extraMetadata") or {}).get("savepointed_timestamps") or "").split(",") if s]
    bound = ectr or clean.timestamp
    if ectr and savepoints and plan.get("policy") != "KEEP_LATEST_FILE_VERSIONS":
        first_sp = min(savepoints)
        if ectr > first_sp and any(first_sp <= r.timestamp <= ectr for r in replaces if r.is_completed):
            bound = first_sp
    return next((r for r in replaces if r.timestamp >= bound), None)


def _metadata_table_bound(timeline: Timeline, completed: list[Instant],
                          options: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """Data table with a metadata table: (blocked, bound). Nothing at or after ``bound`` may go
    (``TimelineArchiverV2`` step 4): the metadata table's log blocks of later instants count
    only while those instants are on the data table's active timeline; with no compaction on
    the metadata table yet, nothing is archived."""
    from ..metadata.init import metadata_storage, metadata_table_exists
    from ..options import option
    from ..metadata.writer import is_metadata_table
    storage, config = timeline.storage, timeline.config
    if is_metadata_table(storage, config) or not config.metadata_partitions \
            or not option(options, "hoodie.metadata.enable") or not metadata_table_exists(storage):
        return False, None
    md = metadata_storage(storage)
    md_timeline = Timeline.load(md, TableConfig.load(md))
    compactions = [i.timestamp for i in md_timeline.completed if i.action == "commit"]
    if not compactions:
        log.info("not archiving %s: its metadata table has no compaction yet", storage.url)
        return True, None
    latest = max(compactions)
    if config.version < 8:
        return False, latest  # Hudi 0.x: only instants requested before it
    after = [i for i in completed if i.completion_time and i.completion_time > latest and i.timestamp != latest]
    return False, min((i.timestamp for i in after), default=None)


def _data_table_bound(data_timeline: Timeline, beyond_savepoint: bool) -> str | None:
    """``TimelineUtils.getEarliestInstantForMetadataArchival``: the metadata table keeps every
    instant from the data table's first commit (first non-savepointed one when archiving beyond
    savepoints) or its first pending instant, whichever is earlier (rollbacks of data instants
    still on the data timeline need their metadata-table deltacommits)."""
    commits = [i for i in data_timeline.instants if i.action in _WRITE_TIMELINE and i.action not in
               ("compaction", "logcompaction")]
    if beyond_savepoint:
        savepointed = {i.timestamp for i in data_timeline.instants if i.action == "savepoint"}
        commits = [i for i in commits if i.timestamp not in savepointed]
    candidates = [commits[0].timestamp] if commits else []
    pending = data_timeline.pending
    if pending:
        candidates.append(pending[0].timestamp)
    return min(candidates, default=None)


def _until_uncompacted(md_timeline: Timeline, chosen: list[Instant]) -> list[Instant]:
    """``chosen`` (metadata-table instants by request time) up to the first deltacommit whose
    log blocks no compaction has folded into a base file yet. A deltacommit requested before
    the latest compaction but completed after it was planned lives in the slice on top of it
    (v8: it completed after the compaction's request time; v6: one of its log files is still
    in the latest slice of its file group)."""
    compactions = [i for i in md_timeline.completed if i.action == "commit"]
    if not compactions:
        return []
    latest = max(i.timestamp for i in compactions)
    bases: dict[str, dict[str, str]] = {}
    for n, inst in enumerate(chosen):
        if inst.timestamp >= latest:
            return chosen[:n]
        if inst.action != "deltacommit":
            continue
        if md_timeline.config.version >= 8:
            if inst.completion_time is None or inst.completion_time > latest:
                return chosen[:n]
        elif _v6_uncompacted(md_timeline, inst, bases):
            return chosen[:n]
    return chosen


def _v6_uncompacted(md_timeline: Timeline, inst: Instant, bases: dict) -> bool:
    """v6 (no completion times): does a log file ``inst`` wrote still sit in the latest slice
    of its file group (no base file newer than the log file's base instant)? ``bases`` caches
    partition -> {file id: latest base instant}."""
    from ..view.file_names import parse_base_file_name, parse_log_file_name
    storage = md_timeline.storage
    try:
        meta = md_timeline.raw_metadata(inst)
    except TimelineError:
        return True   # cannot tell: keep it
    for part, stats in (meta.get("partitionToWriteStats") or {}).items():
        if part not in bases:
            latest: dict[str, str] = {}
            for f in storage.list(part) if storage.exists(part) else ():
                parsed = parse_base_file_name(f.name)
                if parsed is not None and parsed.instant_time > latest.get(parsed.file_id, ""):
                    latest[parsed.file_id] = parsed.instant_time
            bases[part] = latest
        for st in stats or ():
            for name in [st.get("path") or ""] + list(st.get("logFiles") or ()):
                parsed = parse_log_file_name(posixpath.basename(name))
                if parsed is not None and bases[part].get(parsed.file_id, "") <= parsed.instant_time:
                    return True
    return False


def _until_replaced_present(timeline: Timeline, chosen: list[Instant],
                            options: Mapping[str, Any] | None) -> list[Instant]:
    """``chosen`` up to the first replacecommit whose replaced file groups still have files in
    storage or in the metadata table's listing (``ClusteringUtils``' rule that a replacecommit
    goes only once the cleaner deleted what it replaced, checked against the files)."""
    replaces = [(n, i) for n, i in enumerate(chosen) if i.action == "replacecommit"]
    if not replaces:
        return chosen
    from ..view.file_names import parse_base_file_name, parse_log_file_name
    storage = timeline.storage
    listings: dict[str, set[str]] = {}
    mdt_listing = _metadata_listing(timeline, options)

    def file_ids(partition: str) -> set[str]:
        if partition not in listings:
            names = [f.name for f in storage.list(partition) if not f.is_dir] if storage.exists(partition) else []
            names += [posixpath.basename(f.path) for f in mdt_listing.get(partition, ())]
            ids = set()
            for name in names:
                parsed = parse_log_file_name(name) if name.startswith(".") else parse_base_file_name(name)
                if parsed is not None:
                    ids.add(parsed.file_id)
            listings[partition] = ids
        return listings[partition]

    for n, inst in replaces:
        try:
            replaced = timeline.metadata(inst).replaced_file_ids
        except TimelineError:
            return chosen[:n]
        present = [(p, f) for p, f in replaced if f in file_ids(p)]
        if present:
            log.info("not archiving replacecommit %s of %s yet: %d replaced file groups still have "
                     "files (e.g. %s/%s)", inst.timestamp, storage.url, len(present), *present[0])
            return chosen[:n]
    return chosen


def _metadata_listing(timeline: Timeline, options: Mapping[str, Any] | None) -> dict:
    """The metadata table's file listing when readers would use it, else empty."""
    from ..options import option
    from ..metadata.reader import MetadataTable
    from ..errors import HudiError
    config = timeline.config
    if not config.metadata_partitions or not option(options, "hoodie.metadata.enable"):
        return {}
    mt = MetadataTable(timeline.storage, config, timeline)
    try:
        if mt.staleness() is not None:
            return {}
        return mt.files_listing()
    except HudiError:
        return {}   # unreadable: readers list storage instead


def instants_to_archive(timeline: Timeline, options: Mapping[str, Any] | None = None,
                        data_timeline: Timeline | None = None) -> list[Instant]:
    """The instants an archival now would move out of the active timeline, by request time.

    ``data_timeline``: when archiving a metadata table, the active timeline of its data table.
    """
    opts = values(options, OPTION_KEYS)
    lo, hi = min_max_to_keep(timeline, opts)
    completed = completed_commits(timeline)
    if len(completed) <= hi:
        return []
    candidates: list[Instant] = []
    bounds: list[str] = []
    blocked, bound = _metadata_table_bound(timeline, completed, options)
    if blocked:
        return []
    if bound is not None:
        bounds.append(bound)
    if data_timeline is not None:
        bound = _data_table_bound(data_timeline, opts["hoodie.archive.beyond.savepoint"])
        if bound is not None:
            bounds.append(bound)
    pending = sorted((i for i in timeline.pending if i.action in _WRITE_TIMELINE), key=lambda i: i.timestamp)
    if pending:
        before = [i for i in completed if i.timestamp < pending[0].timestamp]
        candidates.append(before[-1] if before else pending[0])
    if timeline.config.is_mor and opts["hoodie.compact.inline.trigger.strategy"] in ("NUM_COMMITS", "NUM_AND_TIME"):
        found = _earliest_for_compaction(timeline, opts["hoodie.compact.inline.max.delta.commits"])
        if found is not None:
            candidates.append(found)
    clean, clean_meta, clean_plan = _last_clean(timeline)
    found = _earliest_for_clustering(timeline, clean_plan, clean)
    if found is not None:
        candidates.append(found)
    ectr = clean_meta.get("earliestCommitToRetain") or ""
    if ectr:
        keep = next((i for i in completed if i.timestamp >= ectr), None)
        candidates.append(keep if keep is not None else completed[-1])
    retain_from = min([c.timestamp for c in candidates] + bounds, default=None)

    savepoints = sorted(i.timestamp for i in timeline.completed if i.action == "savepoint")
    beyond = opts["hoodie.archive.beyond.savepoint"]
    chosen = []
    for inst in completed:
        if beyond:
            if inst.timestamp in savepoints:
                continue
        elif savepoints and inst.timestamp >= savepoints[0]:
            break
        if retain_from is not None and inst.timestamp >= retain_from:
            break
        chosen.append(inst)
    chosen = chosen[:max(len(completed) - lo, 0)]
    if data_timeline is not None:
        chosen = _until_uncompacted(timeline, chosen)
    chosen = _until_replaced_present(timeline, chosen, options)
    if not chosen:
        return []
    newest = chosen[-1].timestamp
    chosen += [i for i in timeline.completed if i.action in ("clean", "rollback") and i.timestamp < newest]
    return sorted(chosen, key=lambda i: (i.timestamp, i.action))


def _delete_active_files(storage: Storage, timeline: Timeline, actions: list[ActiveAction]) -> None:
    from ..writer.markers import delete_markers
    tdir = timeline.timeline_dir
    for a in actions:  # requested and inflight files first: no completed instant loses its plan
        for state in (State.REQUESTED, State.INFLIGHT):
            if state in a.files:
                storage.delete(f"{tdir}/{a.files[state]}")
    for a in actions:  # then completed files, oldest first, so the timeline never has a hole
        if State.COMPLETED in a.files:
            storage.delete(f"{tdir}/{a.files[State.COMPLETED]}")
        try:
            delete_markers(storage, a.timestamp)
        except Exception:  # noqa: BLE001 - markers are debris; never fail archival over them
            log.debug("could not delete markers of %s", a.timestamp)


def archive(storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
            data_timeline: Timeline | None = None, *, snapshot: TableSnapshot | None = None) -> list[Instant]:
    """Archive what the active timeline no longer needs; the archived instants (oldest first).

    ``data_timeline``: when archiving a metadata table, its data table's active timeline.
    ``snapshot``: a metadata table's snapshot, listed under its data table's lock; reused while
    this process changed nothing since it was listed. A data table's timeline is always listed
    here, after passing through the time lock (see below).
    """
    opts = values(options, OPTION_KEYS)
    if data_timeline is None and not is_metadata_storage(storage):
        # every time issued before this pass through the time lock has its instant requested
        # (``Transaction.begin``), and a time issued after it is newer than any instant listed
        # now: nothing archived can be newer than a write still to show on the timeline
        with InstantClock(storage, config).hold():
            pass
        snapshot = None
    timeline = Timeline.current(storage, config, snapshot.timeline if snapshot is not None else None)
    chosen = instants_to_archive(timeline, options, data_timeline)
    if not chosen:
        return []
    actions = [ActiveAction.of(timeline, i) for i in chosen]
    if config.version >= 8:
        writer = LSMTimelineWriter(storage, config, opts["hoodie.timeline.compaction.batch.size"],
                                   opts["hoodie.timeline.compaction.target.file.max.bytes"])
        writer.write(actions, timeline.timeline_dir)
        _delete_active_files(storage, timeline, actions)
        writer.compact_and_clean()
    else:
        write_v6_archive(storage, config, actions, opts["hoodie.commits.archival.batch"])
        _delete_active_files(storage, timeline, actions)
    log.info("archived %d instants of %s", len(chosen), storage.url)
    return chosen


__all__ = ["OPTION_KEYS", "archive", "instants_to_archive", "min_max_to_keep"]
