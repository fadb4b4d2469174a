"""Distributed write of a Spark DataFrame as one Hudi commit.

The driver does what only it can do: open the instant and plan it. Executors do the bytes.
A bulk_insert that does not precombine skips the steps below: each task writes its own rows
(:mod:`.bulk`, Hudi's ``hoodie.bulkinsert.sort.mode``).

1. Keys: a ``mapInArrow`` stage over the key columns computes every row's record key and
   partition path with the core's key generator; they stay on the executors.
2. Tag (upsert, delete, insert with ``insert.drop.duplicates``; :mod:`.tagging`): the engine
   API plans the index's lookup tasks from the table state (``engine.plan_index_lookup``).
   A non-global simple or bloom index (lookup tasks are file slices of the records' own
   partitions) tags the rows where they are: the rows go by partition path to tasks that
   run their partitions' lookups and tag them (one shuffle, no join), unless one partition
   holds more than a core's share of many records. Otherwise (global indexes, record
   index, such a partition) the executors run the lookups (the keys of candidate file slices,
   or the incoming keys checked against bloom filters or the record index) and Spark joins
   the answer with the rows. Each tagged record is an update, insert, delete, move or drop
   (``IndexLookup.actions``, the core planner's own rule); the tagged rows are kept (a local
   checkpoint) and only their counts per file group and partition reach the driver (other
   operations: counts per partition).
3. Plan: ``engine.plan_write(job, counts=...)`` (small-file top-up, file sizing, replaced
   file groups, pending-clustering checks, as the core plans a batch it holds) turns the
   counts into *buckets*: an existing file group to merge into (COW) or append to (MOR), or a
   new file group; it opens the instant.
   A write without an index (bulk_insert, insert) whose partition path is a plain rendering
   of the values is counted by Spark per partition value instead (:mod:`.spread`): the rows
   then cross into Python once, in the task writing them, which computes their keys.
4. Route and shuffle: the tagged rows (kept from step 2) get their
   bucket by Spark expressions and a broadcast join with the plan (:mod:`.spread`; a
   timestamp-based key generator in a ``mapInArrow``): updates and deletes that of the file group the index found;
   inserts of a partition are spread over its buckets by a hash of the key, in proportion to
   the plan, as Hudi's ``UpsertPartitioner`` does. ``repartition(n_tasks, slot)`` sends each
   bucket to the Spark partition the plan chose for it (:func:`pack_buckets`): one bucket per
   task, unless the buckets are small (then several, balanced by their bytes to read and write:
   a Python task costs tens of milliseconds, as much as merging a file of a few MB).
5. Write: each task writes its file groups one by one with ``hudi_format.engine.write_bucket``
   and Hudi's write token ``<partition>-<stage>-<attempt>`` and returns each bucket's result;
   the driver commits them as one instant (``engine.commit``) or aborts (``engine.abort``).

The driver receives one row per partition, file group and bucket, never one per record. What
the tasks need of the plan that grows with the table (the buckets, the index's lookup tasks, the
assignment) reaches them as broadcasts, unpickled once per Python worker, not in every task
(:mod:`.shipping`).
The DataFrame is computed twice (keys, then rows): a source that can give different rows on a
second computation must be ``persist()``-ed first; records of a partition the plan never saw
fail the write instead of being dropped.

Failures: the tagged rows are a local checkpoint (no lineage to recompute them from): an
executor lost between tagging and writing fails the write, which is aborted as below.
Files are written under a requested/inflight instant with write markers and a
heartbeat, so a failed task or job leaves nothing visible. A failed job is cleaned up at once
(its files, markers and pending instant removed); if the driver dies, the next write rolls the
instant back (its heartbeat has expired). Files of task attempts that Spark discarded (retries,
speculation) are deleted before the commit by reconciling markers with the stats, as Hudi does.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections import defaultdict
from typing import Any, Mapping

import pyarrow as pa

from hudi_format import engine
from hudi_format.engine import index as engine_index
from hudi_format.engine.index import is_global_index
from hudi_format.errors import ConcurrentWriteError, HudiError, InvalidOptionError
from hudi_format.options import WRITE_SCOPES, option, validate
from hudi_format.storage import Storage

from . import bulk, record_index, spread, tagging as tagging_tasks, tasks
from .arrow import hudi_schema, local_frame, spark_arrow_schema, string_fields, to_hudi_arrow
from .datasource import STORAGE_OPTIONS, storage_options as _storage_options
from .packing import least_loaded
from .shipping import Shipments

log = logging.getLogger(__name__)

# bulk_insert sizes its new files from the compressed size of this many of the first rows
SAMPLE_ROWS = 20_000
# a partition of up to this many incoming records may be tagged by one task
LOCAL_TAG_ROWS = 1_000_000
# a write task takes several buckets while their bytes (files read, records written) stay
# under this: a core merges ~25 MB of Parquet a second, so a task's fixed ~35 ms stays under
# ~5% of its work; never fewer tasks than TASKS_PER_CORE per core (balance)
TASK_BYTES = 32 << 20
TASKS_PER_CORE = 3
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
        self._shipments: Shipments | None = None   # the broadcasts of the attempt running

    # -- driver ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _step(self, name: str):
        """Log how long a step of the write took (``DEBUG``): where a slow write spends it."""
        start = time.perf_counter()
        try:
            yield
        finally:
            log.debug("%s %s: %s took %.2f s", self.op, self.path, name, time.perf_counter() - start)

    def run(self):
        """The write; an executor's failure is raised here as a :class:`HudiError` (Spark's
        own error is its cause), after the abort removed what the write wrote. A write that
        lost a conflict runs again from the DataFrame (recomputed) on the table as it is then,
        up to ``hoodie.write.num.retries.on.conflict.failures`` times, as Hudi's Spark writer."""
        retries = option(validate(self.options, WRITE_SCOPES), engine.RETRIES_ON_CONFLICT)
        return engine.retrying_conflicts(self._run_reported, retries, self.path)

    def _run_reported(self):
        self._shipments = Shipments(self.df.sparkSession)
        try:
            return self._run()
        except HudiError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith(("pyspark", "py4j")):
                cause = _root_cause(exc)
                if "ConcurrentWriteError: " in cause:   # a file the plan read was removed: retried
                    raise ConcurrentWriteError(f"writing {self.path}: a Spark task lost a conflict: {cause}") from exc
                raise HudiError(f"writing {self.path} failed in a Spark task: {cause}") from exc
            raise
        finally:
            self._shipments.release()

    def _ship(self, value):
        """``value`` (a list that grows with the table: buckets, lookup tasks) to bind in a
        task's function: a broadcast, unpickled once per Python worker (:mod:`.shipping`)."""
        return value if self._shipments is None else self._shipments.ship(value)

    def _run(self):
        in_hudi = hudi_schema(spark_arrow_schema(self.df.schema))
        # recovery, the table's config (or a new one's), the checks and the writer schema
        job = engine.begin_write(self.path, self.op, schema=in_hudi, options=self.options,
                                 storage_options=self.storage_options)
        if not len(job.spec.schema):
            raise InvalidOptionError("the table has no schema yet: its first write must carry data")
        keyer = tasks.Keyer(job.spec, in_hudi)
        if bulk.applies(job):      # each task writes its own rows (Hudi's sort modes): no planning
            return bulk.write(self.df, job, keyer, in_hudi, self.storage_options, self.extra_metadata)

        # 1-2. keys on the executors; tagged there; only counts come to the driver
        tagging = self.op in ("upsert", "delete") or (
            self.op == "insert" and bool(job.options and option(job.options, "hoodie.datasource.write.insert.drop.duplicates")))
        lookup, values, tagged = None, None, None
        persisted: list = []      # unpersisted when the write ends, whichever way
        try:
            if not tagging and spread.applies(keyer, self.df, job.dedupe):
                # counted by Spark per partition value; the rows reach Python once, to be written
                with self._step("count"):
                    values = spread.count(self.df, keyer)
                counts = engine.WriteCounts(inserts=values.inserts, partitions=frozenset(values.paths))
            elif tagging:
                # The records' keys are computed once (the rows cross into Python once before
                # they are written) and kept with the rows; the index's answer is joined on
                # once and kept too: counting and routing read the same tagged rows, as Hudi
                # persists its tagged records.
                parts = None
                if spread.renders_keys(keyer, self.df):     # keys by Spark expressions
                    with self._step("count"):
                        parts = spread.count(self.df, keyer)
                    keyed = spread.with_keys(self.df, keyer, parts)
                else:
                    keyed = self.df.mapInArrow(functools.partial(tasks.with_keys, keyer=keyer),
                                               tasks.with_key_schema(self.df))
                    persisted.append(keyed.persist())
                keys_df = keyed.select(tasks.KEY, tasks.PARTITION)
                incoming = parts.inserts if parts else None
                lookup = None
                if not is_global_index(job):
                    if incoming is None:
                        incoming = _per_partition(keys_df)
                    with self._step("plan index lookup"):
                        lookup = engine.plan_index_lookup(job, list(incoming))
                if lookup is not None and tagging_tasks.tags_locally(lookup) and self._spreads(incoming):
                    # the rows of each partition meet in one task, which runs that
                    # partition's lookups: no join, no keys shuffled apart from their rows
                    tagged = self._tag_rows(keyed, lookup, incoming)
                else:
                    if job.dedupe:      # one record per key: the task writing it merges its duplicates
                        keys_df = keys_df.dropDuplicates([tasks.KEY, tasks.PARTITION])
                    with self._step("index lookup"):
                        lookup, locations = self._lookup(job, keys_df, incoming, lookup)
                    persisted.append(locations)
                    joined = _join(keyed, locations, lookup)
                    check = engine_index.plan_outrank_check(job)
                    if check is not None:
                        with self._step("outranked moves"):
                            joined = self._keep_outranked(joined, check)
                    tagged = spread.tag(joined, lookup)
                # kept where they were computed. In local mode a local checkpoint (no columnar
                # cache to build: ~40% of the tagging stage; no executor can be lost); on a
                # cluster a cache, which Spark recomputes when an executor is lost (a local
                # checkpoint would fail the write then)
                tagged = (tagged.localCheckpoint(eager=False)
                          if local_master(str(self.df.sparkSession.sparkContext.master)) else tagged.persist())
                persisted.append(tagged)
                with self._step("count tagged"):
                    counts = _write_counts(spread.count_tagged(tagged, job.dedupe).toArrow())
                for df in persisted[:-1]:     # the tagged rows hold what the write needs
                    _release(df)
            else:
                key_cols = [c for c in keyer.columns if c in self.df.columns]
                keys_df = self.df.select(*key_cols).mapInArrow(
                    functools.partial(tasks.keys_of, keyer=keyer.restrict(key_cols)),
                    f"{tasks.KEY} string, {tasks.PARTITION} string")
                per_partition = keys_df.groupBy(tasks.PARTITION).count().toArrow()
                parts = per_partition.column(tasks.PARTITION).to_pylist()
                ns = per_partition.column("count").to_pylist()
                counts = engine.WriteCounts(
                    inserts={} if self.op == "delete_partition" else dict(zip(parts, ns)),
                    partitions=frozenset(parts))
            sample = None
            if self.op == "bulk_insert" and counts.inserts:
                with self._step("sample"):
                    sample = job.spec.conform(to_hudi_arrow(self.df.limit(SAMPLE_ROWS).toArrow(), in_hudi))
            # 3-4. plan from counts (opens the instant), shuffle, write on the executors, commit once
            with self._step("plan"):
                buckets = engine.plan_write(job, counts=counts, sample=sample)
            try:
                assignment = _assignment(buckets, lookup, pack_buckets(
                    buckets, engine_index.record_size_estimate(job),
                    self.df.sparkSession.sparkContext.defaultParallelism))
                staging = record_index.staged_by_executors(job)
                with self._step(f"write {len(buckets)} buckets"):
                    results = self._run_tasks(buckets, keyer, assignment, tagged, values,
                                              job.instant_time if staging else None)
                stats = [engine.BucketResult(index=b, partition=buckets[b].partition,
                                             stat=engine.WriteStat.from_dict(json.loads(stat)),
                                             files=tuple(json.loads(files)))
                         for b, stat, files in zip(*(results.column(c).to_pylist()
                                                     for c in ("bucket", "stat", "files")))]
                # the record index changes stay on the executors (staged files)
                update = record_index.update_of(job, self.df.sparkSession, self.storage_options, results)
                with self._step("commit"):
                    return engine.commit(job, stats, extra_metadata=self.extra_metadata, record_index=update)
            except BaseException:
                engine.abort(job)     # every file its markers name, the pending instant
                raise
            finally:
                if job.instant_time is not None and record_index.staged_by_executors(job):
                    record_index.remove_staged(job.storage, job.instant_time)
        finally:
            for df in persisted:
                _release(df)

    def _spreads(self, incoming: dict) -> bool:
        """Whether tagging by partition is safe: no partition brings more than
        :data:`LOCAL_TAG_ROWS` records (one task holds a partition's rows in its Python worker,
        so the bound is absolute, whatever the cluster's size); else (say one partition of a
        big table) the lookups run per file slice and Spark joins their answer."""
        return not incoming or max(incoming.values()) <= LOCAL_TAG_ROWS

    def _tag_rows(self, keyed, lookup, incoming: dict):
        """``keyed`` tagged as :func:`spread.tag` tags rows (with ``FIRST``): the rows
        shuffled by partition path to the tasks that run their partition's lookups
        (:func:`tagging.tag_rows`)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType, StringType, StructField, StructType
        if not lookup.tasks:     # new partitions only: every record is new
            return spread.tag(keyed.select("*", F.lit(None).cast("string").alias(tasks.FOUND_IN),
                                           F.lit(None).cast("string").alias(tasks.FILE_ID)), lookup)
        parallelism = self.df.sparkSession.sparkContext.defaultParallelism
        width = max(1, min(len(incoming), 2 * parallelism))
        schema = StructType(list(keyed.schema.fields) + [StructField(tasks.FIRST, BooleanType())] + [
            StructField(c, StringType()) for c in (tasks.KIND, tasks.TARGET_PARTITION, tasks.TARGET_FILE)])
        return keyed.repartition(width, tasks.PARTITION).mapInArrow(
            functools.partial(tagging_tasks.tag_rows, lookup=self._ship(lookup), storage_options=self.storage_options),
            schema)

    def _lookup(self, job, keys_df, incoming: dict | None = None, lookup=None):
        """The index's lookup tasks (``lookup``: when planned already) and, computed on the
        executors, ``(key, found_in, file_id)`` of the incoming keys the table holds,
        persisted. ``incoming``: the records per partition, when already known (else counted
        here, one row per partition)."""
        spark = self.df.sparkSession
        if lookup is None:
            if incoming is None and not is_global_index(job):
                incoming = _per_partition(keys_df)
            lookup = engine.plan_index_lookup(job, None if is_global_index(job) else list(incoming or ()))
        n = len(lookup.tasks)
        if not n:
            return lookup, local_frame(spark, [], string_fields(tasks.KEY, tasks.FOUND_IN, tasks.FILE_ID))
        opts = self.storage_options
        if incoming is None and not lookup.probing:
            incoming = _per_partition(keys_df)
        sent, listed = _keys_moved(lookup, incoming, engine_index.record_size_estimate(job))
        probing = lookup.probing or sent < listed
        # a Python task costs tens of milliseconds however few keys it has: as many as keep
        # every core busy, more only for keys by the million
        parallelism = spark.sparkContext.defaultParallelism
        width = max(1, min(n, 4 * parallelism, max(parallelism, -(-min(sent, listed) // 1_000_000))))
        shipped = self._ship(lookup)
        if not probing:
            found = spark.range(0, n, 1, width).mapInArrow(
                functools.partial(tagging_tasks.list_keys, lookup=shipped, storage_options=opts),
                tagging_tasks.LOCATIONS_SCHEMA)
        else:
            if any(t.kind == engine_index.BLOOM for t in lookup.tasks):
                ranges = spark.range(0, n, 1, width).mapInArrow(
                    functools.partial(tagging_tasks.key_ranges, lookup=shipped, storage_options=opts),
                    tagging_tasks.RANGES_SCHEMA).toArrow().sort_by("task")
                lo, hi = ranges.column("lo").to_pylist(), ranges.column("hi").to_pylist()
                lookup = lookup.with_key_ranges([(a, b) if a is not None and b is not None else None
                                                 for a, b in zip(lo, hi)])
                shipped = self._ship(lookup)
            found = tagging_tasks.pairs(keys_df, lookup, shipped).repartition(width, tagging_tasks.TASK).mapInArrow(
                functools.partial(tagging_tasks.run_lookups, lookup=shipped, storage_options=opts),
                tagging_tasks.LOCATIONS_SCHEMA)
        return lookup, found.persist()

    def _keep_outranked(self, joined, check):
        """``joined`` with the keys an upsert would move to another partition but whose stored
        record outranks the incoming one flagged (``tasks.OUTRANKED``): they stay where they
        are (:func:`spread.tag`). The moving records are counted (one small job); when there
        are any, the executors read the stored ordering values of their keys only, grouped by
        the file group holding them."""
        from pyspark.sql import functions as F
        moving = joined.filter(F.col(tasks.FILE_ID).isNotNull() & (F.col(tasks.FOUND_IN) != F.col(tasks.PARTITION)))
        cols = [tasks.KEY, tasks.FOUND_IN, tasks.FILE_ID, *[c for c in check.ordering_fields if c in joined.columns]]
        if len(cols) == 3:
            return joined
        moving = moving.select(*cols)
        n = moving.count()
        if not n:
            return joined
        width = max(1, min(4 * joined.sparkSession.sparkContext.defaultParallelism, -(-n // 100_000)))
        flags = moving.repartition(width, tasks.FOUND_IN, tasks.FILE_ID).mapInArrow(
            functools.partial(tagging_tasks.outranked_keys, check=self._ship(check), storage_options=self.storage_options),
            tagging_tasks.OUTRANKED_SCHEMA).groupBy(tasks.KEY).agg(
            F.min(tasks.OUTRANKED).alias(tasks.OUTRANKED))
        return joined.join(F.broadcast(flags) if n <= 1_000_000 else flags, on=[tasks.KEY], how="left")

    def _run_tasks(self, buckets: list, keyer, assignment, tagged, values, staging: str | None) -> pa.Table:
        """Shuffle the rows into one Spark partition per bucket and write them there.
        ``staging``: the instant whose record index changes the tasks stage."""
        from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType
        if not buckets:
            return pa.table({"bucket": pa.array([], pa.int32()), "stat": pa.array([], pa.string()),
                             "files": pa.array([], pa.string()), "keys": pa.array([], pa.string())})
        write = functools.partial(tasks.write_buckets, buckets=self._ship(buckets), in_schema=keyer.in_schema,
                                  storage_options=self.storage_options, keyer=keyer, record_index=staging)
        if values is not None:       # routed by Spark expressions; keys computed where written
            routed = spread.route(self.df, values, assignment, list(keyer.spec.config.record_key_fields))
            return routed.repartition(assignment.width, tasks.SLOT).mapInArrow(
                write, tasks.RESULT_SCHEMA).toArrow()
        if tagged is not None:       # the tagged rows, the plan applied by Spark expressions
            routed = spread.route_tagged(tagged, assignment)
        else:      # a key generator spread cannot render: keys and buckets in Python
            routed = self.df.mapInArrow(
                functools.partial(tasks.route, keyer=keyer, assignment=self._ship(assignment)),
                StructType(list(self.df.schema.fields) + [
                    StructField(tasks.KEY, StringType()), StructField(tasks.PARTITION, StringType()),
                    StructField(tasks.BUCKET, IntegerType()), StructField(tasks.DELETE, BooleanType()),
                    StructField(tasks.SLOT, IntegerType())]))
        return routed.repartition(assignment.width, tasks.SLOT).mapInArrow(
            write, tasks.RESULT_SCHEMA).toArrow()


def local_master(master: str) -> bool:
    """Whether Spark's ``master`` runs in local mode (driver and executors in one JVM, which no
    executor outlives): ``local``, ``local[N]``, ``local[N,F]``, ``local[*]``. Not
    ``local-cluster[...]``, whose executors are JVMs of their own that can be lost."""
    return master == "local" or master.startswith("local[")


def _release(df) -> None:
    """Drop what ``df`` keeps on the executors: its cache, or the blocks of its local
    checkpoint (which ``unpersist`` leaves to the garbage collector)."""
    df.unpersist()
    try:
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - not a checkpoint, or no JVM (the blocks go with the RDD)
        pass


def _root_cause(exc: BaseException) -> str:
    """The line of a Spark task's failure that says what went wrong (the Python exception of
    the task, else Spark's first line)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error: " in ln or "Exception: " in ln:
            return ln[:2000]
    return lines[0][:2000] if lines else type(exc).__name__


def _join(records, locations, lookup):
    """``records`` (with key and partition) left-joined with the index's answer: by key for a
    global index, by key and partition otherwise (``found_in`` is then the record's partition)."""
    if lookup.global_index:
        return records.join(locations, on=[tasks.KEY], how="left")
    from pyspark.sql import functions as F
    found = locations.withColumnRenamed(tasks.FOUND_IN, tasks.PARTITION)
    joined = records.join(found, on=[tasks.KEY, tasks.PARTITION], how="left")
    return joined.withColumn(tasks.FOUND_IN, F.when(F.col(tasks.FILE_ID).isNotNull(), F.col(tasks.PARTITION)))


def _per_partition(keys_df) -> dict[str, int]:
    """Incoming records per partition path (one row per partition reaches the driver)."""
    counts = keys_df.groupBy(tasks.PARTITION).count().toArrow()
    return dict(zip(counts.column(tasks.PARTITION).to_pylist(), counts.column("count").to_pylist()))


def _keys_moved(lookup, incoming: dict[str, int] | None, record_size: int) -> tuple[int, int]:
    """How many keys go between Spark and Python (about) if the incoming keys are sent to
    the file slices that may hold them (every slice of their partition; of the table for a
    global index), each slice answering with those it holds, and if instead every key of
    those slices is listed to be joined with the incoming ones. The simple index takes
    whichever moves fewer. A slice holds about its size over the table's record size.
    Without the incoming counts (a global index), sending looks dearer than listing."""
    files: dict = defaultdict(int)
    held: dict = defaultdict(int)
    for t in lookup.tasks:
        part = t.file_slice.partition_path if t.file_slice is not None else None
        files[part] += 1
        held[part] += (t.file_slice.total_size if t.file_slice is not None else 0) // max(record_size, 1)
    if incoming is None:
        listed = sum(held.values())
        return listed + 1, listed
    if lookup.global_index:
        return sum(incoming.values()) * len(lookup.tasks), sum(held.values())
    return (sum(n * files.get(p, 0) for p, n in incoming.items()),
            sum(held.get(p, 0) for p in incoming))


def _write_counts(counts: pa.Table) -> "engine.WriteCounts":
    """The counts of :func:`spread.count_tagged` as the planner takes them."""
    updates, deletes, inserts = {}, {}, {}
    cols = [counts.column(c).to_pylist() for c in ("kind", "partition", "file_id", "n")]
    for kind, part, fid, n in zip(*cols):
        if kind == "I":
            inserts[part] = inserts.get(part, 0) + n
        else:
            target = updates if kind == "U" else deletes
            target[(part, fid)] = target.get((part, fid), 0) + n
    return engine.WriteCounts(updates=updates, deletes=deletes, inserts=inserts, partitions=frozenset(inserts))


def pack_buckets(buckets: list, record_size: int, parallelism: int) -> tuple[int, ...]:
    """The write task (Spark partition) of each bucket: one each, unless the buckets' bytes
    (the slice a merge reads, plus the planned records) fit fewer tasks of
    :data:`TASK_BYTES` than :data:`TASKS_PER_CORE` per core; then that many tasks (but never
    fewer), the largest bucket first to the least loaded task. Measured on local[2]: a
    ``mapInArrow`` task costs ~35 ms of a core, so an upsert of 10M rows into 90 file groups
    of ~3 MB paid ~1.5 s of its 12.7 s for its tasks alone."""
    n = len(buckets)
    work = [(b.file_slice.total_size if b.kind == "merge" and b.file_slice is not None else 0)
            + b.num_records * record_size for b in buckets]
    width = min(n, max(TASKS_PER_CORE * max(1, parallelism), -(-sum(work) // TASK_BYTES)))
    if width >= n:
        return tuple(range(n))
    return tuple(least_loaded(work, width))


def _assignment(buckets: list, lookup, task_of: tuple[int, ...]) -> tasks.Assignment:
    """How each record finds its bucket: updates and deletes by the file group the index found
    them in; inserts of a partition spread over its buckets in proportion to the inserts the
    plan gave each (new file groups and small files), by a hash of the key, as Hudi's
    ``UpsertPartitioner`` does, so records of one key always meet in one task. ``task_of``:
    each bucket's write task (:func:`pack_buckets`)."""
    located, located_buckets = [], []
    spread: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for b in buckets:
        if b.kind != "create":
            located.append(f"{b.partition}\0{b.file_id}")
            located_buckets.append(b.index)
        inserts = b.num_records - (b.num_updates if b.kind != "create" else 0)
        if inserts > 0:
            spread[b.partition].append((b.index, inserts))
    return tasks.Assignment(located=tuple(located), located_buckets=tuple(located_buckets),
                            spread=dict(spread), slots=_slots(task_of), lookup=lookup,
                            width=max(task_of, default=0) + 1)


def _slots(task_of: tuple[int, ...]) -> tuple[int, ...]:
    """Per bucket, the value ``repartition(width, col)`` sends to its task's Spark partition."""
    if not task_of:
        return ()
    keys = partition_keys(max(task_of) + 1)
    return tuple(keys[t] for t in task_of)


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
