"""Index tagging side of the engine API: plan lookups on the driver, run them where the keys are.

    job = engine.begin_write(path, "upsert", schema=schema, options=opts)
    lookup = engine.plan_index_lookup(job, partitions)    # no keys: the table state only
    # on workers: engine.lookup(task, keys) per task (keys routed by lookup.assign), joined with
    # the incoming keys; lookup.actions(...) per tagged record; counts back to the driver
    buckets = engine.plan_write(job, counts=engine.WriteCounts(updates=..., inserts=...))

The driver never holds a record key: it plans from per-file-group and per-partition counts.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import attrs
import pyarrow as pa

from ..options import option
from ..read.merge import MergeSpec
from ..read.snapshot import Visibility
from ..storage import Storage
from ..view import FileSlice
from ..writer.index import is_global, stored_outranks
from ..writer.index_lookup import (BLOOM, DELETE, DROP, INSERT, KEYS, MOVE, RECORD_INDEX, UPDATE, IndexLookup,
                                   LookupTask, key_range, moves_partitions, plan_lookup, run_lookup,
                                   run_lookups)
from ..writer.job import WriteJob, retryable
from ..writer.options import sizing_config


def is_global_index(job: WriteJob) -> bool:
    """Does ``job``'s index match a key in any partition (then lookups need no partitions)?"""
    return is_global(option(job.options, "hoodie.index.type"))


def plan_index_lookup(job: WriteJob, partitions: Iterable[str] | None = None) -> IndexLookup:
    """The lookup tasks of ``job``'s index (``hoodie.index.type``): ``partitions`` are those
    the incoming records fall in (ignored by a global index, which looks in every partition)."""
    wanted = None if is_global_index(job) or partitions is None else set(partitions)
    slices = job.planner.latest_slices(job.state, job.view, wanted)
    return plan_lookup(job.storage, job.config, job.options, job.operation, job.state, slices,
                       job.planner.spec, job.spec.full_schema)


def record_size_estimate(job: WriteJob) -> int:
    """Bytes per record of the base files the newest commit wrote (before any,
    ``hoodie.copyonwrite.record.size.estimate``): an engine tells from it about how many keys
    a lookup task's file slice holds, i.e. whether listing them costs more than sending the
    slice the incoming keys. Unlike file sizing, small commits count: a slight overestimate
    (their footers) only makes listing look cheaper."""
    sizes: Iterable[tuple[int, int]] = job.planner.commit_sizes(job.state)  # type: ignore[no-untyped-call]
    for total_bytes, records in sizes:
        if records > 0 and total_bytes > 0:
            return max(1, -(-total_bytes // records))
    estimate: int = sizing_config(job.options).record_size_estimate
    return estimate


def _storage(task: LookupTask, storage_options: Mapping[str, Any] | None) -> Storage:
    return Storage(task.table_uri, dict(storage_options) if storage_options is not None else None)


def lookup_key_range(task: LookupTask, storage_options: Mapping[str, Any] | None = None) -> tuple[str, str] | None:
    """A bloom task's base file key range (one footer read), for :meth:`IndexLookup.with_key_ranges`."""
    return retryable(lambda: key_range(_storage(task, storage_options), task))


def lookup(task: LookupTask, keys: Any = None, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Run one lookup task in this process: ``(key, partition, file_id)`` of the live records
    it finds among ``keys`` (all live keys of its file slice when ``keys`` is ``None``, which
    only the simple index allows: ``lookup.probing`` is false). A file of the task that a
    service of another process removed since the plan (clustering then cleaning) raises
    ``ConcurrentWriteError``: the write, run again, plans on the table as it is then."""
    keys = _key_array(keys) if keys is not None else None
    return retryable(lambda: run_lookup(_storage(task, storage_options), task, keys))


def _key_array(keys: Any) -> pa.Array:
    """Record keys given as an Arrow array, chunked array or iterable, as one Arrow array."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return pa.array(keys, pa.string())
    return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys


def lookup_many(tasks: Sequence[LookupTask], keys: Any, storage_options: Mapping[str, Any] | None = None
                ) -> list[pa.Table]:
    """:func:`lookup` of each of ``tasks`` with the same ``keys`` (say the file slices of the
    partition the keys belong to), in this process: the keys are hashed once for all of them,
    not once per task. One table per task, as :func:`lookup` gives it."""
    if not tasks:
        return []
    keys = _key_array(keys)
    return retryable(lambda: run_lookups(_storage(tasks[0], storage_options), tasks, keys))


@attrs.frozen(eq=False)
class OutrankCheck:
    """What a worker needs to tell whether the stored record of a key that an upsert sends to
    another partition outranks the incoming one (picklable): the table's latest file slices
    by ``(partition, file id)``, its merge rule, schema and the write's visible instants."""

    table_uri: str
    slices: Mapping[tuple[str, str], FileSlice]
    merge: MergeSpec
    schema: pa.Schema
    visibility: Visibility

    @property
    def ordering_fields(self) -> list[str]:
        return [f for f in self.merge.ordering_fields if self.schema.get_field_index(f) >= 0]


def plan_outrank_check(job: WriteJob) -> OutrankCheck | None:
    """For an upsert whose global index moves keys between partitions under event-time
    ordering, the check that keeps a key where it is when its stored record outranks the
    incoming one (as the single-process planner does, Hudi's ``mergeForPartitionUpdatesIfNeeded``);
    ``None`` when no move can be outranked (another operation or index, commit-time ordering)."""
    spec = job.planner.spec
    if job.operation != "upsert" or not is_global_index(job) or not moves_partitions(job.options) \
            or not spec.event_time or job.state is None:
        return None
    check = OutrankCheck(job.storage.url, {(s.partition_path, s.file_id): s for s in
                                           job.planner.latest_slices(job.state, job.view)},
                         spec, job.spec.full_schema, job.state.visibility())
    return check if check.ordering_fields else None


def outranked(check: OutrankCheck, located: pa.Table, storage_options: Mapping[str, Any] | None = None) -> pa.Array:
    """Per row of ``located`` (``key``, ``existing_partition``, ``file_id`` where the index
    found it, and the incoming record's ordering fields) whether the stored record outranks
    the incoming one: the key then stays where it is (an update there, which the stored
    record wins) instead of moving. Reads only the slices named, key and ordering columns."""
    storage = Storage(check.table_uri, dict(storage_options) if storage_options is not None else None)
    return retryable(lambda: stored_outranks(storage, list(check.slices.values()), check.merge, check.schema,
                                             check.visibility, located, located))


__all__ = ["IndexLookup", "LookupTask", "plan_index_lookup", "is_global_index", "lookup", "lookup_many", "lookup_key_range",
           "record_size_estimate", "OutrankCheck", "plan_outrank_check", "outranked", "KEYS", "BLOOM",
           "RECORD_INDEX", "DROP", "UPDATE", "INSERT", "DELETE", "MOVE"]
