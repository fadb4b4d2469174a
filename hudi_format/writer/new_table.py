"""The config of a table that a first write creates, from the write's arguments and options."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from ..storage import Storage


def as_list(value: Any) -> list[str]:
    """A field list argument: ``"a,b"``, ``["a", "b"]`` or ``None``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def new_table_config(storage: Storage, opts: Mapping[str, Any], *, record_key=None, ordering_field=None,
                     partition_by=None, table_type: str | None = "COPY_ON_WRITE", table_version=None,
                     table_name: str | None = None) -> TableConfig:
    """The config of a table the first write creates, from the arguments and Hudi's options
    (the options win over ``table_type``); nothing is written yet."""
    from ..table_init import table_properties

    keys = as_list(record_key or opts.get("hoodie.datasource.write.recordkey.field")
                    or opts.get("hoodie.table.recordkey.fields"))
    requested_version = table_version or opts.get("hoodie.write.table.version") or opts.get("hoodie.table.version")
    if not keys:
        raise InvalidOptionError("creating a table needs record_key (or option "
                                 "hoodie.datasource.write.recordkey.field)")
    version = int(requested_version or 8)
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
        hive_style=bool(opts.get("hoodie.datasource.write.hive_style_partitioning", False)),
        url_encode=bool(opts.get("hoodie.datasource.write.partitionpath.urlencode", False)),
        populate_meta_fields=bool(opts.get("hoodie.populate.meta.fields", True)),
        table_version=version, database=opts.get("hoodie.database.name"), extra=extra or None)
    return TableConfig(props, storage.uri(".hoodie/hoodie.properties"))
