"""The metadata table's part of each data-table commit: the hook the transaction layer calls.

Apache Hudi writes, for every data-table instant that changes files, a metadata-table
deltacommit with the *same instant time*, completed before the data instant completes; readers
only trust metadata blocks whose instant is completed on the data timeline. A data instant that
failed after its deltacommit has that deltacommit rolled back (:meth:`MetadataTableHook.abort`),
and a retried one rolls back the stale deltacommit before applying it again
(:meth:`MetadataWriter.commit`). The metadata table's own table services reach the writer
through the hook (:class:`MetadataTableHook`'s ``services``), given by the services layer.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import HudiError
from ..storage import Storage
from ..timeline import Instant
from ..timeline.clock import InstantClock
from ..timeline.metadata import deleted_files
from ..timeline.writer import TimelineWriter
from . import init as I
from . import keys as K
from .key_changes import KeyChanges
from .record_index_update import RecordIndexUpdate
from .options import _WRITE_ACTIONS
from .writer import DataTableSnapshot, MetadataTableServices, MetadataWriter, is_metadata_table, metadata_enabled

log = logging.getLogger(__name__)


def _rollback_plan_logs(w: "MetadataWriter", rollback_ts: str) -> dict[str, dict[str, int]]:
    """Log files of the rolled-back commit that a (v6) data rollback leaves in place."""
    out: dict[str, dict[str, int]] = {}
    try:
        tl = w.data_timeline()
        inst = next(i for i in tl.instants if i.timestamp == rollback_ts and i.action == "rollback")
        plan = tl.plan(inst)
    except (StopIteration, HudiError):
        return out
    for req in plan.get("RollbackRequests") or ():
        logs = req.get("logBlocksToBeDeleted") or {}
        if isinstance(logs, list):
            logs = dict(logs)
        for path, size in logs.items():
            if w.storage.exists(path):
                out.setdefault(req.get("partitionPath") or "", {})[posixpath.basename(path)] = \
                    w.storage.size(path)
    return out


def _rollback_log_files(metadata: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Log files a (v6) data rollback wrote its command blocks into, by partition."""
    out = {}
    for part, pm in (metadata.get("partitionMetadata") or {}).items():
        logs = pm.get("rollbackLogFiles") or {}
        if isinstance(logs, list):
            logs = dict(logs)
        if logs:
            out[part] = {posixpath.basename(p): int(z or 0) for p, z in logs.items()}
    return out


def before_complete(storage: Storage, config: TableConfig, inflight: Instant, metadata: Any,
                    options: Mapping[str, Any] | None = None, clock: InstantClock | None = None,
                    services: MetadataTableServices | None = None,
                    snapshot: DataTableSnapshot | None = None,
                    record_keys: Mapping[str, KeyChanges] | RecordIndexUpdate | None = None) -> TableConfig:
    """Bring the metadata table along with the data instant ``inflight`` that is about to
    complete with ``metadata``; call right before the data instant's completed file is
    written (under the table lock). ``services`` are the metadata table's own table services.
    Returns the data table's config (its metadata partitions may have changed). ``snapshot``:
    the data table as listed under this lock, when the caller has it (not listed again).
    ``record_keys``: the record index changes of written files (by write stat path), as the
    write handles reported them (those files are not read back), or an engine's
    :class:`.record_index_update.RecordIndexUpdate` that writes them into the index itself."""
    if is_metadata_table(storage, config):
        return config
    if not metadata_enabled(storage, config, options):
        if I.metadata_table_exists(storage) or config.metadata_partitions:
            log.info("metadata table disabled for %s: deleting it", storage.url)
            return I.delete_metadata_table(storage, config)
        return config
    dropped = I.disabled_partitions(options, config)
    if dropped:
        log.info("metadata partitions %s of %s are disabled by this writer: dropping them", dropped, storage.url)
        config = I.drop_partitions(storage, config, dropped)
    action = inflight.action
    if action not in _WRITE_ACTIONS and action not in ("clean", "rollback", "restore"):
        return config   # savepoints change no files
    w = MetadataWriter(storage, config, options, clock, inflight.timestamp, services, snapshot=snapshot)
    meta = getattr(metadata, "raw", metadata) or {}
    if action == "restore":
        if w.exists() or config.metadata_partitions:
            w.drop()
        return w.config
    if not w.ensure():
        return w.config
    ts = inflight.timestamp
    if action in _WRITE_ACTIONS:
        w.run_table_services()
        deltas = w.commit_deltas(ts, meta, record_keys)
        held = record_keys is not None and not isinstance(record_keys, Mapping) and K.RECORD_INDEX in deltas
        w.commit(ts, deltas, update=record_keys if held else None)   # type: ignore[arg-type]
    elif action == "clean":
        w.run_table_services()
        w.commit(ts, w.clean_deltas(ts, meta))
    elif action == "rollback":
        targets = meta.get("commitsRollback") or []
        if targets:
            added = _rollback_log_files(meta)
            # v6: the rolled-back commit's own log files stay (a command block undoes them);
            # Hudi keeps them listed (logFilesFromFailedCommit) until the cleaner takes them
            for part, logs in _rollback_plan_logs(w, ts).items():
                added.setdefault(part, {}).update(logs)
            w.rollback(str(targets[0]), ts, deleted_files(meta), added)
    return w.config


def abort(storage: Storage, config: TableConfig, instant: str, options: Mapping[str, Any] | None = None,
          clock: InstantClock | None = None, services: MetadataTableServices | None = None) -> None:
    """The data instant ``instant`` failed after its MDT deltacommit: roll that back."""
    if is_metadata_table(storage, config) or not I.metadata_table_exists(storage):
        return
    try:
        cfg = TableConfig.load(storage)
        w = MetadataWriter(storage, cfg, options, clock, services=services)
        md_tl = w.md_timeline()
        same = [i for i in md_tl.instants if i.timestamp == instant and i.action == "deltacommit"]
        if not same:
            return
        target = same[0]
        if not target.is_completed:
            w._rollback_files(target)
            TimelineWriter(w.md, w.md_config).delete_instant_files(target)
            return
        w.rollback(instant, w.clock.new_instant_time(), {})
    except Exception as exc:  # noqa: BLE001
        log.warning("could not undo metadata instant %s of %s: %s (readers ignore it while the "
                    "data instant is not completed)", instant, storage.url, exc)


class MetadataTableHook:
    """The default :class:`hudi_format.transaction.MetadataHook`: this package's metadata table,
    with ``services`` its own table services (:class:`.writer.MetadataTableServices`)."""

    def __init__(self, services: MetadataTableServices | None = None):
        self.services = services

    def before_complete(self, storage: Storage, config: TableConfig, inflight: Instant, metadata: Any,
                        options: Mapping[str, Any], clock: InstantClock,
                        snapshot: DataTableSnapshot | None = None,
                        record_keys: Mapping[str, KeyChanges] | RecordIndexUpdate | None = None) -> TableConfig:
        return before_complete(storage, config, inflight, metadata, options, clock, self.services, snapshot,
                               record_keys)

    def abort(self, storage: Storage, config: TableConfig, instant: str, options: Mapping[str, Any],
              clock: InstantClock) -> None:
        abort(storage, config, instant, options, clock, self.services)
