"""Distributed write of a Spark DataFrame as one Hudi commit.

The driver does what only it can do: open the instant and plan it. Executors do the bytes.

1. Keys: a ``mapInArrow`` stage over the key columns computes every row's record key and
   partition path with the core's key generator. Operations that tag records against the index
   (upsert, delete, insert with ``insert.drop.duplicates``) bring those two columns to the
   driver; the others only need how many records go to each partition.
2. Plan: the engine API (``hudi_format.engine.plan_write``: index tagging, small-file top-up,
   file sizing, replaced file groups, pending-clustering checks) turns them into *buckets*: an
   existing file group to merge into (COW) or append to (MOR), or a new file group; it opens
   the instant.
3. Route and shuffle: a second ``mapInArrow`` gives every row its bucket (records the plan
   placed by key are looked up; the other inserts of a partition are spread over its new file
   groups by a hash of the key, in proportion to the plan, as Hudi's ``UpsertPartitioner``
   does), and ``repartition(n_buckets, slot)`` makes bucket ``i`` Spark partition ``i``, so each
   task owns exactly one file group.
4. Write: each task writes its file group with ``hudi_format.engine.write_bucket`` and Hudi's
   write token ``<partition>-<stage>-<attempt>`` and returns the bucket's result; the driver
   commits them as one instant (``engine.commit``) or aborts (``engine.abort``).

The DataFrame is computed twice (keys, then rows): a source that can give different rows on a
second computation must be ``persist()``-ed first; records of a partition the plan never saw
fail the write instead of being dropped.

Failures: files are written under a requested/inflight instant with write markers and a
heartbeat, so a failed task or job leaves nothing visible. A failed job is cleaned up at once
(its files, markers and pending instant removed); if the driver dies, the next write rolls the
instant back (its heartbeat has expired). Files of task attempts that Spark discarded (retries,
speculation) are deleted before the commit by reconciling markers with the stats, as Hudi does.
"""

from __future__ import annotations

import functools
import json
import logging
from collections import defaultdict
from typing import Any, Mapping

import pyarrow as pa

from hudi_format import engine
from hudi_format.errors import HudiError, InvalidOptionError
from hudi_format.options import option
from hudi_format.storage import Storage

from . import tasks
from .arrow import hudi_schema, spark_arrow_schema, to_hudi_arrow
from .datasource import STORAGE_OPTIONS, storage_options as _storage_options

log = logging.getLogger(__name__)

MODES = ("append", "overwrite", "errorifexists", "ignore")
_MODE_ALIASES = {"error": "errorifexists", "default": "errorifexists", None: "errorifexists"}
# Read-side keys users may leave in a shared option map; they do not concern a write.
_READ_KEYS = ("hoodie.datasource.query.type", "hoodie.datasource.read.", "as.of.instant",
              "hoodie.datasource.write.operation")


def write_dataframe(df, path: str, mode: str | None = "append", options: Mapping[str, Any] | None = None,
                    partition_by: list[str] | None = None, extra_metadata: Mapping[str, str] | None = None):
    """Write ``df`` to the Hudi table at ``path`` as one commit; returns the completed instant
    (``None`` when ``mode="ignore"`` found a table). ``options``: Hudi's datasource write keys
    (``hoodie.datasource.write.operation``, ``.recordkey.field``, ``.precombine.field``,
    ``.partitionpath.field``, ``.table.type``, ``hoodie.table.name``, any ``hoodie.*`` write
    option) and ``storage_options`` (fsspec options as JSON). ``extra_metadata``: entries for the
    commit's extra metadata (the streaming sink's checkpoint)."""
    mode = _MODE_ALIASES.get(mode.lower() if isinstance(mode, str) else mode, mode.lower() if mode else mode)
    if mode not in MODES:
        raise InvalidOptionError(f"save mode must be one of {', '.join(MODES)}, got {mode!r}")
    raw = {str(k): v for k, v in (options or {}).items() if v is not None}
    storage = Storage(path, _storage_options(raw))
    operation = str(raw.get("hoodie.datasource.write.operation", "upsert")).strip().lower()
    opts = {k: v for k, v in raw.items() if k.startswith("hoodie.") and not k.startswith(_READ_KEYS)}
    if partition_by and "hoodie.datasource.write.partitionpath.field" not in opts:
        opts["hoodie.datasource.write.partitionpath.field"] = ",".join(partition_by)
    exists = storage.exists(".hoodie/hoodie.properties")
    if exists and mode == "errorifexists":
        raise HudiError(f"a Hudi table already exists at {storage.url}; write with mode "
                        f"'append' or 'overwrite'")
    if exists and mode == "ignore":
        return None
    if exists and mode == "overwrite":
        operation = "insert_overwrite_table"
    return DistributedWrite(df, path, operation, opts, _storage_options(raw), extra_metadata).run()


class DistributedWrite:
    """One commit of a DataFrame; see the module docstring for the steps."""

    def __init__(self, df, path: str, operation: str, options: Mapping[str, Any],
                 storage_options: Mapping[str, Any] | None, extra_metadata: Mapping[str, str] | None = None):
        self.df = df
        self.extra_metadata = dict(extra_metadata) if extra_metadata else None
        self.path = path
        self.op = operation
        self.options = dict(options)
        self.storage_options = dict(storage_options) if storage_options else None

    # -- driver ------------------------------------------------------------------------------
    def run(self):
        in_hudi = hudi_schema(spark_arrow_schema(self.df.schema))
        # recovery, the table's config (or a new one's), the checks and the writer schema
        job = engine.begin_write(self.path, self.op, schema=in_hudi, options=self.options,
                                 storage_options=self.storage_options)
        if not len(job.spec.schema):
            raise InvalidOptionError("the table has no schema yet: its first write must carry data")
        keyer = tasks.Keyer(job.spec, in_hudi)

        # 1-2. keys (or, without index tagging, counts per partition) to the driver; the core's plan
        key_cols = [c for c in keyer.columns if c in self.df.columns]
        keys_df = self.df.select(*key_cols).mapInArrow(
            functools.partial(tasks.keys_of, keyer=keyer.restrict(key_cols)),
            f"{tasks.KEY} string, {tasks.PARTITION} string")
        tagging = self.op in ("upsert", "delete") or (
            self.op == "insert" and bool(job.options and option(job.options, "hoodie.datasource.write.insert.drop.duplicates")))
        if tagging:
            thin = keys_df.toArrow()
            if job.dedupe:
                thin = _unique_keys(thin)
        else:
            counts = keys_df.groupBy(tasks.PARTITION).count().toArrow()
            thin = _rows_from_counts(counts)
        sample = None
        if self.op == "bulk_insert" and thin.num_rows:
            sample = job.spec.conform(to_hudi_arrow(self.df.limit(50_000).toArrow(), in_hudi))
        # 3-4. plan (opens the instant), shuffle, write on the executors, commit once
        buckets = engine.plan_write(job, keys=thin.column(tasks.KEY) if self.op != "delete_partition" else None,
                                    partitions=thin.column(tasks.PARTITION), sample=sample)
        try:
            assignment = _assignment(job, buckets, thin, tagging)
            results = self._run_tasks(buckets, keyer, assignment)
            return engine.commit(job, [
                engine.BucketResult(index=b, partition=buckets[b].partition, stat=json.loads(stat),
                                    files=tuple(json.loads(files)))
                for b, stat, files in zip(*(results.column(c).to_pylist() for c in ("bucket", "stat", "files")))],
                extra_metadata=self.extra_metadata)
        except BaseException:
            engine.abort(job)     # every file its markers name, the pending instant
            raise

    def _run_tasks(self, buckets: list, keyer, assignment) -> pa.Table:
        """Shuffle the rows into one Spark partition per bucket and write them there."""
        from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType
        if not buckets:
            return pa.table({"bucket": pa.array([], pa.int32()), "stat": pa.array([], pa.string()),
                             "files": pa.array([], pa.string())})
        routed_schema = StructType(list(self.df.schema.fields) + [
            StructField(tasks.KEY, StringType()), StructField(tasks.PARTITION, StringType()),
            StructField(tasks.BUCKET, IntegerType()), StructField(tasks.DELETE, BooleanType()),
            StructField(tasks.SLOT, IntegerType())])
        routed = self.df.mapInArrow(functools.partial(tasks.route, keyer=keyer, assignment=assignment),
                                    routed_schema)
        out = routed.repartition(len(buckets), tasks.SLOT).mapInArrow(
            functools.partial(tasks.write_buckets, buckets=buckets, in_schema=keyer.in_schema,
                              storage_options=self.storage_options),
            tasks.RESULT_SCHEMA)
        return out.toArrow()


def _unique_keys(keys: pa.Table) -> pa.Table:
    """One row per (key, partition): records of one key are merged by the task that writes them."""
    if not keys.num_rows:
        return keys
    return keys.group_by([tasks.KEY, tasks.PARTITION], use_threads=False).aggregate([]) \
        .select([tasks.KEY, tasks.PARTITION])


def _rows_from_counts(counts: pa.Table) -> pa.Table:
    """(key, partition) rows standing for ``count`` records of each partition: without index
    tagging the plan depends only on how many records go to each partition."""
    parts = counts.column(tasks.PARTITION).to_pylist()
    ns = counts.column("count").to_pylist()
    partition = pa.concat_arrays([pa.repeat(pa.scalar(p, pa.string()), n) for p, n in zip(parts, ns)]) \
        if parts else pa.array([], pa.string())
    return pa.table({tasks.KEY: pa.nulls(len(partition), pa.string()), tasks.PARTITION: partition})


def _assignment(job, buckets: list, thin: pa.Table, tagging: bool) -> tasks.Assignment:
    """How each record finds its bucket (file group of the plan).

    Records whose file group the plan decided from their key (updates, deletes, moves, small-file
    inserts after index tagging; inserts the plan drops) are looked up by (partition, key). All
    other inserts of a partition are spread over its new file groups in proportion to the
    records the plan gave each, by a hash of the key, as Hudi's ``UpsertPartitioner`` does; so
    the driver needs only counts for them, and records of one key always meet in one task."""
    explicit: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    spread: dict[str, list[tuple[int, int]]] = defaultdict(list)
    keys = thin.column(tasks.KEY).to_pylist() if tagging else None
    parts = thin.column(tasks.PARTITION).to_pylist() if tagging else None
    assigned = set()

    def pin(rows, b: int, delete: bool) -> None:
        for i in rows.to_pylist():
            entry = explicit.setdefault((parts[i], keys[i]), [])
            if all(d != delete for _, d in entry):   # the first bucket of a key wins
                entry.append((b, delete))
            assigned.add(i)

    for bucket in buckets:
        up, dels = job.rows_of(bucket)
        b = bucket.index
        if bucket.kind != "create":
            if tagging:
                pin(up, b, False)
                pin(dels, b, True)
            elif len(up):
                spread[bucket.partition].append((b, len(up)))
            continue
        spread[bucket.partition].append((b, len(up)))
        if tagging:
            for i in up.to_pylist():
                entry = explicit.get((parts[i], keys[i]))
                if entry is not None and all(d for _, d in entry):
                    entry.append((tasks.SPREAD, False))   # a key moving here: deleted there, inserted here
                assigned.add(i)
    if tagging:
        for i in range(thin.num_rows):
            if i not in assigned:          # e.g. an insert of a known key with drop.duplicates
                explicit.setdefault((parts[i], keys[i]), []).append((-1, False))
    return tasks.Assignment(explicit=explicit, spread=dict(spread),
                            slots=partition_keys(len(buckets)) if buckets else ())


# -- Spark's hash partitioning, inverted --------------------------------------------------------------
def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``hash(col)`` and ``repartition(n, col)`` use)."""
    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF
    k1 = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k1 = rotl(k1, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = seed ^ k1
    h1 = (rotl(h1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@functools.lru_cache(maxsize=64)
def partition_keys(n: int) -> tuple[int, ...]:
    """For each of ``n`` Spark partitions, an int whose ``repartition(n, col)`` lands there, so
    that bucket ``i`` is exactly Spark partition ``i`` (as Hudi's ``UpsertPartitioner`` does)."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < n:
        found.setdefault(_murmur3_int(value) % n, value)
        value += 1
    return tuple(found[i] for i in range(n))


__all__ = ["write_dataframe", "DistributedWrite", "STORAGE_OPTIONS", "partition_keys"]
