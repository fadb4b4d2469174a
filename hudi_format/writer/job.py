"""One write as steps that any engine can run: prepare -> plan -> write buckets -> commit | abort.

- :func:`prepare_write` loads the table state once and settles the writer schema.
- :func:`plan_write` tags and sizes the records (from the rows, or from their keys and
  partition paths alone) into :class:`WriteBucket` values, one file group each, then opens the
  instant (requested, inflight) through the one commit path (:class:`Transaction`). A plan
  that fails (bad data, a file group being clustered) has written nothing.
- :func:`write_bucket` writes one bucket's rows; it needs only the bucket and the rows, so it
  runs in any thread or process, and returns a :class:`BucketResult` (the Hudi write stat).
- :func:`.commit.commit_write` commits every bucket's stat as one instant (table lock,
  conflict check, metadata table, completed file); :func:`abort_write` removes what was written.

``WriteClient.write`` is these steps in one process; ``hudi_format.engine`` exposes them to
engines (Spark, Ray, Dask...) with recovery and inline services around them.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Mapping, TypeVar

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base_file import footer_bloom, parquet_format
from ..chunks import one_array
from ..config import META_FIELDS, TableConfig
from ..errors import ConcurrentWriteError, FileMissingError, HudiError, InvalidOptionError
from ..keygen import KeyGenerator
from ..metadata.key_changes import KeyChanges
from ..metadata.init import named_off
from ..metadata.keys import RECORD_INDEX
from ..read.merge import IS_DELETED, MergeSpec, live_rows, merge_pieces, row_numbers
from ..read.snapshot import ReadState
from ..read.table_schema import latest_data_schema
from ..schema import arrow_to_avro_schema, avro_to_arrow_schema, table_record_name
from ..storage import Storage
from ..table_init import ensure_table, write_partition_metadata
from ..timeline import Instant, Timeline
from ..timeline.metadata import WriteStat
from ..transaction import Transaction
from ..transaction.snapshot import TableSnapshot
from ..view import FileSlice, FileSystemView
from . import handles, merge_handle
from .input import check_fields
from .new_table import as_list
from ..options import OPERATIONS, WRITE_SCOPES, option, validate
from ..options.write import KEY_SORTING_MODES
from .planning import REPLACE_OPS, TAGGING_OPS, Plan, WriteCounts, WritePlanner, concat_rows
from .schema_evolution import check_missing_columns, conform, evolve, incoming_schema

log = logging.getLogger(__name__)

OPERATION_TYPES = {"insert": "INSERT", "upsert": "UPSERT", "bulk_insert": "BULK_INSERT",
                   "delete": "DELETE", "insert_overwrite": "INSERT_OVERWRITE",
                   "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
                   "delete_partition": "DELETE_PARTITION"}
_EMPTY_ROWS = pa.array([], pa.int64())


_T = TypeVar("_T")


def compact_json(obj: Any) -> str:
    """JSON as Hudi's Jackson writes it into commit metadata (no spaces)."""
    return json.dumps(obj, separators=(",", ":"))


def check_operation(operation: Any) -> str:
    """The operation's canonical name, or ``InvalidOptionError`` listing the known ones."""
    op = operation.strip().lower() if isinstance(operation, str) else operation
    if op not in OPERATIONS:
        raise InvalidOptionError(f"unknown write operation {operation!r}; use one of {', '.join(OPERATIONS)}")
    return op


OPERATION_OPTION = "hoodie.datasource.write.operation"


def resolve_operation(operation: Any, options: Mapping[str, Any] | None) -> str:
    """The write's operation: the argument, else ``hoodie.datasource.write.operation`` (an
    option map pasted from a Hudi job carries it), else upsert, Hudi's default. Both, naming
    different operations, is an ``InvalidOptionError``: which one was meant is unknown."""
    given = (options or {}).get(OPERATION_OPTION)
    given = None if given is None or (isinstance(given, str) and not given.strip()) else given
    if operation is None:
        return check_operation("upsert" if given is None else given)
    op = check_operation(operation)
    if given is not None and check_operation(given) != op:
        raise InvalidOptionError(f"operation={operation!r} and option {OPERATION_OPTION}={given!r} name "
                                 f"different operations; pass one")
    return op


def should_dedupe(op: str, options: Mapping[str, Any]) -> bool:
    """Precombine the batch (one record per key) before writing, as Hudi's options say."""
    if op == "upsert":
        return bool(option(options, "hoodie.combine.before.upsert"))
    if op == "delete":
        return bool(option(options, "hoodie.combine.before.delete"))
    if op in ("insert", "bulk_insert", "insert_overwrite", "insert_overwrite_table"):
        return bool(option(options, "hoodie.combine.before.insert")
                    or option(options, "hoodie.datasource.write.insert.drop.duplicates"))
    return False


@attrs.frozen(eq=False)
class WriteSpec:
    """What every bucket of one write shares (picklable: shipped with each bucket)."""

    table_uri: str
    config: TableConfig
    options: Mapping[str, Any]
    operation: str
    schema: pa.Schema          # the writer's data schema (no meta fields)
    full_schema: pa.Schema     # as written: meta fields first, when the table populates them
    avro: dict                 # ``full_schema`` as Avro (log blocks, Parquet footers)

    @property
    def deleting(self) -> bool:
        return self.operation in ("delete", "delete_partition")

    @property
    def tracks_record_index(self) -> bool:
        """Whether the commit updates the metadata table's record index: then the write
        handles report the key changes of the files they write (:class:`KeyChanges`). Not
        when the options name it off: the commit drops it."""
        key = "hoodie.metadata.record.index.enable"
        return bool(option(self.options, "hoodie.metadata.enable")) and (
            bool(option(self.options, key))
            or (RECORD_INDEX in self.config.metadata_partitions and not named_off(self.options, key)))

    @property
    def keygen(self) -> KeyGenerator:
        return KeyGenerator.from_config(self.config, self.options)

    def conform(self, rows: pa.Table) -> pa.Table:
        """``rows`` cast to the writer schema (a delete keeps only the columns it carries)."""
        return self.conform_present(rows) if self.deleting else conform(rows, self.schema)

    def conform_present(self, rows: pa.Table) -> pa.Table:
        """The columns of ``rows`` that the writer schema has, cast to it (e.g. key columns)."""
        cols = [c for c in rows.column_names if c in self.schema.names]
        return conform(rows.select(cols), pa.schema([self.schema.field(c) for c in cols]))

    def keys(self, rows: pa.Table, dictionary: bool = False) -> tuple[pa.Array, pa.Array]:
        """(record key, partition path) of each of ``rows`` (conformed), as strings; the paths
        dictionary-encoded where :meth:`KeyGenerator.partition_paths` can (``dictionary``)."""
        keygen = self.keygen
        n = rows.num_rows
        keys = pc.cast(keygen.record_keys(rows), pa.string()) \
            if self.operation != "delete_partition" and n else pa.nulls(n, pa.string())
        if not n:
            return one_array(keys), pa.array([], pa.string())
        parts = keygen.partition_paths(rows, dictionary)
        if not pa.types.is_dictionary(parts.type):
            parts = pc.cast(parts, pa.string())
        return one_array(keys), one_array(parts)

    def dedupe(self, rows: pa.Table) -> pa.Array:
        """Row numbers of ``rows`` to keep: one record per key, the highest ordering value
        winning (Hudi's precombine), in their original order."""
        spec = MergeSpec.from_config(self.config)
        keygen = self.keygen
        spec = attrs.evolve(spec, event_time=bool(spec.ordering_fields), has_meta_fields=False,
                            keygen=KeyGenerator(keygen.record_key_fields, (), keygen.keygen_type))
        # a record flagged _hoodie_is_deleted competes like any other (Hudi's preCombine): when it
        # wins, the write handles apply it as a delete, so it must not vanish here
        numbered = rows.drop_columns([IS_DELETED]) if IS_DELETED in rows.column_names else rows
        numbered = numbered.append_column("__row", row_numbers(rows.num_rows))
        merged = merge_pieces([numbered], [], numbered.schema, spec)
        return pc.take(merged.column("__row"), pc.sort_indices(merged.column("__row")))

@attrs.frozen(eq=False)
class WriteBucket:
    """One file group of a write: ``create`` a new one, ``merge`` into (COW) or ``append`` to
    (MOR) the latest slice of an existing one. Picklable; carries what an executor needs."""

    spec: WriteSpec
    instant_time: str
    index: int                       # position in the plan; the default write token is index+1
    kind: str                        # create | merge | append
    partition: str
    file_id: str
    file_slice: FileSlice | None = None
    num_updates: int = 0             # append: how many records update existing ones
    compaction_instant: str | None = None   # v6 MOR: the pending compaction log files go under
    dedupe: bool = False             # precombine the rows in the task (planned from unique keys)
    num_records: int = 0             # planned records (inserts and updates, not deletes)


@attrs.frozen(eq=False)
class BucketResult:
    """What writing one bucket produced: Hudi's write stat and the files written."""

    index: int
    partition: str
    stat: WriteStat                  # Hudi's ``HoodieWriteStat`` of the file written
    files: tuple[str, ...]
    keys: KeyChanges | None = None   # its record index changes, when the table keeps that index


class WriteJob:
    """The driver's side of one write: the table state it planned against, the plan, and the
    open instant. Not shipped to workers (buckets are)."""

    def __init__(self, storage: Storage, config: TableConfig, options: dict[str, Any], operation: str,
                 create: bool, state: ReadState | None, spec: WriteSpec, data_avro: dict,
                 snapshot: TableSnapshot | None = None):
        self.storage = storage
        self.snapshot = snapshot   # the table as planned against (None: the write creates it)
        self.config = config
        self.options = options
        self.operation = operation
        self.create = create
        self.state = state
        self.spec = spec
        self.data_avro = data_avro
        self.view = snapshot.view if snapshot is not None else FileSystemView(storage, config)
        self.planner = WritePlanner(storage, config, options, MergeSpec.from_config(config))
        self.dedupe = should_dedupe(operation, options)
        self.plan: Plan | None = None
        self.buckets: list[WriteBucket] = []
        self.txn: Transaction | None = None
        self.done: Instant | None = None
        self.committed: TableSnapshot | None = None   # the table after this write's commit
        # per bucket: row numbers (of the planned, precombined input) to write and to delete
        self._rows: dict[int, tuple[pa.Array, pa.Array]] = {}
        self._kept: pa.Array | None = None       # input row of each precombined row
        self._input: tuple[pa.Table, pa.Array] | None = None   # planned rows (conformed), keys

    @property
    def instant_time(self) -> str | None:
        return self.txn.instant_time if self.txn is not None else None

    def rows_of(self, bucket: WriteBucket) -> tuple[pa.Array, pa.Array]:
        """Row numbers of the input given to :func:`plan_write` that go to ``bucket``:
        (records to write, records whose keys it deletes)."""
        rows, dels = self._rows.get(bucket.index, (_EMPTY_ROWS, _EMPTY_ROWS))
        if self._kept is not None:
            rows, dels = pc.take(self._kept, rows), pc.take(self._kept, dels)
        return rows, dels

    def inputs_of(self, bucket: WriteBucket) -> dict[str, Any]:
        """``write_bucket`` arguments for ``bucket`` from the rows given to ``plan_write``,
        already conformed and keyed (no key computed twice)."""
        if self._input is None:
            raise HudiError("this write was planned from keys: route the rows with rows_of()")
        table, keys = self._input
        rows, dels = self._rows.get(bucket.index, (_EMPTY_ROWS, _EMPTY_ROWS))
        return {"rows": table.take(rows), "keys": pc.take(keys, rows), "delete_keys": pc.take(keys, dels),
                "updates": self.updates_of(bucket)}

    def updates_of(self, bucket: WriteBucket) -> pa.Array | None:
        """Of the rows :meth:`rows_of` gives ``bucket`` (an append to an existing file group),
        which update a record the index found there: the plan puts them first
        (``bucket.num_updates``), the inserts it sizes into the file group after. ``None`` for
        other buckets (their handles tell inserts from updates themselves)."""
        if bucket.kind != "append" or bucket.index not in self._rows:
            return None
        n = len(self._rows[bucket.index][0])
        return pa.array(np.arange(n) < bucket.num_updates)


# -- prepare -------------------------------------------------------------------------------------
def prepare_write(storage: Storage, config: TableConfig, operation: str, options: Mapping[str, Any] | None,
                  data_schema: pa.Schema | None, *, create: bool = False,
                  timeline: Timeline | None = None, snapshot: TableSnapshot | None = None) -> WriteJob:
    """Settle the writer schema against the operation's table snapshot (``data_schema``: the
    columns of the data, as Arrow; ``None`` for a delete_partition by option). Writes nothing.
    ``snapshot`` (or just its ``timeline``): the table as the caller loaded it for this
    operation; loaded here when neither is given."""
    op = check_operation(operation)
    opts = validate(options, WRITE_SCOPES)
    if create:
        snapshot = None
    elif snapshot is None:
        snapshot = TableSnapshot(storage, config, timeline)
    else:
        config = snapshot.config
    timeline = snapshot.timeline if snapshot is not None else None
    state = snapshot.state if snapshot is not None else None
    existing = latest_data_schema(config, timeline) if timeline is not None else None
    if existing is None and config.create_schema:
        existing = avro_to_arrow_schema(config.create_schema)
    if data_schema is not None:
        empty = data_schema.empty_table()
        check_fields(empty, config, op)
        incoming = incoming_schema(empty)
        if op in ("delete", "delete_partition"):
            schema = existing or incoming
        else:
            if existing is not None:
                check_missing_columns(existing, incoming, opts)
            schema = evolve(existing, incoming)
    else:
        schema = existing
    if schema is None:
        raise InvalidOptionError("the table has no schema yet: its first write must carry data")
    fields = [f for f in schema if f.name not in META_FIELDS]
    meta = [pa.field(n, pa.string()) for n in META_FIELDS] if config.populate_meta_fields else []
    full_schema = pa.schema(meta + fields)
    _check_sort_columns(opts, full_schema)
    record = table_record_name(config.name)
    avro = arrow_to_avro_schema(full_schema, *record)
    data_avro = arrow_to_avro_schema(schema, *record)
    spec = WriteSpec(storage.url, config, opts, op, schema, full_schema, avro)
    return WriteJob(storage, config, opts, op, create, state, spec, data_avro, snapshot)


def _check_sort_columns(opts: Mapping[str, Any], schema: pa.Schema) -> None:
    """Inline clustering sorts by ``hoodie.clustering.plan.strategy.sort.columns``: a column the
    table will not have fails the write here, before anything is written, not the clustering
    after the commit (whose failure is only logged, and it never runs)."""
    if not (option(opts, "hoodie.clustering.inline") or option(opts, "hoodie.clustering.schedule.inline")):
        return
    value = option(opts, "hoodie.clustering.plan.strategy.sort.columns")
    missing = [c for c in as_list(value) if schema.get_field_index(c) < 0]
    if missing:
        raise InvalidOptionError(f"option hoodie.clustering.plan.strategy.sort.columns: unknown column(s) "
                                 f"{missing}; the table has {', '.join(schema.names)}")


# -- plan ----------------------------------------------------------------------------------------
def plan_write(job: WriteJob, data: pa.Table | None = None, *, keys: pa.Array | None = None,
               partitions: pa.Array | None = None, sample: pa.Table | None = None) -> list[WriteBucket]:
    """Plan the write into buckets and open its instant.

    Either ``data`` (the rows: conformed, keyed and precombined here; ``job.rows_of(bucket)``
    then gives each bucket's row numbers of ``data``), or ``keys`` and ``partitions`` (one entry
    per record; records of one key are then precombined by the task, ``bucket.dedupe``), with
    ``sample`` rows to size bulk_insert files from. Neither: delete_partition by option."""
    if job.plan is not None:
        raise HudiError("this write is already planned")
    op = job.operation
    kept = None
    if data is not None:
        table = job.spec.conform(data)
        rec_keys, parts = job.spec.keys(table, dictionary=True)
        if op != "delete_partition" and job.dedupe and table.num_rows:
            kept = job.spec.dedupe(table)
            if len(kept) == table.num_rows:
                kept = None
            else:
                table, rec_keys, parts = table.take(kept), pc.take(rec_keys, kept), pc.take(parts, kept)
        live = live_rows(table) if op not in TAGGING_OPS else None
        if live is not None:   # nothing to delete where nothing is looked up: never written
            idx = pc.indices_nonzero(live)
            table, rec_keys, parts = table.take(idx), pc.take(rec_keys, idx), pc.take(parts, idx)
            kept = idx if kept is None else pc.take(kept, idx)
        if op == "bulk_insert" and sorts_by_key(job.options) and table.num_rows > 1:
            plain = pc.cast(parts, pa.string()) if pa.types.is_dictionary(parts.type) else parts
            order = pc.sort_indices(pa.table({"p": plain, "k": rec_keys}), [("p", "ascending"), ("k", "ascending")])
            table, rec_keys, parts = table.take(order), pc.take(rec_keys, order), pc.take(parts, order)
            kept = order if kept is None else pc.take(kept, order)
        planned, dedupe_in_task = table, False
        job._input, job._kept = (table, rec_keys), kept
        plan_keys = rec_keys if op != "delete_partition" else None
    elif partitions is not None:
        parts = one_array(partitions)
        rec_keys = one_array(keys) if keys is not None else pa.nulls(len(parts), pa.string())
        planned = pa.table({"key": rec_keys, "partition": parts})
        plan_keys = rec_keys if op != "delete_partition" else None
        dedupe_in_task = job.dedupe
        if op == "delete_partition" and not len(parts):
            planned = None
    else:
        if op != "delete_partition":
            raise InvalidOptionError(f"operation {op!r} needs data")
        planned, parts, plan_keys, dedupe_in_task = None, None, None, False
    job.planner.sample = sample
    plan = job.planner.plan(op, planned, plan_keys, parts, job.state, job.view, job.spec.full_schema)
    return _open_planned(job, plan, dedupe_in_task)


def sorts_by_key(options: Mapping[str, Any] | None) -> bool:
    """Whether bulk_insert writes its records sorted by partition path and record key
    (``hoodie.bulkinsert.sort.mode`` GLOBAL_SORT or PARTITION_SORT: one process is one
    partition of the input), as Hudi's sorting partitioners order them."""
    return option(options, "hoodie.bulkinsert.sort.mode") in KEY_SORTING_MODES


def _open_planned(job: WriteJob, plan: Plan, dedupe: bool) -> list[WriteBucket]:
    """Keep the plan, open the instant, make the buckets (a failure aborts the instant)."""
    job.plan = plan
    _open(job)
    try:
        job.buckets = _buckets(job, plan, dedupe)
        for part in sorted({b.partition for b in job.buckets if b.kind == "create"}):
            write_partition_metadata(job.storage, part, job.txn.instant_time, part.count("/") + 1 if part else 0)
    except BaseException:
        abort_write(job)
        raise
    return list(job.buckets)


def open_streamed(job: WriteJob) -> None:
    """Open the instant of a write whose buckets are made while its input streams in
    (:mod:`.stream`): new file groups and small-file top-ups, reported to :func:`.commit.commit_write`
    as they are written. A failure aborts the instant."""
    if job.plan is not None:
        raise HudiError("this write is already planned")
    _open_planned(job, Plan(), False)


def _open(job: WriteJob) -> None:
    """Create the table (first write) and open the instant: requested, inflight, heartbeat."""
    config = job.config
    if job.create and not config.create_schema:
        # As Hudi: the first writer's schema is kept in hoodie.properties, so a table whose
        # every commit is rolled back (or not yet written) still has its columns.
        config = TableConfig({**dict(config), "hoodie.table.create.schema": compact_json(job.data_avro)})
    # an existing table's config is the snapshot's (loaded once); the commit reloads it under its lock
    job.config = ensure_table(job.storage, config, create=True) if job.create else config
    job.spec = attrs.evolve(job.spec, config=job.config)
    op = job.operation
    action = "replacecommit" if op in REPLACE_OPS else "deltacommit" if job.config.is_mor else "commit"
    # Hudi records the operation of a replacecommit in its requested file.
    requested = ({"operationType": OPERATION_TYPES[op], "clusteringPlan": None, "extraMetadata": {},
                  "version": 1} if action == "replacecommit" else None)
    job.txn = Transaction.begin(job.storage, job.config, action, job.options, plan=requested)


def _buckets(job: WriteJob, plan: Plan, dedupe: bool) -> list[WriteBucket]:
    instant = job.txn.instant_time
    existing = sorted(set(plan.upserts) | set(plan.deletes) | set(plan.records) | set(plan.deleted))
    slices = {(s.partition_path, s.file_id): s
              for s in job.planner.latest_slices(job.state, job.view, {p for p, _ in existing})} if existing else {}
    compacting, _ = job.planner.pending_service_groups(job.state)
    mor = job.config.is_mor
    out: list[WriteBucket] = []
    for key in existing:
        part, fid = key
        up, dels = concat_rows(plan.upserts.get(key, [])), concat_rows(plan.deletes.get(key, []))
        job._rows[len(out)] = (up, dels)
        out.append(WriteBucket(
            job.spec, instant, len(out), "append" if mor else "merge", part, fid, slices[key],
            num_updates=plan.updates.get(key, 0),
            compaction_instant=compacting.get(key) if mor and job.config.version < 8 else None,
            dedupe=dedupe, num_records=len(up) + plan.records.get(key, 0)))
    for part, rows in plan.new_groups:
        job._rows[len(out)] = (rows, _EMPTY_ROWS)
        out.append(WriteBucket(job.spec, instant, len(out), "create", part, handles.new_file_id(),
                               dedupe=dedupe, num_records=len(rows)))
    for part, n in plan.new_counts:
        out.append(WriteBucket(job.spec, instant, len(out), "create", part, handles.new_file_id(),
                               dedupe=dedupe, num_records=n))
    return out


def plan_write_counts(job: WriteJob, counts: WriteCounts, sample: pa.Table | None = None) -> list[WriteBucket]:
    """Plan a write whose records an engine tagged on its workers (:mod:`.index_lookup`) from
    their counts alone, and open its instant. The engine routes each record itself: updates and
    deletes to the bucket of the file group the index found, inserts of a partition spread over
    the partition's buckets in proportion to ``bucket.num_records - bucket.num_updates``
    (records of one key always to one bucket, which precombines them when ``bucket.dedupe``)."""
    if job.plan is not None:
        raise HudiError("this write is already planned")
    job.planner.sample = sample
    plan = job.planner.plan_counts(job.operation, counts, job.state, job.view)
    return _open_planned(job, plan, job.dedupe)


# -- write ---------------------------------------------------------------------------------------
def write_bucket(storage: Storage, bucket: WriteBucket, rows: pa.Table | None, *, keys: pa.Array | None = None,
                 deletes: pa.Table | None = None, delete_keys: pa.Array | None = None,
                 write_token: str | None = None, updates: pa.Array | None = None) -> BucketResult:
    """Write one bucket: ``rows`` to insert or update (keys by the table's key generator
    unless ``keys`` is given) and records to delete (``deletes`` rows or ``delete_keys``).
    ``write_token``: Hudi's ``<task>-<stage>-<attempt>`` for the file names (default: from the
    bucket index). ``updates`` (bool per row): the row updates a record the index found in this
    bucket's file group, whose record index entry then stays as it is (Hudi's rule; ``None``:
    every row of an append is reported to the index). A failure removes the files this call wrote."""
    spec = bucket.spec
    ups: pa.Table | None = spec.conform(rows) if rows is not None and rows.num_rows else None
    up_keys = pa.array([], pa.string())
    if updates is not None:
        updates = one_array(updates)
        if len(updates) != (0 if ups is None else ups.num_rows) or updates.null_count:
            raise HudiError(f"bucket {bucket.index}: updates must flag each of its "
                            f"{0 if ups is None else ups.num_rows} rows (got {len(updates)})")
    if ups is not None:
        up_keys = one_array(keys) if keys is not None else spec.keys(ups)[0]
        if bucket.dedupe:
            keep = spec.dedupe(ups)
            if len(keep) != ups.num_rows:
                ups, up_keys = ups.take(keep), pc.take(up_keys, keep)
                updates = pc.take(updates, keep) if updates is not None else None
    if ups is None:
        ups = spec.full_schema.empty_table()
    if delete_keys is None and deletes is not None and deletes.num_rows:
        delete_keys = spec.keys(spec.conform(deletes))[0] if spec.operation != "delete_partition" else None
    dels = handles.delete_records(delete_keys, bucket.partition) \
        if delete_keys is not None and len(delete_keys) else None
    ctx = write_context(storage, bucket, write_token)
    try:
        if bucket.kind == "create":
            stat = handles.create(ctx, bucket.partition, ups, up_keys)
        elif bucket.kind == "merge":
            stat = retryable(lambda: merge_handle.merge(ctx, bucket.file_slice, ups, up_keys, dels))
        else:
            stat = retryable(lambda: handles.append(ctx, bucket.file_slice, ups, up_keys, dels,
                                                     bucket.num_updates, bucket.compaction_instant, updates))
    except BaseException:
        for path in ctx.written:
            try:
                if storage.exists(path):
                    storage.delete(path)
            except (HudiError, OSError) as exc:   # the abort, or the next rollback, removes it
                log.warning("could not remove %s of a failed bucket: %s", path, exc)
        raise
    return BucketResult(bucket.index, bucket.partition, stat, tuple(ctx.written), ctx.keys)


def retryable(run: Callable[[], _T]) -> _T:
    """``run()``, with a file of the table gone since this write listed it (a clean, clustering
    or rollback of another process removed it) reported as the conflict it is: a retry lists
    the table again."""
    try:
        return run()
    except FileMissingError as exc:
        raise ConcurrentWriteError(f"{exc} (removed by another process since this write read the "
                                   "table); retry the write") from exc


def write_context(storage: Storage, bucket: WriteBucket, write_token: str | None = None) -> handles.WriteContext:
    """The write handles' context for ``bucket``: its instant, schema, file id, write token
    (``write_token``, else from the bucket index) and the file format options."""
    spec = bucket.spec
    task = bucket.index + 1
    token = (int(write_token.split("-", 1)[0]), write_token) if write_token else (task, f"{task}-1-{task}")
    opts = spec.options
    return handles.WriteContext(
        storage=storage, instant=bucket.instant_time, schema=spec.full_schema, avro_schema=spec.avro,
        spec=MergeSpec.from_config(spec.config), meta_fields=spec.config.populate_meta_fields,
        table_version=spec.config.version,
        log_block_format=option(opts, "hoodie.logfile.data.block.format"),
        parquet=parquet_format(opts),
        max_log_file_size=option(opts, "hoodie.logfile.max.size"),
        bloom=footer_bloom(opts),
        file_id=bucket.file_id, token=token, track_keys=spec.tracks_record_index)


def abort_write(job: WriteJob) -> None:
    """Undo the write: its files (every marker's), the metadata table's part, its instant."""
    if job.txn is not None and job.done is None:
        job.txn.abort()
