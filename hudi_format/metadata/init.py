"""Creating the metadata table of a data table, and bootstrapping its partitions.

The metadata table lives at ``<table>/.hoodie/metadata``: a MERGE_ON_READ Hudi table of the
data table's version, HFile base files, virtual keys (field ``key``), the
``HoodieMetadataPayload`` merge and no meta fields. Its ``hoodie.properties`` carries the keys
Hudi's ``HoodieBackedTableMetadataWriter.initializeMetaClient`` gives it.

Each metadata partition starts (``initializeFromFilesystem``) with its own deltacommit:

- instant times: v8 takes ``00000000000000000``, ``00000000000000001``, ... (Hudi 1.x's
  ``SOLO_COMMIT_TIMESTAMP`` plus one millisecond per partition); v6 appends ``010``, ``011``,
  ... to the data table's last completed instant (or to ``00000000000000`` on a table without
  commits), as Hudi writes v6 tables;
- the partition's file groups (``files-0000-0``; ``record-index-0000-0`` ...) each get a first
  log file ``.<fg>_<instant>.log.1_0-0-0`` holding an empty delete block, so a group that
  receives no record still exists;
- the records describing the data table as it is (listing of committed files, their column
  statistics and bloom filters, every live record key) are bulk-inserted as one HFile base file
  per file group, ``<fg>_<token>_<instant>.hfile``;
- the deltacommit (``BULK_INSERT_PREPPED``) completes and the partition is added to the data
  table's ``hoodie.table.metadata.partitions``.

``files`` is always first. A data table is only bootstrapped while it has no pending write
other than the one in progress (its files could not be told apart from debris).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Mapping

from ..config import PROPS_PATH, TableConfig, replace_properties
from ..errors import HudiError
from ..storage import Storage
from ..table_init import properties_text
from . import keys as K
from ..options import option
from .hfiles import cells_by_file_group, cells_of
from .options import MetadataTableError

log = logging.getLogger(__name__)

__all__ = [
    "METADATA_PAYLOAD_CLASS", "METADATA_KEYGEN_CLASS", "metadata_storage", "metadata_table_exists",
    "metadata_table_properties", "create_metadata_table", "set_metadata_partitions",
    "init_instant_times", "is_init_instant", "file_group_count", "enabled_partitions", "initialize_partitions",
    "delete_metadata_table", "disabled_partitions", "drop_partitions", "named_off",
]

METADATA_PAYLOAD_CLASS = "org.apache.hudi.metadata.HoodieMetadataPayload"
METADATA_KEYGEN_CLASS = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
PAYLOAD_BASED_STRATEGY = "00000000-0000-0000-0000-000000000000"
SOLO_COMMIT_TIMESTAMP_V8 = "00000000000000000"
SOLO_COMMIT_TIMESTAMP_V6 = "00000000000000"
PARTITION_INITIALIZATION_TIME_SUFFIX = 10  # v6: "010", "011", ...
INIT_WRITE_TOKEN = "0-0-0"  # HoodieLogFormat.DEFAULT_WRITE_TOKEN
# Average bytes of one record index entry (HoodieBackedTableMetadataWriter)
RECORD_INDEX_AVERAGE_RECORD_SIZE = 48
# MetadataPartitionType order, in which Hudi initialises partitions
_ORDER = (K.FILES, K.COLUMN_STATS, K.BLOOM_FILTERS, K.RECORD_INDEX)


def metadata_storage(storage: Storage) -> Storage:
    return storage.sub(K.METADATA_TABLE_DIR)


def metadata_table_exists(storage: Storage) -> bool:
    md = metadata_storage(storage)
    return md.exists(PROPS_PATH) or md.exists(PROPS_PATH + ".backup")


def metadata_table_properties(data_config: TableConfig) -> dict[str, str]:
    """``hoodie.properties`` of the metadata table of a table with ``data_config``."""
    version = data_config.version
    props: dict[str, str] = {"hoodie.table.name": f"{data_config.name}_metadata",
                             "hoodie.table.type": "MERGE_ON_READ",
                             "hoodie.table.version": str(version)}
    if data_config.database:
        props["hoodie.database.name"] = data_config.database
    if version >= 8:
        props.update({
            "hoodie.timeline.layout.version": "2",
            "hoodie.table.initial.version": str(version),
            "hoodie.archivelog.folder": "history",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.compaction.payload.class": METADATA_PAYLOAD_CLASS,
            "hoodie.record.merge.strategy.id": PAYLOAD_BASED_STRATEGY,
        })
    else:
        props.update({
            "hoodie.archivelog.folder": "archived",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.class": METADATA_KEYGEN_CLASS,
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.compaction.payload.class": METADATA_PAYLOAD_CLASS,
        })
    return props


def create_metadata_table(storage: Storage, data_config: TableConfig) -> TableConfig:
    """Write the metadata table's folders and ``hoodie.properties`` (kept if present)."""
    md = metadata_storage(storage)
    if metadata_table_exists(storage):
        return TableConfig.load(md)
    version = data_config.version
    folders = [".hoodie", ".hoodie/.temp", ".hoodie/.aux"]
    folders += [".hoodie/timeline", ".hoodie/timeline/history"] if version >= 8 else [".hoodie/archived"]
    for folder in folders:
        try:
            md.fs.makedirs(md.full(folder), exist_ok=True)
        except OSError:
            pass  # object stores have no folders
    text = properties_text(metadata_table_properties(data_config), version)
    md.create_if_absent(PROPS_PATH, text.encode("utf-8"))
    return TableConfig.load(md)


def delete_metadata_table(storage: Storage, data_config: TableConfig) -> TableConfig:
    """Drop the metadata table (the partitions in the data table's config, then its files), so
    that the next write bootstraps it again from the file system.

    Un-declared first (one atomic rewrite of ``hoodie.properties``): from then on readers list
    storage, so a drop killed half-way never shows a half-deleted metadata table; what is left
    is an undeclared leftover that the next bootstrap removes."""
    config = set_metadata_partitions(storage, data_config, [], [])
    md = metadata_storage(storage)
    try:
        paths = [f.path for f in md.walk_files("")]
    except (HudiError, OSError):
        paths = []
    # the properties last: a half-deleted metadata table is still recognised as a leftover
    for rel in sorted(paths, key=lambda p: p.endswith("hoodie.properties")):
        try:
            md.delete(rel)
        except (HudiError, OSError):
            log.warning("could not delete %s of the metadata table", md.uri(rel))
    return config


def set_metadata_partitions(storage: Storage, data_config: TableConfig, partitions: Iterable[str],
                            inflight: Iterable[str] | None = None) -> TableConfig:
    """Rewrite the data table's ``hoodie.properties`` with these metadata partitions.

    As Hudi's ``HoodieTableConfig.update``: a backup copy first (readers fall back to it), then
    the new file, then the backup goes. Returns the reloaded config.
    """
    current = TableConfig.load(storage)
    props = dict(current)
    value = ",".join(sorted(set(partitions)))
    inflight_value = ",".join(sorted(set(inflight))) if inflight is not None else \
        props.get("hoodie.table.metadata.partitions.inflight", "")
    if props.get("hoodie.table.metadata.partitions", "") == value and \
            props.get("hoodie.table.metadata.partitions.inflight", "") == inflight_value and \
            ("hoodie.table.metadata.partitions" in props or not value):
        return current
    props["hoodie.table.metadata.partitions"] = value
    props["hoodie.table.metadata.partitions.inflight"] = inflight_value
    text = properties_text(props, current.version)
    lines = text.split("\n", 1)
    text = lines[0].replace("#Properties saved on ", "#Updated at ") + "\n" + lines[1]
    replace_properties(storage, text)
    return TableConfig.load(storage)


def init_instant_times(data_config: TableConfig, md_instants: Iterable[str],
                       last_data_instant: str | None, count: int) -> list[str]:
    """``count`` unused instant times for initialising metadata partitions."""
    taken = set(md_instants)
    out: list[str] = []
    offset = 0
    while len(out) < count:
        if data_config.version >= 8:
            ts = f"{offset:017d}"
        else:
            ts = f"{last_data_instant or SOLO_COMMIT_TIMESTAMP_V6}{PARTITION_INITIALIZATION_TIME_SUFFIX + offset:03d}"
        offset += 1
        if ts not in taken:
            taken.add(ts)
            out.append(ts)
    return out


def is_init_instant(ts: str) -> bool:
    """Whether a metadata-table instant time is one :func:`init_instant_times` gives: v8
    ``0000000000000000N``, v6 a data instant + ``010``, ``011``, ... (compactions take ``001``,
    log compactions ``005``, rollbacks ``006``)."""
    return ts.startswith(SOLO_COMMIT_TIMESTAMP_V6) or (
        len(ts) == 20 and ts[17:].isdigit() and int(ts[17:]) >= PARTITION_INITIALIZATION_TIME_SUFFIX)


def file_group_count(partition: str, options: Mapping[str, Any], num_records: int = 0) -> int:
    """How many file groups a new metadata partition gets (Hudi's defaults and estimate)."""

    if partition == K.FILES:
        return 1
    if partition == K.COLUMN_STATS:
        return max(1, int(option(options, "hoodie.metadata.index.column.stats.file.group.count")))
    if partition == K.BLOOM_FILTERS:
        return max(1, int(option(options, "hoodie.metadata.index.bloom.filter.file.group.count")))
    if partition == K.RECORD_INDEX:
        lo = int(option(options, "hoodie.metadata.record.index.min.filegroup.count"))
        hi = int(option(options, "hoodie.metadata.record.index.max.filegroup.count"))
        growth = float(option(options, "hoodie.metadata.record.index.growth.factor"))
        max_size = int(option(options, "hoodie.metadata.record.index.max.filegroup.size"))
        estimate = math.ceil(num_records * RECORD_INDEX_AVERAGE_RECORD_SIZE * growth / max(1, max_size))
        return max(1, min(hi, max(lo, estimate)))
    raise HudiError(f"cannot size unknown metadata partition {partition!r}")


# the option that keeps each index partition of the metadata table
_INDEX_OPTIONS = {K.COLUMN_STATS: "hoodie.metadata.index.column.stats.enable",
                  K.BLOOM_FILTERS: "hoodie.metadata.index.bloom.filter.enable",
                  K.RECORD_INDEX: "hoodie.metadata.record.index.enable"}


def enabled_partitions(options: Mapping[str, Any]) -> list[str]:
    """Metadata partitions the write options turn on (``files`` first)."""
    return [K.FILES] + [p for p, key in _INDEX_OPTIONS.items() if option(options, key)]


def disabled_partitions(options: Mapping[str, Any] | None, data_config: TableConfig) -> list[str]:
    """Index partitions the table keeps that the options turn off by name (``...enable=false``):
    the writer drops them, as Hudi's does (``deleteMetadataIndexIfNecessary``). A writer whose
    options leave the key out keeps maintaining the partition, where Hudi's would drop it too
    (its defaults are off): jobs that share a table need not all repeat its index options."""
    kept = data_config.metadata_partitions
    return [p for p, key in _INDEX_OPTIONS.items() if p in kept and named_off(options, key)]


def named_off(options: Mapping[str, Any] | None, key: str) -> bool:
    """Whether ``options`` set ``key`` false (not merely left it at its default)."""
    return bool(options) and options.get(key) is not None and not option(options, key)


def drop_partitions(storage: Storage, data_config: TableConfig, partitions: Iterable[str]) -> TableConfig:
    """Drop these index partitions of the metadata table: un-declared first (from then on no
    reader or writer uses them; a drop killed half-way leaves files that the partition's next
    bootstrap clears), then their files deleted."""
    gone = set(partitions)
    config = set_metadata_partitions(storage, data_config,
                                     [p for p in data_config.metadata_partitions if p not in gone])
    md = metadata_storage(storage)
    for partition in sorted(gone):
        try:
            md.delete_tree(partition)
        except (HudiError, OSError) as exc:
            log.warning("could not delete partition %s of the metadata table %s: %s", partition, md.url, exc)
    return config


def initialize_partitions(writer, partitions: list[str]) -> None:
    """Bootstrap ``partitions`` (not yet in the table config) of ``writer``'s metadata table
    from the data table as it is committed now. ``writer`` is a :class:`.writer.MetadataWriter`."""
    from .data_files import DataSnapshot

    if not partitions:
        return
    data_timeline = writer.data_timeline()
    pending = [i for i in data_timeline.instants if not i.is_completed
               and i.action in ("commit", "deltacommit", "replacecommit", "compaction",
                                "logcompaction", "clustering", "clean", "rollback", "restore")
               and i.timestamp != writer.inflight_instant]
    if pending:
        raise MetadataTableError(
            f"cannot bootstrap the metadata table of {writer.storage.url}: instants "
            f"{[i.timestamp for i in pending]} are pending on the data timeline")
    ordered = sorted(partitions, key=lambda p: (_ORDER.index(p) if p in _ORDER else len(_ORDER), p))
    completed = [i.timestamp for i in data_timeline.completed]
    last = completed[-1] if completed else None
    md_instants = [i.timestamp for i in writer.md_timeline().instants]
    times = init_instant_times(writer.config, md_instants, last, len(ordered))
    snapshot = DataSnapshot(writer)
    done = list(writer.config.metadata_partitions)
    for partition, instant in zip(ordered, times):
        if partition == K.RECORD_INDEX:   # millions of keys: column-wise
            keys, values = snapshot.record_index_cells()
            count = file_group_count(partition, writer.options, len(keys))
            cells = cells_of(keys, values, count)
        else:
            records = snapshot.records_for(partition)
            count = file_group_count(partition, writer.options, len(records))
            cells = cells_by_file_group(records, count)
        fids = K.file_group_ids(partition, count)
        writer.clear_partition(partition)
        writer.create_file_groups(partition, fids, instant)
        writer.bulk_commit(instant, partition, fids, cells)
        done.append(partition)
        writer.config = set_metadata_partitions(writer.storage, writer.config, done)
        log.info("initialised metadata partition %s of %s at %s (%d file groups, %d records)",
                 partition, writer.storage.url, instant, count, sum(len(k) for k, _ in cells.values()))

