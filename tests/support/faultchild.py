"""Child process for fault injection: run one write and SIGKILL ourselves at a chosen point.

usage: python faultchild.py <table> <point> <table_type> <version> [options json [moves]]

``moves``: the upsert gives its keys other partitions (under a global index that moves keys).
"""

from __future__ import annotations

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))

import hudi_format as hudi  # noqa: E402
from writemodel import make_rows  # noqa: E402


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def install(point: str) -> None:
    from hudi_format.log import writer as log_writer
    from hudi_format.timeline import writer as tl_writer
    from hudi_format.writer import handles, merge_handle
    import hudi_format.base_file as base_file

    if point == "after_requested":
        tl_writer.TimelineWriter.transition_to_inflight = lambda self, *a, **k: die()
    elif point == "before_data":
        for name in ("create", "append"):
            setattr(handles, name, lambda *a, **k: die())
        merge_handle.merge = lambda *a, **k: die()
    elif point == "mid_base_file":
        real_wbf = base_file.write_base_file

        def torn(storage, rel, *a, **k):
            real_wbf(storage, rel, *a, **k)
            data = storage.read_bytes(rel)
            storage.write_bytes(rel, data[: len(data) // 2])
            die()
        handles.write_base_file = torn
    elif point == "mid_streamed_merge":
        # a COW merge streamed batch by batch, killed once row groups of the new file are written
        merge_handle._STREAM_ABOVE_ROWS = merge_handle._MERGE_BATCH_ROWS = 2
        merge_handle._MERGE_BUFFER_BYTES = 1
        real_merged, calls = merge_handle._write_merged, []

        def merged_then_die(*a, **k):
            real_merged(*a, **k)
            calls.append(1)
            if len(calls) == 3:
                die()
        merge_handle._write_merged = merged_then_die
    elif point == "mid_log_append":
        def torn_log(storage, rel, blocks):
            with storage.open(rel, "wb") as f:
                f.write(blocks[0][: len(blocks[0]) // 2])
                f.flush()
                os.fsync(f.fileno()) if hasattr(f, "fileno") else None
            die()
        log_writer._write_one = torn_log
    elif point == "after_data":
        tl_writer.TimelineWriter.complete = lambda self, *a, **k: die()
    elif point in ("after_commit", "after_metadata_commit"):
        # The metadata table's deltacommit (same instant) completes just before the data one.
        real_complete = tl_writer.TimelineWriter.complete
        wanted_metadata = point == "after_metadata_commit"

        def complete_then_die(self, *a, **k):
            out = real_complete(self, *a, **k)
            if self.storage.url.rstrip("/").endswith(".hoodie/metadata") == wanted_metadata:
                die()
            return out
        tl_writer.TimelineWriter.complete = complete_then_die
    elif point == "mid_metadata_write":
        # die while writing the metadata table's log file, after the data files are written
        real_wlf = log_writer.write_log_file

        def torn_metadata_log(storage, *a, **k):
            if storage.url.rstrip("/").endswith(".hoodie/metadata"):
                partition, file_id, instant, blocks = a[0], a[1], a[2], a[3]
                rel = f"{partition}/.{file_id}_{instant}.log.99_0-0-0"
                with storage.open(rel, "wb") as f:
                    f.write(blocks[0][: len(blocks[0]) // 2])
                die()
            return real_wlf(storage, *a, **k)
        import hudi_format.metadata.record_index_update as mdt_groups   # writes every MDT log file
        mdt_groups.write_log_file = torn_metadata_log
    else:
        raise SystemExit(f"unknown point {point}")


if __name__ == "__main__":
    path, point, table_type, version = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    partitions = ("b", "c", "a") if len(sys.argv) > 6 and sys.argv[6] == "moves" else ("a", "b", "c")
    install(point)
    hudi.write(path, make_rows(range(10, 30), ts=2, partitions=partitions, seed=1), operation="upsert",
               record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
               table_version=version, options=options)
    raise SystemExit("the write finished: the fault point was never reached")
