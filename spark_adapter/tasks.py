"""What the executors run for a distributed write (pickled into ``mapInArrow``).

- :func:`keys_of`: every row's record key and partition path, by the core's key generator.
- :func:`with_keys`: every row with its record key and partition path (to join with the index).
- :func:`route`: every row with its bucket (file group of the plan) and shuffle slot.
- :func:`write_buckets`: the rows of one bucket written through the engine API
  (``hudi_format.engine.write_bucket``) with Hudi's write token
  ``<spark partition>-<stage>-<attempt>``; yields the bucket's result.

Only ``hudi_format.engine`` and public names of the core are used here.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hudi_format.engine import WriteSpec
from hudi_format.engine.index import DELETE as _DELETE, INSERT, MOVE, UPDATE
from hudi_format.errors import HudiError

from .arrow import to_hudi_arrow
from .shipping import received
from .record_index import stage_result

KEY = "__hoodie_key"
PARTITION = "__hoodie_partition"
BUCKET = "__hoodie_bucket"
DELETE = "__hoodie_delete"
UPDATED = "__hoodie_update"          # the row updates a record in the file group the index found
SLOT = "__hoodie_slot"
FOUND_IN = "__hoodie_found_in"      # the partition the index found the key in (null: new)
FILE_ID = "__hoodie_file_id"        # the file group it found it in
OUTRANKED = "__hoodie_outranked"    # the stored record outranks this one: the key does not move
FIRST = "__hoodie_first"            # the first row of its (key, partition) where it was tagged
# a tagged row's action: U(pdate), D(elete) or I(nsert), in target partition / file group
KIND, TARGET_PARTITION, TARGET_FILE = "__hoodie_kind", "__hoodie_jp", "__hoodie_jf"
_INTERNAL = (KEY, PARTITION, BUCKET, DELETE, UPDATED, SLOT, FOUND_IN, FILE_ID, FIRST, KIND, TARGET_PARTITION, TARGET_FILE)


@attrs.frozen(eq=False)
class Keyer:
    """Record keys and partition paths of Spark batches, by the core's key generator."""

    spec: WriteSpec          # the write's spec (writer schema, key generator, operation)
    in_schema: pa.Schema     # the DataFrame's columns as Hudi stores them

    @property
    def columns(self) -> list[str]:
        """The columns the keys depend on."""
        config = self.spec.config
        fields = [] if self.spec.operation == "delete_partition" else list(config.record_key_fields)
        return list(dict.fromkeys(fields + list(config.partition_fields)))

    def restrict(self, columns: list[str]) -> "Keyer":
        """The same keyer for batches carrying only ``columns``."""
        return attrs.evolve(self, in_schema=pa.schema([self.in_schema.field(c) for c in columns]))

    def keys(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        names = [c for c in self.columns if c in self.in_schema.names]
        data = to_hudi_arrow(batch.select(names), pa.schema([self.in_schema.field(c) for c in names]))
        return self.spec.keys(self.spec.conform_present(data))


def keys_of(batches: Iterator[pa.RecordBatch], *, keyer: Keyer) -> Iterator[pa.RecordBatch]:
    """(record key, partition path) of every row."""
    for batch in batches:
        keys, parts = keyer.keys(batch)
        yield pa.RecordBatch.from_arrays([keys, parts], names=[KEY, PARTITION])


@attrs.frozen
class Assignment:
    """Which bucket each record goes to (see ``spark_adapter.writer._assignment``)."""

    located: tuple           # "<partition>\0<file id>" of each existing file group of the plan
    located_buckets: tuple   # its bucket
    spread: dict             # partition -> [(bucket, planned inserts)]
    slots: tuple             # per bucket, a value ``repartition(width, col)`` sends to its task's partition
    lookup: Any = None       # the write's IndexLookup (tagged records), None: every record inserts
    width: int = 1           # write tasks (Spark partitions of the shuffle)

    def buckets_of(self, keys: pa.Array, parts: pa.Array, found_in: pa.Array | None,
                   file_ids: pa.Array | None) -> tuple[pa.Array, pa.Array, pa.Array]:
        """(row, bucket, is_delete) arrays: updates and deletes go to the bucket of the file
        group the index found them in, inserts are spread over their partition's buckets by
        a hash of the key (records of one key always meet); a key moving partitions gives two
        rows (a delete there, an insert here); dropped records none."""
        n = len(keys)
        if self.lookup is not None and file_ids is not None:
            acts = self.lookup.actions(parts, found_in, file_ids)
        else:
            acts = pa.repeat(pa.scalar(INSERT, pa.int8()), n)
        rows = pa.array(range(n), pa.int64())
        out_rows, out_buckets, out_deletes = [], [], []
        at = pc.is_in(acts, value_set=pa.array([UPDATE, _DELETE, MOVE], pa.int8()))
        if file_ids is not None and pc.any(at).as_py():
            idx = pc.filter(rows, at)
            names = pc.binary_join_element_wise(pc.take(found_in, idx), pc.take(file_ids, idx), "\0")
            pos = pc.index_in(names, value_set=pa.array(self.located, pa.string()))
            if pc.any(pc.is_null(pos)).as_py():
                raise HudiError("records were tagged to file groups the plan never saw: the DataFrame gave "
                                "different rows when it was computed again for writing; persist() it "
                                "before writing")
            out_rows.append(idx)
            out_buckets.append(pc.take(pa.array(self.located_buckets, pa.int32()), pos))
            out_deletes.append(pc.not_equal(pc.take(acts, idx), UPDATE))
        ins = pc.is_in(acts, value_set=pa.array([INSERT, MOVE], pa.int8()))
        if pc.any(ins).as_py():
            idx = pc.filter(rows, ins)
            sp_keys, sp_parts = pc.take(keys, idx), pc.take(parts, idx)
            h = _key_hash(sp_keys)
            for p in pc.unique(sp_parts).to_pylist():
                targets = self.spread.get(p)
                if not targets:
                    raise HudiError(f"records of partition {p!r} were not planned: the DataFrame gave "
                                    f"different rows when it was computed again for writing; "
                                    f"persist() it before writing")
                mask = pc.equal(sp_parts, p) if p is not None else pc.is_null(sp_parts)
                ends = np.cumsum([c for _, c in targets])
                ids = np.array([b for b, _ in targets], dtype=np.int32)
                chosen = ids[np.searchsorted(ends, h[mask.to_numpy(zero_copy_only=False)] % ends[-1], side="right")]
                out_rows.append(pc.filter(idx, mask))
                out_buckets.append(pa.array(chosen, pa.int32()))
                out_deletes.append(pa.repeat(pa.scalar(False), len(chosen)))
        if not out_rows:
            return pa.array([], pa.int64()), pa.array([], pa.int32()), pa.array([], pa.bool_())
        return (pa.concat_arrays(out_rows), pa.concat_arrays(out_buckets),
                pa.concat_arrays([pc.cast(d, pa.bool_()) for d in out_deletes]))


def _key_hash(keys: pa.Array) -> "np.ndarray":
    """A hash of each key (a polynomial over its UTF-8 bytes, then murmur's finalizer), in
    numpy: deterministic across processes and runs, unlike Python's ``hash``."""
    arr = pc.fill_null(pc.cast(keys, pa.string()), "")
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    base = offsets[0]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[base:offsets[-1]] if arr.buffers()[2] is not None \
        else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    h = np.zeros(n, dtype=np.uint64)
    if len(data):
        owner = np.repeat(np.arange(n), lengths)
        exp = (offsets[1:][owner] - base) - 1 - np.arange(len(data))
        pows = np.ones(int(lengths.max()) + 1, dtype=np.uint64)
        for i in range(1, len(pows)):
            pows[i] = (pows[i - 1] * np.uint64(31)) & np.uint64(0xFFFFFFFF)
        contrib = data.astype(np.uint64) * pows[exp]
        nonempty = lengths > 0
        h[nonempty] = np.add.reduceat(contrib, (offsets[:-1] - base)[nonempty])
    h &= np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(16)
    return h.astype(np.int64)


def route(batches: Iterator[pa.RecordBatch], *, keyer: Keyer, assignment: Assignment) -> Iterator[pa.RecordBatch]:
    """Each row with its key, partition path, bucket, delete flag and shuffle slot. Rows of a
    tagged write carry the index's answer (``FOUND_IN``, ``FILE_ID``) from the join."""
    assignment = received(assignment)
    slots = pa.array(assignment.slots, pa.int32())
    for batch in batches:
        if not batch.num_rows:
            continue
        names = batch.schema.names
        if KEY in names:
            keys, parts = batch.column(KEY), batch.column(PARTITION)
        else:
            keys, parts = keyer.keys(batch)
        tagged = FILE_ID in names
        rows, bucket, deletes = assignment.buckets_of(
            keys, parts, batch.column(FOUND_IN) if tagged else None, batch.column(FILE_ID) if tagged else None)
        data = [c for c in names if c not in _INTERNAL]
        out = batch.select(data).take(rows)
        cols = list(out.columns) + [pc.take(keys, rows), pc.take(parts, rows), bucket, deletes, slots.take(bucket)]
        yield pa.RecordBatch.from_arrays(cols, names=data + [KEY, PARTITION, BUCKET, DELETE, SLOT])


def with_key_schema(df):
    """``df``'s schema with the record key and partition path (:func:`with_keys`)."""
    from pyspark.sql.types import StringType, StructField, StructType
    return StructType(list(df.schema.fields) + [StructField(KEY, StringType()), StructField(PARTITION, StringType())])


def with_keys(batches: Iterator[pa.RecordBatch], *, keyer: Keyer) -> Iterator[pa.RecordBatch]:
    """Every row with its record key and partition path (to join with the index's answer)."""
    for batch in batches:
        keys, parts = keyer.keys(batch)
        yield pa.RecordBatch.from_arrays(list(batch.columns) + [keys, parts],
                                         names=list(batch.schema.names) + [KEY, PARTITION])


def task_token() -> str:
    """Hudi's write token of this Spark task: ``<partition id>-<stage id>-<task attempt id>``."""
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        return "0-0-0"
    return f"{tc.partitionId()}-{tc.stageId()}-{tc.taskAttemptId()}"


# a write task's result per bucket: its write stat, its files, the file of its staged record
# index changes (spark_adapter.record_index; null when the write does not stage them)
RESULT_SCHEMA = "bucket int, stat string, files string, keys string"


def write_buckets(batches: Iterator[pa.RecordBatch], *, buckets: list, in_schema: pa.Schema,
                  storage_options: dict | None, keyer: Keyer | None = None,
                  record_index: str | None = None) -> Iterator[pa.RecordBatch]:
    """Write the buckets of this Spark partition (one, or several small ones) one by one
    through the engine API; yield each one's result (its write stat and files). Rows routed by Spark expressions
    (``spark_adapter.spread``) come without their keys: ``keyer`` computes them here.
    ``record_index``: the instant whose record index changes the tasks stage
    (:mod:`spark_adapter.record_index`); each result then names its bucket's staged file."""
    from hudi_format import engine

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    buckets = received(buckets)
    table = pa.Table.from_batches(batches)
    data_cols = [c for c in table.column_names if c not in _INTERNAL]
    token = task_token()
    if table.column(BUCKET).null_count:
        raise HudiError("records of a partition were not planned: the DataFrame gave different rows "
                        "when it was computed again for writing; persist() it before writing")
    ids = pc.unique(table.column(BUCKET)).to_pylist()
    for b in ids:
        # a task normally holds one bucket and only upserts: then no row is copied here
        rows = table if len(ids) == 1 else table.filter(pc.equal(table.column(BUCKET), b))
        data = to_hudi_arrow(rows.select(data_cols), in_schema)
        if KEY in rows.column_names:
            keys, is_delete = rows.column(KEY), rows.column(DELETE)
        else:
            if keyer is None:
                raise HudiError("rows without record keys need the write's key generator")
            keys, parts = keyer.spec.keys(keyer.spec.conform_present(data.select(
                [c for c in keyer.columns if c in data.column_names])))
            if not pc.all(pc.equal(parts, buckets[b].partition)).as_py():
                raise HudiError(f"records routed to partition {buckets[b].partition!r} have another "
                                f"partition path: the DataFrame gave different rows when it was "
                                f"computed again for writing; persist() it before writing")
            keys, is_delete = pa.chunked_array([keys]), pa.chunked_array([], pa.bool_())
        # rows tagged as updates in place (their record index entries stay as they are)
        updates = rows.column(UPDATED) if UPDATED in rows.column_names else None
        if len(is_delete) and pc.any(is_delete).as_py():
            upserting = pc.invert(is_delete)
            data, delete_keys = data.filter(upserting), pc.unique(keys.filter(is_delete).combine_chunks())
            keys = keys.filter(upserting)
            updates = updates.filter(upserting) if updates is not None else None
        else:
            delete_keys = pa.array([], pa.string())
        result = engine.write_bucket(buckets[b], data, storage_options, keys=keys.combine_chunks(),
                                     delete_keys=delete_keys, write_token=token,
                                     updates=pc.fill_null(updates, False).combine_chunks() if updates is not None else None)
        staged = stage_result(buckets[b].spec.table_uri, storage_options, record_index, token, result)
        yield pa.RecordBatch.from_pydict({"bucket": pa.array([result.index], pa.int32()),
                                          "stat": [json.dumps(result.stat.to_dict())],
                                          "files": [json.dumps(list(result.files))],
                                          "keys": pa.array([staged], pa.string())})
