"""One write stat: what a commit wrote to one file (``HoodieWriteStat`` / ``HoodieDeltaWriteStat``).

The same class is read out of commit metadata (``from_dict``) and built by every writer (data
files, log files, compaction, clustering, metadata-table files) and turned back into Hudi's
mapping (``to_dict``), so the fields a reader sees are exactly those a writer sets. ``to_dict``
gives Hudi's keys in the declaration order of its Java classes (Jackson writes them so) with
their defaults; the timeline writer encodes that mapping as JSON (v6) or Avro (v8+).

A stat is a delta stat (the log files of a Merge-on-Read file slice) when it names log files;
Hudi's ``HoodieDeltaWriteStat`` then adds ``logVersion``, ``logOffset``, ``baseFile``,
``logFiles`` and ``recordsStats``.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Mapping

import attrs

NULL_COMMIT = "null"  # HoodieWriteStat.NULL_COMMIT: "no previous commit" (a new file group)
RUNTIME_FIELDS = ("totalScanTime", "totalUpsertTime", "totalCreateTime")

# attribute -> Hudi key, in HoodieWriteStat's declaration order (delta fields follow)
_KEYS = (
    ("file_id", "fileId"), ("path", "path"), ("cdc_stats", "cdcStats"),
    ("prev_commit", "prevCommit"), ("num_writes", "numWrites"), ("num_deletes", "numDeletes"),
    ("num_update_writes", "numUpdateWrites"), ("num_inserts", "numInserts"),
    ("total_write_bytes", "totalWriteBytes"), ("total_write_errors", "totalWriteErrors"),
    ("temp_path", "tempPath"), ("partition_path", "partitionPath"),
    ("total_log_records", "totalLogRecords"),
    ("total_log_files_compacted", "totalLogFilesCompacted"),
    ("total_log_size_compacted", "totalLogSizeCompacted"),
    ("total_updated_records_compacted", "totalUpdatedRecordsCompacted"),
    ("total_log_blocks", "totalLogBlocks"), ("total_corrupt_log_block", "totalCorruptLogBlock"),
    ("total_rollback_blocks", "totalRollbackBlocks"), ("file_size_in_bytes", "fileSizeInBytes"),
    ("min_event_time", "minEventTime"), ("max_event_time", "maxEventTime"),
    ("runtime_stats", "runtimeStats"),
)
_DELTA_KEYS = (("log_version", "logVersion"), ("log_offset", "logOffset"),
               ("base_file", "baseFile"), ("log_files", "logFiles"))
# set only by compaction (Avro HoodieWriteStat carries them; Jackson's 0.x POJO does not)
_COMPACTION_KEYS = (("prev_base_file", "prevBaseFile"),
                    ("total_log_read_time_ms", "totalLogReadTimeMs"))


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _runtime(value: Mapping[str, Any] | None) -> dict[str, int] | None:
    return None if value is None else {k: int(value.get(k, 0) or 0) for k in RUNTIME_FIELDS}


def _prev(value: Any) -> str | None:
    return None if value in (None, NULL_COMMIT) else str(value)


def _files(value: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(str(f) for f in (value or ()))


@attrs.frozen(kw_only=True)
class WriteStat:
    """One file written by a commit. ``path`` is relative to the table base; ``prev_commit``
    ``None`` means a new file group; ``file_size_in_bytes`` defaults to ``total_write_bytes``."""

    file_id: str | None = attrs.field(converter=_opt_str)
    path: str | None = attrs.field(converter=_opt_str)
    partition_path: str | None = attrs.field(converter=_opt_str)
    prev_commit: str | None = attrs.field(default=None, converter=_prev)
    num_writes: int = attrs.field(default=0, converter=_int)
    num_deletes: int = attrs.field(default=0, converter=_int)
    num_update_writes: int = attrs.field(default=0, converter=_int)
    num_inserts: int = attrs.field(default=0, converter=_int)
    total_write_bytes: int = attrs.field(default=0, converter=_int)
    file_size_in_bytes: int = attrs.field(converter=_int, default=attrs.Factory(
        lambda self: self.total_write_bytes, takes_self=True))
    total_write_errors: int = attrs.field(default=0, converter=_int)
    total_log_records: int = attrs.field(default=0, converter=_int)
    total_log_files_compacted: int = attrs.field(default=0, converter=_int)
    total_log_size_compacted: int = attrs.field(default=0, converter=_int)
    total_updated_records_compacted: int = attrs.field(default=0, converter=_int)
    total_log_blocks: int = attrs.field(default=0, converter=_int)
    total_corrupt_log_block: int = attrs.field(default=0, converter=_int)
    total_rollback_blocks: int = attrs.field(default=0, converter=_int)
    min_event_time: int | None = attrs.field(default=None, converter=_opt_int)
    max_event_time: int | None = attrs.field(default=None, converter=_opt_int)
    runtime_stats: Mapping[str, int] | None = attrs.field(default=None, converter=_runtime)
    cdc_stats: Mapping[str, int] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else dict(v))
    temp_path: str | None = attrs.field(default=None, converter=_opt_str)
    # HoodieDeltaWriteStat (MOR log files)
    base_file: str | None = attrs.field(default=None, converter=_opt_str)
    log_files: tuple[str, ...] = attrs.field(default=(), converter=_files)
    log_version: int = attrs.field(default=0, converter=_int)
    log_offset: int = attrs.field(default=0, converter=_int)
    delta: bool = attrs.field(default=attrs.Factory(   # a HoodieDeltaWriteStat or not
        lambda self: bool(self.log_files) or self.base_file is not None, takes_self=True))
    prev_base_file: str | None = attrs.field(default=None, converter=_opt_str)
    total_log_read_time_ms: int = attrs.field(default=0, converter=_int)

    @property
    def file_name(self) -> str | None:
        return posixpath.basename(self.path) if self.path else None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], partition: str | None = None) -> "WriteStat":
        """A stat as commit metadata carries it (Jackson JSON or decoded Avro). ``partition``:
        the map key the stat was listed under, for stats that leave ``partitionPath`` out."""
        kw: dict[str, Any] = {a: d.get(k) for a, k in _KEYS + _COMPACTION_KEYS if k in d}
        kw.setdefault("file_id", None)
        kw.setdefault("path", None)
        if kw.get("partition_path") is None:
            kw["partition_path"] = partition
        delta = "recordsStats" in d or any(d.get(k) is not None for _, k in _DELTA_KEYS)
        if delta:
            kw.update({a: d.get(k) for a, k in _DELTA_KEYS})
        if "fileSizeInBytes" not in d:
            kw["file_size_in_bytes"] = 0
        return cls(delta=delta, **kw)

    def to_dict(self) -> dict[str, Any]:
        """Hudi's mapping of this stat, keys in its classes' declaration order."""
        out: dict[str, Any] = {k: getattr(self, a) for a, k in _KEYS}
        out["prevCommit"] = NULL_COMMIT if self.prev_commit is None else self.prev_commit
        if out["runtimeStats"] is not None:
            out["runtimeStats"] = dict(out["runtimeStats"])
        if out["cdcStats"] is not None:
            out["cdcStats"] = dict(out["cdcStats"])
        if self.delta:
            out.update({"logVersion": self.log_version, "logOffset": self.log_offset,
                        "baseFile": self.base_file, "logFiles": list(self.log_files),
                        "recordsStats": {"val": None}})
        for a, k in _COMPACTION_KEYS:    # Avro reads an absent one as null / 0
            if getattr(self, a):
                out[k] = getattr(self, a)
        return out


__all__ = ["WriteStat", "NULL_COMMIT", "RUNTIME_FIELDS"]
