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
from typing import Any, Mapping, Sequence

from .config import TableConfig
from .services.inline import run_inline_services
from .services.rollback import rollback_failed_writes
from .storage import Storage
from .timeline import Timeline
from .transaction import WriteResult
from .writer.client import WriteClient
from .options import WRITE_SCOPES, validate
from .writer.new_table import new_table_config
from .writer.options import check_against_table, check_write_arguments

__all__ = ["write", "write_data", "new_table_config", "recover", "post_commit"]

PROPERTIES = ".hoodie/hoodie.properties"


def write(path: str | os.PathLike[str], data: Any, *, operation: str = "upsert",
          record_key: str | Sequence[str] | None = None,
          ordering_field: str | Sequence[str] | None = None,
          partition_by: str | Sequence[str] | None = None,
          table_type: str | None = None, table_version: int | None = None,
          table_name: str | None = None, options: Mapping[str, Any] | None = None,
          storage_options: Mapping[str, Any] | None = None) -> WriteResult:
    """Write ``data`` to the Hudi table at ``path``, creating the table on the first write
    (``table_type`` defaults to COPY_ON_WRITE). On an existing table every argument must agree
    with the table's properties: a differing one is refused, not ignored.

    Returns the completed instant; its ``service_errors`` lists inline table services that
    failed after the commit was durable (logged, never raised)."""
    storage = Storage(path, storage_options)
    return write_data(storage, None, data, operation, options, record_key=record_key,
                      ordering_field=ordering_field, partition_by=partition_by,
                      table_type=table_type, table_version=table_version, table_name=table_name)


def write_data(storage: Storage, config: TableConfig | None, data: Any, operation: str,
               options: Mapping[str, Any] | None, **table_args: Any) -> WriteResult:
    """The one write path of ``hudi_format.write`` and ``Table.write``.

    ``config``: the table's config when the caller holds it (an open ``Table``); ``None`` loads
    it, or creates the table from ``table_args`` (record_key, ordering_field, partition_by,
    table_type, table_version, table_name) when there is none yet. Arguments are checked before
    anything is written, so bad input leaves the table as it was."""
    check_write_arguments(operation=operation, **table_args)
    opts = validate(options, WRITE_SCOPES)
    if config is None and storage.exists(PROPERTIES):
        config = TableConfig.load(storage)
    if config is not None:
        check_against_table(config, opts, storage.url, **table_args)
        # Load once: recovery and planning share one listing of the timeline (listed again only
        # when recovery changed it).
        timeline = recover(storage, config, opts, Timeline.load(storage, config))
        client = WriteClient(storage, config, opts, timeline=timeline)
        instant = client.write(data, operation)
        return WriteResult.of(instant, post_commit(storage, config, opts, client.timeline))
    new = new_table_config(storage, opts, **table_args)
    instant = WriteClient(storage, new, opts, create=True).write(data, operation)
    # the first commit wrote hoodie.properties (and may have declared the metadata table)
    return WriteResult.of(instant, post_commit(storage, TableConfig.load(storage), opts))


def recover(storage: Storage, config: TableConfig, opts: Mapping[str, Any],
            timeline: Timeline | None = None) -> Timeline:
    """Before writing: finish interrupted rollbacks and roll back writes whose writer died, so a
    new commit never lands beside the leftovers of a failed one. ``timeline``: the table's
    timeline as the caller listed it; returned as is when recovery changed nothing in the
    timeline folder, else listed again (``Timeline.current``)."""
    rollback_failed_writes(storage, config, opts, timeline=timeline)
    return Timeline.current(storage, config, timeline)


def post_commit(storage: Storage, config: TableConfig, opts: Mapping[str, Any],
                timeline: Timeline | None = None) -> tuple[Exception, ...]:
    """Inline table services after a commit; their failures are returned, never raised (the
    write is durable). ``timeline``: the table as the commit left it, when known."""
    return run_inline_services(storage, config, opts, timeline=timeline)
