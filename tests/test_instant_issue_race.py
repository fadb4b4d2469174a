"""A write stalled between issuing its instant time and requesting its instant, while other
writers commit and archive (found in session 52).

``Transaction.begin`` issues the time, starts the heartbeat, then writes the requested file, not
under the table lock. Archival (under the lock) cannot see an issued time that has no requested
file yet, so it may archive instants newer than it; once the stalled write requests its
instant, the active timeline starts at that older time again, and the archived instants newer
than it are neither active nor before the start: readers (ours and hudi-rs) no longer see their
rows, and writers tagging through the files miss their keys (with the metadata table on, its
compaction bound kept archival back here). Now a time is requested before the time lock that
issued it goes, and archival passes through that lock before it lists: the other writers wait
for the stalled one's request (a thread of this process waits as another process would).
"""

from __future__ import annotations

import threading

import pyarrow as pa

import hudi_format as hudi
from hudi_format.transaction import commit as transaction_commit
from writemodel import hudi_rs_read

KEY = dict(record_key="id", ordering_field="ts", partition_by="p")
OPTS = {"hoodie.metadata.enable": "false", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
        "hoodie.cleaner.commits.retained": "1", "hoodie.parquet.small.file.limit": "0"}


def _rows(ids, ts: int, p: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i}" for i in ids], "ts": [ts] * len(ids), "p": [p] * len(ids)})


def test_commits_archived_while_a_write_is_between_its_time_and_its_request_stay_visible(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    for i in range(4):
        hudi.write(path, _rows(range(i * 5, i * 5 + 5), i, "a"), operation="insert", options=OPTS, **KEY)
    heartbeat, others = transaction_commit.Heartbeat, []

    def other_writers() -> None:
        for j in range(6):
            hudi.write(path, _rows(range(100 + j * 3, 103 + j * 3), 10 + j, "b"), operation="insert",
                       options=OPTS, **KEY)

    class Stalled(heartbeat):
        def start(self):
            if not others:    # the stall: other writers commit, and archive, meanwhile (or wait)
                others.append(threading.Thread(target=other_writers))
                others[0].start()
                others[0].join(timeout=8)
            return super().start()
    monkeypatch.setattr(transaction_commit, "Heartbeat", Stalled)
    hudi.write(path, _rows([50, 51], 99, "c"), operation="insert", options=OPTS, **KEY)
    others[0].join()
    monkeypatch.undo()
    assert hudi.open_table(path).read().num_rows == 20 + 18 + 2
    assert hudi_rs_read(path).num_rows == 20 + 18 + 2
