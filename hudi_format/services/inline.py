"""Table services that run inline after a write, in Hudi's order: compaction and clustering
when enabled, then cleaning and archival (on by default, as in Hudi).

They run after the write's commit is durable, so none of them may fail the write: a failure is
logged and returned, and the caller reports it on the write's result (``service_errors``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from ..config import TableConfig
from ..options import option
from ..storage import Storage
from ..timeline import Timeline
from ..transaction.snapshot import TableSnapshot

log = logging.getLogger(__name__)


def check_inline_options(opts: Mapping[str, Any], is_mor: bool) -> None:
    """Before a write: the options its commit's lock and its inline services read, so a value
    that cannot work fails the write before anything is written, not after its commit (where a
    service's failure is only logged and the service never runs)."""
    from ..transaction.locks import lock_provider_class
    from . import clustering, common

    lock_provider_class(opts)
    if is_mor and (option(opts, "hoodie.compact.inline") or option(opts, "hoodie.compact.schedule.inline")):
        common.compaction_strategy(opts)
    if option(opts, "hoodie.clustering.inline") or option(opts, "hoodie.clustering.schedule.inline"):
        clustering.check_options(opts)


def run_inline_services(storage: Storage, config: TableConfig, opts: Mapping[str, Any],
                        timeline: Timeline | None = None, *,
                        snapshot: "TableSnapshot | Timeline | None" = None) -> tuple[Exception, ...]:
    """Run the enabled inline services; return the errors of those that failed.

    ``snapshot`` (or its ``timeline``): the table as the write's commit left it (load once).
    Compaction, log compaction and clustering run on it and hand the table they leave to the
    next step; cleaning and archival start from that while this process changed nothing since
    (``Timeline.current``), and end without a lock or a listing when it shows they have
    nothing to do (another process's later commit runs them after itself); what they
    decide under the table lock they still decide on a fresh listing."""
    from . import archival, cleaning, clustering, compaction, log_compaction

    if isinstance(snapshot, Timeline):
        timeline, snapshot = snapshot, None
    if snapshot is None and timeline is not None:
        snapshot = TableSnapshot(storage, config, timeline)
    state: dict[str, TableSnapshot | None] = {"snapshot": snapshot}

    def service(run: Callable[[TableSnapshot], tuple[Any, TableSnapshot]]) -> Callable[[], Any]:
        def step() -> Any:
            start = state["snapshot"] or TableSnapshot.load(storage, config)
            state["snapshot"] = None   # if the service fails, the next step lists again
            done, state["snapshot"] = run(start)
            return done
        return step

    def latest() -> Timeline | None:
        snap = state["snapshot"]
        return snap.timeline if snap is not None else None

    steps: list[tuple[str, Callable[[], Any]]] = []
    if config.is_mor and option(opts, "hoodie.compact.inline"):
        steps.append(("compaction", service(lambda s: compaction.compact_on(s, opts))))
    elif config.is_mor and option(opts, "hoodie.compact.schedule.inline"):
        steps.append(("compaction scheduling", lambda: _scheduled(storage, opts, lambda: compaction.schedule_compaction(storage, config, opts))))
    if config.is_mor and option(opts, "hoodie.log.compaction.inline"):
        steps.append(("log compaction", service(lambda s: log_compaction.log_compact_on(s, opts))))
    if option(opts, "hoodie.clustering.inline"):
        steps.append(("clustering", service(lambda s: clustering.cluster_on(s, None, opts))))
    elif option(opts, "hoodie.clustering.schedule.inline"):
        steps.append(("clustering scheduling", lambda: _scheduled(storage, opts, lambda: clustering.schedule_clustering(storage, config, options=opts))))
    archived: list[bool] = []   # archival already ran (or was found idle) before its own step

    def archive() -> Any:
        archived.append(True)
        return archival.archive(storage, config, opts)

    def archive_when_idle(listing: Timeline) -> None:
        # same lock hold as the clean that found nothing to plan (archival lists the timeline
        # again, after passing the time lock); a failure is archival's, reported as such
        try:
            archive()
        except Exception as exc:  # noqa: BLE001 - reported below, never raised
            idle_errors.append(("archival", exc))

    idle_errors: list[tuple[str, Exception]] = []
    archiving = bool(option(opts, "hoodie.archive.automatic"))

    def archiving_needed() -> bool:
        # as of the table the services before left: nothing to archive -> no lock, no listing
        tl = latest()
        if archiving and tl is not None and _nothing_to_archive(tl, opts):
            archived.append(True)
        return archiving and not archived

    if option(opts, "hoodie.clean.automatic"):
        steps.append(("clean", lambda: cleaning.clean(storage, config, opts, snapshot=state["snapshot"],
                                                      when_idle=archive_when_idle if archiving_needed() else None)))
    if archiving:
        # one archiver at a time: under the table lock, as Hudi's archiver takes it
        steps.append(("archival", lambda: None if not archiving_needed() else _scheduled(storage, opts, archive)))

    errors: list[Exception] = []
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the write is committed; report, do not raise
            log.warning("inline %s of %s failed after the commit was durable: %r", name, storage.url, exc,
                        exc_info=True)
            errors.append(exc)
        for what, exc in idle_errors:
            log.warning("inline %s of %s failed after the commit was durable: %r", what, storage.url, exc,
                        exc_info=exc)
            errors.append(exc)
        idle_errors.clear()
    return tuple(errors)


def _nothing_to_archive(timeline: Timeline, opts: Mapping[str, Any]) -> bool:
    """As of the commit's own view, archival would choose no instant."""
    from .archival import instants_to_archive
    try:
        return not instants_to_archive(timeline, opts)
    except Exception:  # noqa: BLE001 - undecided: let archival decide under its lock
        return False


def _scheduled(storage: Storage, opts: Mapping[str, Any], schedule: Callable[[], Any]) -> Any:
    """Run ``schedule`` under the table lock (as ``run_pending_then_new`` schedules)."""
    from ..transaction import table_lock
    with table_lock(storage, opts):
        return schedule()
