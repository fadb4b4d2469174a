"""A write's conflict check covers instants archived while it ran.

Found by the v6 services soak (duplicate keys): a writer loaded the table and tagged its upsert
to file group X; meanwhile a clustering replaced X, the cleaner deleted X's files and archival
moved the replacecommit out of the active timeline. At the writer's commit the conflict check
looked for completed instants it had not seen on the *active* timeline only, missed the
archived replacecommit, and committed an update into the replaced group X: the key then lived in
X (again visible, its replacecommit archived) and in the clustering's output.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.errors import ConcurrentWriteError
from hudi_format.transaction.commit import Transaction
from writemodel import hudi_rs_read

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])


def _rows(ids, ts, tag):
    return pa.Table.from_pylist([{"id": f"k{i:02d}", "ts": ts, "v": f"{tag}{i}", "p": "a"} for i in ids],
                                schema=SCHEMA)


class PausedWrite:
    """``hudi.write(*args, **kwargs)`` in a thread of its own, stopped in the function ``name`` of
    ``owner`` (patched; before it runs, or after with ``after=True``) until :meth:`resume`;
    ``outcome`` is then its instant or error."""

    def __init__(self, monkeypatch, owner, name: str, *args, after: bool = False, **kwargs):
        self.reached, self.go, self.outcome = threading.Event(), threading.Event(), []
        real = getattr(owner, name)
        func = getattr(real, "__func__", real)
        is_class = isinstance(owner.__dict__.get(name), classmethod)

        def hooked(*a, **k):
            mine = threading.current_thread() is self.thread
            result = func(*a, **k) if after else None
            if mine:
                self.reached.set()
                assert self.go.wait(60)
            return result if after else func(*a, **k)

        monkeypatch.setattr(owner, name, classmethod(hooked) if is_class else hooked)
        self.thread = threading.Thread(target=self._run, args=args, kwargs=kwargs)
        self.thread.start()
        assert self.reached.wait(60)

    def _run(self, *args, **kwargs):
        try:
            self.outcome.append(hudi.write(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            self.outcome.append(exc)

    def resume(self) -> list:
        self.go.set()
        self.thread.join(60)
        return self.outcome


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("version", [6, 8])
def test_a_replacecommit_archived_during_a_write_still_conflicts(tmp_path, monkeypatch, table_type, version):
    path = str(tmp_path / "t")
    opts = {"hoodie.write.table.version": str(version), "hoodie.metadata.enable": "false",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false", "hoodie.parquet.small.file.limit": "0",
            "hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}
    w = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, options=opts)
    hudi.write(path, _rows(range(0, 10), 1, "a"), **w)     # file group X
    hudi.write(path, _rows(range(10, 20), 1, "b"), **w)    # file group Y (small files: both clustered)

    # the write loads the table and tags its row to X, then waits before its instant exists
    slow = PausedWrite(monkeypatch, Transaction, "begin", path, _rows([3], 2, "late"), operation="upsert", **w)
    table = hudi.open_table(path)
    assert table.cluster(options=opts) is not None                  # replaces X and Y
    for c in range(3):   # commits for archival to keep (updates: MOR logs for the compaction)
        hudi.write(path, _rows([12 + c], 3, "c"), operation="upsert", **w)
    if table_type == "MERGE_ON_READ":
        hudi.open_table(path).compact(opts)                         # archival keeps what compaction needs
    hudi.open_table(path).clean(opts)                               # X's files go
    archived = hudi.open_table(path).archive(opts)
    assert any(i.action == "replacecommit" for i in archived), archived
    outcome = slow.resume()

    assert len(outcome) == 1
    got = hudi.open_table(path).read()
    rows = canonical_rows(got.select(SCHEMA.names))
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"duplicate keys: {sorted(i for i in ids if ids.count(i) > 1)}"
    # refused as a conflict: MOR appends to X's log (the archived replacecommit), COW merges X's
    # base file, which the clean removed
    assert isinstance(outcome[0], ConcurrentWriteError), outcome[0]
    assert {r["id"]: r["v"] for r in rows}["k03"] == "a3"          # the refused update is not visible
    assert canonical_rows(hudi_rs_read(path).select(SCHEMA.names)) == rows


def test_two_writers_taking_the_same_v6_log_version_is_a_conflict(tmp_path, monkeypatch):
    """Table version 6 names a log file by its slice's base instant, so two writers appending to
    one file group list the same next version; the one that finds it taken meanwhile fails with
    a retryable ``ConcurrentWriteError`` (found by the v6 soak, where it was an
    ``InvalidOptionError`` telling the caller to pass another version)."""
    import hudi_format.writer.handles as handles
    path = str(tmp_path / "t")
    w = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
             options={"hoodie.write.table.version": "6", "hoodie.metadata.enable": "false"})
    hudi.write(path, _rows(range(0, 10), 1, "a"), **w)
    # the write lists the file group's next log version, then waits before creating it
    slow = PausedWrite(monkeypatch, handles, "next_log_version", path, _rows([1], 2, "slow"),
                       operation="upsert", after=True, **w)
    hudi.write(path, _rows([2], 2, "fast"), operation="upsert", **w)   # takes log version 1
    outcome = slow.resume()
    assert len(outcome) == 1 and isinstance(outcome[0], ConcurrentWriteError), outcome
    rows = {r["id"]: r["v"] for r in hudi.open_table(path).read().to_pylist()}
    assert rows["k02"] == "fast2" and rows["k01"] == "a1"
    assert {r["id"]: r["v"] for r in hudi_rs_read(path).to_pylist()} == rows
