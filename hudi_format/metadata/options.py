"""The metadata table writer's options (Hudi's ``hoodie.metadata.*`` keys and defaults)."""

from __future__ import annotations

from ..errors import HudiError


class MetadataTableError(HudiError):
    """The metadata table cannot be written (or bootstrapped) as asked."""


DEFAULT_METADATA_CLEANER_COMMITS_RETAINED = 20
_RECORD_INDEX_SKIPPED_OPS = ("COMPACT", "LOG_COMPACT")
_META_COLUMNS_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
_WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit", "compaction", "logcompaction", "clustering")

