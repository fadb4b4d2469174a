"""Index tagging as picklable tasks, so an engine tags records where they are.

One process tags a batch with :func:`hudi_format.writer.index.known_locations`. An engine whose
records are spread over many workers cannot bring their keys to one place; it runs the same
lookups as tasks instead, as Hudi's Spark index implementations do:

- the driver plans an :class:`IndexLookup` from the table state alone (no keys): one
  :class:`LookupTask` per candidate file slice (SIMPLE / BLOOM and their GLOBAL variants: the
  slices of the touched partitions, of every partition for a global index) or per file group
  of the metadata table's record index (RECORD_INDEX);
- a worker runs :func:`run_lookup` for one task (:func:`run_lookups` for several that see
  the same keys, such as the file slices of one partition) with the incoming keys routed to it
  (:meth:`IndexLookup.assign`: by partition and key range for bloom, by Hudi's
  ``mapRecordKeyToFileGroupIndex`` hash for the record index) or, for the simple index,
  without keys (all live keys of the slice, which the engine joins with the incoming keys);
- :meth:`IndexLookup.actions` then says, per tagged record, what the write does with it
  (update in place, insert, delete, move partition, drop), exactly as the single-process
  planner decides (:mod:`hudi_format.writer.planning` uses the same function).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..membership import is_in
from ..read.merge import MergeSpec, existing_keys, live_keys, row_numbers
from ..read.snapshot import Visibility
from ..storage import Storage
from ..view import FileSlice
from ..options import option
from .grouping import groups_of
from .index import (candidate_slices_by_bloom, completed_since, completed_times, is_global, record_index_locations,
                    usable_metadata_table)

# what a write does with a tagged record (see IndexLookup.actions)
DROP, UPDATE, INSERT, DELETE, MOVE = 0, 1, 2, 3, 4

KEYS, BLOOM, RECORD_INDEX = "keys", "bloom", "record_index"
LOCATION_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])


@attrs.frozen(eq=False)
class LookupTask:
    """One unit of index lookup (picklable; paths relative to ``table_uri``).

    ``keys``: the live keys of ``file_slice``; ``bloom``: of those keys, the incoming ones that
    pass the base file's key range and bloom filter; ``record_index``: the record index entries
    of the incoming keys hashed to file group ``file_group`` of ``num_file_groups``, kept when
    they name a live file group (``live``; one outside it is a conflict when an instant
    completed since ``completed``, see :func:`.index.record_index_locations`)."""

    table_uri: str
    kind: str
    file_slice: FileSlice | None = None
    merge: MergeSpec | None = None
    key_schema: pa.Schema | None = None
    visibility: Visibility | None = None
    key_range: tuple[str, str] | None = None       # bloom: the base file's min/max record key
    file_group: int = 0
    num_file_groups: int = 0
    live: frozenset = frozenset()                  # record index: live (partition, file id)
    completed: frozenset = frozenset()             # record index: instants completed when planned

    @property
    def partition(self) -> str | None:
        return self.file_slice.partition_path if self.file_slice is not None else None


@attrs.frozen(eq=False)
class IndexLookup:
    """The lookup tasks of one write and how tagged records become write actions."""

    tasks: tuple[LookupTask, ...]
    operation: str
    global_index: bool
    moves: bool            # global index: a key arriving in another partition moves there
    probing: bool          # tasks take the incoming keys (bloom, record index)

    def with_key_ranges(self, ranges: Sequence[tuple[str, str] | None]) -> "IndexLookup":
        """The same lookup with each bloom task's key range (from :func:`key_range`, run by
        the workers), so :meth:`assign` sends a key only to files whose range holds it."""
        tasks = tuple(attrs.evolve(t, key_range=r) if t.kind == BLOOM else t for t, r in zip(self.tasks, ranges))
        return attrs.evolve(self, tasks=tasks)

    def assign(self, keys: pa.Array, partitions: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(row, task) pairs: which lookup tasks must see each incoming key (probing lookups)."""
        keys = pc.cast(keys, pa.string())
        n = len(keys)
        if not self.tasks or not n:
            return pa.array([], pa.int64()), pa.array([], pa.int32())
        if self.tasks[0].kind == RECORD_INDEX:
            groups = file_group_indexes(keys, self.tasks[0].num_file_groups)
            by_group = {t.file_group: i for i, t in enumerate(self.tasks)}
            task = pc.cast(pc.index_in(groups, pa.array(sorted(by_group), pa.int32())), pa.int32())
            order = [by_group[g] for g in sorted(by_group)]
            task = pc.take(pa.array(order, pa.int32()), task)
            return row_numbers(n), task
        rows, tasks = [], []
        everything = row_numbers(n)
        # a partition's rows found once, not once per file slice of it
        by_partition = {} if self.global_index else {
            part: idx for (part,), idx in groups_of(pa.table({"p": partitions, "row": everything}), ["p"])}
        for i, t in enumerate(self.tasks):
            hit = everything if self.global_index else by_partition.get(t.partition, everything[:0])
            if t.key_range is not None and len(hit):
                mine = keys if len(hit) == n else pc.take(keys, hit)
                in_range = pc.and_(pc.greater_equal(mine, t.key_range[0]), pc.less_equal(mine, t.key_range[1]))
                hit = pc.filter(hit, pc.fill_null(in_range, False))
            if len(hit):
                rows.append(hit)
                tasks.append(pa.repeat(pa.scalar(i, pa.int32()), len(hit)))
        if not rows:
            return pa.array([], pa.int64()), pa.array([], pa.int32())
        return pa.concat_arrays(rows), pa.concat_arrays(tasks)

    def actions(self, partitions: Any, existing_partitions: Any, file_ids: Any) -> pa.Array:
        """Per tagged record (its partition, and the partition and file id the index found it
        in, null when new): DROP, UPDATE, INSERT, DELETE or MOVE (delete in the old partition,
        insert in the new one), as Hudi's write client decides."""
        return actions_of(self.operation, self.global_index and self.moves, partitions,
                          existing_partitions, file_ids)


def actions_of(op: str, moves: bool, partitions: Any, existing_partitions: Any, file_ids: Any) -> pa.Array:
    """See :meth:`IndexLookup.actions`; ``moves``: a global index that updates partition paths."""
    known = pc.is_valid(file_ids)
    if op == "delete":
        return pc.cast(pc.if_else(known, DELETE, DROP), pa.int8())
    if op not in ("upsert", "insert"):
        return pc.cast(pc.if_else(known, INSERT, INSERT), pa.int8())
    moved = pc.fill_null(pc.and_(known, pc.not_equal(existing_partitions, partitions)), False) \
        if moves else pc.and_(known, pa.scalar(False))
    stay = UPDATE if op == "upsert" else DROP      # insert with drop-duplicates skips known keys
    out = pc.if_else(moved, MOVE, pc.if_else(known, stay, INSERT))
    return pc.cast(out, pa.int8())


_UPDATE_PARTITION_PATH = {"GLOBAL_SIMPLE": "hoodie.simple.index.update.partition.path",
                          "GLOBAL_BLOOM": "hoodie.bloom.index.update.partition.path",
                          "RECORD_INDEX": "hoodie.record.index.update.partition.path"}


def moves_partitions(options: Mapping[str, Any]) -> bool:
    """Whether the global index ``hoodie.index.type`` names moves a key that arrives in another
    partition (delete there, insert here), by that index's own option, as Hudi reads them:
    true for the simple and bloom indexes, false for the record index (updated where it is)."""
    key = _UPDATE_PARTITION_PATH.get(str(option(options, "hoodie.index.type")))
    return key is not None and bool(option(options, key))


def file_group_indexes(keys: pa.Array, num_file_groups: int) -> pa.Array:
    """``mapRecordKeyToFileGroupIndex`` of each key (the metadata writer's and reader's hash,
    column-wise); a null key goes to group 0."""
    from ..metadata.keys import file_group_indexes as hashed
    return pc.fill_null(hashed(keys, num_file_groups), 0)


def plan_lookup(storage: Storage, config: TableConfig, options: Mapping[str, Any], operation: str, state,
                slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema) -> IndexLookup:
    """The lookup tasks for ``slices`` (the latest slices of the partitions the write touches,
    every partition for a global index), by ``hoodie.index.type``. A record index that is
    absent or behind falls back to the global simple index, as the single-process path does."""
    index_type = option(options, "hoodie.index.type")
    global_index = is_global(index_type)
    moves = moves_partitions(options)
    uri = storage.url
    if index_type == "RECORD_INDEX" and slices:
        mdt = usable_metadata_table(storage, config, state.timeline if state is not None else None,
                                    "record_index")
        if mdt is not None:
            n = len(mdt.file_slices("record_index"))
            live = frozenset((s.partition_path, s.file_id) for s in slices)
            completed = completed_times(state.timeline)
            tasks = tuple(LookupTask(uri, RECORD_INDEX, file_group=i, num_file_groups=n, live=live,
                                     completed=completed) for i in range(n))
            return IndexLookup(tasks, operation, True, moves, True)
    kind = BLOOM if index_type.endswith("BLOOM") else KEYS
    key_schema = pa.schema([f for f in schema if f.name in set(spec.needed_columns())])
    visibility = state.visibility() if state is not None else Visibility(frozenset(), None)
    tasks = tuple(LookupTask(uri, kind, s, spec, key_schema, visibility) for s in slices)
    return IndexLookup(tasks, operation, global_index, moves, kind == BLOOM)


def key_range(storage: Storage, task: LookupTask) -> tuple[str, str] | None:
    """A bloom task's base file key range from its footer (``None``: unknown, or log files)."""
    from ..base_file import read_footer
    s = task.file_slice
    if task.kind != BLOOM or s is None or s.log_files or not s.base_file:
        return None
    footer = read_footer(storage, s.base_file)
    if footer.min_key is None or footer.max_key is None:
        return None
    return footer.min_key, footer.max_key


def run_lookup(storage: Storage, task: LookupTask, keys: pa.Array | None = None) -> pa.Table:
    """``(key, partition, file_id)`` of the live records ``task`` finds: all of its slice's
    (``keys`` ``None``, simple index) or those among ``keys``."""
    from ..base_file import read_footer
    if keys is not None:
        keys = pc.unique(pc.drop_null(pc.cast(keys, pa.string())))
        if not len(keys):
            return LOCATION_SCHEMA.empty_table()
    if task.kind == RECORD_INDEX:
        if keys is None:
            raise ValueError("a record index lookup needs the incoming keys")
        from ..metadata.reader import MetadataTable
        from ..timeline import Timeline
        config = TableConfig.load(storage)
        now = Timeline.load(storage, config)
        found = record_index_locations(MetadataTable(storage, config, now), task.live, keys,
                                       lambda: completed_since(now, task.completed))
        return found.cast(LOCATION_SCHEMA)
    slices = [task.file_slice]
    if task.kind == BLOOM and keys is not None:
        slices = candidate_slices_by_bloom(storage, slices, keys, read_footer)
    if not slices:
        return LOCATION_SCHEMA.empty_table()
    if keys is None:
        return existing_keys(storage, slices, task.merge, task.key_schema, task.visibility).cast(LOCATION_SCHEMA)
    return pa.concat_tables(_found_in(storage, slices, task, keys))


# keys read together by run_lookups: their slices' bytes (a fraction of which is keys) stay under this
_LOOKUP_CHUNK_BYTES = 256 << 20


def run_lookups(storage: Storage, tasks: Sequence[LookupTask], keys: pa.Array) -> list[pa.Table]:
    """:func:`run_lookup` of each task with the same ``keys``, the keys hashed once per chunk
    of slices instead of once per slice (one is_in over the chunk's keys): the simple index's
    tasks of one partition all see that partition's incoming keys, and building the hash set
    of 100k keys costs more than probing one file's keys against it. Tasks of another kind,
    or with their own merge rules, run one by one."""
    keys = pc.unique(pc.drop_null(pc.cast(keys, pa.string())))
    first = tasks[0] if tasks else None
    if first is None or not len(keys) or any(
            t.kind != KEYS or t.file_slice is None or t.merge is not first.merge
            or t.key_schema is not first.key_schema or t.visibility is not first.visibility for t in tasks):
        return [run_lookup(storage, t, keys) for t in tasks]
    out: list[pa.Table] = []
    chunk: list[FileSlice] = []
    size = 0
    for i, t in enumerate(tasks):
        assert t.file_slice is not None
        chunk.append(t.file_slice)
        size += t.file_slice.total_size
        if size >= _LOOKUP_CHUNK_BYTES or i == len(tasks) - 1:
            out.extend(_found_in(storage, chunk, first, keys))
            chunk, size = [], 0
    return out


def _found_in(storage: Storage, slices: list[FileSlice], task: LookupTask, keys: pa.Array) -> list[pa.Table]:
    """Per slice, ``(key, partition, file_id)`` of its live records whose key is among the
    (unique) ``keys``, read with ``task``'s merge rules: one hash set of ``keys`` for all the
    slices, and no partition or file id built for the stored keys no record brings."""
    assert task.merge is not None and task.key_schema is not None and task.visibility is not None
    stored = live_keys(storage, slices, task.merge, task.key_schema, task.visibility)
    hit = is_in(pa.chunked_array(stored, pa.string()), keys).to_numpy(zero_copy_only=False)
    bounds = np.cumsum([0] + [len(k) for k in stored]).tolist()
    out = []
    for s, k, lo, hi in zip(slices, stored, bounds, bounds[1:]):
        found = k.filter(pa.array(hit[lo:hi]))
        out.append(pa.table([found, pa.repeat(pa.scalar(s.partition_path), len(found)),
                             pa.repeat(pa.scalar(s.file_id), len(found))], schema=LOCATION_SCHEMA))
    return out
