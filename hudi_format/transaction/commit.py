"""One commit path for every write and every table service.

``begin`` (a new instant: time, heartbeat, requested, inflight) or ``resume`` (claim a planned
service instant under the table lock: skipped when another live process runs it) -> the
caller's work (files recorded in ``written`` and in markers) -> ``commit``: under the table lock,
reload the timeline, check the instant is still ours and run the conflict check, then the
metadata-table hook (its deltacommit with the same instant time), then the completed file;
markers and heartbeat go. Any failure before the completed file -> ``abort``: files removed, the
metadata table's deltacommit undone, the instant removed (a service's plan stays requested
unless it is dropped). Use it as a context manager: leaving the block without a commit aborts.

The metadata table plugs in as a :class:`MetadataHook`; the default one is
``hudi_format.metadata.commit.MetadataTableHook``, given the metadata table's own table services
(cleaning, compaction, archival, rollback plans) that the services layer above installs with
:func:`install_metadata_table_services` -- this layer and the metadata layer never import them.
The metadata table's own instants commit through the same path without a lock (the data table's
lock is held around them) or a hook.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterable, Mapping, Protocol

from ..config import TableConfig
from ..errors import HudiError, StorageError
from ..metadata.commit import MetadataTableHook
from ..metadata.key_changes import KeyChanges
from ..metadata.record_index_update import RecordIndexUpdate
from ..metadata.writer import DataTableSnapshot, MetadataTableServices
from ..options import option
from ..storage import Storage
from ..timeline import Instant, State, Timeline
from ..timeline.clock import InstantClock
from ..timeline.writer import TimelineWriter
from .heartbeat import Heartbeat, heartbeat_expired
from .locks import TableLock
from .markers import delete_markers, read_markers, written_by
from .schema_conflicts import resolve_commit_schema
from .snapshot import TableSnapshot

log = logging.getLogger(__name__)

METADATA_DIR = ".hoodie/metadata"


class ServiceBusyError(HudiError):
    """A table service instant is being run by another live process, or is no longer pending:
    this process skips it instead of colliding with it."""


class MetadataHook(Protocol):
    """Keeps the metadata table in the same transaction as a data instant."""

    def before_complete(self, storage: Storage, config: TableConfig, inflight: Instant, metadata: Any,
                        options: Mapping[str, Any], clock: InstantClock,
                        snapshot: DataTableSnapshot | None = None,
                        record_keys: Mapping[str, KeyChanges] | RecordIndexUpdate | None = None) -> TableConfig:
        """Bring the metadata table along (under the lock); return the data table's config.
        ``snapshot``: the data table as the commit just listed it under the lock (``None``:
        not listed; load what is needed). ``record_keys``: the record index changes of
        written files, by write stat path, as their write handles reported them."""

    def abort(self, storage: Storage, config: TableConfig, instant: str, options: Mapping[str, Any],
              clock: InstantClock) -> None:
        """Undo the metadata table's deltacommit of ``instant`` (the data instant failed)."""


class WriteResult(Instant):
    """The completed instant of a write, and the errors of the table services that ran after
    it was durable (inline clean, archival, compaction, clustering): those never fail the
    write, since its data is committed. Compares and hashes as the plain :class:`Instant`."""

    service_errors: tuple[BaseException, ...] = ()

    @classmethod
    def of(cls, instant: Instant, errors: Iterable[BaseException] = ()) -> "WriteResult":
        out = cls(instant.timestamp, instant.action, instant.state, instant.completion_time, instant.file_name)
        object.__setattr__(out, "service_errors", tuple(errors))
        return out

    def _key(self) -> tuple:
        return (self.timestamp, self.action, self.state, self.completion_time)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Instant):
            return self._key() == (other.timestamp, other.action, other.state, other.completion_time)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = Instant.__hash__


_metadata_table_services: MetadataTableServices | None = None


def install_metadata_table_services(services: MetadataTableServices | None) -> None:
    """Give the default metadata hook the metadata table's own table services. The services
    layer installs its own when it is imported (``hudi_format.services``); every commit after
    that runs them on the metadata table (Hudi's metadata writer runs its services through a
    write client of its own, which in this package's layering sits above the hook)."""
    global _metadata_table_services
    _metadata_table_services = services


def default_metadata_hook() -> MetadataHook:
    return MetadataTableHook(_metadata_table_services)


def is_metadata_storage(storage: Storage) -> bool:
    return storage.url.rstrip("/").endswith(METADATA_DIR)


def _locking(storage: Storage, options: Mapping[str, Any]) -> bool:
    mode = option(options, "hoodie.write.concurrency.mode")
    return mode != "SINGLE_WRITER" and not is_metadata_storage(storage)


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


ConflictCheck = Callable[[Timeline], None]


def table_lock(storage: Storage, options: Mapping[str, Any] | None = None) -> Any:
    """The table lock as a context manager (a no-op for a single writer or the metadata table,
    whose writes happen under the data table's lock). Table services are scheduled under it,
    as Hudi does, so two processes never plan the same work."""
    opts = dict(options or {})
    return TableLock(storage, opts) if _locking(storage, opts) else _NoLock()


class Transaction:
    """One instant between ``begin``/``resume`` and ``commit``/``abort`` (see the module doc)."""

    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any] | None,
                 writer: TimelineWriter, inflight: Instant, heartbeat: Heartbeat | None,
                 hook: MetadataHook | None, keep_plan: bool, undo_on_abort: bool = True):
        self.storage = storage
        self.config = config
        self.options = dict(options or {})
        self.writer = writer
        self.inflight = inflight
        self.heartbeat = heartbeat
        self.hook = hook
        self.keep_plan = keep_plan
        self.undo_on_abort = undo_on_abort
        self.written: list[str] = []       # files created so far; removed on abort
        # data files named by markers a listing found (attempts an engine discarded); with
        # `written` they name every marker of a fresh instant, which then go without a listing
        self.marked: list[str] = []
        self.markers_known = False         # begin() of a new time: no earlier attempt's markers
        self.done: Instant | None = None
        self._hooked = False
        self._aborted = False
        self.timeline: Timeline | None = None   # the data timeline after commit(), when known

    @property
    def instant_time(self) -> str:
        return self.inflight.timestamp

    # -- starting ---------------------------------------------------------------------------
    @classmethod
    def begin(cls, storage: Storage, config: TableConfig, action: str, options: Mapping[str, Any] | None = None,
              *, plan: Any = None, instant_time: str | None = None,
              hook: MetadataHook | None = None, undo_on_abort: bool = True) -> "Transaction":
        """A new instant: time, heartbeat (first: a pending instant without a live heartbeat is
        what others roll back), requested, inflight. ``undo_on_abort=False`` (rollback,
        restore) leaves a failed instant pending, to be finished from its plan."""
        opts = dict(options or {})
        writer = TimelineWriter(storage, config)
        heartbeat = None
        requested = None
        # A time issued here is requested before the time lock goes: archival passes through
        # that lock before it lists (``archival.archive``), so it never archives past a time
        # issued but not yet requested (its instant, requested later at an older time than
        # what was archived, would start the active timeline there and hide those commits).
        with contextlib.nullcontext(None) if instant_time is not None else writer.clock.hold() as generate:
            ts = instant_time or generate()
            if not is_metadata_storage(storage):
                heartbeat = Heartbeat(storage, ts, _interval(opts)).start()
            try:
                # a time the clock just issued is newer than any completed instant: no listing
                requested = writer.create_requested(action, ts, plan=plan, known_new=instant_time is None)
                inflight = writer.transition_to_inflight(requested, known_requested=True)
            except BaseException:
                if requested is not None:
                    _quietly(lambda: writer.delete_instant_files(requested), f"pending instant {ts}")
                if heartbeat is not None:
                    heartbeat.stop()
                raise
        txn = cls(storage, config, opts, writer, inflight, heartbeat,
                  _hook(storage, hook), keep_plan=False, undo_on_abort=undo_on_abort)
        txn.markers_known = instant_time is None
        return txn

    @classmethod
    def resume(cls, storage: Storage, config: TableConfig, instant: Instant, options: Mapping[str, Any] | None = None,
               *, leftovers: Iterable[str] | Callable[[], Iterable[str]] = (), inflight_data: Any = None,
               hook: MetadataHook | None = None, undo_on_abort: bool = True) -> "Transaction":
        """Claim a planned service instant (requested, or inflight from a run that died).

        Under the table lock, so two processes never run one instant: raises
        ``ServiceBusyError`` when the instant is no longer pending or another live process
        holds its heartbeat. An inflight instant is taken over: ``leftovers`` (files the dead
        run may have written) are removed first.
        """
        opts = dict(options or {})
        writer = TimelineWriter(storage, config)
        ts = instant.timestamp
        heartbeat = None
        with table_lock(storage, opts):
            timeline = Timeline.load(storage, config)
            current = next((i for i in timeline.pending if i.timestamp == ts and i.action == instant.action), None)
            if current is None:
                raise ServiceBusyError(f"{instant.action} {ts} is no longer pending on {storage.url} "
                                       "(completed or removed by another process)")
            if not is_metadata_storage(storage):
                if not heartbeat_expired(storage, ts, _interval(opts), _misses(opts)):
                    raise ServiceBusyError(f"{instant.action} {ts} is being run by another live process "
                                           f"on {storage.url}; skipping it")
                heartbeat = Heartbeat(storage, ts, _interval(opts)).start()
        try:
            if current.state is State.REQUESTED:
                inflight = writer.transition_to_inflight(current, inflight_data)
            else:
                for path in (leftovers() if callable(leftovers) else leftovers):
                    _quietly(lambda p=path: storage.delete(p) if storage.exists(p) else None,
                             f"{path} left by an earlier attempt of {current}")
                name = timeline.files_of(current).get(State.INFLIGHT)
                inflight = Instant(ts, current.action, State.INFLIGHT, None, name)
        except BaseException:
            if heartbeat is not None:
                heartbeat.stop()
            raise
        txn = cls(storage, config, opts, writer, inflight, heartbeat, _hook(storage, hook), keep_plan=True,
                  undo_on_abort=undo_on_abort)
        # a requested instant never ran, or its last attempt aborted (and removed its markers):
        # only an inflight one taken over from a dead run can have markers nobody recorded
        txn.markers_known = current.state is State.REQUESTED
        return txn

    # -- finishing --------------------------------------------------------------------------
    def commit(self, metadata: Any, conflict_check: ConflictCheck | None = None, *,
               started: frozenset[str] | None = None,
               record_keys: Mapping[str, KeyChanges] | RecordIndexUpdate | None = None) -> Instant:
        """Complete the instant: under the table lock, check it is still ours and run
        ``conflict_check`` on the reloaded timeline, resolve the schema it records, then the
        metadata hook, then complete. ``started``: the completed write instants the operation
        loaded, when known (with none completed since, the schema cannot have moved).
        ``record_keys``: the written files' record index changes (or the engine's update that
        writes them into the index itself), for the hook."""
        locking = _locking(self.storage, self.options)
        now: Timeline | None = None
        with table_lock(self.storage, self.options):
            if locking:
                # what other processes committed meanwhile: the timeline, and the table config
                # (another commit may have built, dropped or extended the metadata table)
                self.config = TableConfig.load(self.storage)
                now = Timeline.load(self.storage, self.config)
                self._check_still_pending(now)
                if conflict_check is not None:
                    conflict_check(now)
                # a writer or service that loaded the table before another writer evolved its
                # schema records the evolved one, never the columns it loaded alone
                if started is None or any(i.timestamp not in started for i in now.write_instants()):
                    resolve_commit_schema(self.config, now, self.instant_time, metadata)
            # the metadata table's deltacommit keeps the time lock that issued its completion
            # time, and this instant completes under that same hold: both completion times come
            # from one lock round, the metadata table's first (the block releases it in any case)
            with self.writer.clock.sharing():
                if self.hook is not None:
                    self._hooked = True
                    listed = TableSnapshot(self.storage, self.config, now) if now is not None else None
                    self.config = self.hook.before_complete(self.storage, self.config, self.inflight, metadata,
                                                            self.options, self.writer.clock, snapshot=listed,
                                                            record_keys=record_keys)
                # `now`, listed under this lock hold, showed the instant pending: no second
                # listing; the inflight file is there: that listing showed it, or (the metadata
                # table, under its data table's lock) this transaction wrote it
                self.done = self.writer.complete(
                    self.inflight, metadata, known_pending=now is not None,
                    known_inflight=now is not None or is_metadata_storage(self.storage))
            # the table after this commit, for the inline services (load once): current while
            # the completed file is this process's one change since the conflict check listed
            self.timeline = now.advanced(self.done) if now is not None else None
        self._finish()
        return self.done

    def _check_still_pending(self, now: Timeline) -> None:
        ts = self.instant_time
        if not any(i.timestamp == ts and not i.is_completed for i in now.pending):
            raise ServiceBusyError(f"{self.inflight.action} {ts} on {self.storage.url} is no longer "
                                   "pending: another process completed or rolled it back")

    def abort(self, drop_plan: bool = False) -> None:
        """Undo a failed run: its files, the metadata table's deltacommit of it, its instant
        (a service's plan stays requested, to run again, unless ``drop_plan``)."""
        if self.done is not None or self._aborted:
            return
        self._aborted = True
        if not self.undo_on_abort:
            self._finish()
            return
        paths = list(self.written)
        try:
            # a marker alone does not make a file ours: its create may have lost the race for
            # the name to another writer, whose committed file must stay
            paths += [p for p, _ in read_markers(self.storage, self.instant_time)
                      if p not in paths and written_by(self.storage, p, self.instant_time)]
        except (HudiError, OSError):
            pass
        for path in paths:
            _quietly(lambda p=path: self.storage.delete(p) if self.storage.exists(p) else None,
                     f"{path} of the failed {self.inflight}")
        if self._hooked and self.hook is not None:
            _quietly(lambda: self.hook.abort(self.storage, self.config, self.instant_time, self.options,
                                             self.writer.clock), f"metadata instant {self.instant_time}")
        if self.keep_plan and not drop_plan:
            rel = self.writer.path_of(Instant(self.instant_time, self.inflight.action, State.INFLIGHT))
            _quietly(lambda: self.storage.delete(rel) if self.storage.exists(rel) else None,
                     f"inflight file of {self.inflight}")
        else:
            _quietly(lambda: self.writer.delete_instant_files(self.inflight), f"pending instant {self.inflight}")
        self._finish()

    def _finish(self) -> None:
        # committed from a fresh begin: every marker names a file in written/marked, so they go
        # by name (one request on S3); otherwise a crashed or failed attempt may have left
        # others, and the marker folder is listed
        known = self.written + self.marked if self.done is not None and self.markers_known else None
        _quietly(lambda: delete_markers(self.storage, self.instant_time, known), f"markers of {self.instant_time}")
        if self.heartbeat is not None:
            _quietly(self.heartbeat.stop, f"heartbeat of {self.instant_time}")
            self.heartbeat = None

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.done is None:
            self.abort()


def _hook(storage: Storage, hook: MetadataHook | None) -> MetadataHook | None:
    if is_metadata_storage(storage):
        return None
    return hook if hook is not None else default_metadata_hook()


def _interval(opts: Mapping[str, Any]) -> int:
    return option(opts, "hoodie.client.heartbeat.interval_in_ms")


def _misses(opts: Mapping[str, Any]) -> int:
    return option(opts, "hoodie.client.heartbeat.tolerable.misses")


def _quietly(fn: Callable[[], Any], what: str) -> None:
    """Best-effort cleanup: whatever is left, a later rollback finds."""
    try:
        fn()
    except (HudiError, StorageError, OSError) as exc:
        log.warning("could not remove %s: %s", what, exc)
