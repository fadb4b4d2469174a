"""Structured Streaming on ``hudi_format``: a sink with exactly-once commits and an incremental source.

Sink: ``df.writeStream.format("hudi_format").options(**hudi_options).option("checkpointLocation",
cp).start(path)`` takes the batch writer's options (operation, record key, precombine, partition
path, table type, any ``hoodie.*`` write option, ``storage_options``). Every micro-batch is one
Hudi commit through the distributed writer (:func:`spark_adapter.writer.write_dataframe`: index
tagging planned on the driver, rows written on the executors, one ``engine.commit``), with the
inline table services the options configure. Exactly once, as Hudi's ``HoodieStreamingSink``:
the commit's extra metadata records ``_hudi_streaming_sink_checkpoint = {"<identifier>":
"<batch id>"}`` (identifier: ``hoodie.datasource.write.streaming.checkpoint.identifier``, default
``default_single_writer``; one per streaming writer of a table). Spark replays the last
micro-batch after a restart when its own commit log missed it; a batch whose id the table
already holds for the identifier is skipped. The query id is recorded beside it
(``_hudi_format_streaming_query``): a *different* query replaying low batch ids against the same
identifier (a new checkpoint location) fails instead of silently skipping its data.

:func:`install_stream_hooks` (run by :func:`spark_adapter.register`) routes PySpark's
``DataStreamWriter.start`` for this format to that sink (a ``foreachBatch`` in the driver, which
has the SparkSession the distributed writer needs). A stream that reaches the data source
without the hook (``toTable`` of a ``USING hudi_format`` table, another language's driver) gets
:class:`StagedStreamWriter`, Spark's Python stream-writer API: tasks stage their rows under
``.hoodie/.temp/`` and ``commit(messages, batchId)`` writes them as one commit in the driver's
Python worker (same checkpoint and skip rule; the rows pass through that one process).
Both retry a failed batch alike (:func:`write_batch`: ``hoodie.datasource.write.streaming.retry.*``,
``...ignore.failed.batch``) and run a commit that lost a conflict again
(``hoodie.write.num.retries.on.conflict.failures``).

Source: ``spark.readStream.format("hudi_format").option("hoodie.datasource.streaming.startOffset",
"earliest" | "latest" | <instant>).load(path)`` streams the table's changes commit by commit.
An offset is a completed write's bound on the timeline (completion time for table version 8+,
instant time for 6, as Hudi's ``HoodieStreamSourceV2``/``V1``); a micro-batch reads the commits in
``(start, end]`` with the core's incremental query (each record at its latest state in the
range; deletes are not emitted, as Hudi's incremental query). ``earliest`` starts before the
first commit; an instant starts after it (exclusive, as Hudi). ``hoodie.datasource.read.begin.instanttime``
is accepted as the start instant too.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import hashlib
import uuid
from typing import Any, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from hudi_format.errors import HudiError, InvalidOptionError
from hudi_format.options import WRITE_SCOPES, option, validate

from .arrow import hudi_schema, spark_arrow_schema
from .connect import connect_class
from .datasource import (BEGIN, DEFAULT_MAX_PARTITION_BYTES, MAX_PARTITION_BYTES, NAME, SliceGroup, _pack, read_slice_group,
                         _path, _table_options, storage_options)
from .staged import StagedFile, read_staged, remove_staging, stage_rows

log = logging.getLogger(__name__)

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"       # Hudi's HoodieStreamingSink key
QUERY_KEY = "_hudi_format_streaming_query"                    # ours: the query that wrote the batch
IDENTIFIER = "hoodie.datasource.write.streaming.checkpoint.identifier"
DEFAULT_IDENTIFIER = "default_single_writer"
START_OFFSET = "hoodie.datasource.streaming.startOffset"
OPERATION = "hoodie.datasource.write.operation"
STAGING = ".hoodie/.temp/spark-stream-"
_META_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                 "_hoodie_partition_path", "_hoodie_file_name", "_hoodie_operation")


# -- the checkpoint in the commit metadata ---------------------------------------------------------
def identifier_of(options: Mapping[str, Any]) -> str:
    value = next((v for k, v in options.items() if k.lower() == IDENTIFIER), None)
    text = DEFAULT_IDENTIFIER if value is None else str(value).strip()
    if not text:
        raise InvalidOptionError(f"option {IDENTIFIER} must not be empty")
    return text


def checkpoint_metadata(identifier: str, batch_id: int, query_id: str | None) -> dict[str, str]:
    """The commit's extra metadata for micro-batch ``batch_id`` (Hudi's JSON map, compact)."""
    extra = {SINK_CHECKPOINT_KEY: json.dumps({identifier: str(batch_id)}, separators=(",", ":"))}
    if query_id:
        extra[QUERY_KEY] = json.dumps({identifier: query_id}, separators=(",", ":"))
    return extra


def committed_batch(path: str, storage_opts: Mapping[str, Any] | None, identifier: str) -> tuple[int, str | None] | None:
    """(batch id, query id) of the latest completed commit whose checkpoint names
    ``identifier``, newest first over the active timeline (as Hudi's
    ``CommitUtils.getValidCheckpointForCurrentWriter``); ``None`` for a new table or writer."""
    import hudi_format as hudi
    from hudi_format.storage import Storage
    if not Storage(path, dict(storage_opts) if storage_opts else None).exists(".hoodie/hoodie.properties"):
        return None
    table = hudi.open_table(path, dict(storage_opts) if storage_opts else None)
    timeline = table.timeline
    for instant in reversed(timeline.write_instants()):
        extra = timeline.metadata(instant).extra_metadata
        batch = _entry(extra.get(SINK_CHECKPOINT_KEY), identifier, instant)
        if batch is None:
            continue
        try:
            batch_id = int(batch)
        except ValueError:
            raise HudiError(f"{SINK_CHECKPOINT_KEY} of {instant.timestamp} at {path} names batch "
                            f"{batch!r} for {identifier!r}: not a batch id") from None
        return batch_id, _entry(extra.get(QUERY_KEY), identifier, instant)
    return None


def _entry(value: str | None, identifier: str, instant) -> str | None:
    if not value:
        return None
    try:
        mapping = json.loads(value)
    except ValueError:
        raise HudiError(f"commit {instant.timestamp}: {value!r} is not a JSON checkpoint map") from None
    if not isinstance(mapping, dict):
        return None
    found = mapping.get(identifier)
    return None if found is None else str(found)


def should_skip(path: str, storage_opts: Mapping[str, Any] | None, identifier: str, batch_id: int,
                query_id: str | None) -> bool:
    """Whether micro-batch ``batch_id`` is already in the table (a replay after a restart)."""
    done = committed_batch(path, storage_opts, identifier)
    if done is None or batch_id > done[0]:
        return False
    if query_id and done[1] and done[1] != query_id:
        raise HudiError(f"the table at {path} already holds micro-batch {done[0]} of streaming writer "
                        f"{identifier!r} from query {done[1]}; this query ({query_id}) starts again at batch "
                        f"{batch_id}, whose data would be skipped. Give this stream its own {IDENTIFIER}, or "
                        f"restart it from its original checkpointLocation")
    log.warning("skipping micro-batch %s of %r: the table at %s already holds batch %s", batch_id,
                identifier, path, done[0])
    return True


def _sink_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The batch writer's options: the stream's own keys (checkpointLocation, path) dropped."""
    return {k: v for k, v in options.items() if v is not None and k.lower() not in ("checkpointlocation", "path")}


def write_batch(write, path: str, storage_opts: Mapping[str, Any] | None, identifier: str, batch_id: int,
                query_id: str | None, write_options: Mapping[str, Any]) -> None:
    """``write()`` a micro-batch as Hudi's streaming sink does: a failed attempt (which left
    nothing behind) is tried again after ``hoodie.datasource.write.streaming.retry.interval.ms``,
    doubling, up to ``...retry.count`` attempts in all; a batch that failed them all fails the
    query unless ``...ignore.failed.batch`` (then it is logged and dropped, as Hudi does).
    Before each retry the table is asked whether the batch committed after all. Both sinks
    (``foreachBatch`` and the stream-writer API) write through here."""
    attempts = max(1, option(write_options, "hoodie.datasource.write.streaming.retry.count"))
    wait = option(write_options, "hoodie.datasource.write.streaming.retry.interval.ms") / 1000
    for attempt in range(1, attempts + 1):
        try:
            write()
            return
        except HudiError as exc:
            log.error("micro-batch %s into %s failed (attempt %d of %d): %s", batch_id, path,
                      attempt, attempts, exc)
            if attempt < attempts:
                time.sleep(wait)
                wait *= 2
                if should_skip(path, storage_opts, identifier, batch_id, query_id):
                    return
                continue
            if option(write_options, "hoodie.datasource.write.streaming.ignore.failed.batch"):
                log.warning("dropping micro-batch %s as hoodie.datasource.write.streaming."
                            "ignore.failed.batch asks", batch_id)
                return
            raise


# -- the sink: a micro-batch as one distributed commit ----------------------------------------------
class MicroBatchSink:
    """``foreachBatch`` function writing each micro-batch as one Hudi commit, exactly once.

    Output modes map as Hudi's sink maps them: ``append`` runs the configured operation;
    ``complete`` / ``update`` overwrite the table with the batch (``insert_overwrite_table``)."""

    def __init__(self, path: str, options: Mapping[str, Any], partition_by: list[str] | None = None,
                 output_mode: str | None = None):
        self.path = path
        self.options = _sink_options(options)
        self.partition_by = partition_by
        self.mode = "append" if (output_mode or "append").lower() == "append" else "overwrite"
        self.identifier = identifier_of(self.options)
        self.storage_options = storage_options({k.lower(): v for k, v in self.options.items()})
        # bad options fail start(), not the first micro-batch
        self.write_options = validate(_hoodie_keys(self.options), WRITE_SCOPES)

    def __call__(self, df, batch_id: int) -> None:
        # One micro-batch of a writer at a time in this process: a query stopped mid-batch leaves
        # its foreachBatch call running, and the restarted query must see whether it committed.
        with _writer_lock(self.path, self.identifier):
            self._write(df, batch_id)

    def _write(self, df, batch_id: int) -> None:
        from .writer import write_dataframe
        query_id = _query_id(df)
        if should_skip(self.path, self.storage_options, self.identifier, batch_id, query_id):
            return
        meta = [c for c in df.columns if c in _META_COLUMNS]
        if meta:                      # rows read from a Hudi table: Hudi's writer drops them too
            df = df.drop(*meta)
        df = df.persist()             # computed once for the keys and once for the rows
        try:
            if self.mode == "append" and df.isEmpty():
                return
            write_batch(lambda: write_dataframe(
                df, self.path, mode=self.mode, options=self.options, partition_by=self.partition_by,
                extra_metadata=checkpoint_metadata(self.identifier, batch_id, query_id)),
                self.path, self.storage_options, self.identifier, batch_id, query_id, self.write_options)
        finally:
            df.unpersist()

def _hoodie_keys(options: Mapping[str, Any]) -> dict[str, Any]:
    """The write options among a sink's options (read keys, which the source takes, left out)."""
    return {k: v for k, v in options.items() if k.startswith("hoodie.")
            and not k.startswith(("hoodie.datasource.query.", "hoodie.datasource.read."))}


_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _writer_lock(path: str, identifier: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault((path.rstrip("/"), identifier), threading.Lock())


def _query_id(df) -> str | None:
    """The streaming query's id (stable across restarts from one checkpoint location)."""
    try:
        return df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext; the check is then skipped
        return None


# -- the hook on DataStreamWriter --------------------------------------------------------------------
_STATE = "_hudi_format_stream_state"


def install_stream_hooks() -> None:
    """Make ``df.writeStream.format("hudi_format")...start(path)`` run :class:`MicroBatchSink`."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    classes = [DataStreamWriter]
    connect = connect_class("pyspark.sql.connect.streaming.readwriter", "DataStreamWriter")
    if connect is not None:  # Spark Connect's writer has the same API
        classes.append(connect)
    for cls in classes:
        if not getattr(cls, "_hudi_format_stream_hooked", False):
            _wrap(cls)
            cls._hudi_format_stream_hooked = True


def _state(writer) -> dict:
    st = writer.__dict__.get(_STATE)
    if st is None:
        st = {"format": None, "output_mode": None, "options": {}, "partition_by": None}
        writer.__dict__[_STATE] = st
    return st


def _is_ours(fmt: str | None) -> bool:
    from .datasource import HudiDataSource
    return fmt is not None and fmt.lower() in (NAME, f"{HudiDataSource.__module__}.{HudiDataSource.__name__}".lower())


def _wrap(cls) -> None:
    orig = {n: getattr(cls, n) for n in ("format", "outputMode", "option", "options", "partitionBy", "start")}

    def format(self, source: str):
        _state(self)["format"] = source
        return orig["format"](self, source)

    def outputMode(self, outputMode: str):
        _state(self)["output_mode"] = outputMode
        return orig["outputMode"](self, outputMode)

    def option(self, key: str, value: Any):
        _state(self)["options"][key] = None if value is None else _to_str(value)
        return orig["option"](self, key, value)

    def options(self, **opts: Any):
        for k, v in opts.items():
            _state(self)["options"][k] = None if v is None else _to_str(v)
        return orig["options"](self, **opts)

    def partitionBy(self, *cols):
        names = tuple(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        _state(self)["partition_by"] = [str(c) for c in names]
        return self if _is_ours(_state(self)["format"]) else orig["partitionBy"](self, *cols)

    def start(self, path=None, format=None, outputMode=None, partitionBy=None, queryName=None, **opts: Any):
        st = _state(self)
        if not _is_ours(format or st["format"]):
            return orig["start"](self, path, format, outputMode, partitionBy, queryName, **opts)
        options = {k: v for k, v in st["options"].items() if v is not None}
        options.update({k: _to_str(v) for k, v in opts.items() if v is not None})
        path = path or options.get("path")
        if not path:
            raise InvalidOptionError("hudi_format needs a table path: df.writeStream.format('hudi_format').start(path)")
        if isinstance(partitionBy, str):
            partitionBy = [partitionBy]
        sink = MicroBatchSink(str(path), options, list(partitionBy) if partitionBy else st["partition_by"],
                              outputMode or st["output_mode"])
        for k, v in opts.items():        # checkpointLocation and the like reach Spark as given
            orig["option"](self, k, v)
        if outputMode is not None:
            orig["outputMode"](self, outputMode)
        self.foreachBatch(sink)
        return orig["start"](self, None, None, None, None, queryName)

    for name, fn in (("format", format), ("outputMode", outputMode), ("option", option), ("options", options),
                     ("partitionBy", partitionBy), ("start", start)):
        fn.__doc__ = orig[name].__doc__
        fn.__wrapped__ = orig[name]
        setattr(cls, name, fn)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- the data source's own stream writer (no PySpark driver hook) -------------------------------------
class StagedStreamWriter(DataSourceStreamArrowWriter):
    """Spark's stream-writer API: each task stages its rows (Arrow IPC under ``.hoodie/.temp/``);
    ``commit(messages, batchId)`` on the driver writes them as one commit with the checkpoint."""

    def __init__(self, options: Mapping[str, Any], schema: StructType, overwrite: bool):
        lower = {k.lower(): v for k, v in options.items()}
        self.path = _path(lower)
        self.storage_options = storage_options(lower)
        self.identifier = identifier_of(options)
        self.options = {k: v for k, v in options.items() if k.lower().startswith("hoodie.")
                        and not k.lower().startswith(("hoodie.datasource.query.", "hoodie.datasource.read.",
                                                      "hoodie.datasource.streaming."))}
        self.write_options = validate(self.options, WRITE_SCOPES)   # what each commit writes with
        self.overwrite = overwrite
        self.in_schema = hudi_schema(spark_arrow_schema(schema))
        self.data_columns = [n for n in self.in_schema.names if n not in _META_COLUMNS]
        # One staging folder per writer identifier (Hudi allows one writer per identifier).
        # Batches never overlap, so once a batch is committed (or skipped) everything left in
        # the folder is an orphan: attempts Spark discarded, or a batch a stop interrupted.
        self.staging = STAGING + hashlib.sha1(self.identifier.encode("utf-8")).hexdigest()[:16]

    def _storage(self):
        from hudi_format.storage import Storage
        return Storage(self.path, self.storage_options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
        name = f"{self.staging}/{uuid.uuid4().hex}.arrow"    # unique per task attempt
        return stage_rows(self._storage(), name, iterator, self.in_schema)

    def commit(self, messages: list, batchId: int) -> None:
        from hudi_format import engine
        storage = self._storage()
        try:
            if should_skip(self.path, self.storage_options, self.identifier, batchId, None):
                return
            pieces = read_staged(storage, messages)
            if not pieces and not self.overwrite:
                return
            data = (pa.concat_tables(pieces) if pieces else self.in_schema.empty_table()).select(self.data_columns)
            extra = checkpoint_metadata(self.identifier, batchId, None)
            retries = option(self.write_options, engine.RETRIES_ON_CONFLICT)
            # a commit that lost a conflict runs again on the table as the winner left it
            write_batch(lambda: engine.retrying_conflicts(lambda: self._write(storage, data, extra), retries,
                                                          self.path),
                        self.path, self.storage_options, self.identifier, batchId, None, self.write_options)
        finally:
            # the batch's files and any attempts Spark discarded (retries, a stop mid-batch)
            remove_staging(storage, self.staging)

    def _write(self, storage, data: pa.Table, extra: dict[str, str]) -> None:
        """One commit through the engine API (plan, write every bucket here, commit with ``extra``)."""
        from hudi_format import engine
        options = dict(self.options)
        operation = str(options.pop(OPERATION, "upsert")).strip().lower()
        if self.overwrite and storage.exists(".hoodie/hoodie.properties"):
            operation = "insert_overwrite_table"
        job = engine.begin_write(self.path, operation, schema=data.schema, options=options,
                                 storage_options=self.storage_options)
        try:
            buckets = engine.plan_write(job, data)
            results = [engine.write_bucket(b, storage_options=self.storage_options, **job.inputs_of(b))
                       for b in buckets]
            engine.commit(job, results, extra_metadata=extra)
        except BaseException:
            engine.abort(job)
            raise

    def abort(self, messages: list, batchId: int) -> None:
        remove_staging(self._storage(), self.staging)


# -- the source ---------------------------------------------------------------------------------------
class HudiStreamReader(DataSourceStreamReader):
    """Offsets ``{"instant": <bound>}``: the last completed write a micro-batch includes."""

    def __init__(self, options: Mapping[str, Any], schema: StructType):
        lower = {k.lower(): v for k, v in options.items()}
        self.path = _path(lower)
        self.storage_options = storage_options(lower)
        self.table_options = _table_options(lower)
        self.schema = schema
        self.columns = list(schema.names)
        self.max_bytes = int(lower.get(MAX_PARTITION_BYTES.lower(), DEFAULT_MAX_PARTITION_BYTES))
        self.start = lower.get(START_OFFSET.lower()) or lower.get(BEGIN) or "earliest"

    def _table(self):
        import hudi_format as hudi
        return hudi.open_table(self.path, self.storage_options, self.table_options)

    def _latest(self, table) -> str | None:
        from hudi_format.read.snapshot import ReadState
        state = ReadState(table.config, table.timeline)
        return state.bound(state.latest) if state.latest is not None else None

    def initialOffset(self) -> dict:
        from hudi_format.read.bounds import normalize_instant
        start = str(self.start).strip()
        if start.lower() == "earliest":
            return {"instant": "0"}
        table = self._table()
        if start.lower() == "latest":
            return {"instant": self._latest(table) or "0"}
        return {"instant": normalize_instant(start, table.config.timeline_timezone, START_OFFSET)}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = self._latest(self._table())
        if start is not None and (latest is None or latest <= start["instant"]):
            return start
        return {"instant": latest or "0"}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        from hudi_format import engine
        if start["instant"] >= end["instant"]:
            return []
        plan = engine.plan_scan(self._table(), self.columns, None, incremental=(start["instant"], end["instant"]))
        return [SliceGroup(group) for group in _pack(list(plan.tasks), self.max_bytes)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slice_group(partition, self.schema, self.storage_options)

    def commit(self, end: dict) -> None:
        """Nothing to release: offsets are timeline positions, the table keeps no reader state."""


__all__ = ["MicroBatchSink", "StagedStreamWriter", "HudiStreamReader", "install_stream_hooks",
           "committed_batch", "checkpoint_metadata", "SINK_CHECKPOINT_KEY", "IDENTIFIER", "START_OFFSET"]
