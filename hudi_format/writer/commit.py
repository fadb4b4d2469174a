"""Committing a planned write: its buckets' stats as one instant, or undoing it.

The driver's last step of :mod:`.job`'s flow: files of attempts no result reports are removed,
then one :class:`~hudi_format.transaction.Transaction` commit (lock, conflict check, metadata
table, completed instant), handing the metadata table the record index changes the write
handles reported, so the written files are not read back for them.
"""

from __future__ import annotations

import logging
import posixpath
from collections import defaultdict
from typing import Iterable, Mapping

from ..errors import ConcurrentWriteError, HudiError, InvalidOptionError
from ..metadata.key_changes import KeyChanges
from ..metadata.record_index_update import RecordIndexUpdate
from ..read.concurrent_deletions import ConcurrentDeletions
from ..storage import Storage
from ..timeline import Instant, Timeline, commit_metadata
from ..transaction import Transaction, check_write_conflicts, new_file_groups, started_with, touched_file_groups
from ..transaction.markers import read_markers, written_by
from ..transaction.snapshot import TableSnapshot
from ..view.file_names import parse_log_file_name
from .job import OPERATION_TYPES, BucketResult, WriteJob, abort_write, compact_json
from .planning import REPLACE_OPS

log = logging.getLogger(__name__)

__all__ = ["abort_write", "after_commit", "check_listing_whole", "commit_write"]


# -- commit / abort ------------------------------------------------------------------------------
def commit_write(job: WriteJob, results: Iterable[BucketResult], *, discard_unreported: bool = True,
                 extra_metadata: Mapping[str, str] | None = None,
                 record_index: RecordIndexUpdate | None = None) -> Instant:
    """Commit the buckets' stats as one instant. ``discard_unreported``: first delete files
    the markers name but no result reports (task attempts an engine retried or discarded), as
    Hudi's finalize-write does. ``extra_metadata``: string entries added to the commit's
    ``extraMetadata`` (e.g. a streaming sink's checkpoint), beside the writer schema.
    ``record_index``: an engine's writer of the record index changes (else the results')."""
    extra = _extra_metadata(extra_metadata)
    if job.txn is None:
        raise HudiError("this write has no open instant: plan_write() opens it")
    by_index: dict[int, BucketResult] = {}
    for r in results:
        if r.index in by_index:
            raise HudiError(f"bucket {r.index} of {job.instant_time} was reported twice; "
                            "report one attempt per bucket")
        by_index[r.index] = r
    stats = [by_index[i].stat for i in sorted(by_index)]
    written: set[str] = {f for r in by_index.values() for f in r.files}
    job.txn.written.extend(sorted(written - set(job.txn.written)))
    if discard_unreported:
        listed = read_markers(job.storage, job.txn.instant_time)
        job.txn.marked.extend(path for path, _ in listed)   # their markers go at the commit
        for path, _ in listed:
            # only our own: a marker whose create lost the race names another writer's file
            if path not in written and job.storage.exists(path) and \
                    written_by(job.storage, path, job.txn.instant_time):
                log.info("removing %s, written by a discarded attempt of %s", path, job.txn.instant_time)
                job.storage.delete(path)
    metadata = commit_metadata(stats, operation_type=OPERATION_TYPES[job.operation],
                               extra_metadata={**extra, "schema": compact_json(job.data_avro)},
                               replaced_file_ids=job.plan.replaced if job.operation in REPLACE_OPS else None)
    txn = job.txn
    mine = touched_file_groups(metadata["partitionToWriteStats"], metadata.get("partitionToReplaceFileIds"))
    new_groups = new_file_groups(metadata["partitionToWriteStats"])
    seen = started_with(job.state.timeline if job.state is not None else None)
    v6_logs: dict[tuple[str, str], list[str]] = defaultdict(list)
    if job.config.version < 8:
        for st in stats:
            if st.path and parse_log_file_name(posixpath.basename(st.path)) is not None:
                v6_logs[(st.partition_path or "", st.file_id or "")].append(posixpath.basename(st.path))
    try:
        # the conflict check under the table lock makes exactly one of two overlapping writers commit
        def conflicts(now: Timeline) -> None:
            check_write_conflicts(now, txn.instant_time, seen, mine, new_groups, v6_logs, job.config.version >= 8)
            check_listing_whole(job, now)
        job.done = txn.commit(metadata, conflicts, started=seen.seen if job.state is not None else None,
                              record_keys=record_index if record_index is not None else _record_keys(by_index.values()))
    except BaseException:
        abort_write(job)
        raise
    job.config = txn.config
    job.committed = after_commit(job.storage, txn, job.snapshot)
    return job.done


def _record_keys(results: Iterable[BucketResult]) -> dict[str, KeyChanges] | None:
    """The key changes the buckets reported, by the path of their write stat (``None``: none
    reported; the commit reads the files back)."""
    out = {r.stat.path: r.keys for r in results if r.keys is not None and r.stat.path}
    return out or None


def check_listing_whole(job: WriteJob, now: Timeline) -> None:
    """``ConcurrentWriteError`` when the files the write listed lack what its snapshot holds
    (:mod:`..read.concurrent_deletions`): the timeline was loaded, then another process's
    clean removed file groups a clustering replaced meanwhile, then the write listed their
    partition -- which held neither the old groups nor the new, so their keys looked absent (a
    delete did nothing, an upsert wrote second copies). Decided on ``now``, the timeline the
    commit loaded under its lock: no listing of its own."""
    state = job.state
    if state is None:
        return
    listed = job.view.listed_partitions()
    if listed == []:
        return
    wanted = None if listed is None else set(listed)
    why = ConcurrentDeletions(job.storage, job.config, state.timeline).torn(
        state, lambda: job.planner.latest_slices(state, job.view, wanted),
        None if wanted is None else wanted.__contains__, now)
    if why is not None:
        raise ConcurrentWriteError(f"{job.storage.url}: {why}, so this write's listing missed records; "
                                   "retry the write")


def after_commit(storage: Storage, txn: Transaction, before: TableSnapshot | None) -> TableSnapshot:
    """The table as ``txn``'s commit left it, for what runs next in this operation (inline
    services): the timeline the commit listed under its lock, advanced by the completed
    instant; without one (a single writer), the snapshot planned against, advanced (which
    ``TableSnapshot.current`` lists again, since this process wrote more than that file)."""
    assert txn.done is not None
    if txn.timeline is not None:
        return TableSnapshot(storage, txn.config, txn.timeline)
    if before is not None:
        return before.advanced(txn.done, config=txn.config)
    return TableSnapshot(storage, txn.config)


def _extra_metadata(extra: Mapping[str, str] | None) -> dict[str, str]:
    """Checked extra metadata: Hudi keeps it as a map of strings; ``schema`` is the writer's."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise InvalidOptionError(f"extra_metadata must map strings to strings, got {extra!r}")
    if "schema" in extra:
        raise InvalidOptionError("extra_metadata may not set 'schema': the commit records the writer schema there")
    return dict(extra)
