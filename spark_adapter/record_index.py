"""The metadata table's record index update of a Spark write, made on the executors.

Each write task's handles report the key changes of the file it wrote (the keys it now holds
and the keys it dropped). The task stages them as an Arrow IPC file under the instant's temp
folder (``.hoodie/.temp/<instant>/record-index-keys/``) and reports the file's name beside the
bucket's write stat, so the driver receives one name per bucket and no record key. At commit,
under the table lock, the metadata writer hands :class:`ExecutorRecordIndexUpdate` the
deltacommit's target (the record index's file groups); one Spark job reads the staged files
that the reported attempts wrote, hashes every key to its file group (Hudi's hash), shuffles
the changes by group and writes each group's log file in a task
(:func:`hudi_format.engine.write_record_index_changes`). The driver gets one write stat
per file group back.

Staged files of attempts no result reports are never read; the folder goes with the instant's
markers (a rollback lists and removes that folder) and is removed after the commit either way.
Tables of version 6 name their log files by slice, so the metadata writer could not tell a
discarded attempt's record index file from a kept one: their update stays on the driver.
"""

from __future__ import annotations

import functools
import json
import posixpath
from typing import Any, Iterator

import pyarrow as pa

from hudi_format import engine
from hudi_format.errors import HudiError
from hudi_format.engine import (RECORD_INDEX_CHANGES as CHANGES_SCHEMA, KeyChanges, RecordIndexTarget,
                                write_record_index_changes as write_changes)
from hudi_format.storage import Storage

__all__ = ["ExecutorRecordIndexUpdate", "keys_folder", "remove_staged", "stage_changes", "stage_result",
           "staged_by_executors", "update_of"]

_GROUP = "__ri_group"


def staged_by_executors(job: Any) -> bool:
    """Whether the write's record index changes stay on the executors (staged by the tasks):
    the table keeps the record index and names log files by instant (version 8 and later)."""
    return bool(job.spec.tracks_record_index) and job.config.version >= 8


def keys_folder(instant: str) -> str:
    return f".hoodie/.temp/{instant}/record-index-keys"


def stage_changes(storage: Storage, instant: str, bucket: int, token: str, partition: str, file_id: str,
                  changes: KeyChanges) -> str | None:
    """Stage one bucket's key changes (one attempt's: ``token``); returns the file's path
    (``None``, nothing written: no change, as a COW merge of updates alone)."""
    table = changes.rows(partition, file_id)
    if not table.num_rows:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, CHANGES_SCHEMA) as out:
        out.write_table(table)
    path = posixpath.join(keys_folder(instant), f"{bucket}_{token}.arrow")
    storage.write_bytes(path, sink.getvalue().to_pybytes())
    return path


def stage_result(table_uri: str, storage_options: dict | None, instant: str | None, token: str,
                 result: engine.BucketResult) -> str | None:
    """In a write task: stage ``result``'s key changes when the write stages them (``instant``
    given); the staged file's path for the result row, else ``None``."""
    if instant is None or result.keys is None:
        return None
    return stage_changes(Storage(table_uri, storage_options), instant, result.index, token, result.partition,
                         result.stat.file_id or "", result.keys)


def update_of(job: Any, spark: Any, storage_options: dict | None, results: pa.Table) -> "ExecutorRecordIndexUpdate | None":
    """On the driver: the commit's record index update from the write tasks' results (their
    ``keys`` column), when the write staged its changes."""
    if not staged_by_executors(job):
        return None
    return ExecutorRecordIndexUpdate(spark, job.storage.url, storage_options,
                                     [k for k in results.column("keys").to_pylist() if k])


def remove_staged(storage: Storage, instant: str) -> None:
    try:
        storage.delete_tree(keys_folder(instant))
    except (FileNotFoundError, OSError, HudiError):
        pass


class ExecutorRecordIndexUpdate:
    """The staged changes of a write's reported attempts (``paths``), written into the record
    index by a Spark job (:class:`hudi_format.engine.RecordIndexUpdate`)."""

    def __init__(self, spark: Any, table_uri: str, storage_options: dict | None, paths: list[str]):
        self.spark = spark
        self.table_uri = table_uri
        self.storage_options = storage_options
        self.paths = sorted(paths)

    def write(self, target: RecordIndexTarget, deleted: pa.Array) -> list[engine.WriteStat]:
        from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType
        if not self.paths and not len(deleted):
            return []    # no key changed: no job
        sc = self.spark.sparkContext
        parallelism = sc.defaultParallelism
        staged = self.spark.createDataFrame(pa.table({"path": pa.array(self.paths, pa.string())}))
        schema = StructType([StructField("key", StringType()), StructField("partition", StringType()),
                             StructField("file_id", StringType()), StructField("deleted", BooleanType()),
                             StructField(_GROUP, IntegerType())])
        changes = staged.repartition(max(1, min(len(self.paths), parallelism))).mapInArrow(
            functools.partial(_read_staged, table_uri=self.table_uri, storage_options=self.storage_options,
                              target=target), schema)
        if len(deleted):   # keys of replaced file groups, found by the driver
            gone = pa.table({"key": deleted, "partition": pa.nulls(len(deleted), pa.string()),
                             "file_id": pa.nulls(len(deleted), pa.string()),
                             "deleted": pa.repeat(pa.scalar(True), len(deleted)),
                             _GROUP: pa.array(target.group_indexes(deleted), pa.int32())})
            changes = changes.unionByName(self.spark.createDataFrame(gone, schema=schema))
        width = max(1, min(len(target.groups), 2 * parallelism))
        out = changes.repartition(width, _GROUP).mapInArrow(
            functools.partial(_write_groups, md_uri=target.table_uri, storage_options=self.storage_options,
                              target=target), "stat string").toArrow()
        return [engine.WriteStat.from_dict(json.loads(s)) for s in out.column("stat").to_pylist()]


def _read_staged(batches: Iterator[pa.RecordBatch], *, table_uri: str, storage_options: dict | None,
                 target: RecordIndexTarget) -> Iterator[pa.RecordBatch]:
    """A task: the staged files it is given, each change with its record index file group."""
    storage = Storage(table_uri, storage_options)
    for batch in batches:
        for path in batch.column(0).to_pylist():
            table = pa.ipc.open_file(pa.BufferReader(storage.read_bytes(path))).read_all()
            groups = pa.array(target.group_indexes(table.column("key").combine_chunks()), pa.int32())
            yield from table.append_column(_GROUP, groups).to_batches()


def _write_groups(batches: Iterator[pa.RecordBatch], *, md_uri: str, storage_options: dict | None,
                  target: RecordIndexTarget) -> Iterator[pa.RecordBatch]:
    """A task: the changes of its record index file groups, one log file each."""
    from .tasks import task_token
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches).drop_columns([_GROUP])
    stats = write_changes(Storage(md_uri, storage_options), target, table, task_token())
    yield pa.RecordBatch.from_pydict({"stat": [json.dumps(st.to_dict()) for st in stats]})
