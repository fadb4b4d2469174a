"""The config of the table a first write creates: Hudi's options and the write arguments
turned into ``hoodie.properties`` (nothing is written here). Below the api and engine layers,
so both the public ``write`` and an engine's ``begin_write`` create tables alike."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from ..options import default, option
from ..storage import Storage
from ..table_init import table_properties

__all__ = ["as_list", "new_table_config"]


def as_list(value: Any) -> list[str]:
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
    keys = as_list(record_key or opts.get("hoodie.datasource.write.recordkey.field")
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
    parts = as_list(partition_by or opts.get("hoodie.datasource.write.partitionpath.field")
                     or opts.get("hoodie.table.partition.fields"))
    ordering = as_list(ordering_field or opts.get("hoodie.datasource.write.precombine.field")
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
    return TableConfig(props, storage.uri(".hoodie/hoodie.properties"))
