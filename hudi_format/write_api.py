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
import posixpath
from typing import Any, Mapping, Sequence

from .config import TableConfig
from .errors import InvalidOptionError
from .services.inline import run_inline_services
from .services.rollback import rollback_failed_writes
from .storage import Storage
from .table_init import table_properties
from .transaction import WriteResult
from .writer.client import WriteClient
from .options import WRITE_SCOPES, default, option, validate
from .writer.options import check_against_table, check_write_arguments

__all__ = ["write", "write_data", "new_table_config", "recover", "post_commit"]

PROPERTIES = ".hoodie/hoodie.properties"


def write(path: str | os.PathLike, data: Any, *, operation: str = "upsert",
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
        recover(storage, config, opts)
        instant = WriteClient(storage, config, opts).write(data, operation)
        return WriteResult.of(instant, post_commit(storage, config, opts))
    new = new_table_config(storage, opts, **table_args)
    instant = WriteClient(storage, new, opts, create=True).write(data, operation)
    # the first commit wrote hoodie.properties (and may have declared the metadata table)
    return WriteResult.of(instant, post_commit(storage, TableConfig.load(storage), opts))


def recover(storage: Storage, config: TableConfig, opts: Mapping[str, Any]) -> None:
    """Before writing: finish interrupted rollbacks and roll back writes whose writer died, so a
    new commit never lands beside the leftovers of a failed one."""
    rollback_failed_writes(storage, config, opts)


def post_commit(storage: Storage, config: TableConfig, opts: Mapping[str, Any]) -> tuple[Exception, ...]:
    """Inline table services after a commit; their failures are returned, never raised (the
    write is durable)."""
    return run_inline_services(storage, config, opts)


def _as_list(value: Any) -> list[str]:
    """A column argument as a list: ``"a,b"``, ``["a", "b"]`` and ``None`` (no columns)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def new_table_config(storage: Storage, opts: Mapping[str, Any], *, record_key: Any = None,
                     ordering_field: Any = None, partition_by: Any = None,
                     table_type: str | None = "COPY_ON_WRITE", table_version: Any = None,
                     table_name: str | None = None) -> TableConfig:
    """The config of a table the first write creates, from the arguments and Hudi's options
    (the options win over ``table_type``); nothing is written yet."""
    keys = _as_list(record_key or opts.get("hoodie.datasource.write.recordkey.field")
                    or opts.get("hoodie.table.recordkey.fields"))
    requested_version = table_version or opts.get("hoodie.write.table.version") or opts.get("hoodie.table.version")
    if not keys:
        raise InvalidOptionError("creating a table needs record_key (or option "
                                 "hoodie.datasource.write.recordkey.field)")
    version = int(requested_version or default("hoodie.write.table.version"))
    ttype = (opts.get("hoodie.datasource.write.table.type") or opts.get("hoodie.table.type")
             or table_type or "COPY_ON_WRITE").upper()
    ttype = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(ttype, ttype)
    if ttype not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        raise InvalidOptionError(f"table_type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    parts = _as_list(partition_by or opts.get("hoodie.datasource.write.partitionpath.field")
                     or opts.get("hoodie.table.partition.fields"))
    ordering = _as_list(ordering_field or opts.get("hoodie.datasource.write.precombine.field")
                        or opts.get("hoodie.table.ordering.fields") or opts.get("hoodie.table.precombine.field"))
    keygen_class = opts.get("hoodie.datasource.write.keygenerator.class") or opts.get("hoodie.table.keygenerator.class")
    keygen_type = opts.get("hoodie.datasource.write.keygenerator.type") or opts.get("hoodie.table.keygenerator.type")
    if not keygen_class and not keygen_type:
        keygen_type = ("NON_PARTITION" if not parts else
                       "COMPLEX" if len(keys) > 1 or len(parts) > 1 else "SIMPLE")
    name = table_name or opts.get("hoodie.table.name") or posixpath.basename(storage.root.rstrip("/")) or "hudi_table"
    extra = {k: str(v) for k, v in opts.items() if k.startswith("hoodie.keygen.timebased.")}
    if opts.get("hoodie.record.merge.mode"):
        extra["hoodie.record.merge.mode"] = opts["hoodie.record.merge.mode"]
    if opts.get("hoodie.table.timeline.timezone"):
        extra["hoodie.table.timeline.timezone"] = opts["hoodie.table.timeline.timezone"]
    props = table_properties(
        table_name=name, table_type=ttype, record_key_fields=keys, partition_fields=parts,
        ordering_fields=ordering, keygen_type=keygen_type, keygen_class=keygen_class,
        hive_style=option(opts, "hoodie.datasource.write.hive_style_partitioning"),
        url_encode=option(opts, "hoodie.datasource.write.partitionpath.urlencode"),
        populate_meta_fields=option(opts, "hoodie.populate.meta.fields"),
        table_version=version, database=opts.get("hoodie.database.name"), extra=extra or None)
    return TableConfig(props, storage.uri(PROPERTIES))
