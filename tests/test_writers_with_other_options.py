"""Writers of one table that configure its metadata differently, checked against a model.

Jobs that share a table rarely share their options: one writes with the metadata table off
(Hudi deletes it then), the next with it on (it is bootstrapped again), one keeps the record
index and tags through it, another column stats, one turns an index off by name (it is
dropped, as Hudi's writers drop it), some run the table services inline. Each
random sequence here gives every write its own such options; after each step our snapshot,
hudi-rs's snapshot and ``Table.lookup`` of every key ever written equal the model, the metadata
table's listing equals storage, and ``hudi-format validate`` finds nothing.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.cli.validate import validate_table
from writemodel import hudi_rs_read, metadata_listing_problem

KEY = dict(record_key="id", ordering_field="ts", partition_by="p")
RECORD_INDEX = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
                "hoodie.metadata.record.index.min.filegroup.count": "2"}
NO_METADATA = {"hoodie.metadata.enable": "false", "hoodie.index.type": "GLOBAL_SIMPLE"}
COLUMN_STATS = {"hoodie.metadata.index.column.stats.enable": "true"}
BLOOM_FILTERS = {"hoodie.metadata.index.bloom.filter.enable": "true", "hoodie.index.type": "BLOOM",
                 "hoodie.bloom.index.use.metadata": "true"}
# a writer that names an index's option false drops that index (Hudi's writers do)
DROPS = {"hoodie.metadata.record.index.enable": "false", "hoodie.metadata.index.column.stats.enable": "false",
         "hoodie.metadata.index.bloom.filter.enable": "false"}
WRITERS = [RECORD_INDEX, NO_METADATA, {**RECORD_INDEX, **COLUMN_STATS}, {}, COLUMN_STATS, BLOOM_FILTERS,
           DROPS, {"hoodie.metadata.record.index.enable": "false"}]
SERVICES = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
            "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3",
            "hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "4"}
KEYS = 60


def _rows(ids: list[int], ts: int) -> pa.Table:
    # a key's partition never changes (non-global and global indexes then agree)
    return pa.table({"id": [f"k{i}" for i in ids], "ts": [ts] * len(ids), "p": [f"p{i % 3}" for i in ids],
                     "v": [float(ts)] * len(ids)})


def _pairs(t: pa.Table) -> list[tuple[str, int]]:
    return sorted(zip(t.column("id").to_pylist(), t.column("ts").to_pylist()))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_writers_with_their_own_metadata_options(tmp_path, table_type, seed):
    rng = random.Random(f"{table_type}-{seed}")
    path = str(tmp_path / "t")
    model: dict[int, int] = {}
    for step in range(16):
        opts = dict(rng.choice(WRITERS))
        if rng.random() < 0.4:
            opts.update(SERVICES)
        ids = rng.sample(range(KEYS), rng.randint(1, 15))
        op = rng.choice(["upsert", "upsert", "delete", "insert"]) if step else "insert"
        if op == "insert":    # inserts bring new keys only (an insert of a stored key duplicates it)
            ids = [i for i in ids if i not in model] or [KEYS + step]
        hudi.write(path, _rows(ids, step + 1), operation=op, table_type=table_type, options=opts, **KEY)
        for i in ids:
            if op == "delete":
                model.pop(i, None)
            else:
                model[i] = step + 1
        expected = sorted((f"k{i}", ts) for i, ts in model.items())
        where = f"step {step} ({op} of {len(ids)} keys, options {opts})"
        table = hudi.open_table(path)
        assert _pairs(table.read()) == expected, where
        assert _pairs(hudi_rs_read(path)) == expected, where
        every_key = [f"k{i}" for i in range(KEYS + step + 1)]
        assert _pairs(table.lookup(every_key)) == expected, where
        assert metadata_listing_problem(path) is None, where
        assert validate_table(path) == [], where


def _partitions(path: str) -> list[str]:
    return hudi.open_table(path).config.metadata_partitions


def test_an_index_turned_off_by_name_is_dropped_and_one_left_out_is_kept(tmp_path):
    path = str(tmp_path / "t")
    on = {**RECORD_INDEX, **COLUMN_STATS}
    hudi.write(path, _rows(list(range(10)), 1), operation="insert", options=on, **KEY)
    assert {"record_index", "column_stats"} <= set(_partitions(path))
    # left out: kept, and kept up to date (the new keys are in the index)
    hudi.write(path, _rows([10, 11], 2), operation="insert", **KEY)
    assert {"record_index", "column_stats"} <= set(_partitions(path))
    assert validate_table(path) == []
    # named false: dropped from hoodie.properties and from storage, the rest kept
    hudi.write(path, _rows([1, 12], 3), operation="upsert",
               options={"hoodie.metadata.record.index.enable": "false"}, **KEY)
    assert "record_index" not in _partitions(path) and "column_stats" in _partitions(path)
    assert not (tmp_path / "t" / ".hoodie" / "metadata" / "record_index").exists()
    expected = sorted([(f"k{i}", 1) for i in range(10) if i != 1] + [("k1", 3), ("k10", 2), ("k11", 2), ("k12", 3)])
    assert _pairs(hudi.open_table(path).read()) == expected
    assert _pairs(hudi_rs_read(path)) == expected
    assert metadata_listing_problem(path) is None and validate_table(path) == []
    # named true again: bootstrapped with every key; upserts tag through it
    hudi.write(path, _rows([2, 13], 4), operation="upsert", options=on, **KEY)
    assert "record_index" in _partitions(path)
    expected = sorted([p for p in expected if p[0] != "k2"] + [("k2", 4), ("k13", 4)])
    assert _pairs(hudi.open_table(path).lookup([f"k{i}" for i in range(14)])) == expected
    assert _pairs(hudi_rs_read(path)) == expected
    assert validate_table(path) == []


def test_a_drop_cut_short_leaves_the_index_undeclared_and_the_next_bootstrap_clears_it(tmp_path, monkeypatch):
    from hudi_format.storage import Storage
    path = str(tmp_path / "t")
    hudi.write(path, _rows(list(range(10)), 1), operation="insert", options=RECORD_INDEX, **KEY)

    class Killed(Exception):
        pass

    def killed(self, rel):
        raise Killed(rel)
    monkeypatch.setattr(Storage, "delete_tree", killed)
    with pytest.raises(Exception):
        hudi.write(path, _rows([1, 10], 2), operation="upsert",
                   options={"hoodie.metadata.record.index.enable": "false"}, **KEY)
    monkeypatch.undo()
    # un-declared before its files went: nothing reads the half-dropped index
    assert "record_index" not in _partitions(path)
    assert (tmp_path / "t" / ".hoodie" / "metadata" / "record_index").exists()
    expected = sorted((f"k{i}", 1) for i in range(10))
    assert _pairs(hudi.open_table(path).read()) == expected
    assert _pairs(hudi_rs_read(path)) == expected
    hudi.write(path, _rows([1, 10], 3), operation="upsert", options=RECORD_INDEX, **KEY)
    expected = sorted([p for p in expected if p[0] != "k1"] + [("k1", 3), ("k10", 3)])
    assert _pairs(hudi.open_table(path).lookup([f"k{i}" for i in range(11)])) == expected
    assert validate_table(path) == [] and metadata_listing_problem(path) is None


@pytest.mark.parametrize("between", ["dropped", "rebuilt", "half_deleted"])
def test_a_write_tagging_through_a_record_index_dropped_under_it_is_retried(tmp_path, monkeypatch, between):
    """Another writer drops the record index (or drops and rebuilds it, or Hudi's writer, which
    deletes the files before un-declaring them, is killed half-way through) after this delete
    loaded the table and before it reads the index: the index it declared is gone or not the
    one it loaded, which must not read as "these keys are absent" (the delete would do nothing,
    an upsert write a second copy). A concurrent change is a conflict (the write runs again on
    the table as it is then); a broken index is not used (every key read instead)."""
    from hudi_format.storage import Storage
    from hudi_format.writer import client
    path = str(tmp_path / "t")
    hudi.write(path, _rows(list(range(30)), 1), operation="insert", table_type="MERGE_ON_READ",
               options=RECORD_INDEX, **KEY)
    plan, done = client.plan_write, []

    def racing(job, data):
        if not done:
            done.append(True)
            if between == "half_deleted":   # still declared, its first file group's files gone
                st = Storage(path)
                victim = sorted(f.path for f in st.walk_files(".hoodie/metadata/record_index")
                                if "record-index-0000" in f.path)
                for rel in victim:
                    st.delete(rel)
            else:
                hudi.write(path, _rows([40], 2), operation="insert",
                           options={"hoodie.metadata.record.index.enable": "false"}, **KEY)
                if between == "rebuilt":
                    hudi.write(path, _rows([41], 3), operation="insert",
                               options={**RECORD_INDEX, "hoodie.metadata.record.index.min.filegroup.count": "3"},
                               **KEY)
        return plan(job, data)
    monkeypatch.setattr(client, "plan_write", racing)
    deleted = list(range(0, 30, 2))
    retried = {**RECORD_INDEX, "hoodie.write.num.retries.on.conflict.failures": "1"}
    hudi.write(path, _rows(deleted, 9), operation="delete", options=retried, **KEY)
    left = {f"k{i}" for i in range(30) if i not in deleted}
    left |= {"k40"} if between != "half_deleted" else set()
    left |= {"k41"} if between == "rebuilt" else set()
    assert {k for k, _ in _pairs(hudi.open_table(path).read())} == left
    assert {k for k, _ in _pairs(hudi_rs_read(path))} == left


# the metadata table compacts every other deltacommit and archives past its initialisations;
# the data table keeps its timeline (nothing archived there)
ARCHIVING_METADATA = {"hoodie.metadata.compact.max.delta.commits": "2", "hoodie.keep.min.commits": "2",
                      "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
                      "hoodie.archive.automatic": "false"}


@pytest.mark.parametrize("later", ["", "metadata archived"])
@pytest.mark.parametrize("version", [6, 8])
def test_a_write_that_began_before_the_metadata_table_was_dropped_leaves_it_in_sync(tmp_path, caplog, version,
                                                                                    later):
    """A write opens its instant; another writer, with the metadata table off, commits (and
    deletes it); the first commits, bootstrapping it again from a listing that holds the other
    writer's commit, then adding its own. The metadata table is in sync: its bootstrap covers
    the commit that completed before it, even though that commit's instant is later than the
    first regular deltacommit's (it was read as unsynced, and every later writer rebuilt the
    metadata table, readers listing storage meanwhile) -- also once the metadata table has
    archived its initialisation (seen in the kill soak with writers of other options)."""
    import logging

    from hudi_format import engine
    from hudi_format.metadata.reader import MetadataTable
    path = str(tmp_path / "t")
    opts = ARCHIVING_METADATA if later else {}
    hudi.write(path, _rows(list(range(10)), 1), operation="insert", table_version=version, options=opts, **KEY)
    early = _rows([1, 4], 2)   # partition p1; the other writer p2
    job = engine.begin_write(path, "upsert", schema=early.schema, options=opts)
    try:
        buckets = engine.plan_write(job, early)   # opens its instant
        hudi.write(path, _rows([2, 5], 3), operation="upsert", options=NO_METADATA, **KEY)
        assert _partitions(path) == []
        assert not (tmp_path / "t" / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").exists()
        results = [engine.write_bucket(b, early.take(job.rows_of(b)[0]), deletes=early.take(job.rows_of(b)[1]))
                   for b in buckets]
        engine.commit(job, results)
    except BaseException:
        engine.abort(job)
        raise
    expected = sorted([(f"k{i}", 1) for i in range(10) if i not in (1, 2, 3, 4, 5)]
                      + [("k1", 2), ("k4", 2), ("k2", 3), ("k5", 3)])
    if later:
        with caplog.at_level(logging.WARNING, logger="hudi_format"):
            for step in range(6):
                hudi.write(path, _rows([6], 10 + step), operation="upsert", options=opts, **KEY)
        assert "out of date" not in caplog.text
        expected = sorted([p for p in expected if p[0] != "k6"] + [("k6", 15)])
        if version >= 8:   # version 6 names it after the data instant it follows: it stays as long
            md_timeline = hudi.open_table(path).metadata_table.mdt_timeline   # as the instants around it
            assert not [i for i in md_timeline.instants if i.timestamp.startswith("00000000000000")], \
                "the metadata table did not archive its initialisation: the test exercises nothing"
    table = hudi.open_table(path)
    mdt = MetadataTable(table.storage, table.config, table.timeline)
    assert mdt.staleness() is None, mdt.staleness()
    with caplog.at_level(logging.WARNING, logger="hudi_format"):
        hudi.write(path, _rows([3], 4), operation="upsert", options=opts, **KEY)
    assert "out of date" not in caplog.text
    expected = sorted(expected + [("k3", 4)])
    assert _pairs(hudi.open_table(path).read()) == expected
    assert _pairs(hudi_rs_read(path)) == expected
    assert metadata_listing_problem(path) is None and validate_table(path) == []


@pytest.mark.parametrize("version", [6, 8])
def test_an_index_initialised_later_does_not_cover_a_commit_the_listing_misses(tmp_path, version):
    """Only the ``files`` partition's initialisation stands for the listing: a commit the
    metadata table misses (its deltacommit gone) that completed before the record index was
    initialised still makes the metadata table unusable for listing."""
    import os

    from hudi_format.metadata.reader import MetadataTable
    path = str(tmp_path / "t")
    hudi.write(path, _rows(list(range(10)), 1), operation="insert", table_version=version, **KEY)
    hudi.write(path, _rows([1, 4], 2), operation="upsert", **KEY)
    missed = hudi.open_table(path).timeline.latest_completed_write().timestamp
    hudi.write(path, _rows([2], 3), operation="upsert", options=RECORD_INDEX, **KEY)
    assert "record_index" in _partitions(path)
    mdt_timeline = tmp_path / "t" / ".hoodie" / "metadata" / ".hoodie"
    gone = [os.path.join(d, f) for d, _, files in os.walk(mdt_timeline) for f in files
            if f.split(".")[0].split("_")[0] == missed and f.endswith(".deltacommit") and "archived" not in d]
    assert len(gone) == 1
    os.remove(gone[0])
    table = hudi.open_table(path)
    assert missed in (MetadataTable(table.storage, table.config, table.timeline).staleness() or "")


def test_only_initialisations_stand_for_the_bootstrap_listing():
    """A version-6 metadata table's log compaction completes as a deltacommit named after an
    instant (``<instant>005``), as an initialisation is (``<instant>010``): only the latter
    covers data instants (taking the former for one would hide a commit the listing misses)."""
    from types import SimpleNamespace

    from hudi_format.metadata import sync
    from hudi_format.timeline import Instant, State
    base = "20261201000000000"
    instants = [Instant(base + suffix, "deltacommit", State.COMPLETED) for suffix in ("005", "010")]
    every_partition = SimpleNamespace(metadata=lambda i: SimpleNamespace(partitions=["files", "record_index"]))
    assert [i.timestamp for i in sync._initialisations(every_partition, instants)] == [base + "010"]
