"""bulk_insert as Hudi's Spark writer runs it: each task writes its own rows, no planning.

``hoodie.bulkinsert.sort.mode`` (Hudi's ``BulkInsertSortMode``) decides how the rows reach the
tasks; then every task writes the rows it holds into new file groups, per partition path,
rolling over at the file size the driver measured on the first rows
(``hudi_format.engine.write_new_files``), and the driver commits the tasks' results at once:

- ``NONE`` (Hudi's default): the DataFrame's own partitions, no shuffle, as ``df.write.parquet``
  writes; a partition path spread over many tasks gets a file group from each.
- ``GLOBAL_SORT``: range-partitioned and sorted by partition path and record key (each file
  holds a key range: bloom and key-range pruning work best).
- ``PARTITION_SORT``: sorted by partition path and record key within each task.
- ``PARTITION_PATH_REPARTITION``: each partition path's rows in one task (fewer, fuller files).
- ``PARTITION_PATH_REPARTITION_AND_SORT``: that, sorted by partition path within the task.

The shuffling modes use ``hoodie.bulkinsert.shuffle.parallelism`` tasks (default: the
DataFrame's partitions). Only a bulk_insert that does not precombine goes this way (else the
records of a key must meet first: the planned path of :mod:`.writer`).

Failures: the instant is open (requested, inflight, heartbeat) while tasks write; a failed
job is aborted at once (every file its markers name); files of attempts Spark retried or
discarded are deleted by the commit, which keeps only the files the results report.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterator, Mapping

import pyarrow as pa

from hudi_format import engine
from hudi_format.options import option

from . import record_index, tasks
from .record_index import stage_result
from .arrow import to_hudi_arrow

SAMPLE_ROWS = 20_000   # first rows whose compressed size sizes the new files
# a task's share of its executor: Spark runs a task per core, so each holds at most this many
# bytes of rows in its open files and encodes Parquet on one thread beside the one reading rows
TASK_BUFFER_BYTES = 128 * 1024 * 1024
TASK_THREADS = 1


def applies(job) -> bool:
    """Whether the write is a bulk_insert that writes task by task (no precombining)."""
    return job.operation == "bulk_insert" and not job.dedupe


def arrange(df, keyer: tasks.Keyer, mode: str, parallelism: int | None):
    """``df`` as the sort mode hands rows to the write tasks; every mode but ``NONE`` adds the
    record key and partition path columns (``tasks.KEY``, ``tasks.PARTITION``) to order by."""
    if mode == "NONE":
        return df
    keyed = df.mapInArrow(functools.partial(tasks.with_keys, keyer=keyer), tasks.with_key_schema(df))
    n = parallelism or max(1, df.rdd.getNumPartitions())
    if mode == "GLOBAL_SORT":
        return keyed.repartitionByRange(n, tasks.PARTITION, tasks.KEY).sortWithinPartitions(tasks.PARTITION, tasks.KEY)
    if mode == "PARTITION_SORT":
        return keyed.sortWithinPartitions(tasks.PARTITION, tasks.KEY)
    spread = keyed.repartition(n, tasks.PARTITION)
    return spread.sortWithinPartitions(tasks.PARTITION) if mode.endswith("_AND_SORT") else spread


def write(df, job, keyer: tasks.Keyer, in_hudi: pa.Schema, storage_options: Mapping[str, Any] | None,
          extra_metadata: Mapping[str, str] | None):
    """The bulk_insert of ``df``: open, write task by task, commit (abort on any failure)."""
    sample = to_hudi_arrow(df.limit(SAMPLE_ROWS).toArrow(), in_hudi)
    mode = option(job.options, "hoodie.bulkinsert.sort.mode")
    arranged = arrange(df, keyer, mode, option(job.options, "hoodie.bulkinsert.shuffle.parallelism"))
    target = engine.open_new_files(job, sample)
    staging = record_index.staged_by_executors(job)
    opts = dict(storage_options) if storage_options else None
    try:
        write_task = functools.partial(write_files, target=target, in_schema=in_hudi, storage_options=opts,
                                       record_index=job.instant_time if staging else None)
        results = arranged.mapInArrow(write_task, tasks.RESULT_SCHEMA).toArrow()
        stats = [engine.WriteStat.from_dict(json.loads(s)) for s in results.column("stat").to_pylist()]
        done = [engine.BucketResult(index=i, partition=st.partition_path or "", stat=st, files=tuple(json.loads(f)))
                for i, (st, f) in enumerate(zip(stats, results.column("files").to_pylist()))]
        return engine.commit(job, done, extra_metadata=extra_metadata,
                             record_index=record_index.update_of(job, df.sparkSession, opts, results))
    except BaseException:
        engine.abort(job)
        raise
    finally:
        if staging and job.instant_time is not None:
            record_index.remove_staged(job.storage, job.instant_time)


def write_files(batches: Iterator[pa.RecordBatch], *, target, in_schema: pa.Schema,
                storage_options: dict | None, record_index: str | None = None) -> Iterator[pa.RecordBatch]:
    """One task: its rows, in the order they come, into new file groups; one result row each.
    ``record_index``: the instant whose record index changes the task stages (each result then
    names its file's staged keys, :mod:`spark_adapter.record_index`)."""
    def tables():
        for batch in batches:
            if batch.num_rows:
                data = batch.select([c for c in batch.schema.names if c not in (tasks.KEY, tasks.PARTITION)])
                yield to_hudi_arrow(pa.Table.from_batches([data]), in_schema)

    token = tasks.task_token()
    results = engine.write_new_files(target, tables(), storage_options, write_token=token,
                                     buffer_bytes=TASK_BUFFER_BYTES, threads=TASK_THREADS)
    for r in results:
        staged = stage_result(target.spec.table_uri, storage_options, record_index, token, r)
        yield pa.RecordBatch.from_pydict({"bucket": pa.array([r.index], pa.int32()),
                                          "stat": [json.dumps(r.stat.to_dict())],
                                          "files": [json.dumps(list(r.files))],
                                          "keys": pa.array([staged], pa.string())})
