"""A streaming workload: many small upsert commits with the table services inline.

Reports, for the first and the last commits, the snapshot read time, the active timeline
length and the number of files per partition: with compaction, cleaning and archival inline
they stay bounded, so read latency stays flat however long the stream runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import hudi_format as hudi

OPTIONS = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "5",
           "hoodie.cleaner.commits.retained": "4", "hoodie.keep.min.commits": "6",
           "hoodie.keep.max.commits": "10", "hoodie.parquet.small.file.limit": "0"}


def batch(commit: int, rows: int, keys: int) -> pa.Table:
    idx = pc.bit_wise_and(pa.array(range(commit * rows, commit * rows + rows), pa.int64()), keys - 1)
    return pa.table({"id": pc.cast(idx, pa.string()), "ts": pa.repeat(pa.scalar(commit, pa.int64()), rows),
                     "part": pc.cast(pc.bit_wise_and(idx, 3), pa.string()),
                     "value": pc.multiply(pc.cast(idx, pa.float64()), float(commit))})


def stream(path: str, commits: int, rows: int = 500, keys: int = 4096, table_type="MERGE_ON_READ",
           timed_read: bool = True):
    """Run the stream; yield (commit, read seconds, active instants, max files per partition).
    ``timed_read=False`` skips the snapshot read after each commit (read seconds are then 0)."""
    for c in range(commits):
        hudi.write(path, batch(c, rows, keys), record_key="id", ordering_field="ts",
                   partition_by="part", table_type=table_type, options=OPTIONS)
        table = hudi.open_table(path)
        t0 = time.perf_counter()
        if timed_read:
            table.read()
        read_s = time.perf_counter() - t0
        per_partition: dict[str, int] = {}
        for p in table._view.partitions():
            per_partition[p] = sum(1 for f in table.storage.list(p) if not f.name.startswith(".hoodie"))
        yield c, read_s, len(table.timeline.instants), max(per_partition.values())


def run(commits: int = 200) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "stream")
        results = list(stream(path, commits))
    # The first commits fill the key space; compare a window after that with the last one.
    early, last = results[20:30], results[-10:]
    med = lambda rows: statistics.median(r[1] for r in rows)  # noqa: E731
    print(f"\nstreaming benchmark: {commits} upsert commits of 500 rows, services inline\n")
    print("| window | read s (median) | active instants (max) | files per partition (max) |")
    print("|---|---|---|---|")
    for name, rows in (("commits 20-29", early), (f"commits {commits - 10}-{commits - 1}", last)):
        print(f"| {name} | {med(rows):.3f} | {max(r[2] for r in rows)} | {max(r[3] for r in rows)} |")
    print(f"\nlast/early read time ratio: {med(last) / med(early):.2f}")
