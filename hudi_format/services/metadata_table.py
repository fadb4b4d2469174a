"""The metadata table's own table services: cleaning, compaction and archival of
``.hoodie/metadata``, and the execution of its rollback plans.

The metadata table is a Hudi table, serviced as Hudi's metadata writer services it
(``performTableServices``, before each new metadata deltacommit, under the data table's lock):
cleaning with ``KEEP_LATEST_COMMITS`` and ``max(20, 1.2 * hoodie.cleaner.commits.retained)``
commits retained (``HoodieMetadataWriteUtils.createMetadataWriteConfig``), then its compaction
when due (:mod:`hudi_format.metadata.compaction`), then archival with the data table's
``hoodie.keep.min/max.commits`` + 1 (``archiveCommitsWith(min + 1, max + 1)``) that never passes a
deltacommit the latest compaction did not fold into a base file.

Cleaning, archival and rollback are this layer's services, run on the metadata table; the
metadata writer below gets them as a :class:`~hudi_format.metadata.writer.MetadataTableServices`,
which ``hudi_format.services`` installs in the transaction layer's metadata hook.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from ..config import TableConfig
from ..metadata import keys as K
from ..metadata.compaction import CLEAN_SUFFIX
from ..metadata.options import DEFAULT_METADATA_CLEANER_COMMITS_RETAINED
from ..metadata.writer import MetadataWriter
from ..options import option
from ..storage import Storage
from ..timeline import Instant
from ..transaction.snapshot import TableSnapshot
from .archival import archive
from .cleaning import clean
from .rollback import execute_plan

log = logging.getLogger(__name__)

__all__ = ["MetadataTableServiceRunner", "clean_metadata_table", "archive_metadata_table",
           "run_metadata_table_services"]


def clean_metadata_table(w: MetadataWriter) -> Instant | None:
    """Clean the metadata table of ``w`` (``KEEP_LATEST_COMMITS``) when there is anything to clean."""
    retained = option(w.options, "hoodie.metadata.cleaner.commits.retained")
    if retained is None:
        data_retained = int(option(w.options, "hoodie.cleaner.commits.retained"))
        retained = max(DEFAULT_METADATA_CLEANER_COMMITS_RETAINED, int(data_retained * 1.2))
    # under the data table's lock: the MDT timeline the writer listed is current for everyone
    return clean(w.md, w.md_config, {"hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
                                     "hoodie.cleaner.commits.retained": int(retained)},
                 snapshot=_snapshot(w), locked=True, instant_time=lambda now: w.service_instant_time(now, CLEAN_SUFFIX))


def archive_metadata_table(w: MetadataWriter) -> list[Instant]:
    """Archive the metadata timeline of ``w`` as Hudi does (``archiveCommitsWith(min + 1, max + 1)``
    of the data table's ``hoodie.keep.min/max.commits``); only instants before its latest
    compaction go, whose records live in base files."""
    md_tl = w.md_timeline()
    if not w.compaction_instants(md_tl):
        return []
    lo = int(option(w.options, "hoodie.keep.min.commits")) + 1
    hi = int(option(w.options, "hoodie.keep.max.commits")) + 1
    return archive(w.md, w.md_config, {
        "hoodie.keep.min.commits": lo, "hoodie.keep.max.commits": hi,
        "hoodie.cleaner.commits.retained": max(1, lo - 1),
        "hoodie.compact.inline.max.delta.commits":
            int(option(w.options, "hoodie.metadata.compact.max.delta.commits"))},
        data_timeline=w.data_timeline(), snapshot=TableSnapshot(w.md, w.md_config, md_tl))


def _snapshot(w: MetadataWriter) -> TableSnapshot:
    """The metadata table as its writer listed it (under the data table's lock)."""
    return TableSnapshot(w.md, w.md_config, w.md_timeline())


def run_metadata_table_services(w: MetadataWriter) -> None:
    """Cleaning, then compaction when due, then archival of the metadata table of ``w``, before a
    new deltacommit: the deltacommit about to be written is never in the compaction, so rolling
    back the latest data commit only ever undoes a deltacommit. A failure is logged, never
    raised (the data commit goes on)."""
    if not w.exists() or K.FILES not in w.config.metadata_partitions:
        return
    try:
        clean_metadata_table(w)
        w.compact_if_due()
        archive_metadata_table(w)
    except Exception as exc:  # noqa: BLE001
        log.warning("metadata table services of %s failed: %s", w.storage.url, exc)


class MetadataTableServiceRunner:
    """This layer's services for the metadata writer (a
    :class:`~hudi_format.metadata.writer.MetadataTableServices`)."""

    def run(self, writer: MetadataWriter) -> None:
        run_metadata_table_services(writer)

    def execute_rollback_plan(self, storage: Storage, config: TableConfig, plan: Mapping[str, Any],
                              rollback_time: str) -> dict:
        return execute_plan(storage, config, plan, rollback_time)
