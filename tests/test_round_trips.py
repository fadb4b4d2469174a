"""Round trips of a small upsert: the table state is loaded once per operation.

On object stores every listing is a paid round trip (20-50 ms), so a small commit's latency is
mostly how often it lists. One 1,000-row upsert into a table with the metadata table must load
timelines (data and metadata table together) at most 4 times: once for recovery and planning,
once for the conflict check under the commit lock, once for the metadata table under that lock,
once for the inline clean's plan (archival shares its listing) — and list storage at most 16
times. The counts do not depend on the table's size.
"""

from __future__ import annotations

import collections
from typing import Any

import pyarrow.compute as pc
import pytest

import hudi_format as hudi
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from writemodel import make_rows

# Storage calls that list a folder (a recursive removal lists the tree once)
LISTINGS = ("list", "walk_files", "delete_tree")
VERBS = LISTINGS + ("exists", "read_bytes", "open", "size", "create_if_absent", "write_bytes", "delete",
                    "rename")


def _count_upsert(monkeypatch: pytest.MonkeyPatch, path: str, table_type: str, rows: int,
                  table_version: int | None = None, options: dict | None = None) -> collections.Counter:
    hudi.write(path, make_rows(range(rows), ts=1), operation="bulk_insert", record_key="id",
               ordering_field="ts", partition_by="p", table_type=table_type, table_version=table_version)
    counts: collections.Counter = collections.Counter()
    load = Timeline.load.__func__

    def counted_load(cls: Any, *a: Any, **k: Any) -> Timeline:
        counts["timeline_load"] += 1
        return load(cls, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(Timeline, "load", classmethod(counted_load))
        for name in (v for v in VERBS if hasattr(Storage, v)):
            f = getattr(Storage, name)

            def wrap(self: Storage, *a: Any, _f: Any = f, _n: str = name, **k: Any) -> Any:
                # walk_files recurses through list: count the listings, not the generator
                counts[_n] += 1
                return _f(self, *a, **k)
            m.setattr(Storage, name, wrap)
        done = hudi.write(path, make_rows(range(0, 2000, 2), ts=2, seed=1), operation="upsert", options=options)
    assert done.service_errors == ()
    # walk_files lists through list(); a delete_tree is one listing of its own
    counts["listings"] = counts["list"] + counts["delete_tree"]
    return counts


@pytest.mark.parametrize("table_type,table_version", [("MERGE_ON_READ", None), ("COPY_ON_WRITE", None),
                                                    ("MERGE_ON_READ", 6)])
def test_small_upsert_loads_once(tmp_path, monkeypatch, table_type, table_version):
    counts = _count_upsert(monkeypatch, str(tmp_path / "t"), table_type, 20_000, table_version)
    print(table_type, table_version or "default", {k: counts[k] for k in ("timeline_load", "listings", *VERBS) if counts[k]})
    assert counts["timeline_load"] <= 4, counts
    assert counts["listings"] <= 16, counts
    # cheap and still right: the 1,000 keys all existed, so they were updated in place
    got = hudi.open_table(str(tmp_path / "t")).read(columns=["id", "ts"])
    assert got.num_rows == 20_000
    assert pc.sum(pc.equal(got["ts"], 2)).as_py() == 1_000


def test_counts_do_not_depend_on_table_size(tmp_path, monkeypatch):
    small = _count_upsert(monkeypatch, str(tmp_path / "small"), "MERGE_ON_READ", 4_000)
    large = _count_upsert(monkeypatch, str(tmp_path / "large"), "MERGE_ON_READ", 20_000)
    assert small["timeline_load"] == large["timeline_load"]
    assert small["listings"] == large["listings"]


def _verb(method: str, query: str) -> str:
    """An S3 request as the bill names it: LIST (a GET listing a prefix), GET, HEAD, PUT, DELETE,
    POST (multi-object delete, multipart upload)."""
    if method == "GET" and ("list-type" in query or "prefix=" in query or "delimiter" in query):
        return "LIST"
    return method


@pytest.fixture(scope="module")
def round_trips_bucket(moto_s3):
    return moto_s3("round-trips")


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_small_upsert_requests_on_s3(moto_s3, round_trips_bucket, table_type):
    """On the S3 test server, one 1,000-row upsert into a 10k-row table (metadata table on, as by
    default) makes at most 40 requests in all, counted where they arrive: at the server."""
    opts = round_trips_bucket
    path = f"s3://round-trips/{table_type.lower()}"
    hudi.write(path, make_rows(range(10_000), ts=1), operation="bulk_insert", record_key="id",
               ordering_field="ts", partition_by="p", table_type=table_type, storage_options=opts)
    log = moto_s3.requests
    start = len(log)
    hudi.write(path, make_rows(range(0, 2000, 2), ts=2, seed=1), operation="upsert", storage_options=opts)
    made = log[start:]
    verbs = collections.Counter(_verb(m, q) for m, _, q in made)
    print(f"\n{table_type}: {len(made)} requests", dict(sorted(verbs.items())))
    for m, p, q in made:
        print("  ", _verb(m, q), p, q[:80])
    got = hudi.open_table(path, storage_options=opts).read(columns=["id", "ts"])
    assert got.num_rows == 10_000
    assert pc.sum(pc.equal(got["ts"], 2)).as_py() == 1_000
    # the markers went by name (one multi-object delete), none left behind
    assert list(Storage(path, opts).walk_files(".hoodie/.temp")) == []
    assert len(made) <= 40, dict(verbs)


def test_inline_services_take_the_commits_snapshot(tmp_path, monkeypatch):
    """The layers after a commit receive its snapshot: inline cleaning and archival with
    nothing to do decide it on that snapshot, without loading a timeline or listing storage."""
    from hudi_format.config import TableConfig
    from hudi_format.services.inline import run_inline_services
    from hudi_format.transaction.snapshot import TableSnapshot

    path = str(tmp_path / "t")
    for ts in (1, 2):
        hudi.write(path, make_rows(range(100), ts=ts), operation="upsert", record_key="id",
                   ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ")
    storage = Storage(path)
    snapshot = TableSnapshot.load(storage, TableConfig.load(storage))
    counts: collections.Counter = collections.Counter()
    load = Timeline.load.__func__
    monkeypatch.setattr(Timeline, "load", classmethod(lambda cls, *a, **k: counts.update(["load"]) or load(cls, *a, **k)))
    real_list = Storage.list
    monkeypatch.setattr(Storage, "list", lambda self, *a, **k: counts.update(["list"]) or real_list(self, *a, **k))
    assert run_inline_services(storage, snapshot.config, {}, snapshot=snapshot) == ()
    assert counts == {}, counts
    # without the snapshot the same services list the timeline themselves
    assert run_inline_services(storage, snapshot.config, {}) == ()
    assert counts["load"] >= 1


def test_inline_compaction_loads_bounded(tmp_path, monkeypatch):
    """An inline compaction after a small upsert (MOR, due after every delta commit) starts
    from the write's snapshot. The write loads 3 timelines and lists 8 times (as above); the
    compaction adds 4 loads, each one a decision that must see other processes: its plan,
    listed under the table lock after its time was issued; claiming the instant and the
    conflict check, both under the lock; the metadata table's timeline under the lock. Its
    plan lists the table (root + 3 partitions), its commit the metadata partition and the
    markers; the clean and archival after it start from its commit's timeline (no load).
    Before the services took the snapshot: 10 loads, 25 listings."""
    opts = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"}
    counts = _count_upsert(monkeypatch, str(tmp_path / "t"), "MERGE_ON_READ", 4_000, options=opts)
    print({k: counts[k] for k in ("timeline_load", "listings", *VERBS) if counts[k]})
    table = hudi.open_table(str(tmp_path / "t"))
    assert [i.action for i in table.timeline.instants][-1] == "commit"     # the compaction
    got = table.read(columns=["id", "ts"])
    assert got.num_rows == 4_000 and pc.sum(pc.equal(got["ts"], 2)).as_py() == 1_000
    assert counts["timeline_load"] <= 7, counts
    assert counts["listings"] <= 18, counts
