"""The metadata table writer's options (Hudi's ``hoodie.metadata.*`` keys and defaults)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import HudiError


class MetadataTableError(HudiError):
    """The metadata table cannot be written (or bootstrapped) as asked."""


# key -> (kind, default), Hudi's names and defaults (HoodieMetadataConfig)
MDT_OPTIONS: dict[str, tuple[str, Any]] = {
    "hoodie.metadata.enable": ("bool", True),
    "hoodie.metadata.index.column.stats.enable": ("bool", False),
    "hoodie.metadata.index.column.stats.column.list": ("str", None),
    "hoodie.metadata.index.column.stats.max.columns.to.index": ("int", 32),
    "hoodie.metadata.index.column.stats.file.group.count": ("int", 2),
    "hoodie.metadata.index.bloom.filter.enable": ("bool", False),
    "hoodie.metadata.index.bloom.filter.file.group.count": ("int", 4),
    "hoodie.metadata.record.index.enable": ("bool", False),
    "hoodie.metadata.record.index.min.filegroup.count": ("int", 10),
    "hoodie.metadata.record.index.max.filegroup.count": ("int", 10000),
    "hoodie.metadata.record.index.growth.factor": ("str", "2.0"),
    "hoodie.metadata.record.index.max.filegroup.size": ("int", 1024 * 1024 * 1024),
    "hoodie.metadata.compact.max.delta.commits": ("int", 10),
    # 0.x's own retention key for the metadata table; by default it follows the data table
    "hoodie.metadata.cleaner.commits.retained": ("int", None),
    "hoodie.bloom.index.use.metadata": ("bool", False),
}
DEFAULT_METADATA_CLEANER_COMMITS_RETAINED = 20
_RECORD_INDEX_SKIPPED_OPS = ("COMPACT", "LOG_COMPACT")
_META_COLUMNS_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
_WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit", "compaction", "logcompaction", "clustering")


def mdt_option(opts: Mapping[str, Any] | None, key: str) -> Any:
    kind, default = MDT_OPTIONS[key]
    value = (opts or {}).get(key, default)
    if value is None:
        return None
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"
    if kind == "int":
        return int(value)
    return str(value)
