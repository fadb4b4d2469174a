"""Write options: sizing from the option registry, and a write's arguments checked against the
table it writes to. The options themselves (keys, types, defaults, validation) live in
:mod:`hudi_format.options`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..config import TableConfig, builtin_keygen_type
from ..errors import InvalidOptionError, UnsupportedFeatureError
from ..options import OPERATIONS, option, parse_bool
from .file_sizing import SizingConfig

__all__ = ["OPERATIONS", "sizing_config", "check_against_table", "check_arguments_agree", "check_writable",
           "check_write_arguments", "payload_of", "payload_mode", "PAYLOAD_MODES", "write_config"]


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


# The payload classes whose merging this writer does, and the merge mode each implies (Hudi 1.x
# infers a table's hoodie.record.merge.mode from the payload class the same way); any other
# class's merge logic is Java code (partial updates, CDC payloads, a user's own).
PAYLOAD_MODES = {"OverwriteWithLatestAvroPayload": "COMMIT_TIME_ORDERING",
                 "DefaultHoodieRecordPayload": "EVENT_TIME_ORDERING",
                 "EventTimeAvroPayload": "EVENT_TIME_ORDERING"}
PAYLOAD_OPTIONS = ("hoodie.datasource.write.payload.class", "hoodie.compaction.payload.class")


def payload_of(opts: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(option, class, merge mode)``: the payload class a write's options name (both
    spellings must agree), one this writer merges with, and the mode it implies; ``None``
    when none is named."""
    given = [(k, str(opts[k]).strip()) for k in PAYLOAD_OPTIONS if str(opts.get(k) or "").strip()]
    if len({cls for _, cls in given}) > 1:
        raise InvalidOptionError(" and ".join(f"{k}={c!r}" for k, c in given) + " disagree; pass one payload class")
    if not given:
        return None
    key, cls = given[0]
    return key, cls, payload_mode(key, cls)


def payload_mode(key: str, cls: str) -> str:
    """The merge mode payload class ``cls`` implies; ``UnsupportedFeatureError`` for a class
    whose merging only Hudi's Java code does (writing with another would merge differently)."""
    mode = PAYLOAD_MODES.get(cls.rsplit(".", 1)[-1])
    if mode is None:
        raise UnsupportedFeatureError(
            f"{key}={cls!r}: this payload's merge logic runs only in Hudi's Java writer; this writer "
            f"merges as {', '.join(sorted(PAYLOAD_MODES))} do (or set hoodie.record.merge.mode)")
    return mode


def check_writable(config: TableConfig, where: str) -> None:
    """``UnsupportedFeatureError`` for a table whose records only Java code can key or merge:
    a key generator class of the user's own, a custom merge (payload) class. Reading them needs
    neither; writing with our key generator or merge would split or misorder records."""
    cls = (config.get("hoodie.table.keygenerator.class") or "").strip()
    if config.keygen_type == "USER_PROVIDED" or (cls and builtin_keygen_type(cls) is None):
        raise UnsupportedFeatureError(f"{where} keys its records with key generator {cls or 'USER_PROVIDED'!r} "
                                      f"(hoodie.properties), a Java class this writer cannot run")
    if config.merge_mode == "CUSTOM":
        raise UnsupportedFeatureError(f"{where} merges records with payload {config.payload_class!r} "
                                      f"(hoodie.record.merge.mode CUSTOM), Java code this writer cannot run")


def _given(opts: Mapping[str, Any], record_key: Any = None, partition_by: Any = None, ordering_field: Any = None,
           table_type: Any = None, table_version: Any = None,
           table_name: Any = None) -> list[tuple[str, list[tuple[str, Any, Any]]]]:
    """Per table setting, the ``(name, value, normalised value)`` of each argument and option
    of the write that gives it (a write may give one setting several ways)."""
    settings: list[tuple[str, Callable[[Any], Any], list[tuple[str, Any]]]] = [
        ("record key fields", _fields,
         [("record_key", record_key), ("hoodie.datasource.write.recordkey.field", None),
          ("hoodie.table.recordkey.fields", None)]),
        ("partition fields", _fields,
         [("partition_by", partition_by), ("hoodie.datasource.write.partitionpath.field", None),
          ("hoodie.table.partition.fields", None)]),
        ("ordering fields", _fields,
         [("ordering_field", ordering_field), ("hoodie.datasource.write.precombine.field", None),
          ("hoodie.table.precombine.field", None), ("hoodie.table.ordering.fields", None)]),
        ("type", _table_type,
         [("table_type", table_type), ("hoodie.datasource.write.table.type", None), ("hoodie.table.type", None)]),
        ("version", int,
         [("table_version", table_version), ("hoodie.write.table.version", None), ("hoodie.table.version", None)]),
        ("name", str, [("table_name", table_name), ("hoodie.table.name", None)]),
        ("key generator", _keygen_type,
         [("hoodie.datasource.write.keygenerator.type", None), ("hoodie.datasource.write.keygenerator.class", None),
          ("hoodie.table.keygenerator.type", None), ("hoodie.table.keygenerator.class", None)]),
        ("hive-style partitioning", _flag, [("hoodie.datasource.write.hive_style_partitioning", None)]),
        ("URL-encoded partitions", _flag, [("hoodie.datasource.write.partitionpath.urlencode", None)]),
        ("merge mode", lambda v: str(v).strip().upper(), [("hoodie.record.merge.mode", None)]),
    ]
    out = []
    for label, norm, sources in settings:
        given = []
        for name, value in sources:
            if value is None:
                value = opts.get(name) if name.startswith("hoodie.") else None
            if value is None or (isinstance(value, str) and not value.strip()) \
                    or (norm is _fields and not _fields(value)):
                continue
            try:
                given.append((name, value, norm(value)))
            except (TypeError, ValueError):
                raise InvalidOptionError(f"{name}={value!r} is not a valid {label}") from None
        out.append((label, given))
    return out


def check_against_table(config: TableConfig, opts: Mapping[str, Any], where: str, **arguments: Any) -> None:
    """``InvalidOptionError`` for an argument or option that contradicts the existing table
    (``arguments``: ``write``'s record_key, partition_by, ordering_field, table_type,
    table_version, table_name); ``UnsupportedFeatureError`` for a table only Java can write.

    The table's properties decide how keys, partitions, files and merges are made; a writer
    that asks for something else and is silently given the table's way writes what it did not
    mean (Hudi's own writer refuses such a "config conflict" too). Matching values are fine.
    """
    check_writable(config, where)
    current = {"record key fields": config.record_key_fields, "partition fields": config.partition_fields,
               "ordering fields": config.ordering_fields, "type": config.table_type, "version": config.version,
               "name": config.name, "key generator": config.keygen_type,
               "hive-style partitioning": config.hive_style_partitioning,
               "URL-encoded partitions": config.url_encode_partitions, "merge mode": config.merge_mode}
    for label, given in _given(opts, **arguments):
        for name, value, norm in given:
            if norm != current[label]:
                raise InvalidOptionError(f"{name}={value!r} does not match the table: {where} has {label} "
                                         f"{current[label]!r} (hoodie.properties), which a write cannot change; "
                                         f"omit {name} or pass the table's value")
    payload = payload_of(opts)
    if payload is not None and (config.version >= 8 or config.is_mor):
        key, cls, mode = payload
        if mode == "EVENT_TIME_ORDERING" and not config.ordering_fields:
            mode = "COMMIT_TIME_ORDERING"   # no ordering field to order by (as the table infers it)
        if mode != config.merge_mode:
            raise InvalidOptionError(f"{key}={cls!r} does not match the table: {where} merges "
                                     f"with {config.merge_mode} (hoodie.properties), which a write cannot "
                                     f"change; omit {key} or pass a payload of that merge mode")


def write_config(config: TableConfig, opts: Mapping[str, Any]) -> TableConfig:
    """The table's config as this write merges by it. On a version 6 copy-on-write table the
    write's payload class decides, as in Hudi 0.x, whose tables keep a payload class only for
    merge-on-read (a copy-on-write write merges by its own write config); without one, the
    table's (recorded by our first write, else 0.x's default OverwriteWithLatestAvroPayload).
    On any other table the table's, which the write's must agree with."""
    payload = payload_of(opts)
    if payload is None or config.version >= 8 or config.is_mor:
        return config
    return TableConfig({**dict(config), "hoodie.compaction.payload.class": payload[1]}, config.source)


def check_arguments_agree(opts: Mapping[str, Any], **arguments: Any) -> None:
    """``InvalidOptionError`` when a new table's setting is given two different ways (an
    argument and an option, or two spellings of an option): which one was meant is unknown."""
    for label, given in _given(opts, **arguments):
        for (name, value, norm), (first, first_value, first_norm) in zip(given[1:], given):
            if norm != first_norm:
                raise InvalidOptionError(f"{first}={first_value!r} and {name}={value!r} give the table's {label} "
                                         f"two different ways; pass one")


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
