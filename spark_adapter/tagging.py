"""Index tagging on the executors: the driver plans lookup tasks, never collects a record key.

The driver plans the index's lookup tasks from the table state (``engine.plan_index_lookup``:
one per candidate file slice, or per metadata-table record index file group). A non-global
simple or bloom index (:func:`tags_locally`) tags the rows themselves: Spark brings all rows
of a partition to one task, which runs that partition's lookups and decides each row's
action (:func:`tag_rows`), so no key leaves its row. Other indexes, on the executors:

- simple index: a stage with one row per task lists the live keys of its slice
  (:func:`list_keys`), and Spark joins them with the incoming keys;
- bloom index: a stage reads each candidate base file's key range (:func:`key_ranges`; the
  driver gets one row per file), every incoming key goes to the files whose partition and
  range hold it (:func:`assign`), Spark groups them by file and each file's bloom filter and
  keys are checked there (:func:`run_lookups`);
- record index: every incoming key goes to its metadata file group by Hudi's hash
  (:func:`assign`) and is looked up there (:func:`run_lookups`).

What comes back, ``(key, found_in, file_id)`` of the incoming keys the table holds, is joined
with the incoming records by Spark; :func:`spark_adapter.spread.count_tagged` reduces the
tagged records to counts per file group and partition, all the driver needs to size the write.
"""

from __future__ import annotations

import functools
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from hudi_format import engine

from .arrow import local_frame, string_fields
from .shipping import received
from .tasks import FILE_ID, FIRST, FOUND_IN, KEY, KIND, OUTRANKED, PARTITION, TARGET_FILE, TARGET_PARTITION

TASK = "__hoodie_lookup_task"
LOCATIONS_SCHEMA = f"{KEY} string, {FOUND_IN} string, {FILE_ID} string"
RANGES_SCHEMA = "task long, lo string, hi string"


def _locations(found: pa.Table) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([found.column("key").combine_chunks(),
                                       found.column("partition").combine_chunks(),
                                       found.column("file_id").combine_chunks()],
                                      names=[KEY, FOUND_IN, FILE_ID])


def list_keys(batches: Iterator[pa.RecordBatch], *, lookup, storage_options) -> Iterator[pa.RecordBatch]:
    """Simple index: the live keys of each task (the input: task numbers)."""
    lookup = received(lookup)
    for batch in batches:
        for i in batch.column(0).to_pylist():
            found = engine.lookup(lookup.tasks[i], None, storage_options)
            if found.num_rows:
                yield _locations(found)


def key_ranges(batches: Iterator[pa.RecordBatch], *, lookup, storage_options) -> Iterator[pa.RecordBatch]:
    """Bloom index: each task's base file key range (one footer read)."""
    lookup = received(lookup)
    for batch in batches:
        ids = batch.column(0).to_pylist()
        got = [engine.lookup_key_range(lookup.tasks[i], storage_options) for i in ids]
        yield pa.RecordBatch.from_pydict({"task": pa.array(ids, pa.int64()),
                                          "lo": pa.array([r[0] if r else None for r in got], pa.string()),
                                          "hi": pa.array([r[1] if r else None for r in got], pa.string())})


def pairs(keys_df, lookup, shipped=None):
    """Probing lookups: ``(key, task)`` for every task that must see the key, as
    ``IndexLookup.assign`` decides: a file slice of the key's partition (any, for a global
    index) whose key range, when known, holds the key; by a broadcast join with one row per
    task, so the keys stay in Spark. The record index's hash of the key is the core's
    (:func:`assign`, in Python), bound to ``shipped`` (``lookup`` as a broadcast) when given."""
    from pyspark.sql import functions as F
    if any(t.kind == engine.index.RECORD_INDEX for t in lookup.tasks):
        return keys_df.mapInArrow(functools.partial(assign, lookup=lookup if shipped is None else shipped),
                                  f"{KEY} string, {TASK} int")
    rows = [(i, t.partition, *(t.key_range or (None, None))) for i, t in enumerate(lookup.tasks)]
    from pyspark.sql.types import IntegerType, StructField
    schema = string_fields("__hoodie_tp", "__hoodie_lo", "__hoodie_hi")
    targets = F.broadcast(local_frame(keys_df.sparkSession, [(p, lo, hi, i) for i, p, lo, hi in rows],
                                      schema.add(StructField(TASK, IntegerType()))))
    key = keys_df[KEY]
    cond = targets["__hoodie_lo"].isNull() | ((key >= targets["__hoodie_lo"]) & (key <= targets["__hoodie_hi"]))
    if not lookup.global_index:
        cond = (keys_df[PARTITION] == targets["__hoodie_tp"]) & cond
    return keys_df.join(targets, on=cond, how="inner").select(key.alias(KEY), targets[TASK])


def assign(batches: Iterator[pa.RecordBatch], *, lookup) -> Iterator[pa.RecordBatch]:
    """Probing indexes: (key, task) for every task that must see the key."""
    lookup = received(lookup)
    for batch in batches:
        keys = batch.column(KEY)
        rows, task = lookup.assign(keys, batch.column(PARTITION))
        if len(rows):
            yield pa.RecordBatch.from_arrays([pc.take(keys, rows), task], names=[KEY, TASK])


def run_lookups(batches: Iterator[pa.RecordBatch], *, lookup, storage_options) -> Iterator[pa.RecordBatch]:
    """Probing indexes: each task of this Spark partition with the keys sent to it."""
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    lookup = received(lookup)
    table = pa.Table.from_batches(batches)
    task_col = table.column(TASK)
    for i in pc.unique(task_col).to_pylist():
        keys = table.column(KEY).filter(pc.equal(task_col, i)).combine_chunks()
        found = engine.lookup(lookup.tasks[i], keys, storage_options)
        if found.num_rows:
            yield _locations(found)


OUTRANKED_SCHEMA = f"{KEY} string, {OUTRANKED} boolean"


def outranked_keys(batches: Iterator[pa.RecordBatch], *, check, storage_options) -> Iterator[pa.RecordBatch]:
    """Per record an upsert sends to another partition (key, where the index found it, its
    ordering fields; grouped by that file group), whether the stored record outranks it
    (``engine.index.outranked``): a key all of whose records are outranked stays where it is."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return
    rows = pa.Table.from_batches(got)
    located = rows.rename_columns([{KEY: "key", FOUND_IN: "existing_partition", FILE_ID: "file_id"}.get(c, c)
                                   for c in rows.column_names])
    flags = engine.index.outranked(received(check), located, storage_options)
    yield pa.RecordBatch.from_arrays([located.column("key").combine_chunks(), flags], [KEY, OUTRANKED])


# -- tagging the rows where they are (an index whose tasks are a partition's file slices) ----------

def tags_locally(lookup) -> bool:
    """Whether the rows themselves can be tagged in one stage (:func:`tag_rows`): a non-global
    index whose tasks are file slices of the incoming records' own partitions (simple, bloom),
    so one Spark task holding all rows of a partition can run that partition's lookups."""
    return not lookup.global_index and all(t.kind != engine.index.RECORD_INDEX and t.partition is not None
                                           for t in lookup.tasks)


def tag_rows(batches: Iterator[pa.RecordBatch], *, lookup, storage_options) -> Iterator[pa.RecordBatch]:
    """Rows (with ``KEY`` and ``PARTITION``; all rows of a partition in this Spark partition)
    tagged as :func:`spark_adapter.spread.tag` tags them (``KIND``, ``TARGET_PARTITION``,
    ``TARGET_FILE``; dropped records left out), with ``FIRST``: each lookup task of the
    partitions present runs once, on the keys ``IndexLookup.assign`` routes to it
    (partition, key range); ``IndexLookup.actions`` decides."""
    import numpy as np
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    lookup = received(lookup)
    table = pa.Table.from_batches(batches)
    n = table.num_rows
    keys = table.column(KEY).combine_chunks()
    parts = table.column(PARTITION).combine_chunks()
    rows, task = lookup.assign(keys, parts)
    pos = np.full(n, -1, dtype=np.int64)
    found_ids: list = []
    offset = 0
    task_np = task.to_numpy(zero_copy_only=False)
    rows_np = rows.to_numpy(zero_copy_only=False)
    # tasks of one partition and key range see the same keys: looked up together, the keys
    # hashed once (a partition's slices under the simple index), in task order as before
    groups: dict = {}
    for i in np.unique(task_np).tolist():
        t = lookup.tasks[i]
        groups.setdefault((t.partition, t.key_range), []).append(i)
    for ids in groups.values():
        mine = rows_np[task_np == ids[0]]
        sent = keys.take(pa.array(mine))
        for found in engine.lookup_many([lookup.tasks[i] for i in ids], sent, storage_options):
            if not found.num_rows:
                continue
            at = pc.index_in(sent, value_set=found.column("key").combine_chunks())
            hit = at.is_valid().to_numpy(zero_copy_only=False)
            pos[mine[hit]] = offset + at.filter(pa.array(hit)).to_numpy(zero_copy_only=False)
            found_ids.append(found.column("file_id").combine_chunks())
            offset += found.num_rows
    ids = pa.concat_arrays(found_ids) if found_ids else pa.array([], pa.string())
    file_id = ids.take(pa.array(pos, mask=pos < 0)) if len(ids) else pa.nulls(n, pa.string())
    acts = lookup.actions(parts, pc.if_else(pc.is_valid(file_id), parts, pa.scalar(None, pa.string())), file_id)
    # the first row of each (key, partition): with precombining a key counts once
    first = np.zeros(n, dtype=bool)
    firsts = pa.table({"k": keys, "p": parts, "r": pa.array(np.arange(n))}).group_by(
        ["k", "p"], use_threads=False).aggregate([("r", "min")]).column("r_min")
    first[firsts.to_numpy()] = True
    code: list = [None] * 5
    code[engine.index.UPDATE], code[engine.index.DELETE], code[engine.index.INSERT] = "U", "D", "I"
    kind = pa.array(code, pa.string()).take(acts)
    kept = pc.not_equal(acts, engine.index.DROP)
    is_insert = pc.equal(kind, "I")
    names = list(table.column_names) + [FIRST, KIND, TARGET_PARTITION, TARGET_FILE]
    cols = [c.combine_chunks() for c in table.columns] + [
        pa.array(first), kind, parts, pc.if_else(is_insert, pa.scalar(None, pa.string()), file_id)]
    out = pa.Table.from_arrays(cols, names=names)
    if not pc.all(kept).as_py():
        out = out.filter(kept)
    yield from out.to_batches()
