"""Write options: Hudi's own ``hoodie.*`` keys, validated up front.

Users paste option maps from their Spark jobs, so we take Hudi's names. A key we do not know is
an error (a typo silently ignored is a table written wrong), except keys of features that only
matter to other engines, which we accept and ignore.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from .file_sizing import (DEFAULT_INSERT_SPLIT_SIZE, DEFAULT_MAX_FILE_SIZE,
                          DEFAULT_RECORD_SIZE_ESTIMATE, DEFAULT_SMALL_FILE_LIMIT, SizingConfig)

OPERATIONS = ("insert", "upsert", "bulk_insert", "delete", "insert_overwrite",
              "insert_overwrite_table", "delete_partition")

# key -> (kind, default); kinds: int, bool, str, choice:<a|b>
KNOWN: dict[str, tuple[str, Any]] = {
    "hoodie.table.name": ("str", None),
    "hoodie.database.name": ("str", None),
    "hoodie.datasource.write.operation": ("choice:" + "|".join(OPERATIONS), "upsert"),
    "hoodie.datasource.write.table.type": ("choice:COPY_ON_WRITE|MERGE_ON_READ", None),
    "hoodie.table.type": ("choice:COPY_ON_WRITE|MERGE_ON_READ", None),
    "hoodie.datasource.write.recordkey.field": ("str", None),
    "hoodie.table.recordkey.fields": ("str", None),
    "hoodie.datasource.write.partitionpath.field": ("str", None),
    "hoodie.table.partition.fields": ("str", None),
    "hoodie.datasource.write.precombine.field": ("str", None),
    "hoodie.table.precombine.field": ("str", None),
    "hoodie.table.ordering.fields": ("str", None),
    "hoodie.datasource.write.keygenerator.type": ("str", None),
    "hoodie.datasource.write.keygenerator.class": ("str", None),
    "hoodie.table.keygenerator.type": ("str", None),
    "hoodie.table.keygenerator.class": ("str", None),
    "hoodie.datasource.write.hive_style_partitioning": ("bool", False),
    "hoodie.datasource.write.partitionpath.urlencode": ("bool", False),
    "hoodie.populate.meta.fields": ("bool", True),
    "hoodie.write.table.version": ("int", 8),
    "hoodie.table.version": ("int", None),
    "hoodie.record.merge.mode": ("choice:EVENT_TIME_ORDERING|COMMIT_TIME_ORDERING", None),
    "hoodie.compaction.payload.class": ("str", None),
    "hoodie.datasource.write.payload.class": ("str", None),
    "hoodie.parquet.max.file.size": ("int", DEFAULT_MAX_FILE_SIZE),
    "hoodie.parquet.small.file.limit": ("int", DEFAULT_SMALL_FILE_LIMIT),
    "hoodie.copyonwrite.insert.split.size": ("int", DEFAULT_INSERT_SPLIT_SIZE),
    "hoodie.copyonwrite.insert.auto.split": ("bool", True),
    "hoodie.copyonwrite.record.size.estimate": ("int", DEFAULT_RECORD_SIZE_ESTIMATE),
    "hoodie.merge.small.file.group.candidates.limit": ("int", 1),
    "hoodie.parquet.compression.codec": ("str", "gzip"),
    "hoodie.parquet.block.size": ("int", 120 * 1024 * 1024),
    "hoodie.logfile.max.size": ("int", 1024 * 1024 * 1024),
    "hoodie.logfile.data.block.format": ("choice:avro|parquet", "avro"),
    "hoodie.logfile.data.block.max.size": ("int", 256 * 1024 * 1024),
    "hoodie.combine.before.insert": ("bool", False),
    "hoodie.combine.before.upsert": ("bool", True),
    "hoodie.combine.before.delete": ("bool", True),
    "hoodie.datasource.write.insert.drop.duplicates": ("bool", False),
    "hoodie.index.type": ("choice:SIMPLE|GLOBAL_SIMPLE|BLOOM|GLOBAL_BLOOM|RECORD_INDEX", "SIMPLE"),
    "hoodie.simple.index.update.partition.path": ("bool", True),
    "hoodie.bloom.index.update.partition.path": ("bool", True),
    "hoodie.index.bloom.num_entries": ("int", 60000),
    "hoodie.index.bloom.fpp": ("str", "0.000000001"),
    "hoodie.bloom.index.filter.type": ("choice:SIMPLE|DYNAMIC_V0", "DYNAMIC_V0"),
    "hoodie.bloom.index.filter.dynamic.max.entries": ("int", 100000),
    "hoodie.table.timeline.timezone": ("choice:LOCAL|UTC", "LOCAL"),
    "hoodie.avro.schema.validate": ("bool", True),
    "hoodie.datasource.write.partitions.to.delete": ("str", None),
    "hoodie.write.concurrency.mode": ("choice:OPTIMISTIC_CONCURRENCY_CONTROL|SINGLE_WRITER|NON_BLOCKING_CONCURRENCY_CONTROL",
                                      "OPTIMISTIC_CONCURRENCY_CONTROL"),
    "hoodie.write.lock.provider": ("str", "filesystem"),
    "hoodie.write.lock.wait_time_ms": ("int", 1000),
    "hoodie.write.lock.num_retries": ("int", 60),
    "hoodie.write.lock.filesystem.path": ("str", None),
    "hoodie.write.lock.filesystem.expire": ("int", 0),
    "hoodie.client.heartbeat.interval_in_ms": ("int", 60_000),
    "hoodie.client.heartbeat.tolerable.misses": ("int", 2),
    "hoodie.cleaner.policy.failed.writes": ("choice:EAGER|LAZY|NEVER", "LAZY"),
}
# the metadata table's keys (hoodie.metadata.*), declared where the metadata writer reads them
from ..metadata.options import MDT_OPTIONS as _MDT_OPTIONS  # noqa: E402

KNOWN.update(_MDT_OPTIONS)
KNOWN_PREFIXES = ("hoodie.keygen.timebased.",)
# Accepted for compatibility with pasted Spark options; no effect on this engine.
IGNORED = {
    "hoodie.upsert.shuffle.parallelism", "hoodie.insert.shuffle.parallelism",
    "hoodie.bulkinsert.shuffle.parallelism", "hoodie.delete.shuffle.parallelism",
    "hoodie.datasource.write.streaming.ignore.failed.batch", "hoodie.datasource.hive_sync.enable",
    "hoodie.embed.timeline.server", "hoodie.write.markers.type",
}


def register_options(options: Mapping[str, tuple[str, Any]]) -> None:
    """Let a higher layer (table services) declare the ``hoodie.*`` keys it reads, so that one
    validation covers every option of a write."""
    for key, spec in options.items():
        KNOWN.setdefault(key, spec)


def _coerce(key: str, kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "int":
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"option {key} must be an integer, got {value!r}") from None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise InvalidOptionError(f"option {key} must be true or false, got {value!r}")
    if kind.startswith("choice:"):
        choices = kind[7:].split("|")
        for c in choices:
            if str(value).strip().lower() == c.lower():
                return c
        raise InvalidOptionError(f"option {key} must be one of {choices}, got {value!r}")
    return str(value)


def validate_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check every key and coerce every value; unknown keys are errors with a suggestion."""
    if options is not None and not isinstance(options, Mapping):
        raise InvalidOptionError(f"options must be a mapping of hoodie.* keys to values, got {options!r}")
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise InvalidOptionError(f"option keys are hoodie.* strings, got {key!r}")
        if key in KNOWN:
            out[key] = _coerce(key, KNOWN[key][0], value)
        elif key.startswith(KNOWN_PREFIXES) or key in IGNORED:
            out[key] = value
        else:
            close = difflib.get_close_matches(key, list(KNOWN), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidOptionError(f"unknown write option {key!r}{hint}")
    return out


def option(opts: Mapping[str, Any], key: str) -> Any:
    return opts.get(key, KNOWN[key][1])


def sizing_config(opts: Mapping[str, Any]) -> SizingConfig:
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
    return str(value).strip().lower() == "true"


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
