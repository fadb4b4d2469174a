"""Rolling back metadata-table instants: the metadata side of a data rollback, and the
undoing of a deltacommit whose data instant failed (Hudi's ``HoodieTableMetadataUtil``
``processRollbackMetadata`` and the metadata writer's rollback of a re-attempted instant)."""

from __future__ import annotations

import logging
import posixpath
from collections import defaultdict
from typing import Any, Mapping

from ..errors import HudiError
from ..log import read_log_file
from ..timeline import Instant, State, Timeline
from ..timeline.writer import TimelineWriter
from ..view.file_names import parse_base_file_name, parse_log_file_name
from . import keys as K
from .init import is_init_instant
from . import payloads as P

log = logging.getLogger(__name__)

__all__ = ["MetadataRollback"]


class MetadataRollback:
    """Mixin of :class:`~hudi_format.metadata.writer.MetadataWriter`: rollbacks."""

    def _files_written_by(self, target: Instant) -> list[str]:
        """MDT files an MDT instant wrote: its commit metadata, else names carrying it (v8) or
        log blocks of it (v6)."""
        out: list[str] = []
        if target.is_completed and target.action in ("deltacommit", "commit"):
            try:
                meta = self.md_timeline().raw_metadata(target)
                for part, stats in (meta.get("partitionToWriteStats") or {}).items():
                    for st in stats or ():
                        for name in [posixpath.basename(st.get("path") or "")] + list(st.get("logFiles") or ()):
                            if name:
                                rel = posixpath.join(part, name)
                                if rel not in out:
                                    out.append(rel)
                return out
            except HudiError:
                pass
        for f in self.md.walk_files("", skip_dirs=(".hoodie",)):
            name = posixpath.basename(f.path)
            bf = parse_base_file_name(name)
            if bf is not None and bf.instant_time == target.timestamp:
                out.append(f.path)
                continue
            lf = parse_log_file_name(name)
            if lf is None:
                continue
            if self.md_config.version >= 8:
                if lf.instant_time == target.timestamp:
                    out.append(f.path)
            elif any(b.instant_time == target.timestamp for b in read_log_file(self.md, f.path)):
                out.append(f.path)
        return out

    @staticmethod
    def _initializations(md_tl: Timeline) -> list[Instant]:
        """The completed deltacommits that bootstrapped metadata partitions."""
        return [i for i in md_tl.instants
                if i.is_completed and i.action == "deltacommit" and is_init_instant(i.timestamp)]

    def _rollback_files(self, target: Instant) -> list[str]:
        deleted = []
        for rel in self._files_written_by(target):
            if self.md.exists(rel):
                self.md.delete(rel)
                deleted.append(rel)
        return deleted

    def rollback(self, target_ts: str, rollback_ts: str, deleted_data_files: Mapping[str, list[str]],
                 added_log_files: Mapping[str, Mapping[str, int]] | None = None) -> None:
        """Apply a data rollback (at ``rollback_ts``) of ``target_ts`` to the MDT.

        The MDT deltacommit of the target (if any) is rolled back by an MDT rollback instant at
        ``rollback_ts``. Files the data rollback touched are recorded by a deltacommit at
        ``rollback_ts`` instead when nothing of the target reached the MDT, or -- v6, whose
        rollbacks append command blocks in new log files -- before the MDT rollback, which then
        takes ``rollback_ts + "006"`` (as Hudi's v6 writer does).
        """
        md_tl = self.md_timeline()
        targets = [i for i in md_tl.instants if i.timestamp == target_ts and i.action == "deltacommit"]
        done = {i.timestamp for i in md_tl.instants if i.is_completed}
        added = {p: dict(f) for p, f in (added_log_files or {}).items() if f}
        if rollback_ts in done and not targets:
            return   # applied already (a resumed data rollback)
        # A resumed data rollback: its MDT rollback (same time, or +"006" on v6) is finished
        # or taken over from its plan, never started again (Hudi reuses a pending rollback).
        mine = [i for i in md_tl.instants if i.action == "rollback"
                and i.timestamp in (rollback_ts, rollback_ts + "006")]
        if mine and self._resume_rollback(md_tl, mine[0], targets[0] if targets else None):
            return

        def files_deltacommit() -> None:
            files = [(p, posixpath.basename(f)) for p, fs in deleted_data_files.items() for f in fs]
            parts = set(deleted_data_files) | set(added)
            recs = [P.files_record(p, {posixpath.basename(n): z for n, z in added.get(p, {}).items()},
                                   [n for q, n in files if q == p]) for p in parts]
            deltas = {K.FILES: P.records_delta(recs)}
            deltas.update(self._tombstones(files, rollback_ts))
            self.commit(rollback_ts, deltas)

        inits = self._initializations(md_tl)
        if not targets:
            last_init = max((i.completion_time or i.timestamp for i in inits), default=None)
            if last_init is not None and target_ts < last_init:
                # the target completed before a metadata partition was bootstrapped (a bootstrap
                # waits for pending writes): its records are in that partition's base files
                # (record index entries a delete_partition removed, say), which no deltacommit
                # of it can undo
                log.warning("data rollback of %s undoes a commit the metadata table of %s was "
                            "bootstrapped with; dropping it (the next write bootstraps it again)",
                            target_ts, self.storage.url)
                self.drop()
                return
            # nothing of the target reached the MDT: record what the rollback changed, so that
            # the data rollback has its deltacommit
            files_deltacommit()
            return
        # v6: log files the data rollback deleted outright (those of the slices the target
        # started, which later, since undone, writes left) were listed by other deltacommits
        # than the target's: only a deltacommit of the deletion unlists them
        record = bool(added) or (self.config.version < 8 and any(
            ".log." in n for fs in deleted_data_files.values() for n in fs))
        if record and rollback_ts not in done:
            files_deltacommit()
        if record:
            rollback_ts = rollback_ts + "006"
        target = targets[0]
        # a partition bootstrapped after the target holds it in its base files, as a compaction does
        compactions = self.compaction_instants(md_tl) + [i for i in inits if i.timestamp != target.timestamp]
        if target.is_completed and compactions:
            last = max(compactions, key=lambda i: i.completion_time or i.timestamp)
            if (target.completion_time or target.timestamp) <= (last.completion_time or last.timestamp):
                log.warning("data rollback of %s reaches behind the metadata table's compaction %s; "
                            "dropping the metadata table of %s", target_ts, last.timestamp, self.storage.url)
                self.drop()
                return
        writer = self._md_writer()
        plan = {"instantToRollback": {"commitTime": target.timestamp, "action": target.action},
                "RollbackRequests": [], "version": 1}
        files = self._files_written_by(target)
        by_group: dict[tuple[str, str], list[str]] = defaultdict(list)
        for rel in files:
            part, name = posixpath.split(rel)
            parsed = parse_base_file_name(name) or parse_log_file_name(name)
            by_group[(part, parsed.file_id if parsed else "")].append(rel)
        plan["RollbackRequests"] = [{"partitionPath": p, "fileId": f, "latestBaseInstant": None,
                                     "filesToBeDeleted": paths, "logBlocksToBeDeleted": None}
                                    for (p, f), paths in sorted(by_group.items())]
        requested = writer.create_requested("rollback", rollback_ts, plan=plan)
        self._run_rollback(md_tl, requested, plan, target)

    def _run_rollback(self, md_tl: Timeline, rb: Instant, plan: Mapping[str, Any], target: Instant | None) -> None:
        """Carry out the MDT rollback ``rb`` (requested or inflight) of ``target``: hide the
        target, delete its files, complete, drop the target's instant files. Every step is
        idempotent, so a run killed anywhere is finished by running it again."""
        writer = self._md_writer()
        inflight = writer.transition_to_inflight(rb) if rb.state is State.REQUESTED else rb
        if target is not None and target.is_completed:
            done_name = md_tl.files_of(target).get(State.COMPLETED)
            if done_name:
                self.md.delete(f"{md_tl.timeline_dir}/{done_name}")
        metadata = self.execute_rollback_plan(plan, rb.timestamp)
        writer.complete(inflight, metadata)
        self._drop_target_files(md_tl, target)

    def _drop_target_files(self, md_tl: Timeline, target: Instant | None) -> None:
        if target is None:
            return
        for name in md_tl.files_of(target).values():
            rel = f"{md_tl.timeline_dir}/{name}"
            if self.md.exists(rel):
                self.md.delete(rel)

    def _resume_rollback(self, md_tl: Timeline, rb: Instant, target: Instant | None) -> bool:
        """Finish an MDT rollback a killed data rollback left: completed -> only the target's
        remaining instant files go; pending -> executed again from its plan. False when it
        has no plan (nothing was done under it): it is removed, to be started afresh."""
        if rb.is_completed:
            self._drop_target_files(md_tl, target)
            return True
        plan = md_tl.plan(rb)
        if not plan:
            TimelineWriter(self.md, self.md_config).delete_instant_files(rb)
            return False
        self._run_rollback(md_tl, rb, plan, target)
        return True
