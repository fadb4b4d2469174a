"""Compaction and log compaction on tables we write (MOR, v8 and v6), checked with our reader and
hudi-rs before and after the service, as of every earlier instant, and against the plans Apache
Hudi wrote into the v9 fixture tables. (Log compaction's tests: test_log_compaction.py.)"""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.errors import InvalidOptionError, TimelineError
from hudi_format.services import (SERVICE_OPTIONS, compact, pending_compaction_base_instants, run_compaction,
                                  schedule_compaction, validate_service_options)
from hudi_format.services.compaction import _order_and_filter
from hudi_format.timeline import State
from writemodel import hudi_rs_read, make_rows

MOR = [8, 6]
FIXTURE = "sample_table__mor__avro__v9_txns_simple_meta"
FIXTURE_COMPACTION = "20260307162618152"
FIXTURE_CLUSTERING = "20260307162619269"


# -- helpers shared with test_clustering and test_log_compaction ----------------------------


def write(path, data, *, op="upsert", table_type="MERGE_ON_READ", version=8, options=None):
    return hudi.write(str(path), data, operation=op, record_key="id", ordering_field="ts",
                      partition_by="p", table_type=table_type, table_version=version, options=options)


def without_file_name(table: pa.Table) -> pa.Table:
    return table.drop_columns([c for c in ("_hoodie_file_name",) if c in table.column_names])


def both(path, as_of=None) -> list[dict]:
    """Our rows and hudi-rs' rows (as of ``as_of``) must agree; returns them without
    ``_hoodie_file_name``, the one field a service rewrites. (Time travel into the window in
    which a compaction was pending: we read the slice as it was then, hudi-rs reads the
    compacted base file whose request time is before ``as_of``; same records, other file.)"""
    ours = without_file_name(hudi.open_table(str(path)).read(as_of=as_of))
    theirs = without_file_name(hudi_rs_read(str(path), **({"as_of": as_of} if as_of else {})))
    assert canonical_rows(ours.select(theirs.column_names)) == canonical_rows(theirs), \
        f"our reader and hudi-rs disagree (as_of={as_of})"
    return canonical_rows(ours)


def bounds(path, instants) -> list[str]:
    """Time-travel bounds of ``instants``: completion time (v8+) or request time (v6)."""
    v8 = hudi.open_table(str(path)).version >= 8
    return [(i.completion_time if v8 else i.timestamp) for i in instants]


def history(path, instants) -> dict[str, list[dict]]:
    return {b: both(path, b) for b in bounds(path, instants)}


def assert_history_kept(path, recorded: dict[str, list[dict]]) -> None:
    for b, rows in recorded.items():
        assert both(path, b) == rows, f"time travel to {b} changed"


def timeline_files(path) -> list[str]:
    t = hudi.open_table(str(path))
    return sorted(f.name for f in t.storage.list(t.config.timeline_dir) if not f.is_dir)


def mor_history(path, version):
    """Insert, upsert, delete, re-insert and stale upserts: every merge rule in the logs."""
    instants = [write(path, make_rows(range(0, 60), ts=10), op="insert", version=version)]
    instants.append(write(path, make_rows(range(30, 70), ts=20, seed=1), version=version))
    instants.append(write(path, make_rows(range(0, 10), ts=0).select(["id", "p"]), op="delete",
                          version=version))
    instants.append(write(path, make_rows(range(5, 8), ts=5, seed=2), version=version))  # after a hard delete
    instants.append(write(path, make_rows(range(40, 45), ts=1, seed=3), version=version))  # stale in v8
    return instants


# -- compaction -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", MOR)
def test_compaction_keeps_rows_history_and_meta_fields(tmp_path, version):
    path = tmp_path / "t"
    instants = mor_history(path, version)
    before = both(path)
    recorded = history(path, instants)
    table = hudi.open_table(str(path))
    every = {s.file_id: s for s in table.file_slices()}
    old = {fid: s for fid, s in every.items() if s.log_files}
    assert old and len(old) < len(every)            # some groups have logs, new ones do not
    commit_time = {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in table.read().to_pylist()}

    b = bounds(path, instants)
    incremental = [canonical_rows(without_file_name(table.read_incremental(x, y)))
                   for x, y in zip(["0"] + b, b)]

    done = compact(table.storage, table.config)
    assert done is not None and done.action == "commit" and done.is_completed
    # incremental reads keep their answers; the compaction itself adds no changes
    table = hudi.open_table(str(path))
    assert [canonical_rows(without_file_name(table.read_incremental(x, y)))
            for x, y in zip(["0"] + b, b)] == incremental
    assert table.read_incremental(b[-1], bounds(path, [done])[0]).num_rows == 0

    assert both(path) == before
    assert_history_kept(path, recorded)
    table = hudi.open_table(str(path))
    assert both(path, bounds(path, [done])[0]) == before
    rows = table.read().to_pylist()
    assert {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in rows} == commit_time
    new = {s.file_id: s for s in table.file_slices()}
    assert set(new) == set(every)
    for s in new.values():
        assert not s.log_files, "a compacted slice has no log files"
        if s.file_id not in old:
            assert s == every[s.file_id]
            continue
        assert s.base_instant == done.timestamp
        assert s.base_file_name.endswith(f"_{done.timestamp}.parquet")
        names = pq.read_table(table.storage.full(s.base_file), columns=["_hoodie_file_name"]).column(0)
        assert set(names.to_pylist()) <= {s.base_file_name}

    # timeline: requested plan, inflight, completed commit (v8: <t>_<completion>.commit)
    files = timeline_files(path)
    assert f"{done.timestamp}.compaction.requested" in files
    assert f"{done.timestamp}.compaction.inflight" in files
    assert (f"{done.timestamp}_{done.completion_time}.commit" if version >= 8 else f"{done.timestamp}.commit") in files
    plan = table.timeline.plan(done.timestamp)
    assert plan["version"] == 2
    ops = {op["fileId"]: op for op in plan["operations"]}
    assert set(ops) == set(old)
    for fid, op in ops.items():
        assert op["dataFilePath"] == old[fid].base_file_name
        assert sorted(op["deltaFilePaths"]) == sorted(posixpath.basename(p) for p in old[fid].log_files)
        assert op["baseInstantTime"] == old[fid].base_instant
        assert op["metrics"]["TOTAL_LOG_FILES"] == len(old[fid].log_files)
        assert op["metrics"]["TOTAL_LOG_FILES_SIZE"] == sum(old[fid].log_file_sizes)
    meta = table.timeline.metadata(done)
    assert meta.compacted and meta.operation_type == "COMPACT" and meta.schema
    stats = {st.file_id: st for st in meta.write_stats}
    assert set(stats) == set(old)
    per_group = {}
    for r in rows:
        per_group[r["_hoodie_file_name"]] = per_group.get(r["_hoodie_file_name"], 0) + 1
    for fid, st in stats.items():
        assert st.prev_commit == old[fid].base_instant
        assert st.path == new[fid].base_file
        assert st.num_writes == per_group.get(new[fid].base_file_name, 0)
        assert st.total_log_files_compacted == len(old[fid].log_files)


@pytest.mark.parametrize("version", MOR)
def test_writes_after_compaction_land_in_the_new_slice(tmp_path, version):
    path = tmp_path / "t"
    mor_history(path, version)
    table = hudi.open_table(str(path))
    compact(table.storage, table.config)
    write(path, make_rows(range(50, 55), ts=30, seed=4), version=version)
    rows = both(path)
    assert {r["id"]: r["ts"] for r in rows if r["id"] in {f"k{i:05d}" for i in range(50, 55)}} == \
        {f"k{i:05d}": 30 for i in range(50, 55)}
    slices = hudi.open_table(str(path)).file_slices()
    assert sum(len(s.log_files) for s in slices) >= 1


def test_compaction_is_a_no_op_on_copy_on_write_and_without_logs(tmp_path):
    cow = tmp_path / "cow"
    write(cow, make_rows(range(10), ts=1), table_type="COPY_ON_WRITE")
    write(cow, make_rows(range(5), ts=2), table_type="COPY_ON_WRITE")
    t = hudi.open_table(str(cow))
    assert schedule_compaction(t.storage, t.config) is None
    assert compact(t.storage, t.config) is None
    mor = tmp_path / "mor"
    write(mor, make_rows(range(10), ts=1), op="insert")
    t = hudi.open_table(str(mor))
    assert schedule_compaction(t.storage, t.config) is None
    with pytest.raises(TimelineError, match="no pending compaction"):
        run_compaction(t.storage, t.config)


def test_pending_compaction_v8_writes_continue_and_readers_see_old_slices(tmp_path):
    path = tmp_path / "t"
    write(path, make_rows(range(0, 30), ts=1), op="insert")
    write(path, make_rows(range(0, 15), ts=2, seed=1))
    table = hudi.open_table(str(path))
    before = both(path)
    pending = schedule_compaction(table.storage, table.config)
    assert pending is not None and pending.state is State.REQUESTED
    assert both(path) == before                    # scheduling changes nothing visible
    planned = {op["fileId"]: op for op in hudi.open_table(str(path)).timeline.plan(pending.timestamp)["operations"]}

    late = write(path, make_rows(range(10, 20), ts=3, seed=2))   # a write while compaction is pending
    during = both(path)
    assert {r["id"]: r["ts"] for r in during}[f"k{12:05d}"] == 3
    # the new log files are not part of the plan; they belong to the slice the compaction starts
    for s in hudi.open_table(str(path)).file_slices():
        new_logs = [p for p in s.log_files if late.timestamp in posixpath.basename(p)]
        if s.file_id in planned:
            assert not set(map(posixpath.basename, new_logs)) & set(planned[s.file_id]["deltaFilePaths"])

    done = run_compaction(table.storage, table.config)
    assert done.timestamp == pending.timestamp
    assert both(path) == during
    assert both(path, bounds(path, [late])[0]) == during
    for s in hudi.open_table(str(path)).file_slices():
        if s.file_id in planned:
            assert s.base_instant == done.timestamp
            assert all(late.timestamp in posixpath.basename(p) for p in s.log_files)


def test_pending_compaction_v6_routes_new_logs_to_the_new_slice(tmp_path):
    """Table version 6 names log files by their slice's base instant. While a compaction is
    pending, the writer names the log files it adds to those file groups with the compaction
    instant (as Hudi 0.x's append handle does), so the compaction completes with nothing lost."""
    routed = tmp_path / "routed"
    write(routed, make_rows(range(0, 30), ts=1), op="insert", version=6)
    write(routed, make_rows(range(0, 15), ts=2, seed=1), version=6)
    t = hudi.open_table(str(routed))
    pending = schedule_compaction(t.storage, t.config)
    assert set(pending_compaction_base_instants(t.storage, t.config).values()) == {pending.timestamp}
    write(routed, make_rows(range(10, 20), ts=3, seed=2), version=6)
    new_logs = [f for s in hudi.open_table(str(routed)).file_slices() for f in s.log_files
                if f"_{pending.timestamp}.log." in f]
    assert new_logs, "the write did not name its log files with the pending compaction instant"
    during = canonical_rows(without_file_name(hudi.open_table(str(routed)).read()))
    assert {r["id"]: r["ts"] for r in during}["k00012"] == 3
    # (hudi-rs 0.5 does not merge a pending compaction's slice of a v6 table, so it is only
    # compared once the compaction completed)
    done = run_compaction(t.storage, t.config)
    assert both(routed) == during
    for s in hudi.open_table(str(routed)).file_slices():
        assert s.base_instant == done.timestamp
        assert all(f"_{done.timestamp}.log." in p for p in s.log_files)


def test_v6_single_writer_compaction_refuses_to_plan_behind_a_pending_write(tmp_path):
    path = tmp_path / "t"
    write(path, make_rows(range(10), ts=1), op="insert", version=6)
    write(path, make_rows(range(5), ts=2), version=6)
    t = hudi.open_table(str(path))
    from hudi_format.timeline import TimelineWriter
    TimelineWriter(t.storage, t.config).create_requested("deltacommit", "20000101000000000")
    with pytest.raises(TimelineError, match="still pending"):
        schedule_compaction(t.storage, t.config, {"hoodie.write.concurrency.mode": "SINGLE_WRITER"})


@pytest.mark.parametrize("files_first", [True, False])
def test_v6_compaction_behind_a_concurrent_write_leaves_its_groups_and_both_commit(tmp_path, files_first):
    """Optimistic concurrency (the default): as Hudi, a compaction is planned while an earlier
    write is still in flight (busy writers would starve it otherwise). It leaves out the groups
    that write's markers name (their new log files carry the old slice's name: planned, a
    failed write's removal of them would leave a plan that can never run), so both commit. A
    write that writes its files only after the plan (no markers yet) fails its conflict check
    instead, cleanly, and its retry commits."""
    from hudi_format import engine
    from hudi_format.services import run_compaction
    path = tmp_path / "t"
    write(path, make_rows(range(12), ts=1), op="insert", version=6)
    write(path, make_rows(range(6), ts=2), version=6)                 # logs in every group
    update = make_rows([3, 6, 9], ts=3)                                # partition a only
    job = engine.begin_write(str(path), "upsert", schema=update.schema)
    buckets = engine.plan_write(job, update)                           # its instant is open

    def write_files():
        out = []
        for b in buckets:
            rows, dels = job.rows_of(b)
            out.append(engine.write_bucket(b, update.take(rows), deletes=update.take(dels)))
        return out
    results = write_files() if files_first else None
    t = hudi.open_table(str(path))
    pending = schedule_compaction(t.storage, t.config)
    assert pending is not None and pending.timestamp > job.instant_time
    planned = {op["partitionPath"] for op in t.timeline.reload().plan(pending)["operations"]}
    assert planned == ({"b", "c"} if files_first else {"a", "b", "c"})
    if files_first:
        engine.commit(job, results)
        run_compaction(t.storage, t.config, pending, {})
    else:
        results = write_files()
        before = both(path)
        with pytest.raises(hudi.ConcurrentWriteError, match="compaction"):
            engine.commit(job, results)
        run_compaction(t.storage, t.config, pending, {})
        assert both(path) == before
        write(path, update, version=6)
    assert hudi.open_table(str(path)).timeline.pending == []
    assert {r["id"]: r["ts"] for r in both(path)}["k00006"] == 3


def test_failed_compaction_leaves_the_table_as_it_was_and_can_be_rerun(tmp_path, monkeypatch):
    path = tmp_path / "t"
    mor_history(path, 8)
    before = both(path)
    t = hudi.open_table(str(path))
    pending = schedule_compaction(t.storage, t.config)
    from hudi_format.services import compaction as mod
    calls = []

    def failing(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kw)
    real = mod.write_base_file
    monkeypatch.setattr(mod, "write_base_file", failing)
    with pytest.raises(OSError):
        run_compaction(t.storage, t.config, pending, {})
    monkeypatch.setattr(mod, "write_base_file", real)
    t = hudi.open_table(str(path))
    assert t.timeline.get(pending.timestamp).state is State.REQUESTED
    leftovers = [f for p in t._view.partitions() for f in t.storage.list(p) if pending.timestamp in f.name]
    assert leftovers == []
    assert both(path) == before
    done = run_compaction(t.storage, t.config, pending.timestamp)
    assert done.timestamp == pending.timestamp and both(path) == before


def test_crashed_inflight_compaction_is_taken_over(tmp_path):
    path = tmp_path / "t"
    mor_history(path, 8)
    before = both(path)
    t = hudi.open_table(str(path))
    pending = schedule_compaction(t.storage, t.config)
    from hudi_format.timeline import TimelineWriter
    TimelineWriter(t.storage, t.config).transition_to_inflight(pending)
    op = t.timeline.reload().plan(pending.timestamp)["operations"][0]
    debris = posixpath.join(op["partitionPath"], f"{op['fileId']}_9-9-9_{pending.timestamp}.parquet")
    t.storage.write_bytes(debris, b"partial")       # a torn file of the dead attempt
    assert both(path) == before                      # invisible while inflight
    done = run_compaction(t.storage, t.config)
    assert done.timestamp == pending.timestamp
    assert not t.storage.exists(debris)
    assert both(path) == before


def test_compaction_trigger_strategies(tmp_path):
    path = tmp_path / "t"
    write(path, make_rows(range(10), ts=1), op="insert")
    t = hudi.open_table(str(path))
    inline = {"hoodie.compact.inline": "true"}
    for i in range(3):
        write(path, make_rows(range(5), ts=2 + i))
    t.refresh()
    # 4 delta commits < 5 (NUM_COMMITS default)
    assert schedule_compaction(t.storage, t.config, inline) is None
    assert schedule_compaction(t.storage, t.config, {**inline, "hoodie.compact.inline.max.delta.commits": 4}) is not None
    t.refresh()
    run_compaction(t.storage, t.config)
    write(path, make_rows(range(5), ts=9))
    t.refresh()
    opts = {**inline, "hoodie.compact.inline.max.delta.commits": 2}
    assert schedule_compaction(t.storage, t.config, opts) is None       # 1 since the compaction
    assert schedule_compaction(t.storage, t.config, {**opts, "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
                                                     "hoodie.compact.inline.max.delta.seconds": 3600}) is None
    assert schedule_compaction(t.storage, t.config, {**opts, "hoodie.compact.inline.trigger.strategy": "NUM_AND_TIME",
                                                     "hoodie.compact.inline.max.delta.seconds": 0}) is None
    assert schedule_compaction(t.storage, t.config, {**opts, "hoodie.compact.inline.trigger.strategy": "NUM_OR_TIME",
                                                     "hoodie.compact.inline.max.delta.seconds": 0}) is not None
    # on demand (no inline option) the trigger does not apply
    t2 = tmp_path / "t2"
    write(t2, make_rows(range(10), ts=1), op="insert")
    write(t2, make_rows(range(3), ts=2))
    t2 = hudi.open_table(str(t2))
    assert schedule_compaction(t2.storage, t2.config) is not None


def test_compaction_strategies_order_and_bound():
    def op(fid, size, n, io):
        return {"fileId": fid, "metrics": {"TOTAL_LOG_FILES_SIZE": float(size), "TOTAL_LOG_FILES": float(n),
                                           "TOTAL_IO_MB": float(io)}}
    ops = [op("a", 10, 1, 300), op("b", 30, 3, 300), op("c", 20, 5, 300)]
    ids = lambda got: [o["fileId"] for o in got]  # noqa: E731
    assert ids(_order_and_filter(ops, {})) == ["b", "c", "a"]           # biggest logs first
    assert ids(_order_and_filter(ops, {"hoodie.compaction.logfile.size.threshold": 15})) == ["b", "c"]
    assert ids(_order_and_filter(ops, {"hoodie.compaction.target.io": 500})) == ["b", "c"]
    assert ids(_order_and_filter(ops, {"hoodie.compaction.strategy": "LogFileNumBasedCompactionStrategy"})) == ["c", "b", "a"]
    assert ids(_order_and_filter(ops, {"hoodie.compaction.strategy": "LogFileNumBasedCompactionStrategy",
                                       "hoodie.compaction.logfile.num.threshold": 3})) == ["c", "b"]
    assert ids(_order_and_filter(ops, {"hoodie.compaction.strategy":
                                       "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy",
                                       "hoodie.compaction.target.io": 1})) == ["a", "b", "c"]
    assert ids(_order_and_filter(ops, {"hoodie.compaction.strategy": "BoundedIOCompactionStrategy",
                                       "hoodie.compaction.target.io": 300})) == ["a"]


def test_service_options_are_validated():
    assert validate_service_options({"hoodie.compact.inline.max.delta.commits": "3"}) == \
        {"hoodie.compact.inline.max.delta.commits": 3}
    assert "hoodie.layout.optimize.strategy" in SERVICE_OPTIONS
    # write options and other services' options pass through
    assert validate_service_options({"hoodie.parquet.max.file.size": "10",
                                     "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS"})
    with pytest.raises(InvalidOptionError, match="did you mean 'hoodie.compact.inline.max.delta.commits'"):
        validate_service_options({"hoodie.compact.inline.max.delta.commit": 3})
    with pytest.raises(InvalidOptionError, match="must be an integer"):
        validate_service_options({"hoodie.compaction.target.io": "lots"})
    with pytest.raises(InvalidOptionError, match="must be one of"):
        validate_service_options({"hoodie.compact.inline.trigger.strategy": "SOMETIMES"})
    with pytest.raises(InvalidOptionError, match="must be positive"):
        validate_service_options({"hoodie.compact.inline.max.delta.commits": 0})
    with pytest.raises(InvalidOptionError, match="unsupported strategy"):
        from hudi_format.services.common import compaction_strategy
        compaction_strategy({"hoodie.compaction.strategy": "DayBasedCompactionStrategy"})


# -- plans against Apache Hudi's --------------------------------------------------------------


def _keys(d):
    return set(d.keys())


def test_fixture_compaction_plan_and_commit(fixture_tables):
    table = hudi.open_table(str(fixture_tables(FIXTURE)))
    inst = table.timeline.get(FIXTURE_COMPACTION)
    assert inst.action == "commit" and inst.is_completed
    plan = table.timeline.plan(inst)
    assert plan["version"] == 2 and plan["strategy"] is None
    ops = {op["fileId"]: op for op in plan["operations"]}
    assert ops["3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0"]["partitionPath"] == "region=us"
    assert ops["3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0"]["deltaFilePaths"] == [
        ".3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0_20260307162604102.log.1_0-52-126",
        ".3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0_20260307162606034.log.1_0-78-180"]
    assert ops["c3b646cc-8602-47c5-b010-3fe002241298-0"]["dataFilePath"] == \
        "c3b646cc-8602-47c5-b010-3fe002241298-0_2-26-56_20260307162557587.parquet"
    assert all(op["baseInstantTime"] == "20260307162557587" for op in ops.values())
    meta = table.timeline.metadata(inst)
    assert meta.compacted and meta.operation_type == "COMPACT"
    assert {st.file_id: st.prev_commit for st in meta.write_stats} == \
        {fid: "20260307162557587" for fid in ops}
    assert all(st.path.endswith(f"_{FIXTURE_COMPACTION}.parquet") for st in meta.write_stats)
    # the delta commits of the plan completed before the compaction was requested (v8+ slicing)
    for op in ops.values():
        for name in op["deltaFilePaths"]:
            delta = name.split("_")[1].split(".")[0]
            assert table.timeline.completion_time(delta) < FIXTURE_COMPACTION


def test_our_compaction_plan_has_hudis_fields(tmp_path, fixture_tables):
    hudi_plan = hudi.open_table(str(fixture_tables(FIXTURE))).timeline.plan(FIXTURE_COMPACTION)
    path = tmp_path / "t"
    mor_history(path, 8)
    t = hudi.open_table(str(path))
    inst = schedule_compaction(t.storage, t.config)
    ours = hudi.open_table(str(path)).timeline.plan(inst)
    assert _keys(ours) == _keys(hudi_plan)
    assert _keys(ours["operations"][0]) == _keys(hudi_plan["operations"][0])
    assert _keys(ours["operations"][0]["metrics"]) == _keys(hudi_plan["operations"][0]["metrics"])
    for key in ("version", "strategy", "preserveHoodieMetadata", "missingSchedulePartitions", "extraMetadata"):
        assert ours[key] == hudi_plan[key], key
    # the completed commit metadata decodes with Hudi's schema, stats with Hudi's fields
    done = run_compaction(t.storage, t.config)
    meta = hudi.open_table(str(path)).timeline.metadata(done).raw
    hudi_meta = hudi.open_table(str(fixture_tables(FIXTURE))).timeline.metadata(FIXTURE_COMPACTION).raw
    assert _keys(meta) == _keys(hudi_meta)
    ours_stat = next(iter(meta["partitionToWriteStats"].values()))[0]
    hudi_stat = next(iter(hudi_meta["partitionToWriteStats"].values()))[0]
    assert _keys(ours_stat) == _keys(hudi_stat)
    assert ours_stat["prevBaseFile"] and ours_stat["totalLogFilesCompacted"] >= 1


def test_v6_plan_decodes_with_the_0x_schema(tmp_path):
    path = tmp_path / "t"
    mor_history(path, 6)
    t = hudi.open_table(str(path))
    inst = schedule_compaction(t.storage, t.config)
    raw = t.storage.read_bytes(f"{t.config.timeline_dir}/{inst.timestamp}.compaction.requested")
    import io
    import fastavro
    reader = fastavro.reader(io.BytesIO(raw))
    fields = [f["name"] for f in reader.writer_schema["fields"]]
    assert fields == ["operations", "extraMetadata", "version", "strategy", "preserveHoodieMetadata"]
    assert list(reader)[0]["operations"]
    done = run_compaction(t.storage, t.config)
    text = t.storage.read_bytes(f"{t.config.timeline_dir}/{done.timestamp}.commit").decode()
    assert '"compacted" : true' in text and '"operationType" : "COMPACT"' in text
