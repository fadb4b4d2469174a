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


@attrs.frozen
class Keyer:
    """Record keys and partition paths of Spark batches, by the core's key generator."""

    config: Any
    options: dict
    in_schema: pa.Schema     # the DataFrame's columns as Hudi stores them
    schema: pa.Schema        # the writer schema (the key columns are cast to it)
    op: str

    @classmethod
    def for_write(cls, config, options, in_schema: pa.Schema, schema: pa.Schema, op: str) -> "Keyer":
        return cls(config, dict(options), in_schema, schema, op)

    @property
    def columns(self) -> list[str]:
        """The columns the keys depend on."""
        fields = [] if self.op == "delete_partition" else list(self.config.record_key_fields)
        return list(dict.fromkeys(fields + list(self.config.partition_fields)))

    def restrict(self, columns: list[str]) -> "Keyer":
        """The same keyer for batches carrying only ``columns``."""
        return attrs.evolve(self, in_schema=pa.schema([self.in_schema.field(c) for c in columns]))

    def keys(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        from hudi_format.keygen import KeyGenerator
        names = [c for c in self.columns if c in self.in_schema.names]
        data = to_hudi_arrow(batch.select(names), pa.schema([self.in_schema.field(c) for c in names]))
        data = conform_batch(data, self.schema, deleting=True)
        keygen = KeyGenerator.from_config(self.config, self.options)
        n = batch.num_rows
        keys = pc.cast(keygen.record_keys(data), pa.string()) if self.op != "delete_partition" and n \
            else pa.nulls(n, pa.string())
        parts = pc.cast(keygen.partition_paths(data), pa.string()) if n else pa.array([], pa.string())
        return _flat(keys), _flat(parts)


def keys_of(batches: Iterator[pa.RecordBatch], *, keyer: Keyer) -> Iterator[pa.RecordBatch]:
    """(record key, partition path) of every row."""
    for batch in batches:
        keys, parts = keyer.keys(batch)
        yield pa.RecordBatch.from_arrays([keys, parts], names=[KEY, PARTITION])


SPREAD = -2   # the record goes to one of its partition's new file groups, by key hash


@attrs.frozen
class Assignment:
    """Which bucket each record goes to (see ``spark_adapter.writer._assignment``)."""

    explicit: dict     # (partition, key) -> [(bucket, is_delete)]; bucket -1: dropped, SPREAD
    spread: dict       # partition -> [(bucket, planned records)]
    slots: tuple       # per bucket, a value that ``repartition(n, col)`` sends to Spark partition i

    def buckets_of(self, keys: list, parts: list) -> tuple[list[int], list[int], list[bool]]:
        """(row, bucket, is_delete) triples as three lists; a row may go to two buckets (a key
        moving partitions: a delete there and an insert here)."""
        import zlib

        import numpy as np
        rows, buckets, deletes = [], [], []
        to_spread: list[int] = []
        explicit = self.explicit
        for i, (p, k) in enumerate(zip(parts, keys)):
            entry = explicit.get((p, k)) if explicit else None
            if entry is None:
                to_spread.append(i)
                continue
            for b, d in entry:
                if b == SPREAD:
                    to_spread.append(i)
                elif b >= 0:
                    rows.append(i)
                    buckets.append(b)
                    deletes.append(d)
        if to_spread:
            by_part: dict[str, list[int]] = {}
            for i in to_spread:
                by_part.setdefault(parts[i], []).append(i)
            for p, idx in by_part.items():
                targets = self.spread.get(p)
                if not targets:
                    from hudi_format.errors import HudiError
                    raise HudiError(f"records of partition {p!r} were not planned: the DataFrame gave "
                                    f"different rows when it was computed again for writing; "
                                    f"persist() it before writing")
                ends = np.cumsum([n for _, n in targets])
                ids = np.array([b for b, _ in targets])
                h = np.fromiter((zlib.crc32(keys[i].encode()) if keys[i] is not None else 0 for i in idx),
                                dtype=np.int64, count=len(idx))
                chosen = ids[np.searchsorted(ends, h % ends[-1], side="right")]
                rows.extend(idx)
                buckets.extend(chosen.tolist())
                deletes.extend([False] * len(idx))
        return rows, buckets, deletes


def route(batches: Iterator[pa.RecordBatch], *, keyer: Keyer, assignment: Assignment) -> Iterator[pa.RecordBatch]:
    """Each row with its key, partition path, bucket, delete flag and shuffle slot."""
    slots = pa.array(assignment.slots, pa.int32())
    for batch in batches:
        if not batch.num_rows:
            continue
        keys, parts = keyer.keys(batch)
        rows, buckets, deletes = assignment.buckets_of(keys.to_pylist(), parts.to_pylist())
        take = pa.array(rows, pa.int64())
        bucket = pa.array(buckets, pa.int32())
        out = batch.take(take)
        cols = list(out.columns) + [keys.take(take), parts.take(take), bucket,
                                    pa.array(deletes, pa.bool_()), slots.take(bucket)]
        names = list(batch.schema.names) + [KEY, PARTITION, BUCKET, DELETE, SLOT]
        yield pa.RecordBatch.from_arrays(cols, names=names)


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
    from hudi_format.options import option

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
    from hudi_format.storage import Storage
    from hudi_format.writer import handles
    from hudi_format.writer.client import WriteClient

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
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
