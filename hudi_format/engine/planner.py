"""Scan planning: a query (snapshot, time travel, read-optimized, incremental) into scan tasks.

A :class:`ScanPlanner` holds what planning needs from one loaded table (config, timeline,
file-system view, the metadata table for listings and column-stats pruning) and turns a query
into a :class:`~hudi_format.read.scan.ScanPlan`. ``Table.read``/``scan``/``read_incremental``
and the engine API (``hudi_format.engine.plan_scan``) both plan here, so a query means the
same thing whichever process reads its tasks.
"""

from __future__ import annotations

import logging
import posixpath
from functools import cached_property
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..config import META_FIELDS, TableConfig
from ..options import option
from ..options.read import INCR_FALLBACK
from ..errors import CorruptFileError, FileMissingError, HudiError, InvalidOptionError, SchemaError
from ..storage import Storage
from ..timeline import Instant, Timeline
from ..view import FileSlice, FileSystemView
from ..read.bounds import normalize_instant
from ..read.concurrent_deletions import ConcurrentDeletions
from ..read.filters import Filter, PartitionPruner, check_columns, parse_filters
from ..read.merge import MergeSpec
from ..read.scan import COMMIT_TIME, ScanPlan, ScanTask
from ..read.snapshot import ReadState
from ..read.table_schema import latest_data_schema

log = logging.getLogger(__name__)

_META_SCHEMA = pa.schema([pa.field(name, pa.string()) for name in META_FIELDS])


class ScanPlanner:
    """Plans queries against one loaded state of a table (its timeline as loaded)."""

    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline,
                 options: Mapping[str, Any] | None = None):
        self.storage = storage
        self.config = config
        self.timeline = timeline
        self.options = dict(options or {})
        self._metadata: Any = None
        self.view = FileSystemView(storage, config, lister=self._metadata_listing)
        # what other processes' cleans, rollbacks and restores removed since the timeline was loaded
        self._deletions = ConcurrentDeletions(storage, config, timeline)

    # -- metadata table ----------------------------------------------------------------------
    @property
    def metadata_table(self) -> Any:
        """The metadata table as of the loaded timeline, or ``None`` when the table declares
        none or ``hoodie.metadata.enable`` is false for this reader."""
        from ..metadata.reader import MetadataTable
        enabled = str(self.options.get("hoodie.metadata.enable", True)).strip().lower()
        if enabled in ("false", "0", "no") or not self.config.metadata_partitions:
            return None
        if self._metadata is None:
            self._metadata = MetadataTable(self.storage, self.config, self.timeline)
        return self._metadata

    def usable_metadata(self, partition: str) -> Any:
        """The metadata table when ``partition`` is declared and it is not behind the data."""
        mdt = self.metadata_table
        if mdt is None or not mdt.has_partition(partition):
            return None
        try:
            reason = mdt.staleness()
        except HudiError as exc:
            reason = str(exc)
        if reason is not None:
            log.warning("not using the metadata table of %s: %s", self.storage.url, reason)
            return None
        return mdt

    def _metadata_listing(self) -> Any:
        """Partition listing from the metadata table's ``files`` partition (``None``: list storage)."""
        from ..metadata.keys import FILES
        mdt = self.usable_metadata(FILES)
        if mdt is None:
            return None
        try:
            return mdt.files_listing()
        except HudiError as exc:
            log.warning("cannot list %s from its metadata table (%s); listing storage",
                        self.storage.url, exc)
            return None

    def _prune_by_stats(self, slices: list[FileSlice], filters: list[Filter]) -> list[FileSlice]:
        from ..metadata.keys import COLUMN_STATS
        if not filters or not slices:
            return slices
        mdt = self.usable_metadata(COLUMN_STATS)
        if mdt is None:
            return slices
        try:
            pruned: list[FileSlice] = mdt.prune_slices(slices, filters, self.schema)
            return pruned
        except HudiError as exc:
            log.warning("column stats of %s unusable (%s); not skipping files", self.storage.url, exc)
            return slices

    # -- schema ------------------------------------------------------------------------------
    @cached_property
    def schema(self) -> pa.Schema:
        """The latest table schema as Arrow, the ``_hoodie_*`` meta fields first."""
        data = self._data_schema()
        data = pa.schema([f for f in data if f.name not in META_FIELDS])
        if self.config.populate_meta_fields:
            return pa.schema(list(_META_SCHEMA) + list(data))
        return data

    def _data_schema(self) -> pa.Schema:
        schema = latest_data_schema(self.config, self.timeline)
        if schema is not None:
            return schema
        state = ReadState(self.config, self.timeline)
        for s in state.file_slices(self.view):
            if s.base_file:
                with self.storage.open(s.base_file) as f:
                    try:
                        return pq.ParquetFile(f).schema_arrow
                    except (pa.ArrowException, OSError, ValueError) as exc:
                        raise CorruptFileError(f"cannot read the schema of base file "
                                               f"{self.storage.uri(s.base_file)}: {exc}") from exc
        return pa.schema([])

    @cached_property
    def merge_spec(self) -> MergeSpec:
        return MergeSpec.from_config(self.config)

    # -- arguments ---------------------------------------------------------------------------
    def instant(self, value: Any, what: str) -> str | None:
        """An instant argument (string, datetime, epoch) as ``yyyyMMddHHmmssSSS``."""
        return normalize_instant(value, self.config.timeline_timezone, what)

    def prepare(self, columns: Sequence[str] | None, filters: Any) -> tuple[list[str], list[Filter]]:
        """Checked column names (all when ``None``) and parsed filters."""
        schema = self.schema
        parsed = parse_filters(filters)
        check_columns(parsed, schema)
        if columns is None:
            return list(schema.names), parsed
        if isinstance(columns, str):
            raise InvalidOptionError("columns must be a list of column names, not a string")
        try:
            cols = list(columns)
        except TypeError:
            raise InvalidOptionError(f"columns must be a list of column names, got {columns!r}") from None
        odd = [c for c in cols if not isinstance(c, str)]
        if odd:
            raise InvalidOptionError(f"columns must be column names (strings), got {odd}")
        missing = [c for c in cols if schema.get_field_index(c) < 0]
        if missing:
            raise SchemaError(f"unknown column(s) {missing}; the table has {', '.join(schema.names)}")
        return cols, parsed

    # -- planning ----------------------------------------------------------------------------
    def state(self, as_of: str | None = None) -> ReadState:
        return ReadState(self.config, self.timeline, as_of)

    def slices(self, state: ReadState, filters: list[Filter], read_optimized: bool) -> list[FileSlice]:
        """The file slices a query reads: pruned by partition values, then by column stats."""
        return self._prune_by_stats(self._partition_slices(state, filters, read_optimized)[0], filters)

    def _partition_slices(self, state: ReadState, filters: list[Filter],
                          read_optimized: bool) -> tuple[list[FileSlice], Any]:
        """The slices of the partitions ``filters`` select, and that selection (``None``: all)."""
        if read_optimized and self.config.table_type != "MERGE_ON_READ":
            read_optimized = False
        pruner = PartitionPruner(self.config, self.schema, filters)
        accepts = pruner.matches if pruner.active else None
        return state.file_slices(self.view, accepts, read_optimized), accepts

    def read_schema(self, columns: Sequence[str], filters: Sequence[Filter], with_logs: bool) -> pa.Schema:
        """What to read for ``columns``: plus filter columns, plus the merge's columns for logs."""
        need = set(columns) | {f.column for f in filters}
        if with_logs:
            need |= set(self.merge_spec.needed_columns())
            if self.config.populate_meta_fields:
                need.add(COMMIT_TIME)
        return pa.schema([f for f in self.schema if f.name in need])

    def task(self, s: FileSlice, state: ReadState, columns: Sequence[str], filters: Sequence[Filter], *,
             read_optimized: bool = False, commit_times: frozenset[str] | None = None,
             extra: Sequence[str] = ()) -> ScanTask:
        """One slice as a task; ``extra``: columns read (e.g. for the incremental filter) but not
        returned."""
        read = list(dict.fromkeys(list(columns) + list(extra)))
        return ScanTask(table_uri=self.storage.url, file_slice=s, columns=tuple(columns),
                        filters=tuple(filters),
                        read_schema=self.read_schema(read, filters, bool(s.log_files)),
                        merge=self.merge_spec, visibility=state.visibility(),
                        as_of=state.as_of, read_optimized=read_optimized, commit_times=commit_times)

    def plan(self, columns: Sequence[str] | None = None, filters: Any = None, as_of: Any = None,
             read_optimized: bool = False, incremental: tuple[Any, Any] | None = None) -> ScanPlan:
        """Plan a snapshot / time-travel / read-optimized query, or with ``incremental=(start,
        end)`` the records written by commits in ``(start, end]`` (``as_of`` is then ignored)."""
        cols, parsed = self.prepare(columns, filters)
        out_schema = pa.schema([self.schema.field(c) for c in cols])
        if incremental is not None:
            start, end = incremental
            return self._plan_incremental(cols, parsed, self.instant(start, "start") or "0",
                                          self.instant(end, "end"), out_schema)
        state = self.state(self.instant(as_of, "as_of"))
        ro = read_optimized and self.config.table_type == "MERGE_ON_READ"
        tasks = tuple(self.task(s, state, cols, parsed, read_optimized=ro)
                      for s in self.checked_slices(state, parsed, read_optimized))
        return ScanPlan(tasks, out_schema, self.storage.url, state.as_of)

    def checked_slices(self, state: ReadState, filters: list[Filter], read_optimized: bool) -> list[FileSlice]:
        """``slices``, once the listing is checked against what cleans, rollbacks and restores
        removed past ``state`` (``FileMissingError``: the slices it needs are gone)."""
        listed, accepts = self._partition_slices(state, filters, read_optimized)
        self.check_not_cleaned(state, listed, accepts)
        return self._prune_by_stats(listed, filters)

    def check_not_cleaned(self, state: ReadState, listed: list[FileSlice], accepts: Any = None) -> None:
        """A query whose file slices the cleaner removed fails, naming one, instead of reading
        the older slices that are left (:mod:`..read.cleaned`): time travel to an old instant,
        and the snapshot of a table opened before another process's clean (checked after the
        listing, which then no longer holds what that clean deleted; :mod:`..read.concurrent_deletions`).
        ``listed``: the query's slices before column-stats pruning, of the partitions ``accepts`` takes."""
        self._deletions.check(state, listed, accepts)

    def _plan_incremental(self, cols: list[str], parsed: list[Filter], start_ts: str, end_ts: str | None,
                          out_schema: pa.Schema) -> ScanPlan:
        """Each record written by a commit in ``(start, end]`` at its state as of ``end``: the
        slices as of ``end`` of the file groups those commits touched. When the cleaner removed
        files those commits wrote, that state is gone (a view built from today's listing would
        silently lack it): the latest snapshot's records of those commits are read instead
        (:data:`~hudi_format.options.read.INCR_FALLBACK`, as Hudi 1.x), or the query fails."""
        state = self.state(end_ts)
        bound = state.bound
        in_range = [i for i in state.instants if bound(i) > start_ts]
        if state.active_start and start_ts < state.active_start:
            in_range += [i for i in state.archived_instants.values() if bound(i) > start_ts]
        if not in_range:
            return ScanPlan((), out_schema, self.storage.url, end_ts)
        commit_times = frozenset(i.timestamp for i in in_range)
        written = self.written_files(in_range)
        extra = [COMMIT_TIME] if self.config.populate_meta_fields else []
        gone = self._missing(written) if written is not None else []
        if gone:
            state = self._fallback_state(start_ts, end_ts, gone)
            tasks = tuple(self.task(s, state, cols, parsed, commit_times=commit_times, extra=extra)
                          for s in self.slices(state, parsed, False))
            return ScanPlan(tasks, out_schema, self.storage.url, end_ts)
        touched = None if written is None else {file_id for file_id, _, _ in written}
        tasks = tuple(self.task(s, state, cols, parsed, commit_times=commit_times, extra=extra)
                      for s in self.slices(state, parsed, False)
                      if touched is None or s.file_id in touched)
        return ScanPlan(tasks, out_schema, self.storage.url, end_ts)

    def written_files(self, instants: Sequence[Instant]) -> list[tuple[str, str, str]] | None:
        """``(file id, partition, path)`` of the files ``instants`` wrote, from their commit
        metadata (``None``: some metadata unreadable; path ``""`` when a stat names none)."""
        out: list[tuple[str, str, str]] = []
        for inst in instants:
            try:
                meta = self.timeline.metadata(inst) if self.timeline.get(inst.timestamp) else \
                    self.timeline.archived().metadata(inst)
            except HudiError:
                return None
            for partition, stats in meta.partition_to_write_stats.items():
                out.extend((st.file_id, partition or "", st.path or "") for st in stats if st.file_id)
        return out

    def _missing(self, written: list[tuple[str, str, str]]) -> list[str]:
        """Paths among ``written`` that the table's listing no longer holds."""
        names: dict[str, set[str]] = {}
        gone = []
        for _, partition, path in written:
            if not path:
                continue
            part = posixpath.dirname(path) if "/" in path else partition
            if part not in names:
                names[part] = {f.name for f in self.view.files_in(part)}
            if posixpath.basename(path) not in names[part]:
                gone.append(path)
        return gone

    def _fallback_state(self, start_ts: str, end_ts: str | None, gone: list[str]) -> ReadState:
        """The latest state, to read the range's records from, when the fallback is on; else
        the error Hudi gives (``HoodieIncrementalPathNotFoundException``)."""
        enabled = option(self.options, INCR_FALLBACK)
        if enabled is None:
            enabled = self.config.version >= 8
        where = f"incremental query ({start_ts}, {end_ts or 'latest'}] of {self.storage.url}"
        if not enabled or not self.config.populate_meta_fields:
            why = (f"set {INCR_FALLBACK}=true to read the latest snapshot's records of those commits"
                   if self.config.populate_meta_fields else
                   "without meta fields (_hoodie_commit_time) the latest snapshot cannot stand in")
            raise FileMissingError(f"{where}: {len(gone)} file(s) its commits wrote are gone, likely "
                                   f"removed by the cleaner (e.g. {self.storage.uri(gone[0])}); {why}")
        log.warning("%s: %d file(s) its commits wrote were cleaned; reading the latest snapshot's "
                    "records of those commits (%s)", where, len(gone), INCR_FALLBACK)
        return self.state()
