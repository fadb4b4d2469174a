"""What the executors run for a distributed write (pickled into ``mapInArrow``).

- :func:`keys_of`: every row's record key and partition path, by the core's key generator.
- :func:`route`: every row with its bucket (file group of the plan) and shuffle slot.
- :func:`write_buckets`: the rows of one bucket written through the engine API
  (``hudi_format.engine.write_bucket``) with Hudi's write token
  ``<spark partition>-<stage>-<attempt>``; yields the bucket's result.

Only ``hudi_format.engine`` and public names of the core are used here.
"""

from __future__ import annotations

import json
from typing import Iterator

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from hudi_format.engine import WriteSpec
from hudi_format.errors import HudiError

from .arrow import to_hudi_arrow

KEY = "__hoodie_key"
PARTITION = "__hoodie_partition"
BUCKET = "__hoodie_bucket"
DELETE = "__hoodie_delete"
SLOT = "__hoodie_slot"
_INTERNAL = (KEY, PARTITION, BUCKET, DELETE, SLOT)


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


def _task_token() -> str:
    """Hudi's write token of this Spark task: ``<partition id>-<stage id>-<task attempt id>``."""
    from pyspark import TaskContext
    tc = TaskContext.get()
    if tc is None:
        return "0-0-0"
    return f"{tc.partitionId()}-{tc.stageId()}-{tc.taskAttemptId()}"


RESULT_SCHEMA = "bucket int, stat string, files string"


def write_buckets(batches: Iterator[pa.RecordBatch], *, buckets: list, in_schema: pa.Schema,
                  storage_options: dict | None) -> Iterator[pa.RecordBatch]:
    """Write the buckets of this Spark partition (normally exactly one) through the engine
    API; yield each one's result (its write stat and files)."""
    from hudi_format import engine

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    data_cols = [c for c in table.column_names if c not in _INTERNAL]
    token = _task_token()
    ids = pc.unique(table.column(BUCKET)).to_pylist()
    for b in ids:
        # a task normally holds one bucket and only upserts: then no row is copied here
        rows = table if len(ids) == 1 else table.filter(pc.equal(table.column(BUCKET), b))
        is_delete = rows.column(DELETE)
        data = to_hudi_arrow(rows.select(data_cols), in_schema)
        keys = rows.column(KEY)
        if pc.any(is_delete).as_py():
            upserting = pc.invert(is_delete)
            data, delete_keys = data.filter(upserting), pc.unique(keys.filter(is_delete).combine_chunks())
            keys = keys.filter(upserting)
        else:
            delete_keys = pa.array([], pa.string())
        result = engine.write_bucket(buckets[b], data, storage_options, keys=keys.combine_chunks(),
                                     delete_keys=delete_keys, write_token=token)
        yield pa.RecordBatch.from_pydict({"bucket": pa.array([result.index], pa.int32()),
                                          "stat": [json.dumps(dict(result.stat))],
                                          "files": [json.dumps(list(result.files))]})
