"""Savepoints and restore.

A savepoint (``<ts>.savepoint``, HoodieSavepointMetadata) pins the files of the table as of a
completed commit, so cleaning keeps them; ``restore`` brings the table back to a savepoint by
rolling back, newest first, every instant after it, under one ``restore`` instant
(HoodieRestorePlan, HoodieRestoreMetadata) as Apache Hudi does. The execution, resumable at
every step, is in ``rollback`` (a write's recovery finishes a killed restore too).
"""

from __future__ import annotations

import getpass
import posixpath
import time
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from ..read.snapshot import ReadState
from ..storage import Storage
from ..timeline import Instant, State, Timeline
from ..transaction import Transaction
from ..view import FileSystemView
from .rollback import restore_plan, resume_pending_restores, run_restore

def savepoint(storage: Storage, config: TableConfig, instant: str, user: str | None = None,
              comment: str = "") -> Instant:
    """Savepoint the completed write ``instant`` (its timestamp names the savepoint)."""
    timeline = Timeline.load(storage, config)
    target = next((i for i in timeline.write_instants() if i.timestamp == str(instant)), None)
    if target is None:
        raise InvalidOptionError(f"{instant} is not a completed commit of {storage.url}; "
                                 f"only completed commits can be savepointed")
    if any(i.action == "savepoint" and i.timestamp == target.timestamp for i in timeline.instants):
        raise InvalidOptionError(f"{instant} is already savepointed")
    state = ReadState(config, timeline, target.completion_time if config.version >= 8 else target.timestamp)
    partitions: dict[str, dict] = {}
    for s in state.file_slices(FileSystemView(storage, config)):
        files = ([posixpath.basename(s.base_file)] if s.base_file else []) + \
            [posixpath.basename(f) for f in s.log_files]
        entry = partitions.setdefault(s.partition_path, {"partitionPath": s.partition_path, "savepointDataFile": []})
        entry["savepointDataFile"].extend(files)
    metadata = {"savepointedBy": user or _user(), "savepointedAt": int(time.time()),
                "comments": comment, "partitionMetadata": partitions, "version": 1}
    with Transaction.begin(storage, config, "savepoint", instant_time=target.timestamp) as txn:
        return txn.commit(metadata)


def delete_savepoint(storage: Storage, config: TableConfig, instant: str) -> None:
    timeline = Timeline.load(storage, config)
    sp = next((i for i in timeline.instants if i.action == "savepoint" and i.timestamp == str(instant)), None)
    if sp is None:
        raise InvalidOptionError(f"no savepoint {instant}")
    for name in timeline.files_of(sp).values():
        storage.delete(f"{timeline.timeline_dir}/{name}")


def restore(storage: Storage, config: TableConfig, instant: str,
            options: Mapping[str, Any] | None = None) -> Instant:
    """Roll the table back to the savepoint ``instant``.

    A restore that a killed process left pending is finished first, from its plan and under its
    own instant (as Hudi does); if it was to this savepoint, that is the restore returned."""
    timeline = Timeline.load(storage, config)
    if not any(i.action == "savepoint" and i.timestamp == str(instant) and i.state is State.COMPLETED
               for i in timeline.instants):
        raise InvalidOptionError(f"{instant} is not a savepoint; restore needs one (savepoint it first)")
    pending = {i.timestamp: timeline.plan(i) for i in timeline.pending if i.action == "restore"}
    resumed = resume_pending_restores(storage, config, options) if pending else []
    for done in resumed:
        if (pending.get(done.timestamp) or {}).get("savepointToRestoreTimestamp") == str(instant):
            return done
    plan = restore_plan(Timeline.load(storage, config) if resumed else timeline, str(instant))
    with Transaction.begin(storage, config, "restore", options, plan=plan, undo_on_abort=False) as txn:
        return run_restore(storage, config, txn, plan)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001
        return "hudi_format"
