"""Commit metadata: what a commit, deltacommit or replacecommit wrote and replaced.

The same information arrives in three shapes: Jackson JSON (v6 active timeline), an Avro
container (v8+ active timeline, LSM history) and a decoded Avro record (v6 archive). The field
names agree across all three (Hudi converts between them with the same Jackson mapper), so one
decoder serves them; the differences are small and handled here, e.g. Jackson writes the
absent previous commit as the string ``"null"`` and Avro leaves missing maps as ``null``.
"""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

import attrs

from ..errors import TimelineError
from .avro_schemas import decode_payload
from .write_stat import NULL_COMMIT, WriteStat

__all__ = ["CommitMetadata", "WriteStat", "NULL_COMMIT", "decode_commit_metadata", "rolled_back_from",
           "deleted_files"]


def _mapping(d: Mapping[str, Any], key: str, source: str) -> dict:
    value = d.get(key)
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = dict(value)  # an Arrow map decoded to key/value pairs
    if not isinstance(value, Mapping):
        raise TimelineError(f"{source}: {key} must be an object, got {type(value).__name__}")
    return dict(value)


@attrs.frozen
class CommitMetadata:
    """Decoded ``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``."""

    partition_to_write_stats: dict[str, list[WriteStat]]
    partition_to_replace_file_ids: dict[str, list[str]]
    extra_metadata: dict[str, str]
    operation_type: str | None
    compacted: bool
    raw: Mapping[str, Any] = attrs.field(eq=False, repr=False)

    @property
    def schema(self) -> str | None:
        """The writer's Avro schema (JSON string) recorded with the commit, if any."""
        return self.extra_metadata.get("schema") or None

    @property
    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    @property
    def partitions(self) -> list[str]:
        return list(self.partition_to_write_stats)

    @property
    def replaced_file_ids(self) -> set[tuple[str, str]]:
        """``(partition, file_id)`` of every file group this commit replaced."""
        return {(p, f) for p, ids in self.partition_to_replace_file_ids.items() for f in ids}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "commit metadata") -> "CommitMetadata":
        if not isinstance(d, Mapping):
            raise TimelineError(f"{source}: commit metadata must be an object, got {type(d).__name__}")
        stats: dict[str, list[WriteStat]] = {}
        for partition, items in _mapping(d, "partitionToWriteStats", source).items():
            if items is None:
                continue
            if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
                raise TimelineError(f"{source}: write stats of partition {partition!r} must be a list of objects")
            stats[str(partition)] = [WriteStat.from_dict(i, str(partition)) for i in items]
        replaced: dict[str, list[str]] = {}
        for partition, ids in _mapping(d, "partitionToReplaceFileIds", source).items():
            if ids is None:
                continue
            if not isinstance(ids, list):
                raise TimelineError(f"{source}: replaced file ids of partition {partition!r} must be a list")
            replaced[str(partition)] = [str(i) for i in ids]
        extra = {str(k): ("" if v is None else str(v))
                 for k, v in _mapping(d, "extraMetadata", source).items()}
        op = d.get("operationType")
        return cls(stats, replaced, extra, None if op is None else str(op),
                   bool(d.get("compacted") or False), d)


def decode_commit_metadata(data: bytes, source: str) -> CommitMetadata:
    """Decode commit metadata bytes (JSON or Avro container); errors name ``source``."""
    return CommitMetadata.from_dict(decode_payload(data, source), source)


def rolled_back_from(action: str, metadata: Mapping[str, Any]) -> set[str]:
    """Instant times undone by a completed rollback or restore, from its metadata."""
    out: set[str] = set()
    if action == "rollback":
        out.update(str(t) for t in metadata.get("commitsRollback") or ())
        out.update(str(i["commitTime"]) for i in metadata.get("instantsRollback") or () if i)
    elif action == "restore":
        out.update(str(t) for t in metadata.get("instantsToRollback") or ())
        out.update(str(i["commitTime"]) for i in metadata.get("restoreInstantInfo") or () if i)
        nested = metadata.get("hoodieRestoreMetadata") or {}
        if isinstance(nested, list):
            nested = dict(nested)
        for rollbacks in nested.values():
            for rb in rollbacks or ():
                if rb:
                    out.update(rolled_back_from("rollback", rb))
    return out


def planned_deletions(plan: Mapping[str, Any]) -> dict[str, list[str]]:
    """File names a cleaner plan (``HoodieCleanerPlan``) is to delete, per partition: what a
    clean still in flight may have deleted already (version 1 plans name files, later ones
    paths)."""
    out = {part: [posixpath.basename(i.get("filePath") or "") for i in (infos or ()) if i.get("filePath")]
           for part, infos in (plan.get("filePathsToBeDeletedPerPartition") or {}).items()}
    for part, names in (plan.get("filesToBeDeletedPerPartition") or {}).items():
        out.setdefault(part, []).extend(posixpath.basename(n) for n in names or ())
    return out


def deleted_files(metadata: Mapping[str, Any]) -> dict[str, list[str]]:
    """File names a completed clean or rollback deleted, per partition (``successDeleteFiles``
    of its ``partitionMetadata``; Hudi writes names or paths, so both end as names)."""
    return {part: [posixpath.basename(p) for p in (pm.get("successDeleteFiles") or ())]
            for part, pm in (metadata.get("partitionMetadata") or {}).items()}
