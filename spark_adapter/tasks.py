"""What the executors run for a distributed write (pickled into ``mapInArrow``).

- :func:`with_keys`: every row's record key and partition path, by the core's key generator.
- :func:`write_buckets`: the rows of one bucket (file group) written through the core's write
  handles, with Hudi's write token ``<spark partition>-<stage>-<attempt>``; yields the write stat.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from .arrow import to_hudi_arrow

KEY = "__hoodie_key"
PARTITION = "__hoodie_partition"
BUCKET = "__hoodie_bucket"
DELETE = "__hoodie_delete"
SLOT = "__hoodie_slot"
_INTERNAL = (KEY, PARTITION, BUCKET, DELETE, SLOT)


@attrs.frozen
class Bucket:
    """One file group of the plan: ``create`` a new one, ``merge`` into (COW) or ``append`` to
    (MOR) the latest slice of an existing one."""

    kind: str
    partition: str
    file_slice: Any = None
    num_updates: int = 0
    compaction_instant: str | None = None


@attrs.define
class WriteJob:
    """Everything a task needs, computed once on the driver."""

    url: str
    storage_options: dict
    config: Any
    options: dict
    schema: pa.Schema          # writer data schema (no meta fields)
    full_schema: pa.Schema     # with meta fields, as written
    avro: dict
    in_schema: pa.Schema       # the DataFrame's columns as Hudi stores them
    deleting: bool
    dedupe: bool
    buckets: list
    instant: str


def conform_batch(table: pa.Table, schema: pa.Schema, deleting: bool) -> pa.Table:
    """The core's schema reconciliation of one batch (delete: only the columns it carries)."""
    from hudi_format.writer.schema_evolution import conform
    if deleting:
        cols = [c for c in table.column_names if c in schema.names]
        return conform(table.select(cols), pa.schema([schema.field(c) for c in cols]))
    return conform(table, schema)


def with_keys(batches: Iterator[pa.RecordBatch], *, config, options, in_schema: pa.Schema,
              schema: pa.Schema, op: str) -> Iterator[pa.RecordBatch]:
    """Append the record key and partition path columns to each batch (Spark layout kept)."""
    from hudi_format.keygen import KeyGenerator
    keygen = KeyGenerator.from_config(config, options)
    deleting = op in ("delete", "delete_partition")
    for batch in batches:
        data = conform_batch(to_hudi_arrow(batch, in_schema), schema, deleting)
        n = batch.num_rows
        keys = pc.cast(keygen.record_keys(data), pa.string()) if op != "delete_partition" and n \
            else pa.nulls(n, pa.string())
        parts = pc.cast(keygen.partition_paths(data), pa.string()) if n else pa.array([], pa.string())
        yield pa.RecordBatch.from_arrays(
            list(batch.columns) + [_flat(keys), _flat(parts)],
            schema=batch.schema.append(pa.field(KEY, pa.string())).append(pa.field(PARTITION, pa.string())))


def _flat(arr) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _task_token() -> tuple[int, str]:
    """Hudi's write token of this Spark task: ``<partition id>-<stage id>-<task attempt id>``."""
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        return 0, "0-0-0"
    return tc.partitionId(), f"{tc.partitionId()}-{tc.stageId()}-{tc.taskAttemptId()}"


def _context(job: WriteJob, storage):
    from hudi_format.read.merge import MergeSpec
    from hudi_format.writer import handles
    from hudi_format.writer.options import option

    @attrs.define
    class TaskWriteContext(handles.WriteContext):
        """One Spark task's context: every file it writes carries the task's write token."""

        task_id: int = 0
        token: str = "0-0-0"

        def next_token(self) -> tuple[int, str]:
            return self.task_id, self.token

    task_id, token = _task_token()
    opts = job.options
    return TaskWriteContext(
        storage=storage, instant=job.instant, schema=job.full_schema, avro_schema=job.avro,
        spec=MergeSpec.from_config(job.config), meta_fields=job.config.populate_meta_fields,
        table_version=job.config.version,
        log_block_format=option(opts, "hoodie.logfile.data.block.format"),
        compression=option(opts, "hoodie.parquet.compression.codec"),
        max_log_file_size=option(opts, "hoodie.logfile.max.size"),
        bloom={k: v for k, v in opts.items() if k.startswith(("hoodie.index.bloom.", "hoodie.bloom."))},
        task_id=task_id, token=token)


def write_buckets(batches: Iterator[pa.RecordBatch], *, job: WriteJob) -> Iterator[pa.RecordBatch]:
    """Write the buckets of this Spark partition (normally exactly one); yield their stats."""
    from hudi_format.errors import HudiError
    from hudi_format.storage import Storage
    from hudi_format.writer import handles
    from hudi_format.writer.client import WriteClient

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    if table.column(BUCKET).null_count:
        raise HudiError("some rows were not planned: the DataFrame gave different rows when it "
                        "was computed again for writing; persist() it before writing")
    storage = Storage(job.url, job.storage_options)
    ctx = _context(job, storage)
    client = WriteClient(storage, job.config, job.options)
    data_cols = [c for c in table.column_names if c not in _INTERNAL]
    try:
        for b in pc.unique(table.column(BUCKET)).to_pylist():
            rows = table.filter(pc.equal(table.column(BUCKET), b))
            bucket = job.buckets[b]
            data = conform_batch(to_hudi_arrow(rows.select(data_cols), job.in_schema), job.schema, job.deleting)
            is_delete = rows.column(DELETE)
            ups = data.filter(pc.invert(is_delete))
            up_keys = rows.column(KEY).filter(pc.invert(is_delete))
            if job.dedupe and ups.num_rows:
                up_parts = rows.column(PARTITION).filter(pc.invert(is_delete))
                ups, up_keys, _ = client._dedupe(ups, up_keys, up_parts)
            del_keys = pc.unique(rows.column(KEY).filter(is_delete))
            deletes = WriteClient._delete_keys(None, del_keys, pa.array(range(len(del_keys)), pa.int64()),
                                               bucket.partition)
            if not ups.num_rows:
                ups, up_keys = job.full_schema.empty_table(), pa.array([], pa.string())
            up_keys = _flat(up_keys)
            if bucket.kind == "create":
                stat = handles.create(ctx, bucket.partition, ups, up_keys)
            elif bucket.kind == "merge":
                stat = handles.merge(ctx, bucket.file_slice, ups, up_keys, deletes)
            else:
                stat = handles.append(ctx, bucket.file_slice, ups, up_keys, deletes,
                                      bucket.num_updates, bucket.compaction_instant)
            yield pa.RecordBatch.from_pydict({"partition": [bucket.partition], "stat": [json.dumps(stat)],
                                              "files": [json.dumps(list(ctx.written))]})
            ctx.written.clear()
    except BaseException:
        for path in ctx.written:
            try:
                storage.delete(path)
            except Exception:  # noqa: BLE001 - the driver's abort or the next rollback removes it
                pass
        raise
