"""File sizing, as Hudi's upsert partitioner does it, so tables keep few, well-sized files.

Updates stay in their file groups. Inserts first top up each partition's small files (base
files under ``hoodie.parquet.small.file.limit``) to ``hoodie.parquet.max.file.size``, using the
average record size seen by earlier commits; what is left goes to new file groups of
``hoodie.copyonwrite.insert.split.size`` records. A small-file limit of 0 turns bin-packing off,
and bulk_insert never bin-packs.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import attrs

from ..options import default

# Hudi's defaults, declared once in the option registry
DEFAULT_MAX_FILE_SIZE: int = default("hoodie.parquet.max.file.size")
DEFAULT_SMALL_FILE_LIMIT: int = default("hoodie.parquet.small.file.limit")
DEFAULT_INSERT_SPLIT_SIZE: int = default("hoodie.copyonwrite.insert.split.size")
DEFAULT_RECORD_SIZE_ESTIMATE: int = default("hoodie.copyonwrite.record.size.estimate")
# MOR: how much of a log file's size a base file would take once compacted.
DEFAULT_LOG_TO_PARQUET_RATIO = 0.35


@attrs.frozen
class SmallFile:
    """A file group whose latest slice may take more inserts."""

    file_id: str
    size: int  # estimated bytes of the latest slice once written as a base file


@attrs.frozen
class InsertBucket:
    """``count`` inserts go to ``file_id`` (an existing small file) or to a new file group."""

    count: int
    file_id: str | None = None  # None: a new file group

    @property
    def is_new(self) -> bool:
        return self.file_id is None


@attrs.frozen
class SizingConfig:
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT
    insert_split_size: int = DEFAULT_INSERT_SPLIT_SIZE
    record_size_estimate: int = DEFAULT_RECORD_SIZE_ESTIMATE
    auto_split: bool = True


def average_record_size(commit_stats: Iterable[tuple[int, int]], small_file_limit: int,
                        default: int = DEFAULT_RECORD_SIZE_ESTIMATE) -> int:
    """Average record size from the newest commit that wrote enough to be trusted.

    ``commit_stats`` yields ``(total_bytes_written, total_records_written)`` newest first; like
    Hudi, a commit counts only when it wrote more than the small-file limit (so tiny commits with
    large per-file overheads do not skew the estimate).
    """
    threshold = max(small_file_limit, 0)
    for total_bytes, total_records in commit_stats:
        if total_records > 0 and total_bytes > threshold:
            return max(1, math.ceil(total_bytes / total_records))
    return default


def small_files(sizes: Sequence[tuple[str, int]], cfg: SizingConfig) -> list[SmallFile]:
    """The file groups under the small-file limit, smallest first (they fill first)."""
    if cfg.small_file_limit <= 0:
        return []
    out = [SmallFile(fid, size) for fid, size in sizes if size < cfg.small_file_limit]
    return sorted(out, key=lambda f: (f.size, f.file_id))


def small_file_capacity(f: SmallFile, avg_record_size: int, cfg: SizingConfig) -> int:
    """Records small file ``f`` takes before it reaches the max file size."""
    return max((cfg.max_file_size - f.size) // max(1, avg_record_size), 0)


def new_file_records(avg_record_size: int, cfg: SizingConfig) -> int:
    """Records per new file group: sized to the max file size (auto-split, Hudi's default),
    else the configured number of records per new file group."""
    if cfg.auto_split:
        return max(1, cfg.max_file_size // max(1, avg_record_size))
    return max(1, cfg.insert_split_size)


def assign_inserts(num_inserts: int, small: Sequence[SmallFile], avg_record_size: int,
                   cfg: SizingConfig, bin_pack: bool = True) -> list[InsertBucket]:
    """Split ``num_inserts`` records of one partition into buckets, small files first."""
    buckets: list[InsertBucket] = []
    remaining = num_inserts
    avg = max(1, avg_record_size)
    if bin_pack and cfg.small_file_limit > 0:
        for f in small:
            if remaining <= 0:
                break
            take = min(small_file_capacity(f, avg, cfg), remaining)
            if take > 0:
                buckets.append(InsertBucket(take, f.file_id))
                remaining -= take
    if remaining > 0:
        per_bucket = new_file_records(avg, cfg)
        full, rest = divmod(remaining, per_bucket)
        buckets += [InsertBucket(per_bucket) for _ in range(full)]
        if rest:
            buckets.append(InsertBucket(rest))
    return buckets
