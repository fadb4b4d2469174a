"""Distributed write of a Spark DataFrame as one Hudi commit.

The driver does what only it can do: open the instant and plan it. Executors do the bytes.

1. Keys: a ``mapInArrow`` stage over the key columns computes every row's record key and
   partition path with the core's key generator. Operations that tag records against the index
   (upsert, delete, insert with ``insert.drop.duplicates``) bring those two columns to the
   driver; the others only need how many records go to each partition.
2. Plan: the core's planner (``WriteClient._plan``: index tagging, small-file top-up, file
   sizing, replaced file groups, pending-clustering checks) turns them into *buckets*: an
   existing file group to merge into (COW) or append to (MOR), or a new file group.
3. Route and shuffle: a second ``mapInArrow`` gives every row its bucket (records the plan
   placed by key are looked up; the other inserts of a partition are spread over its new file
   groups by a hash of the key, in proportion to the plan, as Hudi's ``UpsertPartitioner``
   does), and ``repartition(n_buckets, slot)`` makes bucket ``i`` Spark partition ``i``, so each
   task owns exactly one file group.
4. Write: each task writes its file group through the core's write handles (``create``,
   ``merge``, ``append``) with Hudi's write token ``<partition>-<stage>-<attempt>`` and returns
   the write stats; the driver commits them as one instant.

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

from hudi_format.config import TableConfig
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
                    partition_by: list[str] | None = None):
    """Write ``df`` to the Hudi table at ``path`` as one commit; returns the completed instant
    (``None`` when ``mode="ignore"`` found a table). ``options``: Hudi's datasource write keys
    (``hoodie.datasource.write.operation``, ``.recordkey.field``, ``.precombine.field``,
    ``.partitionpath.field``, ``.table.type``, ``hoodie.table.name``, any ``hoodie.*`` write
    option) and ``storage_options`` (fsspec options as JSON)."""
    mode = _MODE_ALIASES.get(mode.lower() if isinstance(mode, str) else mode, mode.lower() if mode else mode)
    if mode not in MODES:
        raise InvalidOptionError(f"save mode must be one of {', '.join(MODES)}, got {mode!r}")
    raw = {str(k): v for k, v in (options or {}).items() if v is not None}
    storage = Storage(path, _storage_options(raw))
    operation = option(raw, "hoodie.datasource.write.operation")
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
    return DistributedWrite(df, storage, operation, opts, exists).run()


class DistributedWrite:
    """One commit of a DataFrame; see the module docstring for the steps."""

    def __init__(self, df, storage: Storage, operation: str, options: Mapping[str, Any], exists: bool):
        from hudi_format.options import OPERATIONS, WRITE_SCOPES, validate
        if operation not in OPERATIONS:
            raise InvalidOptionError(f"unknown write operation {operation!r}; use one of {', '.join(OPERATIONS)}")
        self.df = df
        self.spark = df.sparkSession
        self.storage = storage
        self.op = operation
        self.options = validate(options, WRITE_SCOPES)
        self.exists = exists
        if exists:
            self.config = TableConfig.load(storage)
            self._check_existing()
        else:
            self.config = new_table_config(storage, self.options)

    def _check_existing(self) -> None:
        """Options that contradict the table are refused, as ``hudi_format.write`` does."""
        from hudi_format.writer.options import check_against_table
        check_against_table(self.config, self.options, self.storage.url)

    # -- driver ------------------------------------------------------------------------------
    def run(self):
        from hudi_format.read.snapshot import ReadState
        from hudi_format.read.table_schema import latest_data_schema
        from hudi_format.schema import arrow_to_avro_schema, avro_to_arrow_schema
        from hudi_format.write_api import post_commit, recover
        from hudi_format.timeline import Timeline
        from hudi_format.view import FileSystemView
        from hudi_format.writer.input import check_fields
        from hudi_format.writer.schema_evolution import evolve, incoming_schema

        if self.exists:
            recover(self.storage, self.config, self.options)
        timeline = Timeline.load(self.storage, self.config) if self.exists else None
        state = ReadState(self.config, timeline) if timeline is not None else None
        existing = latest_data_schema(self.config, timeline) if timeline is not None else None
        if existing is None and self.config.create_schema:
            existing = avro_to_arrow_schema(self.config.create_schema)

        in_spark = spark_arrow_schema(self.df.schema)
        in_hudi = hudi_schema(in_spark)
        check_fields(in_hudi.empty_table(), self.config, self.op)   # never fill key fields with nulls
        deleting = self.op in ("delete", "delete_partition")
        if deleting:
            schema = existing or incoming_schema(in_hudi.empty_table())
            key_schema = pa.schema([f for f in schema if f.name in in_hudi.names])
        else:
            schema = evolve(existing, incoming_schema(in_hudi.empty_table()))
            key_schema = schema
        if schema is None or len(schema) == 0:
            raise InvalidOptionError("the table has no schema yet: its first write must carry data")

        client = _PlanningClient(self.storage, self.config, self.options, create=not self.exists)
        full_schema = client._full_schema(schema)
        name = self.config.name
        avro = arrow_to_avro_schema(full_schema, f"{name}_record", f"hoodie.{name}")
        data_avro = arrow_to_avro_schema(schema, f"{name}_record", f"hoodie.{name}")
        keyer = tasks.Keyer.for_write(self.config, self.options, in_hudi, key_schema, self.op)

        # 1-2. keys (or, without index tagging, counts per partition) to the driver; the core's plan
        key_cols = [c for c in keyer.columns if c in self.df.columns]
        keys_df = self.df.select(*key_cols).mapInArrow(
            functools.partial(tasks.keys_of, keyer=keyer.restrict(key_cols)),
            f"{tasks.KEY} string, {tasks.PARTITION} string")
        dedupe = client._should_dedupe(self.op)
        tagging = self.op in ("upsert", "delete") or (
            self.op == "insert" and option(self.options, "hoodie.datasource.write.insert.drop.duplicates"))
        if tagging:
            thin = keys_df.toArrow()
            if dedupe:
                thin = _unique_keys(thin)
        else:
            counts = keys_df.groupBy(tasks.PARTITION).count().toArrow()
            thin = _rows_from_counts(counts)
        if self.op == "bulk_insert" and thin.num_rows:
            client.sample = tasks.conform_batch(
                to_hudi_arrow(self.df.limit(50_000).toArrow(), in_hudi), schema, deleting)
        view = FileSystemView(self.storage, self.config)
        plan = client._plan(self.op, thin if self.op != "delete_partition" or thin.num_rows else None,
                            thin.column(tasks.KEY) if self.op != "delete_partition" else None,
                            thin.column(tasks.PARTITION), state, view, full_schema)
        buckets, assignment = _assignment(plan, thin, self.config, state, view, client, tagging)

        # 3-4. open the instant, shuffle, write on the executors, commit once
        job = tasks.WriteJob(
            url=self.storage.url, storage_options=self.storage.storage_options, config=self.config,
            options=self.options, schema=schema, full_schema=full_schema, avro=avro,
            in_schema=in_hudi, deleting=deleting, dedupe=dedupe, buckets=buckets, instant="")
        return self._execute(job, keyer, assignment, plan, state, client, data_avro, post_commit)

    def _execute(self, job, keyer, assignment, plan, state, client, data_avro, post_commit):
        from hudi_format.table_init import ensure_table, write_partition_metadata
        from hudi_format.transaction import Transaction, WriteResult
        from hudi_format.writer.client import _OPERATION_TYPES, _REPLACE_OPS, _json

        if not self.exists and not self.config.create_schema:
            self.config = TableConfig({**dict(self.config), "hoodie.table.create.schema": _json(data_avro)})
        ensure_table(self.storage, self.config, create=not self.exists)
        self.config = TableConfig.load(self.storage)
        job.config = self.config
        action = ("replacecommit" if self.op in _REPLACE_OPS
                  else "deltacommit" if self.config.is_mor else "commit")
        requested_meta = ({"operationType": _OPERATION_TYPES[self.op], "clusteringPlan": None,
                           "extraMetadata": {}, "version": 1} if action == "replacecommit" else None)
        # the core's one commit path: its abort removes every file the markers name
        with Transaction.begin(self.storage, self.config, action, self.options, plan=requested_meta) as txn:
            instant_time = job.instant = txn.instant_time
            for part in sorted({b.partition for b in job.buckets if b.kind == "create"}):
                write_partition_metadata(self.storage, part, instant_time, part.count("/") + 1 if part else 0)
            results = self._run_tasks(job, keyer, assignment)
            stats: dict[str, list[dict]] = defaultdict(list)
            written: set[str] = set()
            for part, stat, files in zip(*(results.column(c).to_pylist() for c in ("partition", "stat", "files"))):
                stats[part].append(json.loads(stat))
                written.update(json.loads(files))
            _reconcile_markers(self.storage, instant_time, written)
            metadata = {"partitionToWriteStats": dict(stats), "compacted": False,
                        "extraMetadata": {"schema": _json(data_avro)},
                        "operationType": _OPERATION_TYPES[self.op]}
            if self.op in _REPLACE_OPS:
                metadata["partitionToReplaceFileIds"] = {p: list(f) for p, f in plan.replaced.items()}
            client.config = self.config
            done = client._commit(txn, metadata, plan, state)
        errors = post_commit(self.storage, TableConfig.load(self.storage), self.options)
        return WriteResult.of(done, errors or ())

    def _run_tasks(self, job, keyer, assignment) -> pa.Table:
        """Shuffle the rows into one Spark partition per bucket and write them there."""
        from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType
        if not job.buckets:
            return pa.table({"partition": pa.array([], pa.string()), "stat": pa.array([], pa.string()),
                             "files": pa.array([], pa.string())})
        routed_schema = StructType(list(self.df.schema.fields) + [
            StructField(tasks.KEY, StringType()), StructField(tasks.PARTITION, StringType()),
            StructField(tasks.BUCKET, IntegerType()), StructField(tasks.DELETE, BooleanType()),
            StructField(tasks.SLOT, IntegerType())])
        routed = self.df.mapInArrow(functools.partial(tasks.route, keyer=keyer, assignment=assignment),
                                    routed_schema)
        out = routed.repartition(len(job.buckets), tasks.SLOT).mapInArrow(
            functools.partial(tasks.write_buckets, job=job), "partition string, stat string, files string")
        return out.toArrow()


class _PlanningClient:
    """The core's write client, planning from (key, partition) columns only; bulk insert sizes
    files from a sample of the real rows instead of the key columns it is given."""

    def __new__(cls, *args, **kwargs):
        from hudi_format.writer.client import WriteClient

        class PlanningClient(WriteClient):
            sample: pa.Table | None = None

            def _measured_record_size(self, table):
                return super()._measured_record_size(self.sample if self.sample is not None else table)

        return PlanningClient(*args, **kwargs)


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


def _assignment(plan, thin: pa.Table, config: TableConfig, state, view, client, tagging: bool):
    """The plan's file groups as buckets, and how each record finds its bucket.

    Records whose file group the plan decided from their key (updates, deletes, moves, small-file
    inserts after index tagging; inserts the plan drops) are looked up by (partition, key). All
    other inserts of a partition are spread over its new file groups in proportion to the
    records the plan gave each, by a hash of the key, as Hudi's ``UpsertPartitioner`` does; so
    the driver needs only counts for them, and records of one key always meet in one task."""
    from hudi_format.writer.client import _rows
    buckets: list[tasks.Bucket] = []
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

    slices = {(s.partition_path, s.file_id): s for s in client._latest_slices(state, view)} \
        if (plan.upserts or plan.deletes) else {}
    compacting, _ = client._pending_service_groups(state)
    for key in sorted(set(plan.upserts) | set(plan.deletes)):
        part, fid = key
        b = len(buckets)
        buckets.append(tasks.Bucket(
            kind="append" if config.is_mor else "merge", partition=part, file_slice=slices[key],
            num_updates=plan.updates.get(key, 0),
            compaction_instant=compacting.get(key) if config.is_mor and config.version < 8 else None))
        up, dels = _rows(plan.upserts.get(key, [])), _rows(plan.deletes.get(key, []))
        if tagging:
            pin(up, b, False)
            pin(dels, b, True)
        elif len(up):
            spread[part].append((b, len(up)))
    for part, rows in plan.new_groups:
        b = len(buckets)
        buckets.append(tasks.Bucket(kind="create", partition=part))
        spread[part].append((b, len(rows)))
        if tagging:
            for i in rows.to_pylist():
                entry = explicit.get((parts[i], keys[i]))
                if entry is not None and all(d for _, d in entry):
                    entry.append((tasks.SPREAD, False))   # a key moving here: deleted there, inserted here
                assigned.add(i)
    if tagging:
        for i in range(thin.num_rows):
            if i not in assigned:          # e.g. an insert of a known key with drop.duplicates
                explicit.setdefault((parts[i], keys[i]), []).append((-1, False))
    return buckets, tasks.Assignment(explicit=explicit, spread=dict(spread),
                                     slots=partition_keys(len(buckets)) if buckets else ())


def _reconcile_markers(storage: Storage, instant: str, written: set[str]) -> None:
    """Delete data files of this instant that no successful task reported (failed or
    speculative attempts), as Hudi's finalize-write does from the markers."""
    from hudi_format.writer.markers import read_markers
    for path, _ in read_markers(storage, instant):
        if path not in written and storage.exists(path):
            log.info("removing %s, written by a discarded task attempt of %s", path, instant)
            storage.delete(path)


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


# -- a new table's config, as ``hudi_format.write`` derives it from the options -----------------------
def new_table_config(storage: Storage, opts: Mapping[str, Any]) -> TableConfig:
    from hudi_format.table import new_table_config as from_options
    return from_options(storage, opts, table_type=None)


__all__ = ["write_dataframe", "DistributedWrite", "STORAGE_OPTIONS", "partition_keys"]
