"""Write options: sizing from the option registry, and a write's arguments checked against the
table it writes to. The options themselves (keys, types, defaults, validation) live in
:mod:`hudi_format.options`.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from ..options import OPERATIONS, option, parse_bool
from .file_sizing import SizingConfig

__all__ = ["OPERATIONS", "sizing_config", "check_against_table", "check_write_arguments"]


def sizing_config(opts: Mapping[str, Any]) -> SizingConfig:
    """File sizing as Hudi's options ask for it (each option, or Hudi's default)."""
    return SizingConfig(max_file_size=option(opts, "hoodie.parquet.max.file.size"),
                        small_file_limit=option(opts, "hoodie.parquet.small.file.limit"),
                        insert_split_size=option(opts, "hoodie.copyonwrite.insert.split.size"),
                        record_size_estimate=option(opts, "hoodie.copyonwrite.record.size.estimate"),
                        auto_split=option(opts, "hoodie.copyonwrite.insert.auto.split"))


# -- a write to an existing table: its arguments must agree with the table ----------------------
def _fields(value: Any) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    # CUSTOM key generators write "field:type"; the table config compares on the field
    return [v.strip().split(":")[0] for v in items if v.strip()]


def _table_type(value: Any) -> str:
    text = str(value).strip().upper()
    return {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(text, text)


def _flag(value: Any) -> bool:
    return parse_bool("flag", value)


def _keygen_type(value: Any) -> str:
    from ..keygen import KEYGEN_CLASSES
    text = str(value).strip()
    by_class = {cls: t for t, cls in KEYGEN_CLASSES.items()}
    return by_class.get(text, by_class.get("org.apache.hudi.keygen." + text.rsplit(".", 1)[-1], text.upper()))


def check_against_table(config: TableConfig, opts: Mapping[str, Any], where: str, *,
                        record_key: Any = None, partition_by: Any = None, ordering_field: Any = None,
                        table_type: Any = None, table_version: Any = None, table_name: Any = None) -> None:
    """``InvalidOptionError`` for an argument or option that contradicts the existing table.

    The table's properties decide how keys, partitions and files are made; a writer that asks
    for something else and is silently given the table's way writes what it did not mean
    (Hudi's own writer refuses such a "config conflict" too). Matching values are fine.
    """
    checks = [
        ("record key fields", _fields, config.record_key_fields,
         [("record_key", record_key), ("hoodie.datasource.write.recordkey.field", None),
          ("hoodie.table.recordkey.fields", None)]),
        ("partition fields", _fields, config.partition_fields,
         [("partition_by", partition_by), ("hoodie.datasource.write.partitionpath.field", None),
          ("hoodie.table.partition.fields", None)]),
        ("ordering fields", _fields, config.ordering_fields,
         [("ordering_field", ordering_field), ("hoodie.datasource.write.precombine.field", None),
          ("hoodie.table.precombine.field", None), ("hoodie.table.ordering.fields", None)]),
        ("type", _table_type, config.table_type,
         [("table_type", table_type), ("hoodie.datasource.write.table.type", None), ("hoodie.table.type", None)]),
        ("version", int, config.version,
         [("table_version", table_version), ("hoodie.write.table.version", None), ("hoodie.table.version", None)]),
        ("name", str, config.name, [("table_name", table_name), ("hoodie.table.name", None)]),
        ("key generator", _keygen_type, config.keygen_type,
         [("hoodie.datasource.write.keygenerator.type", None), ("hoodie.datasource.write.keygenerator.class", None),
          ("hoodie.table.keygenerator.type", None), ("hoodie.table.keygenerator.class", None)]),
        ("hive-style partitioning", _flag, config.hive_style_partitioning,
         [("hoodie.datasource.write.hive_style_partitioning", None)]),
        ("URL-encoded partitions", _flag, config.url_encode_partitions,
         [("hoodie.datasource.write.partitionpath.urlencode", None)]),
    ]
    for label, norm, current, sources in checks:
        for name, value in sources:
            if value is None:
                value = opts.get(name) if name.startswith("hoodie.") else None
            if value is None or (norm is _fields and not _fields(value)):
                continue
            try:
                given = norm(value)
            except (TypeError, ValueError):
                raise InvalidOptionError(f"{name}={value!r} is not a valid {label}") from None
            if given != current:
                raise InvalidOptionError(f"{name}={value!r} does not match the table: {where} has {label} "
                                         f"{current!r} (hoodie.properties), which a write cannot change; "
                                         f"omit {name} or pass the table's value")


def check_write_arguments(**arguments: Any) -> None:
    """``InvalidOptionError`` naming an argument of ``write`` whose type makes no sense (an int
    as a column name, a list as the table type), before it surfaces as a TypeError deep down."""
    for name, value in arguments.items():
        if value is None:
            continue
        if name in ("record_key", "ordering_field", "partition_by"):
            ok = isinstance(value, str) or (isinstance(value, (list, tuple))
                                            and all(isinstance(v, str) for v in value))
            what = "a column name or a list of column names"
        elif name == "table_version":
            ok = isinstance(value, int) and not isinstance(value, bool) or \
                isinstance(value, str) and value.strip().isdigit()
            what = "a table version number (6 or 8)"
        else:
            ok = isinstance(value, str)
            what = "a string"
        if not ok:
            raise InvalidOptionError(f"argument {name} must be {what}, got {value!r}")
