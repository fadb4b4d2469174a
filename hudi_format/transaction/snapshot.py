"""One look at a table, loaded once per operation and passed down.

A write, a table service or a recovery needs the same things: the table config, the timeline
(its archived part only when a query reaches back that far), the file-system view, the file
groups pending compaction and clustering, and the metadata table's reader. On object stores
every listing and every small read is a paid round trip, so an operation builds one
:class:`TableSnapshot` and hands it to every step instead of letting each step reload.

Only the conflict check under the commit lock looks at storage again (other processes' commits
matter there). After this process's own commit, :meth:`TableSnapshot.advanced` is the table as
that commit left it, and :meth:`TableSnapshot.current` reuses whatever this process did not
change since it was loaded (``Timeline.current``), so inline services start from it.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import pyarrow as pa

from ..config import META_FIELDS, TableConfig
from ..errors import HudiError
from ..read.snapshot import ReadState
from ..read.table_schema import latest_data_schema
from ..schema import arrow_to_avro_schema, table_record_name
from ..storage import Storage
from ..timeline import Instant, Timeline
from ..timeline.instant import CLUSTERING, COMPACTION, LOG_COMPACTION, REPLACE_COMMIT
from ..view import FileSlice, FileSystemView

if TYPE_CHECKING:
    from ..metadata.reader import MetadataTable

log = logging.getLogger(__name__)


class TableSnapshot:
    """Config, timeline, file-system view, pending services and metadata-table reader of one
    table as of one listing of its timeline. Cheap parts are built on first use and cached."""

    def __init__(self, storage: Storage, config: TableConfig, timeline: Timeline | None = None):
        self.storage = storage
        self.config = config
        self.timeline = timeline if timeline is not None else Timeline.load(storage, config)

    @classmethod
    def load(cls, storage: Storage, config: TableConfig | None = None) -> "TableSnapshot":
        """Read the config (unless given) and list the timeline: one snapshot per operation."""
        return cls(storage, config if config is not None else TableConfig.load(storage))

    def __repr__(self) -> str:
        return f"TableSnapshot({self.storage.url!r}, {self.timeline!r})"

    # -- refreshing ---------------------------------------------------------------------------
    def current(self) -> "TableSnapshot":
        """This snapshot while this process changed nothing in the timeline folder since it
        was listed, else one on a fresh listing (same config). Other processes' changes are not
        seen: the conflict check under the commit lock lists for itself."""
        timeline = Timeline.current(self.storage, self.config, self.timeline)
        if timeline is self.timeline:
            return self
        return TableSnapshot(self.storage, self.config, timeline)

    def advanced(self, instant: Instant, timeline: Timeline | None = None,
                 config: TableConfig | None = None) -> "TableSnapshot":
        """The table after this process completed ``instant``: ``timeline`` when the commit
        listed it under its lock (already advanced), else this snapshot's timeline with the
        instant added; the file-system view is listed again on use (the commit wrote files)."""
        config = config if config is not None else self.config
        if timeline is None:
            timeline = self.timeline.advanced(instant)
        return TableSnapshot(self.storage, config, timeline)

    # -- derived state ------------------------------------------------------------------------
    @cached_property
    def state(self) -> ReadState:
        """What is committed as of the latest completed instant of the timeline."""
        return ReadState(self.config, self.timeline)

    @cached_property
    def view(self) -> FileSystemView:
        """The file-system view; lists only the partitions a caller asks for, each once."""
        return FileSystemView(self.storage, self.config)

    def latest_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        if partitions is None:
            return self.state.file_slices(self.view)
        return self.state.file_slices(self.view, partitions=partitions)

    @cached_property
    def pending_services(self) -> dict[tuple[str, str], Instant]:
        """``(partition, file_id)`` of every file group in a pending compaction, log compaction
        or clustering -> that instant (no service may plan a file group another will rewrite;
        a write may not update one being clustered)."""
        out: dict[tuple[str, str], Instant] = {}
        for inst in self.timeline.pending:
            if inst.action in (COMPACTION, LOG_COMPACTION):
                action = inst.action
            elif is_clustering(self.timeline, inst):
                action = CLUSTERING
            else:
                continue
            try:
                plan = self.timeline.plan(inst)
            except HudiError as exc:
                log.warning("cannot read the plan of pending %s: %s", inst, exc)
                continue
            for key in plan_file_groups(action, plan):
                out[key] = inst
        return out

    @cached_property
    def metadata_table(self) -> "MetadataTable":
        """The metadata table's reader, pinned to this timeline (read lazily, on first query)."""
        from ..metadata.reader import MetadataTable
        return MetadataTable(self.storage, self.config, self.timeline)

    def schemas(self) -> tuple[pa.Schema, dict, dict]:
        """(full Arrow schema with meta fields, its Avro schema, the data-only Avro schema)."""
        data = latest_data_schema(self.config, self.timeline)
        if data is None:
            raise HudiError(f"table {self.storage.url} has no schema yet (no completed write)")
        fields = [f for f in data if f.name not in META_FIELDS]
        data_schema = pa.schema(fields)
        full = pa.schema([pa.field(n, pa.string()) for n in META_FIELDS] + fields) \
            if self.config.populate_meta_fields else data_schema
        record = table_record_name(self.config.name)
        return full, arrow_to_avro_schema(full, *record), arrow_to_avro_schema(data_schema, *record)

    def completion_time(self, instant_time: str) -> str | None:
        return self.state.completion_time(instant_time)


# -- pending services -----------------------------------------------------------------------------
def is_clustering(timeline: Timeline, inst: Instant) -> bool:
    """A clustering instant: ``clustering`` (v8+), or a replacecommit whose plan clusters."""
    if inst.action == CLUSTERING:
        return True
    if inst.action != REPLACE_COMMIT:
        return False
    if inst.is_completed:
        try:
            return (timeline.metadata(inst).operation_type or "").upper() == "CLUSTER"
        except HudiError:
            return False
    try:
        plan = timeline.plan(inst)
    except HudiError:
        return False
    return bool(plan.get("clusteringPlan")) or (plan.get("operationType") or "").upper() == "CLUSTER"


def plan_file_groups(action: str, plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(partition, file_id)`` of every file group a compaction or clustering plan rewrites."""
    out = []
    if action in (COMPACTION, LOG_COMPACTION):
        for op in plan.get("operations") or ():
            out.append((op.get("partitionPath") or "", op.get("fileId")))
    else:
        for group in (plan.get("clusteringPlan") or {}).get("inputGroups") or ():
            for s in group.get("slices") or ():
                out.append((s.get("partitionPath") or "", s.get("fileId")))
    return out


__all__ = ["TableSnapshot", "is_clustering", "plan_file_groups"]
