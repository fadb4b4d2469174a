"""Creating a Hudi table, and the ``.hoodie_partition_metadata`` file of each partition.

``create_table`` lays a new table out as Apache Hudi's ``HoodieTableMetaClient.initTable`` does:
the folders under ``.hoodie`` and a ``hoodie.properties`` with the keys Hudi writes for the table
version (8, as Hudi 1.0 writes it, or 6, as 0.15 does), in the same order and with the same
comment lines and escaping:

- ``java.util.Properties.store`` writes one comment line of its caller (``Properties saved on
  <Instant.now()>``), one with ``new Date().toString()``, then the entries in the iteration order
  of the ``ConcurrentHashMap`` behind ``Properties``. Hudi fills that map by copying its table
  builder's properties through a ``HashMap`` (``stringPropertyNames``) into an
  ``OrderedProperties`` and adding ``hoodie.table.checksum`` last, so the order is a function
  of the keys and of the builder's insertion order; ``java_properties_order`` replays it.
- v8: ``hoodie.table.keygenerator.type``, ``hoodie.table.initial.version``, the timeline and
  history paths, ``hoodie.record.merge.mode`` with the payload class and merge strategy id that
  Hudi infers from it (event-time ordering when ordering fields are set, else commit time).
- v6: ``hoodie.table.keygenerator.class``; for MERGE_ON_READ tables the 0.x default payload
  (``OverwriteWithLatestAvroPayload``) and ``hoodie.compaction.record.merger.strategy``.

The properties file is written last with ``Storage.create_if_absent``: it is what makes the
folder a table, so two concurrent creators cannot both succeed and an existing table is never
overwritten (``TableConfigError``).
"""

from __future__ import annotations

import datetime as _dt
import json
import posixpath
from typing import Any, Iterable, Mapping, Sequence

from .config import (_TABLE_TYPES, builtin_keygen_type, PROPS_PATH, TableConfig,
                     format_properties, table_checksum)
from .errors import InvalidOptionError, TableConfigError, TableNotFoundError
from .storage import Storage
from .java_compat import hashmap_spread, java_hashmap_order, java_string_hash

PARTITION_METAFILE = ".hoodie_partition_metadata"
WRITABLE_VERSIONS = (6, 8)

KEYGEN_CLASSES = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "GLOBAL_DELETE": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
}
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"   # also 0.x's default merger strategy
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
PAYLOAD_BASED_STRATEGY = "00000000-0000-0000-0000-000000000000"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"

# The order in which Hudi's table builder (1.0 for v8; 0.15 as its fixtures show for v6) puts
# keys into the properties; it decides the order of keys sharing a hash bucket in the file.
_V8_BUILD_ORDER = (
    "hoodie.database.name", "hoodie.table.name", "hoodie.table.type", "hoodie.table.version",
    "hoodie.timeline.layout.version", "hoodie.table.initial.version", "hoodie.table.create.schema",
    "hoodie.archivelog.folder", "hoodie.timeline.path", "hoodie.timeline.history.path",
    "hoodie.table.base.file.format", "hoodie.table.precombine.field",
    "hoodie.table.partition.fields", "hoodie.table.recordkey.fields", "hoodie.table.cdc.enabled",
    "hoodie.populate.meta.fields", "hoodie.table.keygenerator.type",
    "hoodie.table.keygenerator.class", "hoodie.datasource.write.hive_style_partitioning",
    "hoodie.datasource.write.partitionpath.urlencode", "hoodie.table.timeline.timezone",
    "hoodie.datasource.write.drop.partition.columns", "hoodie.record.merge.mode",
    "hoodie.compaction.payload.class", "hoodie.record.merge.strategy.id")
_V6_BUILD_ORDER = (
    "hoodie.table.recordkey.fields", "hoodie.database.name", "hoodie.table.name",
    "hoodie.table.type", "hoodie.table.version", "hoodie.compaction.payload.class",
    "hoodie.compaction.record.merger.strategy", "hoodie.table.create.schema",
    "hoodie.archivelog.folder", "hoodie.timeline.layout.version", "hoodie.table.base.file.format",
    "hoodie.table.precombine.field", "hoodie.table.partition.fields", "hoodie.table.cdc.enabled",
    "hoodie.populate.meta.fields", "hoodie.table.keygenerator.class",
    "hoodie.datasource.write.hive_style_partitioning",
    "hoodie.datasource.write.partitionpath.urlencode", "hoodie.table.timeline.timezone",
    "hoodie.datasource.write.drop.partition.columns")
# TableBuilder.set(others): persisted key generator configs go in before everything else
_FIRST_PREFIXES = ("hoodie.keygen.timebased.", "hoodie.deltastreamer.keygen.timebased.")

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# -- java.util.Properties.store ---------------------------------------------------------------


def _chm_transfer(table: list[list[str]], n: int) -> list[list[str]]:
    """``ConcurrentHashMap.transfer``: split each bin in two, reversing nodes before the last run."""
    new: list[list[str]] = [[] for _ in range(2 * n)]
    for i, nodes in enumerate(table):
        if not nodes:
            continue
        bits = [hashmap_spread(java_string_hash(k)) & n for k in nodes]
        last_run, run_bit = 0, bits[0]
        for j in range(1, len(nodes)):
            if bits[j] != run_bit:
                run_bit, last_run = bits[j], j
        low = list(nodes[last_run:]) if run_bit == 0 else []
        high = list(nodes[last_run:]) if run_bit != 0 else []
        for j in range(last_run):
            (low if bits[j] == 0 else high).insert(0, nodes[j])
        new[i], new[i + n] = low, high
    return new


def _chm_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``ConcurrentHashMap`` (as in ``new Properties()``) after ``put``s."""
    n, size_ctl, count = 16, 12, 0
    table: list[list[str]] = [[] for _ in range(n)]
    for k in keys:
        nodes = table[hashmap_spread(java_string_hash(k)) & (n - 1)]
        if k in nodes:
            continue
        nodes.append(k)
        count += 1
        while count >= size_ctl:
            table = _chm_transfer(table, n)
            n *= 2
            size_ctl = n - (n >> 2)
    return [k for nodes in table for k in nodes]


def java_properties_order(build_order: Sequence[str], last: str = "hoodie.table.checksum") -> list[str]:
    """Order in which Hudi's ``storeProperties`` writes keys put in ``build_order`` (plus ``last``).

    Builder properties (a ``ConcurrentHashMap``) -> ``stringPropertyNames`` (a ``HashMap``) ->
    ``OrderedProperties`` (a ``ConcurrentHashMap`` filled in that order) + the checksum.
    """
    builder = _chm_order(k for k in build_order if k != last)
    return _chm_order(java_hashmap_order(builder) + [last])


def _build_rank(keys: Iterable[str], version: int) -> list[str]:
    order = _V8_BUILD_ORDER if version >= 8 else _V6_BUILD_ORDER
    rank = {k: i for i, k in enumerate(order)}
    keys = list(keys)
    first = [k for k in keys if k.startswith(_FIRST_PREFIXES)]
    known = sorted((k for k in keys if k in rank), key=rank.__getitem__)
    rest = [k for k in keys if k not in rank and k not in first]
    return first + known + rest


def _java_instant(now: _dt.datetime) -> str:
    """``java.time.Instant.toString()``: UTC, fraction in groups of three digits."""
    now = now.astimezone(_dt.timezone.utc)
    us = now.microsecond
    frac = "" if us == 0 else f".{us // 1000:03d}" if us % 1000 == 0 else f".{us:06d}"
    return now.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def java_date_string(now: _dt.datetime | None = None) -> str:
    """``java.util.Date.toString()`` in the local timezone: ``Thu Apr 18 17:28:04 CDT 2024``."""
    now = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone()
    return (f"{_DAYS[now.weekday()]} {_MONTHS[now.month - 1]} {now.day:02d} "
            f"{now:%H:%M:%S} {now.tzname() or 'UTC'} {now.year}")


def properties_text(props: Mapping[str, str], table_version: int,
                    now: _dt.datetime | None = None) -> str:
    """The ``hoodie.properties`` text Hudi writes for ``props`` (checksum recomputed)."""
    props = {str(k): str(v) for k, v in props.items() if k != "hoodie.table.checksum"}
    if "hoodie.table.name" not in props:
        raise TableConfigError("hoodie.table.name property needs to be specified")
    props["hoodie.table.checksum"] = str(table_checksum(props["hoodie.table.name"],
                                                       props.get("hoodie.database.name", "")))
    order = java_properties_order(_build_rank(props, table_version))
    now = now or _dt.datetime.now(_dt.timezone.utc)
    body = format_properties({k: props[k] for k in order})
    return (f"#Properties saved on {_java_instant(now)}\n#{java_date_string(now)}\n" + body)


# -- create -------------------------------------------------------------------------------------


def _fields(value: str | Iterable[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    else:
        items = [str(v).strip() for v in value]
    items = [v for v in items if v]
    for v in items:
        if any(c in v for c in "\n\r"):
            raise InvalidOptionError(f"{what}: field name {v!r} contains a line break")
    return items


def _bool(value: Any) -> str:
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "false"):
            return v
        raise InvalidOptionError(f"expected true or false, got {value!r}")
    return "true" if value else "false"


def _keygen(version: int, keygen_type: str | None, keygen_class: str | None,
            record_keys: list[str], partitions: list[str]) -> dict[str, str]:
    if keygen_class:
        ktype = builtin_keygen_type(keygen_class) or "USER_PROVIDED"
        if keygen_type and keygen_type.upper() != ktype:
            raise InvalidOptionError(f"key generator class {keygen_class} is of type {ktype}, "
                                     f"not {keygen_type}")
    elif keygen_type:
        ktype = keygen_type.strip().upper()
        if ktype not in KEYGEN_CLASSES:
            raise InvalidOptionError(f"hoodie.table.keygenerator.type must be one of "
                                     f"{sorted(KEYGEN_CLASSES)}, got {keygen_type!r}")
    elif not partitions:
        ktype = "NON_PARTITION"
    elif len(record_keys) > 1 or len(partitions) > 1:
        ktype = "COMPLEX"
    else:
        ktype = "SIMPLE"
    if version >= 8:
        out = {"hoodie.table.keygenerator.type": ktype}
        if ktype == "USER_PROVIDED":
            out["hoodie.table.keygenerator.class"] = keygen_class
        return out
    return {"hoodie.table.keygenerator.class": keygen_class or KEYGEN_CLASSES[ktype]}


def _merge_configs(version: int, table_type: str, ordering: list[str],
                   extra: Mapping[str, str]) -> dict[str, str]:
    if version < 8:
        payload = extra.get("hoodie.compaction.payload.class")
        if table_type == "MERGE_ON_READ":
            return {"hoodie.compaction.payload.class": payload or OVERWRITE_PAYLOAD,
                    "hoodie.compaction.record.merger.strategy":
                        extra.get("hoodie.compaction.record.merger.strategy", EVENT_TIME_STRATEGY)}
        return {"hoodie.compaction.payload.class": payload} if payload else {}
    mode = (extra.get("hoodie.record.merge.mode") or "").strip().upper() or \
        ("EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING")
    if mode == "EVENT_TIME_ORDERING":
        payload, strategy = DEFAULT_PAYLOAD, EVENT_TIME_STRATEGY
    elif mode == "COMMIT_TIME_ORDERING":
        payload, strategy = OVERWRITE_PAYLOAD, COMMIT_TIME_STRATEGY
    elif mode == "CUSTOM":
        payload = extra.get("hoodie.compaction.payload.class")
        strategy = extra.get("hoodie.record.merge.strategy.id") or PAYLOAD_BASED_STRATEGY
        if not payload:
            raise InvalidOptionError("CUSTOM merge mode needs hoodie.compaction.payload.class")
    else:
        raise InvalidOptionError(f"hoodie.record.merge.mode must be EVENT_TIME_ORDERING, "
                                 f"COMMIT_TIME_ORDERING or CUSTOM, got {mode!r}")
    return {"hoodie.record.merge.mode": mode,
            "hoodie.compaction.payload.class": extra.get("hoodie.compaction.payload.class", payload),
            "hoodie.record.merge.strategy.id": extra.get("hoodie.record.merge.strategy.id", strategy)}


def table_properties(*, table_name: str, table_type: str = "COPY_ON_WRITE",
                     record_key_fields: str | Iterable[str] | None = None,
                     partition_fields: str | Iterable[str] | None = None,
                     ordering_fields: str | Iterable[str] | None = None,
                     keygen_type: str | None = None, keygen_class: str | None = None,
                     hive_style: bool = False, url_encode: bool = False,
                     populate_meta_fields: bool = True, base_file_format: str = "PARQUET",
                     table_version: int = 8, create_schema: str | Mapping | None = None,
                     database: str | None = None, drop_partition_columns: bool = False,
                     extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The ``hoodie.properties`` entries Hudi writes for a new table with these settings
    (in Hudi's build order; ``properties_text`` orders them as the file does)."""
    if table_version not in WRITABLE_VERSIONS:
        raise InvalidOptionError(f"can create tables of version {' or '.join(map(str, WRITABLE_VERSIONS))}, "
                                 f"not {table_version!r}")
    if not table_name or not isinstance(table_name, str) or any(c in table_name for c in "\n\r"):
        raise InvalidOptionError(f"table_name must be a non-empty single-line string, got {table_name!r}")
    ttype = _TABLE_TYPES.get(str(table_type).strip().lower())
    if ttype is None:
        raise InvalidOptionError(f"table_type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    fmt = str(base_file_format).strip().upper()
    if fmt not in ("PARQUET", "ORC", "HFILE"):
        raise InvalidOptionError(f"base_file_format must be PARQUET, ORC or HFILE, got {base_file_format!r}")
    keys = _fields(record_key_fields, "record_key_fields")
    parts = _fields(partition_fields, "partition_fields")
    ordering = _fields(ordering_fields, "ordering_fields")
    extra = {str(k): (_bool(v) if isinstance(v, bool) else str(v)) for k, v in (extra or {}).items()}
    if isinstance(create_schema, Mapping):
        create_schema = json.dumps(create_schema, separators=(",", ":"))
    v8 = table_version >= 8

    props: dict[str, str] = {}
    if database:
        props["hoodie.database.name"] = database
    props["hoodie.table.name"] = table_name
    props["hoodie.table.type"] = ttype
    props["hoodie.table.version"] = str(table_version)
    props["hoodie.timeline.layout.version"] = "2" if v8 else "1"
    if v8:
        props["hoodie.table.initial.version"] = str(table_version)
    if create_schema:
        props["hoodie.table.create.schema"] = create_schema
    props["hoodie.archivelog.folder"] = "archived"
    if v8:
        props["hoodie.timeline.path"] = "timeline"
        props["hoodie.timeline.history.path"] = "history"
    if fmt != "PARQUET":
        props["hoodie.table.base.file.format"] = fmt
    if ordering:
        props["hoodie.table.precombine.field"] = ",".join(ordering)
    if parts:
        props["hoodie.table.partition.fields"] = ",".join(parts)
    if keys:
        props["hoodie.table.recordkey.fields"] = ",".join(keys)
    if not populate_meta_fields:
        props["hoodie.populate.meta.fields"] = "false"
    props.update(_keygen(table_version, keygen_type, keygen_class, keys, parts))
    props["hoodie.datasource.write.hive_style_partitioning"] = _bool(hive_style)
    props["hoodie.datasource.write.partitionpath.urlencode"] = _bool(url_encode)
    props["hoodie.datasource.write.drop.partition.columns"] = _bool(drop_partition_columns)
    props.update(_merge_configs(table_version, ttype, ordering, extra))
    for k, v in extra.items():
        if k == "hoodie.table.checksum":
            continue
        props[k] = v
    TableConfig(props).validate()
    return props


def _meta_folders(version: int) -> list[str]:
    folders = [".hoodie", ".hoodie/.schema", ".hoodie/.temp", ".hoodie/.aux",
               ".hoodie/.aux/.bootstrap", ".hoodie/.aux/.bootstrap/.partitions",
               ".hoodie/.aux/.bootstrap/.fileids"]
    folders += [".hoodie/timeline", ".hoodie/timeline/history"] if version >= 8 else [".hoodie/archived"]
    return folders


def _table_exists(storage: Storage) -> bool:
    return storage.exists(PROPS_PATH) or storage.exists(PROPS_PATH + ".backup")


def _write_table(storage: Storage, props: Mapping[str, str], version: int) -> TableConfig:
    if _table_exists(storage):
        raise TableConfigError(f"a Hudi table already exists at {storage.url} "
                               f"({storage.uri(PROPS_PATH)}); refusing to overwrite it")
    for folder in _meta_folders(version):
        try:
            storage.fs.makedirs(storage.full(folder), exist_ok=True)
        except OSError:
            pass  # object stores have no folders
    text = properties_text(props, version)
    if not storage.create_if_absent(PROPS_PATH, text.encode("utf-8")):
        raise TableConfigError(f"a Hudi table was created at {storage.url} concurrently "
                               f"({storage.uri(PROPS_PATH)}); refusing to overwrite it")
    return TableConfig.load(storage)


def _storage(storage: Storage | str) -> Storage:
    return storage if isinstance(storage, Storage) else Storage(storage)


def create_table(storage: Storage | str, *, table_name: str, table_type: str = "COPY_ON_WRITE",
                 record_key_fields: str | Iterable[str] | None = None,
                 partition_fields: str | Iterable[str] | None = None,
                 ordering_fields: str | Iterable[str] | None = None,
                 keygen_type: str | None = None, keygen_class: str | None = None,
                 hive_style: bool = False, url_encode: bool = False,
                 populate_meta_fields: bool = True, base_file_format: str = "PARQUET",
                 table_version: int = 8, create_schema: str | Mapping | None = None,
                 database: str | None = None, drop_partition_columns: bool = False,
                 extra: Mapping[str, Any] | None = None) -> TableConfig:
    """Create an empty Hudi table (folders + ``hoodie.properties``) and return its config.

    Raises ``TableConfigError`` if a table exists there already, ``InvalidOptionError`` for
    bad settings. ``extra`` adds or overrides ``hoodie.*`` table properties.
    """
    storage = _storage(storage)
    props = table_properties(
        table_name=table_name, table_type=table_type, record_key_fields=record_key_fields,
        partition_fields=partition_fields, ordering_fields=ordering_fields,
        keygen_type=keygen_type, keygen_class=keygen_class, hive_style=hive_style,
        url_encode=url_encode, populate_meta_fields=populate_meta_fields,
        base_file_format=base_file_format, table_version=table_version,
        create_schema=create_schema, database=database,
        drop_partition_columns=drop_partition_columns, extra=extra)
    return _write_table(storage, props, table_version)


def ensure_table(storage: Storage | str, config: TableConfig | Mapping[str, str],
                 create: bool = True) -> TableConfig:
    """The table's config; if there is no table yet and ``create``, write ``config`` as a new one.

    Raises ``TableNotFoundError`` when there is no table and ``create`` is false. A table that
    appears concurrently is loaded rather than overwritten.
    """
    storage = _storage(storage)
    if _table_exists(storage):
        return TableConfig.load(storage)
    if not create:
        raise TableNotFoundError(f"no Hudi table at {storage.url}: {PROPS_PATH} does not exist")
    props = dict(config)
    cfg = TableConfig(props)
    cfg.validate()
    if cfg.version not in WRITABLE_VERSIONS:
        raise InvalidOptionError(f"can create tables of version 6 or 8, not {cfg.version}")
    try:
        return _write_table(storage, props, cfg.version)
    except TableConfigError:
        if _table_exists(storage):
            return TableConfig.load(storage)
        raise


# -- partition metadata ---------------------------------------------------------------------------


def partition_metadata_text(instant_time: str, depth: int, now: _dt.datetime | None = None) -> str:
    """``.hoodie_partition_metadata`` as ``HoodiePartitionMetadata`` stores it (Java properties)."""
    return (f"#partition metadata\n#{java_date_string(now)}\n"
            f"commitTime={instant_time}\npartitionDepth={int(depth)}\n")


def write_partition_metadata(storage: Storage, partition_path: str, instant_time: str,
                             depth: int | None = None) -> bool:
    """Write ``<partition>/.hoodie_partition_metadata`` unless present; True if written.

    ``depth`` defaults to the number of segments of ``partition_path`` (0 for the table root of
    a non-partitioned table). Like Hudi, an existing file is left alone (the first writer of a
    partition records its instant).
    """
    partition_path = (partition_path or "").strip("/")
    if not str(instant_time).isdigit():
        raise InvalidOptionError(f"instant time must be digits, got {instant_time!r}")
    if depth is None:
        depth = len(partition_path.split("/")) if partition_path else 0
    rel = posixpath.join(partition_path, PARTITION_METAFILE) if partition_path else PARTITION_METAFILE
    return storage.create_if_absent(rel, partition_metadata_text(str(instant_time), depth).encode("utf-8"))
