"""Write side of the engine API: begin and plan on the driver, write buckets anywhere, commit once.

    job = engine.begin_write(path, "upsert", schema=data.schema, options=opts)
    try:
        buckets = engine.plan_write(job, data)            # or keys=..., partitions=...
        results = [engine.write_bucket(b, *split(b)) ...] # on workers
        instant = engine.commit(job, results)
    except BaseException:
        engine.abort(job)
        raise
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import pyarrow as pa

from ..config import TableConfig
from ..metadata.record_index_update import RecordIndexUpdate
from ..services.inline import check_inline_options, run_inline_services
from ..services.rollback import rollback_failed_writes
from ..storage import Storage
from ..errors import InvalidOptionError, TableNotFoundError
from ..transaction.snapshot import TableSnapshot
from ..transaction import WriteResult
from ..writer.commit import commit_write
from ..writer.job import (BucketResult, WriteBucket, WriteJob, abort_write, resolve_operation,
                          plan_write as _plan_write, plan_write_counts, prepare_write,
                          open_streamed, write_bucket as _write_bucket)
from ..writer.file_sizing import new_file_records
from ..writer.options import sizing_config
from ..writer.planning import WriteCounts
from ..writer.stream import NewFiles, write_new_files as _write_new_files
from ..writer.input import to_arrow
from ..writer.new_table import new_table_config
from ..options import WRITE_SCOPES, validate
from ..writer.options import check_against_table, check_write_arguments, write_config


def begin_write(table: Any, operation: str | None = None, *, schema: pa.Schema | None,
                options: Mapping[str, Any] | None = None, storage_options: Mapping[str, Any] | None = None,
                record_key: Any = None, ordering_field: Any = None, partition_by: Any = None,
                table_type: str | None = None, table_version: int | None = None,
                table_name: str | None = None) -> WriteJob:
    """Begin a write of data with ``schema`` (Arrow; ``None``: delete_partition by option).

    ``table``: a path / URL, or an open ``hudi_format.Table``. A missing table is created by
    the commit from the arguments and options, as ``hudi_format.write`` does; on an existing
    one they must agree with its properties. Rolls back writes whose writer died first.
    Writes nothing else: the instant opens when the write is planned."""
    opts = validate(options, WRITE_SCOPES)
    op = resolve_operation(operation, opts)
    if isinstance(table, (str, os.PathLike)):
        storage = Storage(table, dict(storage_options) if storage_options is not None else None)
    else:
        storage = table.storage
    check_write_arguments(record_key=record_key, ordering_field=ordering_field, partition_by=partition_by,
                          table_type=table_type, table_version=table_version, table_name=table_name,
                          operation=op)
    try:
        config: TableConfig | None = TableConfig.load(storage)
    except TableNotFoundError:
        config = None
    if config is not None:
        check_against_table(config, opts, storage.url, record_key=record_key, partition_by=partition_by,
                            ordering_field=ordering_field, table_type=table_type,
                            table_version=table_version, table_name=table_name)
        check_inline_options(opts, config.is_mor)
        config = write_config(config, opts)
        # load once: recovery, planning, the commit and the inline services share one snapshot
        snapshot = TableSnapshot.load(storage, config)
        rollback_failed_writes(storage, config, opts, timeline=snapshot.timeline)
        return prepare_write(storage, config, op, opts, schema, snapshot=snapshot.current())
    config = new_table_config(storage, opts, record_key=record_key, ordering_field=ordering_field,
                              partition_by=partition_by, table_type=table_type,
                              table_version=table_version, table_name=table_name)
    check_inline_options(opts, config.is_mor)
    return prepare_write(storage, config, op, opts, schema, create=True)


def plan_write(job: WriteJob, data: pa.Table | None = None, *, keys: Any = None, partitions: Any = None,
               sample: pa.Table | None = None, counts: WriteCounts | None = None) -> list[WriteBucket]:
    """Tag and size the write into buckets (one file group each) and open its instant.

    Give the rows (``data``; then ``job.rows_of(bucket)`` says which rows of ``data`` each
    bucket takes), or only each record's ``keys`` and ``partitions`` when the rows are
    elsewhere (route them to buckets yourself; ``sample`` rows size bulk_insert files), or
    only ``counts`` when the engine tagged the records itself (:mod:`hudi_format.engine.index`;
    see :func:`hudi_format.writer.job.plan_write_counts` for routing)."""
    if counts is not None:
        return plan_write_counts(job, counts, sample)
    if data is not None and not isinstance(data, pa.Table):
        data = to_arrow(data)
    return _plan_write(job, data, keys=_strings(keys), partitions=_strings(partitions), sample=sample)


def open_new_files(job: WriteJob, sample: pa.Table | None = None) -> NewFiles:
    """Open the instant of a bulk_insert whose tasks each write their own rows into new file
    groups (:func:`write_new_files`), as Hudi's bulk_insert does without a shuffle (sort mode
    NONE): no planning, no counts. ``sample``: the first rows of the input, to size the files
    from their compressed size (else ``hoodie.copyonwrite.record.size.estimate``)."""
    if job.operation != "bulk_insert" or job.dedupe:
        raise InvalidOptionError("only a bulk_insert that does not precombine writes new files task by task")
    if sample is not None and not isinstance(sample, pa.Table):
        sample = to_arrow(sample)
    avg = job.planner.measured_record_size(job.spec.conform(sample) if sample is not None
                                           else job.spec.schema.empty_table())
    open_streamed(job)
    assert job.instant_time is not None
    return NewFiles(job.spec, job.instant_time, new_file_records(avg, sizing_config(job.options)))


def write_new_files(target: NewFiles, tables: Iterable[Any], storage_options: Mapping[str, Any] | None = None,
                    *, write_token: str, buffer_bytes: int | None = None,
                    threads: int | None = None) -> list[BucketResult]:
    """Write one task's rows (``tables``, each anything ``pyarrow.table`` takes, in order) as
    new file groups of ``target``'s write: per partition path, files of
    ``target.records_per_file`` records, every one named with ``write_token`` (Hudi's
    ``<task>-<stage>-<attempt>``). The results' indexes count from 0 in each task: renumber
    them across tasks before :func:`commit`. ``buffer_bytes`` (rows held by open files; 256 MB)
    and ``threads`` (Parquet encoding; one per core): this call's share of the machine. A
    failure removes the open files; the files of a failed attempt that no result reports are
    deleted by the commit (their markers)."""
    storage = Storage(target.spec.table_uri, dict(storage_options) if storage_options is not None else None)
    return _write_new_files(storage, target, (t if isinstance(t, pa.Table) else to_arrow(t) for t in tables),
                            write_token, buffer_bytes, threads)


def _strings(values: Any) -> pa.Array | pa.ChunkedArray | None:
    if values is None or isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return pa.array(values, pa.string())


def write_bucket(bucket: WriteBucket, rows: pa.Table | None, storage_options: Mapping[str, Any] | None = None,
                 *, keys: Any = None, deletes: pa.Table | None = None, delete_keys: Any = None,
                 write_token: str | None = None, updates: Any = None) -> BucketResult:
    """Write one bucket in this process: ``rows`` to insert or update, ``deletes`` (rows) or
    ``delete_keys`` (record keys) to delete. ``write_token``: Hudi's ``<task>-<stage>-<attempt>``
    (give each attempt its own, so a retry never overwrites a file). ``updates`` (optional, a
    bool per row): the row updates a record the index found in this bucket's file group
    (``WriteJob.updates_of`` for rows routed by ``rows_of``); its record index entry then
    stays as it is, as Hudi's writers leave it. Returns the write stat to hand to
    :func:`commit`; a failure removes what this call wrote."""
    storage = Storage(bucket.spec.table_uri, dict(storage_options) if storage_options is not None else None)
    if rows is not None and not isinstance(rows, pa.Table):
        rows = to_arrow(rows)
    if deletes is not None and not isinstance(deletes, pa.Table):
        deletes = to_arrow(deletes)
    if updates is not None and not isinstance(updates, (pa.Array, pa.ChunkedArray)):
        updates = pa.array(updates, pa.bool_())
    return _write_bucket(storage, bucket, rows, keys=_strings(keys), deletes=deletes,
                         delete_keys=_strings(delete_keys), write_token=write_token, updates=updates)


def commit(job: WriteJob, results: Iterable[BucketResult], *,
           extra_metadata: Mapping[str, str] | None = None,
           record_index: RecordIndexUpdate | None = None) -> WriteResult:
    """Commit the buckets' results as one instant: files of attempts no result reports are
    deleted, then lock, conflict check, metadata table, completed instant. Inline table
    services run after it (their errors are in ``service_errors``, never raised). A failed
    commit is aborted (nothing becomes visible) and raises. ``extra_metadata``: string
    entries for the commit's ``extraMetadata`` (a streaming sink records its checkpoint there,
    as Hudi's ``_hudi_streaming_sink_checkpoint``). ``record_index``: when the table keeps the
    record index, the engine's own writer of the results' key changes (which then never reach
    this process: see :mod:`hudi_format.metadata.record_index_update`); without it the
    results' ``keys`` are used, or the written files read back."""
    done = commit_write(job, results, discard_unreported=True, extra_metadata=extra_metadata,
                        record_index=record_index)
    after = job.committed if job.committed is not None else TableSnapshot.load(job.storage)
    errors = run_inline_services(job.storage, after.config, job.options, snapshot=after)
    return WriteResult.of(done, errors)


def abort(job: WriteJob) -> None:
    """Undo the write: every file its buckets wrote (by their markers), its instant."""
    abort_write(job)
