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

log = logging.getLogger(__name__)


def run_inline_services(storage: Storage, config: TableConfig, opts: Mapping[str, Any]) -> tuple[Exception, ...]:
    """Run the enabled inline services; return the errors of those that failed."""
    from . import archival, cleaning, clustering, compaction, log_compaction

    steps: list[tuple[str, Callable[[], Any]]] = []
    if config.is_mor and option(opts, "hoodie.compact.inline"):
        steps.append(("compaction", lambda: compaction.compact(storage, config, opts)))
    elif config.is_mor and option(opts, "hoodie.compact.schedule.inline"):
        steps.append(("compaction scheduling", lambda: _scheduled(storage, opts, lambda: compaction.schedule_compaction(storage, config, opts))))
    if config.is_mor and option(opts, "hoodie.log.compaction.inline"):
        steps.append(("log compaction", lambda: log_compaction.log_compact(storage, config, opts)))
    if option(opts, "hoodie.clustering.inline"):
        steps.append(("clustering", lambda: clustering.cluster(storage, config, options=opts)))
    elif option(opts, "hoodie.clustering.schedule.inline"):
        steps.append(("clustering scheduling", lambda: _scheduled(storage, opts, lambda: clustering.schedule_clustering(storage, config, options=opts))))
    if option(opts, "hoodie.clean.automatic"):
        steps.append(("clean", lambda: cleaning.clean(storage, config, opts)))
    if option(opts, "hoodie.archive.automatic"):
        # one archiver at a time: under the table lock, as Hudi's archiver takes it
        steps.append(("archival", lambda: _scheduled(storage, opts, lambda: archival.archive(storage, config, opts))))

    errors: list[Exception] = []
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the write is committed; report, do not raise
            log.warning("inline %s of %s failed after the commit was durable: %r", name, storage.url, exc,
                        exc_info=True)
            errors.append(exc)
    return tuple(errors)


def _scheduled(storage: Storage, opts: Mapping[str, Any], schedule: Callable[[], Any]) -> Any:
    """Run ``schedule`` under the table lock (as ``run_pending_then_new`` schedules)."""
    from ..transaction import table_lock
    with table_lock(storage, opts):
        return schedule()
