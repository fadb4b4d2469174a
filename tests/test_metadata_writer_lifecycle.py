"""The metadata table through bootstrap, rollbacks, savepoint restores and archival: its listing stays right."""

from __future__ import annotations

import posixpath

import pytest

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.metadata import keys as K
from hudi_format.metadata.reader import MetadataTable
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from hudi_format.view.file_names import parse_base_file_name
from test_metadata_writer import ALL_INDEXES, _st, _write, check_in_step, rs_rows
from writemodel import Model, committed_files, data_rows, make_rows, model_rows


def test_existing_table_is_bootstrapped_with_every_index(tmp_path):
    path = tmp_path / "t"
    off = {"hoodie.metadata.enable": "false"}
    _write(path, make_rows(range(40), ts=0), ttype="MERGE_ON_READ", options=off)
    _write(path, make_rows(range(20, 50), ts=1, seed=1), ttype="MERGE_ON_READ", options=off)
    assert not Storage(str(path)).exists(".hoodie/metadata/.hoodie/hoodie.properties")
    _write(path, make_rows(range(45, 55), ts=2, seed=2), ttype="MERGE_ON_READ", options=ALL_INDEXES)
    st, cfg = _st(path)
    assert set(cfg.metadata_partitions) == {"files", "column_stats", "bloom_filters", "record_index"}
    model = Model(event_time=True)
    for rows in (make_rows(range(40), ts=0), make_rows(range(20, 50), ts=1, seed=1),
                 make_rows(range(45, 55), ts=2, seed=2)):
        model.apply("upsert", rows, 0)
    check_in_step(path, model)
    assert set(MetadataTable(st, cfg).all_record_locations()) == set(model.rows)
    # and a write with the metadata table disabled deletes it, as Hudi does
    _write(path, make_rows(range(1), ts=3), ttype="MERGE_ON_READ", options=off)
    st, cfg = _st(path)
    assert cfg.metadata_partitions == [] and not st.exists(".hoodie/metadata/.hoodie/hoodie.properties")
    model.apply("upsert", make_rows(range(1), ts=3), 3)
    assert rs_rows(path, True) == model_rows(model.rows)


def test_restore_drops_and_next_write_rebuilds(tmp_path):
    path = tmp_path / "t"
    _write(path, make_rows(range(20), ts=0), options=ALL_INDEXES)
    sp = _write(path, make_rows(range(10, 30), ts=1, seed=1), options=ALL_INDEXES)
    table = hudi.open_table(str(path))
    table.savepoint(sp.timestamp)
    _write(path, make_rows(range(25, 35), ts=2, seed=2), options=ALL_INDEXES)
    hudi.open_table(str(path)).restore(sp.timestamp)
    st, cfg = _st(path)
    assert "files" not in cfg.metadata_partitions
    model = Model(event_time=True)
    model.apply("upsert", make_rows(range(20), ts=0), 0)
    model.apply("upsert", make_rows(range(10, 30), ts=1, seed=1), 1)
    assert rs_rows(path, True) == model_rows(model.rows)
    _write(path, make_rows(range(40, 45), ts=3), options=ALL_INDEXES)
    model.apply("upsert", make_rows(range(40, 45), ts=3), 3)
    check_in_step(path, model)
    st, cfg = _st(path)
    assert set(MetadataTable(st, cfg).all_record_locations()) == set(model.rows)


@pytest.mark.parametrize("version", [8, 6])
def test_rollback_of_log_appends(tmp_path, version):
    """MOR upserts into log files, then the latest commit is rolled back: v8 deletes its log
    files, v6 appends a rollback command block in a new log file; the listing follows."""
    path = tmp_path / "t"
    opts = {"hoodie.parquet.small.file.limit": str(100 << 20)}
    model = Model(event_time=True)
    rows = make_rows(range(30), ts=0)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("insert", rows, 0)
    rows = make_rows(range(10, 20), ts=1, seed=1)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("upsert", rows, 1)
    last = _write(path, make_rows(range(0, 25), ts=2, seed=2), ttype="MERGE_ON_READ", version=version,
                  options=opts)
    assert any(n.startswith(".") for fs in committed_files(path).values() for n in fs)
    hudi.open_table(str(path)).rollback(last.timestamp)
    check_in_step(path, model, hudi_rs=version >= 8)
    rows = make_rows(range(40, 45), ts=3, seed=3)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("upsert", rows, 3)
    check_in_step(path, model, hudi_rs=version >= 8)


def test_metadata_timeline_is_archived(tmp_path):
    """With the data table's hoodie.keep.min/max.commits (+1, as Hudi configures its metadata
    writer), the metadata timeline stays bounded: older instants move to its LSM history."""
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.metadata.compact.max.delta.commits": "3",
                                "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6",
                                "hoodie.cleaner.commits.retained": "3"})
    model = Model(event_time=True)
    for i in range(24):
        rows = make_rows(range(i * 3, i * 3 + 6), ts=i, seed=i)
        _write(path, rows, ttype="MERGE_ON_READ", options=opts)
        model.apply("upsert", rows, i)
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    tl = Timeline.load(md, TableConfig.load(md))
    writes = [i for i in tl.completed if i.action in ("deltacommit", "commit")]
    assert len(writes) <= 7 + 3     # max + 1, plus what a pending compaction window holds
    archived = tl.archived().write_instants()
    assert any(i.timestamp.startswith("0000000000000") for i in archived)
    assert len(archived) + len(writes) >= 24
    check_in_step(path, model)
    st, cfg = _st(path)
    assert set(MetadataTable(st, cfg).all_record_locations()) == set(model.rows)


def _two_file_groups_per_partition(path, version: int) -> tuple[Model, dict]:
    """A MOR table whose partitions hold two file groups each (small files off), with log
    files in every file group: the next upsert appends to both groups of a partition."""
    opts = {"hoodie.parquet.small.file.limit": "0"}
    model = Model(event_time=True)
    for i, keys in enumerate((range(0, 12), range(12, 24))):
        rows = make_rows(keys, ts=i, seed=i)
        _write(path, rows, op="insert", ttype="MERGE_ON_READ", version=version, options=opts)
        model.apply("insert", rows, i)
    opts["hoodie.parquet.small.file.limit"] = str(100 << 20)
    rows = make_rows(range(0, 24, 2), ts=5, seed=5)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("upsert", rows, 5)
    groups = {}
    for part, names in committed_files(path).items():
        groups[part] = {parse_base_file_name(n).file_id for n in names if not n.startswith(".")}
    assert any(len(g) == 2 for g in groups.values()), groups
    return model, opts


@pytest.mark.parametrize("version", [6, 8])
def test_rollback_lists_the_command_block_log_file_of_every_file_group(tmp_path, version):
    """v6 rollback of a deltacommit that appended to two file groups of one partition: each gets
    a rollback command block in a new log file, and the rollback metadata lists both per
    partition (Hudi merges the rollback stats of a partition), so the metadata table lists
    both: hudi-rs reading through the metadata table sees the same slices as from storage."""
    path = tmp_path / "t"
    model, opts = _two_file_groups_per_partition(path, version)
    last = _write(path, make_rows(range(0, 24, 3), ts=9, seed=9), ttype="MERGE_ON_READ", version=version,
                  options=opts)
    hudi.open_table(str(path)).rollback(last.timestamp)
    st, cfg = _st(path)
    tl = Timeline.load(st, cfg)
    rb = next(i for i in tl.completed if i.action == "rollback")
    if version == 6:
        logs = [p for pm in tl.raw_metadata(rb)["partitionMetadata"].values()
                for p in (pm.get("rollbackLogFiles") or {})]
        plan = tl.plan(rb)
        assert len(logs) == len(plan["RollbackRequests"]) >= 2, (logs, plan)
    check_in_step(path, model)
    rows = make_rows(range(30, 34), ts=10, seed=10)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("upsert", rows, 10)
    check_in_step(path, model)


@pytest.mark.parametrize("version", [6, 8])
def test_restore_over_log_appends_keeps_the_listing(tmp_path, version):
    """Restore to a savepoint over deltacommits that appended to two file groups per partition
    (v6: command blocks in new log files): the metadata table is dropped and built again by the
    next write, listing what is on storage; hudi-rs reads the same through it."""
    path = tmp_path / "t"
    model, opts = _two_file_groups_per_partition(path, version)
    sp_ts = Timeline.load(*_st(path)).completed[-1].timestamp
    hudi.open_table(str(path)).savepoint(sp_ts)
    for i in range(2):
        _write(path, make_rows(range(i, 24, 3), ts=20 + i, seed=20 + i), ttype="MERGE_ON_READ",
               version=version, options=opts)
    hudi.open_table(str(path)).restore(sp_ts)
    assert data_rows(hudi.open_table(str(path)).read()) == model_rows(model.rows)
    if version == 6:   # every command-block log file the restore wrote is in its metadata
        st, cfg = _st(path)
        tl = Timeline.load(st, cfg)
        meta = tl.raw_metadata(next(i for i in tl.completed if i.action == "restore"))
        listed = {posixpath.basename(p) for rbs in meta["hoodieRestoreMetadata"].values() for rb in rbs
                  for pm in rb["partitionMetadata"].values() for p in (pm.get("rollbackLogFiles") or {})}
        on_storage = {n for names in committed_files(path).values() for n in names if n.endswith("_0-0-0")}
        assert listed == on_storage and len(listed) >= 4, (listed, on_storage)
    rows = make_rows(range(30, 34), ts=30, seed=30)
    _write(path, rows, ttype="MERGE_ON_READ", version=version, options=opts)
    model.apply("upsert", rows, 30)
    check_in_step(path, model)
