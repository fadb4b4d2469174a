"""The write entry points of the public API: ``hudi_format.write`` and ``Table.write``.

Both go through :func:`write_data`, so a write to a table opened with ``open_table`` and one
made by path check, recover, commit and run inline services the same way: validate the options,
refuse arguments that contradict an existing table, roll back writes whose writer died, commit
through the write client, then run the inline table services (whose failures never fail the
durable write). ``new_table_config`` is the table a first write creates, shared with engine
adapters that create tables themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Mapping, Sequence

import pyarrow as pa

from .config import TableConfig
from .services.inline import check_inline_options, run_inline_services
from .services.rollback import rollback_failed_writes
from .storage import Storage
from .timeline import Timeline
from .errors import TableNotFoundError
from .transaction import WriteResult
from .transaction.snapshot import TableSnapshot
from .writer.client import WriteClient
from .options import WRITE_SCOPES, option, validate
from .writer.input import to_arrow
from .writer.job import resolve_operation
from .writer.new_table import new_table_config
from .writer.options import check_against_table, check_write_arguments, write_config
from .writer.retries import RETRIES_ON_CONFLICT, retrying_conflicts
from .writer.stream import streams

__all__ = ["write", "write_data", "new_table_config", "recover", "post_commit"]


def write(path: str | os.PathLike[str], data: Any, *, operation: str | None = None,
          record_key: str | Sequence[str] | None = None,
          ordering_field: str | Sequence[str] | None = None,
          partition_by: str | Sequence[str] | None = None,
          table_type: str | None = None, table_version: int | None = None,
          table_name: str | None = None, options: Mapping[str, Any] | None = None,
          storage_options: Mapping[str, Any] | None = None) -> WriteResult:
    """Write ``data`` to the Hudi table at ``path``, creating the table on the first write
    (``table_type`` defaults to COPY_ON_WRITE). On an existing table every argument must agree
    with the table's properties: a differing one is refused, not ignored. ``operation``
    defaults to option ``hoodie.datasource.write.operation``, else upsert.

    ``data``: anything ``pyarrow.table()`` accepts, or batches as they come (a
    RecordBatchReader, a ``pyarrow.dataset`` Dataset or Scanner, an iterator of RecordBatches).
    insert and bulk_insert stream those batch by batch in bounded memory (unless they
    precombine or drop duplicates, which needs every key first); the other operations read
    the input whole. A bad batch late in a stream fails the write and leaves the table as it
    was.

    Returns the completed instant; its ``service_errors`` lists inline table services that
    failed after the commit was durable (logged, never raised)."""
    storage = Storage(path, storage_options)
    return write_data(storage, None, data, operation, options, record_key=record_key,
                      ordering_field=ordering_field, partition_by=partition_by,
                      table_type=table_type, table_version=table_version, table_name=table_name)


def write_data(storage: Storage, config: TableConfig | None, data: Any, operation: str | None,
               options: Mapping[str, Any] | None, **table_args: Any) -> WriteResult:
    """The one write path of ``hudi_format.write`` and ``Table.write``.

    ``config``: the table's config when the caller holds it (an open ``Table``); ``None`` loads
    it, or creates the table from ``table_args`` (record_key, ordering_field, partition_by,
    table_type, table_version, table_name) when there is none yet. Arguments are checked before
    anything is written, so bad input leaves the table as it was.

    A write that loses a conflict to another writer (``ConcurrentWriteError``: nothing of it
    stays) runs again on the table as it is then, up to
    ``hoodie.write.num.retries.on.conflict.failures`` times (0, Hudi's default: it fails), as
    Hudi's Spark writer does. Input that can be read only once and is written as it streams
    (an insert or bulk_insert of a RecordBatchReader or iterator) is not retried."""
    check_write_arguments(**table_args)
    opts = validate(options, WRITE_SCOPES)
    operation = resolve_operation(operation, opts)
    retries = option(opts, RETRIES_ON_CONFLICT)
    if retries and _read_once(data) and not streams(operation, opts):
        data = to_arrow(data)   # read whole by the write anyway: kept for the next attempt
    held = [config]

    def attempt() -> WriteResult:
        # a retry loads the table again: the winner may have changed it
        cfg, held[0] = held[0], None
        return _write_once(storage, cfg, data, operation, opts, table_args)
    return retrying_conflicts(attempt, 0 if _read_once(data) else retries, storage.url)


def _read_once(data: Any) -> bool:
    """Whether ``data`` yields its rows once only (a reader, an iterator, a Scanner)."""
    scanner = (type(data).__module__ or "").startswith("pyarrow._dataset") and hasattr(data, "to_reader")
    return isinstance(data, (pa.RecordBatchReader, Iterator)) or scanner


def _write_once(storage: Storage, config: TableConfig | None, data: Any, operation: str,
                opts: Mapping[str, Any], table_args: Mapping[str, Any]) -> WriteResult:
    if config is None:
        try:
            config = TableConfig.load(storage)
        except TableNotFoundError:
            config = None
    if config is not None:
        check_against_table(config, opts, storage.url, **table_args)
        check_inline_options(opts, config.is_mor)
        config = write_config(config, opts)
        # Load once: recovery, planning, the commit's metadata-table step and the inline
        # services share one snapshot of the table (listed again only when one changed it).
        snapshot = recover(storage, config, opts, TableSnapshot.load(storage, config))
        client = WriteClient(storage, config, opts, snapshot=snapshot)
        instant = client.write(data, operation)
        return WriteResult.of(instant, post_commit(storage, client.config, opts, client.snapshot))
    new = new_table_config(storage, opts, **table_args)
    check_inline_options(opts, new.is_mor)
    client = WriteClient(storage, new, opts, create=True)
    instant = client.write(data, operation)
    # the first commit wrote hoodie.properties (and may have declared the metadata table)
    return WriteResult.of(instant, post_commit(storage, client.config, opts, client.snapshot))


def recover(storage: Storage, config: TableConfig, opts: Mapping[str, Any],
            snapshot: "TableSnapshot | Timeline | None" = None) -> TableSnapshot:
    """Before writing: finish interrupted rollbacks and roll back writes whose writer died, so a
    new commit never lands beside the leftovers of a failed one. ``snapshot``: the table as the
    caller loaded it (a bare ``Timeline`` is taken as its timeline); returned as is when
    recovery changed nothing in the timeline folder, else on a fresh listing
    (``TableSnapshot.current``)."""
    if not isinstance(snapshot, TableSnapshot):
        snapshot = TableSnapshot(storage, config, snapshot)
    rollback_failed_writes(storage, snapshot.config, opts, snapshot=snapshot)
    return snapshot.current()


def post_commit(storage: Storage, config: TableConfig, opts: Mapping[str, Any],
                snapshot: "TableSnapshot | Timeline | None" = None) -> tuple[Exception, ...]:
    """Inline table services after a commit; their failures are returned, never raised (the
    write is durable). ``snapshot``: the table as the commit left it, when known."""
    return run_inline_services(storage, config, opts, snapshot=snapshot)
