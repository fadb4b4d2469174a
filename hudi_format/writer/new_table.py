"""The config of the table a first write creates: Hudi's options and the write arguments
turned into ``hoodie.properties`` (nothing is written here). Below the api and engine layers,
so both the public ``write`` and an engine's ``begin_write`` create tables alike."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..config import TableConfig, builtin_keygen_type
from ..errors import InvalidOptionError, UnsupportedFeatureError
from ..keygen import KEYGEN_CLASSES
from ..options import default, option
from ..storage import Storage
from ..table_init import table_properties
from .options import check_arguments_agree, payload_of

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
    check_arguments_agree(opts, record_key=record_key, ordering_field=ordering_field, partition_by=partition_by,
                          table_type=table_type, table_version=table_version, table_name=table_name)
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
    if keygen_class and builtin_keygen_type(keygen_class) is None:
        raise UnsupportedFeatureError(f"key generator class {keygen_class!r} is Java code of your own, which this "
                                      f"writer cannot run; use hoodie.datasource.write.keygenerator.type "
                                      f"({', '.join(sorted(KEYGEN_CLASSES))})")
    if not keygen_class and not keygen_type:
        keygen_type = ("NON_PARTITION" if not parts else
                       "COMPLEX" if len(keys) > 1 or len(parts) > 1 else "SIMPLE")
    name = table_name or opts.get("hoodie.table.name") or posixpath.basename(storage.root.rstrip("/")) or "hudi_table"
    extra = {k: str(v) for k, v in opts.items() if k.startswith("hoodie.keygen.timebased.")}
    extra.update(_merging(opts, ordering, version))
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


def _merging(opts: Mapping[str, Any], ordering: list[str], version: int) -> dict[str, str]:
    """The merge mode and payload class a new table records, from ``hoodie.record.merge.mode``
    and the payload class options: as Hudi 1.x infers the mode from the payload (v8), and as
    0.x records the payload (v6; 0.x only for merge-on-read, here for copy-on-write too, where
    it is what later writes that name no payload merge by: :func:`.options.write_config`). A
    custom merge is Java code: refused."""
    mode = str(opts.get("hoodie.record.merge.mode") or "").strip().upper()
    if mode == "CUSTOM":
        raise UnsupportedFeatureError("hoodie.record.merge.mode=CUSTOM merges with a payload or merger class's "
                                      "Java code, which this writer cannot run")
    out = {"hoodie.record.merge.mode": mode} if mode else {}
    payload = payload_of(opts)
    if payload is None:
        return out
    key, cls, implied = payload
    if implied == "EVENT_TIME_ORDERING" and not ordering:
        raise InvalidOptionError(f"{key}={cls!r} orders records by the ordering field, and the "
                                 f"table has none: pass ordering_field (hoodie.datasource.write.precombine.field)")
    if mode and mode != implied:
        raise InvalidOptionError(f"hoodie.record.merge.mode={mode} and {key}={cls!r} ({implied}) "
                                 f"disagree; pass one")
    if version >= 8:
        out["hoodie.record.merge.mode"] = implied
    out["hoodie.compaction.payload.class"] = cls
    return out
