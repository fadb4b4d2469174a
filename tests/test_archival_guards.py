"""Archival in combination with compaction, log compaction, clustering and savepoints, with the
default options (automatic cleaning and archival after every write).

Issue 11 defect 1: one-row upserts into a merge-on-read table, each to a different key, are
archived before any compaction merged their log files; a completed instant that was archived is
still completed, so compaction (and every reader) must keep those updates. Checked with our
reader and with hudi-rs after every service.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.storage import Storage
from hudi_format.config import TableConfig
from hudi_format.timeline import Timeline
from writemodel import hudi_rs_read

N = 35
SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])


def _rows(ids, ts, tag):
    return pa.Table.from_pylist([{"id": f"k{i:03d}", "ts": ts, "v": f"{tag}{i}", "p": f"p{i % 2}"}
                                 for i in ids], schema=SCHEMA)


def _expect(updated: set[int]) -> list[dict]:
    return canonical_rows(pa.Table.from_pylist(
        [{"id": f"k{i:03d}", "ts": 1 if i in updated else 0, "v": f"{'new' if i in updated else 'old'}{i}",
          "p": f"p{i % 2}"} for i in range(N)], schema=SCHEMA))


def _check(path, updated: set[int], when: str) -> None:
    expected = _expect(updated)
    ours = hudi.open_table(str(path)).read()
    assert canonical_rows(ours.select(SCHEMA.names)) == expected, f"our reader, {when}"
    theirs = hudi_rs_read(str(path))
    assert canonical_rows(theirs.select(SCHEMA.names)) == expected, f"hudi-rs, {when}"


def _archived(path) -> set[str]:
    st = Storage(str(path))
    return {i.timestamp for i in Timeline.load(st, TableConfig.load(st)).archived().instants}


def _table(tmp_path, version):
    path = tmp_path / "t"
    hudi.write(str(path), _rows(range(N), 0, "old"), operation="insert", record_key="id",
               ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ", table_version=version)
    return path, hudi.open_table(str(path))


def _upserts(table, ids) -> None:
    for i in ids:
        table.write(_rows([i], 1, "new"))


@pytest.mark.parametrize("version", [8, 6])
def test_compaction_keeps_updates_of_archived_deltacommits(tmp_path, version):
    path, table = _table(tmp_path, version)
    _upserts(table, range(N))
    assert _archived(path), "the default options archive some of the delta commits"
    _check(path, set(range(N)), "before compaction")
    # log files newer than every base file need no completion time: a snapshot stays active-only
    fresh = hudi.open_table(str(path))
    fresh.read()
    assert not fresh.timeline.archive_loaded
    table.compact()
    _check(path, set(range(N)), "after compaction")


@pytest.mark.parametrize("version", [8, 6])
def test_log_compaction_then_compaction_keeps_archived_updates(tmp_path, version):
    path, table = _table(tmp_path, version)
    _upserts(table, range(N))
    assert _archived(path)
    table.log_compact({"hoodie.log.compaction.blocks.threshold": 2})
    _check(path, set(range(N)), "after log compaction")
    table.compact()
    _check(path, set(range(N)), "after compaction")


@pytest.mark.parametrize("version", [8, 6])
def test_pending_clustering_keeps_archived_updates(tmp_path, version):
    from hudi_format.services.clustering import schedule_clustering
    path, table = _table(tmp_path, version)
    _upserts(table, range(N))
    assert _archived(path)
    st = Storage(str(path))
    planned = schedule_clustering(st, TableConfig.load(st), options={
        "hoodie.clustering.plan.strategy.small.file.limit": 1 << 30})
    assert planned is not None
    table = hudi.open_table(str(path))
    if version >= 8:  # v6 (Hudi 0.x) cannot schedule a compaction after a pending clustering
        table.compact()
        _check(path, set(range(N)), "after compaction with a clustering pending")
    table.cluster()
    _check(path, set(range(N)), "after clustering")
    table.compact()
    _check(path, set(range(N)), "after clustering and compaction")


@pytest.mark.parametrize("version", [8, 6])
def test_savepoint_keeps_archived_updates(tmp_path, version):
    path, table = _table(tmp_path, version)
    _upserts(table, range(0, 20))
    sp = table.timeline.write_instants()[-1].timestamp
    table.savepoint(sp)
    _upserts(table, range(20, N))
    archived = _archived(path)
    assert archived and all(t < sp for t in archived), "archival stops at the savepoint"
    table.compact()
    _check(path, set(range(N)), "after compaction")


@pytest.mark.parametrize("version", [8, 6])
def test_archival_beyond_savepoint_keeps_updates_in_the_hole(tmp_path, version):
    """Archiving beyond a savepoint leaves the savepointed commit active in front of archived
    ones (a hole): those are still completed (Hudi's ``getFirstNonSavepointCommit``). hudi-rs
    0.5 takes the first active instant as the start and misses them, so only our reader here."""
    path, table = _table(tmp_path, version)
    _upserts(table, range(0, 4))
    sp = table.timeline.write_instants()[1].timestamp
    table.savepoint(sp)
    _upserts(table, range(4, N))
    assert all(t < sp for t in _archived(path))
    table.archive({"hoodie.archive.beyond.savepoint": True})
    assert any(t > sp for t in _archived(path))
    expected = _expect(set(range(N)))
    assert canonical_rows(hudi.open_table(str(path)).read().select(SCHEMA.names)) == expected
    hudi.open_table(str(path)).compact()
    assert canonical_rows(hudi.open_table(str(path)).read().select(SCHEMA.names)) == expected


@pytest.mark.parametrize("version", [8, 6])
def test_metadata_table_bounds_archival_both_ways(tmp_path, version):
    """The data table archives nothing its metadata table's latest compaction does not cover
    (nothing before the first one); the metadata table archives nothing from the data table's
    first active commit on."""
    from hudi_format.metadata.init import metadata_storage
    from hudi_format.services import archival
    low = {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5, "hoodie.cleaner.commits.retained": 1,
           "hoodie.compact.inline.max.delta.commits": 1}
    path, table = _table(tmp_path, version)
    manual = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    for i in range(8):
        table.write(_rows([i], 1, "new"), options=manual)
    st = Storage(str(path))
    cfg = TableConfig.load(st)
    md = metadata_storage(st)
    md_tl = Timeline.load(md, TableConfig.load(md))
    assert not [i for i in md_tl.completed if i.action == "commit"], "no metadata compaction yet"
    assert archival.archive(st, cfg, low) == []
    for i in range(8, N):
        table.write(_rows([i], 1, "new"), options={**low, "hoodie.clean.automatic": "false"})
    md_tl = Timeline.load(md, TableConfig.load(md))
    latest = max(i.timestamp for i in md_tl.completed if i.action == "commit")
    tl = Timeline.load(st, cfg)
    archived = tl.archived().write_instants()
    assert archived
    for inst in archived:
        assert inst.timestamp < latest
        if version >= 8:
            assert inst.completion_time <= latest
    first_active = min(i.timestamp for i in tl.instants if i.action in ("commit", "deltacommit", "replacecommit"))
    md_archived = md_tl.archived().instants
    assert md_archived and all(i.timestamp < first_active for i in md_archived)
    _check(path, set(range(N)), "after archiving both timelines")


@pytest.mark.parametrize("version", [6, 8])
def test_table_archive_waits_for_the_table_lock(tmp_path, version):
    """``Table.archive`` (and the CLI's archive) is one archiver: it runs under the table lock as
    inline archival does (Hudi's archiver takes it), so it never races a writer's own archival
    over the same instants (one deleting active files the other is copying to the archive)."""
    import threading
    from hudi_format.transaction import table_lock
    path = str(tmp_path / "t")
    opts = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1", "hoodie.archive.automatic": "false",
            "hoodie.metadata.enable": "false", "hoodie.write.table.version": str(version)}
    for c in range(6):
        hudi.write(path, _rows(range(c, c + 3), c, "v"), record_key="id", ordering_field="ts",
                   partition_by="p", options=opts)
    table = hudi.open_table(path)
    done: list = []
    with table_lock(Storage(path), {}):
        worker = threading.Thread(target=lambda: done.append(table.archive(opts)))
        worker.start()
        worker.join(1.5)
        assert not done, "archived while another process held the table lock"
    worker.join(30)
    assert done and done[0], "archival ran once the lock was released"
    after = hudi.open_table(path)
    assert after.timeline.archived().write_instants()
