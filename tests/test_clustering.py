"""Clustering on tables we write (COW and MOR, v8 and v6), checked with our reader and hudi-rs
before and after, as of earlier instants, against Apache Hudi's plans in the v9 fixtures, and
the Z-order / Hilbert curves against values derived from Hudi's own functions (test_space_curves.py;
clustering beside writes in flight: test_clustering_concurrency.py)."""

from __future__ import annotations

import io
import random

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.errors import InvalidOptionError, UnsupportedFeatureError
from hudi_format.services import (ServiceConflictError, cluster, run_clustering,
                                  schedule_clustering, schedule_compaction)
from hudi_format.services import space_curves as sc
from hudi_format.timeline import State
from test_compaction import (FIXTURE, FIXTURE_CLUSTERING, both, bounds, history, timeline_files,
                             write)
from writemodel import make_rows

LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]


def _ids(layout):
    return f"{layout[0]}-v{layout[1]}"


def small_files(path, table_type, version, batches=4):
    """``batches`` bulk inserts (one small file group per partition each) and an upsert."""
    instants = [write(path, make_rows(range(i * 30, i * 30 + 30), ts=i), op="bulk_insert",
                      table_type=table_type, version=version) for i in range(batches)]
    instants.append(write(path, make_rows(range(0, 60, 4), ts=9, seed=1), table_type=table_type, version=version))
    return instants


def base_files(path):
    t = hudi.open_table(str(path))
    return {s.file_id: s for s in t.file_slices()}, t


def read_file(table, rel) -> pa.Table:
    return pq.read_table(table.storage.full(rel))


def is_sorted(values) -> bool:
    return all(a <= b for a, b in zip(values, values[1:]))


@pytest.mark.parametrize("layout", LAYOUTS, ids=_ids)
def test_clustering_rewrites_small_file_groups_sorted(tmp_path, layout):
    table_type, version = layout
    path = tmp_path / "t"
    instants = small_files(path, table_type, version)
    before = both(path)
    recorded = history(path, instants)
    old, t = base_files(path)
    meta = {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in t.read().to_pylist()}
    old_rows = {fid: t.storage.size(s.base_file) and pq.read_metadata(t.storage.full(s.base_file)).num_rows
                for fid, s in old.items() if s.base_file}
    assert len(old) >= 12

    b = bounds(path, instants)
    incremental = [canonical_rows(t.read_incremental(x, y).drop_columns(["_hoodie_file_name"]))
                   for x, y in zip(["0"] + b, b)]

    done = cluster(t.storage, t.config, sort_by="score")
    assert done is not None and done.action == "replacecommit" and done.is_completed
    t2 = hudi.open_table(str(path))
    assert [canonical_rows(t2.read_incremental(x, y).drop_columns(["_hoodie_file_name"]))
            for x, y in zip(["0"] + b, b)] == incremental
    assert t2.read_incremental(b[-1], bounds(path, [done])[0]).num_rows == 0

    assert both(path) == before
    for b, rows in recorded.items():
        assert both(path, b) == rows
    new, t = base_files(path)
    assert not set(new) & set(old), "replaced file groups are gone from reads"
    assert len(new) == 3, "one file group per partition"
    assert min(pq.read_metadata(t.storage.full(s.base_file)).num_rows for s in new.values()) > max(old_rows.values())
    rows = t.read().to_pylist()
    assert {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in rows} == meta
    for s in new.values():
        assert not s.log_files and s.base_instant == done.timestamp
        data = read_file(t, s.base_file)
        assert is_sorted(data.column("score").to_pylist())
        assert set(data.column("_hoodie_file_name").to_pylist()) == {s.base_file_name}

    files = timeline_files(path)
    pending_action = "clustering" if version >= 8 else "replacecommit"
    assert f"{done.timestamp}.{pending_action}.requested" in files
    assert f"{done.timestamp}.{pending_action}.inflight" in files
    assert (f"{done.timestamp}_{done.completion_time}.replacecommit" if version >= 8
            else f"{done.timestamp}.replacecommit") in files
    requested = t.timeline.plan(done.timestamp)
    assert requested["operationType"] == "CLUSTER"
    plan = requested["clusteringPlan"]
    assert plan["strategy"]["strategyClassName"] == \
        "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
    assert plan["strategy"]["strategyParams"] == {"hoodie.clustering.plan.strategy.sort.columns": "score"}
    assert plan["preserveHoodieMetadata"] is True
    planned = {s["fileId"] for g in plan["inputGroups"] for s in g["slices"]}
    assert planned == set(old)
    for g in plan["inputGroups"]:
        assert len({s["partitionPath"] for s in g["slices"]}) == 1
        assert g["numOutputFileGroups"] == 1
    md = t.timeline.metadata(done)
    assert md.operation_type == "CLUSTER" and md.schema
    assert md.replaced_file_ids == {(s.partition_path, fid) for fid, s in old.items()}
    assert {st.file_id for st in md.write_stats} == set(new)
    assert all(st.prev_commit is None and st.num_inserts == st.num_writes for st in md.write_stats)
    assert sum(st.num_writes for st in md.write_stats) == len(rows)


def test_target_file_size_cuts_sorted_runs(tmp_path):
    path = tmp_path / "t"
    small_files(path, "COPY_ON_WRITE", 8)
    before = both(path)
    old, t = base_files(path)
    size = max(s.base_file_size for s in old.values())
    opts = {"hoodie.clustering.plan.strategy.target.file.max.bytes": int(size * 1.5)}
    inst = schedule_clustering(t.storage, t.config, ["n"], opts)
    plan = hudi.open_table(str(path)).timeline.plan(inst)["clusteringPlan"]
    for g in plan["inputGroups"]:
        assert g["numOutputFileGroups"] == -(-sum(old[s["fileId"]].base_file_size for s in g["slices"]) // int(size * 1.5))
    run_clustering(t.storage, t.config, inst, opts)
    assert both(path) == before
    new, t = base_files(path)
    by_part = {}
    for s in new.values():
        by_part.setdefault(s.partition_path, []).append(read_file(t, s.base_file).column("n").to_pylist())
    for part, runs in by_part.items():
        assert len(runs) == 3, part
        runs.sort(key=lambda r: r[0])
        for run in runs:
            assert run and is_sorted(run)
        for a, b in zip(runs, runs[1:]):
            assert a[-1] <= b[0], "files of a group hold contiguous ranges"


def test_plan_limits_and_eligibility(tmp_path):
    path = tmp_path / "t"
    small_files(path, "COPY_ON_WRITE", 8)
    old, t = base_files(path)
    size = max(s.base_file_size for s in old.values())
    # nothing is small
    assert schedule_clustering(t.storage, t.config, options={
        "hoodie.clustering.plan.strategy.small.file.limit": 1000}) is None
    # one slice per group; lone slices not wanted (no sort columns) -- Hudi only drops the
    # last group of a partition for that, the groups closed when full stay
    one = schedule_clustering(t.storage, t.config, options={
        "hoodie.clustering.plan.strategy.max.bytes.per.group": int(size * 1.2),
        "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "false"})
    plan = hudi.open_table(str(path)).timeline.plan(one)["clusteringPlan"]
    per_part = {}
    for s in old.values():
        per_part[s.partition_path] = per_part.get(s.partition_path, 0) + 1
    assert [len(g["slices"]) for g in plan["inputGroups"]] == [1] * sum(n - 1 for n in per_part.values())
    from hudi_format.timeline import TimelineWriter
    TimelineWriter(t.storage, t.config).delete_instant_files(one)
    inst = schedule_clustering(t.storage, t.config, options={
        "hoodie.clustering.plan.strategy.max.bytes.per.group": int(size * 2.5),
        "hoodie.clustering.plan.strategy.max.num.groups": 2,
        "hoodie.clustering.plan.strategy.partition.selected": "b,c"})
    plan = hudi.open_table(str(path)).timeline.plan(inst)["clusteringPlan"]
    assert len(plan["inputGroups"]) == 2
    assert [len(g["slices"]) for g in plan["inputGroups"]] == [2, 2]
    assert {s["partitionPath"] for g in plan["inputGroups"] for s in g["slices"]} == {"b"}
    sizes = [[old[s["fileId"]].base_file_size for s in g["slices"]] for g in plan["inputGroups"]]
    flat = [x for g in sizes for x in g]
    assert flat == sorted(flat, reverse=True), "biggest slices are packed first"


@pytest.mark.parametrize("layout_strategy", ["z-order", "hilbert"])
def test_space_curve_clustering_orders_rows_along_the_curve(tmp_path, layout_strategy):
    path = tmp_path / "t"
    import datetime as dt
    rng = random.Random(7)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    for b in range(3):
        rows = make_rows(range(b * 40, b * 40 + 40), ts=b)
        ts = pa.array([rng.randint(-500, 500) for _ in range(rows.num_rows)], pa.int64())
        when = pa.array([epoch + dt.timedelta(milliseconds=rng.randint(0, 1000)) for _ in range(rows.num_rows)],
                        pa.timestamp("us", tz="UTC"))
        rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", ts)
        rows = rows.set_column(rows.schema.get_field_index("when"), "when", when)
        write(path, rows, op="bulk_insert", table_type="COPY_ON_WRITE")
    before = both(path)
    t = hudi.open_table(str(path))
    done = cluster(t.storage, t.config, sort_by=["when", "ts"],
                   options={"hoodie.layout.optimize.strategy": layout_strategy})
    assert both(path) == before
    t = hudi.open_table(str(path))
    plan = t.timeline.plan(done.timestamp)["clusteringPlan"]
    assert plan["strategy"]["strategyParams"]["hoodie.layout.optimize.strategy"] == layout_strategy
    # Hudi feeds the columns by schema position (HashMap<Integer, ...>): ts (6) before when (12)
    assert sc.hudi_column_order(t.schema(), ["when", "ts"]) == ["ts", "when"]
    for s in t.file_slices():
        data = read_file(t, s.base_file)
        millis = [(w - epoch) // dt.timedelta(milliseconds=1) for w in data.column("when").to_pylist()]
        pairs = list(zip(data.column("ts").to_pylist(), millis))
        if layout_strategy == "z-order":
            keys = [sc.interleaving([sc.long_to_8(x), sc.long_to_8(y)]) for x, y in pairs]
        else:
            keys = [sc.hilbert_index_bytes([x, y]) for x, y in pairs]
        assert is_sorted(keys), "rows follow the curve"
        assert not is_sorted([x for x, _ in pairs]) and not is_sorted([y for _, y in pairs]), \
            "a curve order is not a linear order of either column"


def test_pending_clustering_rejects_updates_to_its_file_groups(tmp_path):
    """As Hudi's default update strategy: while clustering is pending, an update to its file
    groups is refused (and writes nothing); once clustering completes, the update goes in."""
    path = tmp_path / "t"
    small_files(path, "COPY_ON_WRITE", 8)
    before = both(path)
    t = hudi.open_table(str(path))
    pending = schedule_clustering(t.storage, t.config, "score")
    assert pending.action == "clustering" and pending.state is State.REQUESTED
    assert both(path) == before
    with pytest.raises(hudi.ConcurrentWriteError, match="being clustered"):
        write(path, make_rows(range(0, 6), ts=50, seed=5), table_type="COPY_ON_WRITE")
    assert both(path) == before
    assert run_clustering(t.storage, t.config).timestamp == pending.timestamp
    write(path, make_rows(range(0, 6), ts=50, seed=5), table_type="COPY_ON_WRITE")
    assert {r["id"]: r["ts"] for r in both(path)}["k00003"] == 50


def test_pending_clustering_aborts_on_an_update_it_did_not_see(tmp_path, monkeypatch):
    """A writer that ignores pending clustering (another engine) updates a clustered file
    group: the clustering aborts, drops its plan and loses nothing."""
    from hudi_format.writer.planning import WritePlanner
    path = tmp_path / "t"
    small_files(path, "COPY_ON_WRITE", 8)
    t = hudi.open_table(str(path))
    pending = schedule_clustering(t.storage, t.config, "score")
    from hudi_format.transaction import conflicts
    # neither at planning nor at its commit does this writer look at pending clustering
    monkeypatch.setattr(WritePlanner, "reject_clustered", staticmethod(lambda plan, groups: None))
    monkeypatch.setattr(conflicts, "clustering_plan_groups", lambda timeline, inst: None)
    write(path, make_rows(range(0, 6), ts=50, seed=5), table_type="COPY_ON_WRITE")
    after_update = both(path)
    with pytest.raises(ServiceConflictError, match="written to after the clustering was planned"):
        run_clustering(t.storage, t.config)
    t = hudi.open_table(str(path))
    assert t.timeline.pending == [] and not any(pending.timestamp in f for f in timeline_files(path))
    assert not [f for p in t._view.partitions() for f in t.storage.list(p) if pending.timestamp in f.name]
    assert both(path) == after_update
    assert {r["id"]: r["ts"] for r in after_update}["k00003"] == 50
    # the next clustering plans afresh and completes
    assert cluster(t.storage, t.config, "score") is not None
    assert both(path) == after_update


def test_pending_clustering_holds_its_file_groups_from_compaction(tmp_path):
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 8)
    before = both(path)
    t = hudi.open_table(str(path))
    pending = schedule_clustering(t.storage, t.config)
    assert schedule_compaction(t.storage, t.config) is None      # every file group is being clustered
    done = run_clustering(t.storage, t.config, pending.timestamp)
    assert done.timestamp == pending.timestamp and both(path) == before
    assert all(not s.log_files for s in hudi.open_table(str(path)).file_slices())


def test_clustering_without_preserving_commit_metadata(tmp_path):
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    t = hudi.open_table(str(path))
    done = cluster(t.storage, t.config, options={"hoodie.clustering.preserve.commit.metadata": "false"})
    plan = hudi.open_table(str(path)).timeline.plan(done.timestamp)["clusteringPlan"]
    assert plan["preserveHoodieMetadata"] is False
    rows = hudi.open_table(str(path)).read().to_pylist()
    assert {r["_hoodie_commit_time"] for r in rows} == {done.timestamp}
    assert len({r["_hoodie_commit_seqno"] for r in rows}) == len(rows)
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("_hoodie_commit")} for r in rows]  # noqa: E731
    assert canonical_rows(strip(both(path))) == canonical_rows(strip(before))


def test_inline_clustering_waits_for_enough_commits(tmp_path):
    path = tmp_path / "t"
    write(path, make_rows(range(30), ts=1), op="bulk_insert")
    write(path, make_rows(range(30, 60), ts=2), op="bulk_insert")
    t = hudi.open_table(str(path))
    inline = {"hoodie.clustering.inline": "true"}
    assert schedule_clustering(t.storage, t.config, options=inline) is None          # 2 < 4
    done = cluster(t.storage, t.config, options={**inline, "hoodie.clustering.inline.max.commits": 2})
    assert done is not None
    write(path, make_rows(range(60, 90), ts=3), op="bulk_insert")
    t = hudi.open_table(str(path))
    assert schedule_clustering(t.storage, t.config, options={**inline, "hoodie.clustering.inline.max.commits": 2}) is None
    assert schedule_clustering(t.storage, t.config) is not None                      # on demand


def test_clustering_options_are_checked(tmp_path):
    path = tmp_path / "t"
    write(path, make_rows(range(10), ts=1), op="bulk_insert")
    t = hudi.open_table(str(path))
    with pytest.raises(InvalidOptionError, match="unknown column"):
        schedule_clustering(t.storage, t.config, "nope")
    with pytest.raises(InvalidOptionError, match="must be one of"):
        schedule_clustering(t.storage, t.config, options={"hoodie.layout.optimize.strategy": "snake"})
    with pytest.raises(UnsupportedFeatureError, match="sample"):
        schedule_clustering(t.storage, t.config, options={"hoodie.layout.optimize.curve.build.method": "sample"})
    with pytest.raises(UnsupportedFeatureError, match="execution.strategy"):
        schedule_clustering(t.storage, t.config, options={
            "hoodie.clustering.execution.strategy.class": "com.example.Mine"})
    with pytest.raises(InvalidOptionError, match="space curve"):
        schedule_clustering(t.storage, t.config, ["tags", "n"], {"hoodie.layout.optimize.strategy": "z-order"})
    assert hudi.open_table(str(path)).timeline.pending == []


# -- plans against Apache Hudi's --------------------------------------------------------------


@pytest.mark.parametrize("name,instant", [(FIXTURE, FIXTURE_CLUSTERING),
                                          ("sample_table__cow__v9_txns_simple_meta", "20260307162454799")])
def test_fixture_clustering_plan_and_replacecommit(fixture_tables, name, instant):
    table = hudi.open_table(str(fixture_tables(name)))
    inst = table.timeline.get(instant)
    assert inst.action == "replacecommit" and inst.is_completed
    assert f"{instant}.clustering.requested" in timeline_files(fixture_tables(name))
    requested = table.timeline.plan(inst)
    assert requested["operationType"] == "CLUSTER"
    plan = requested["clusteringPlan"]
    assert plan["strategy"]["strategyClassName"] == \
        "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
    assert plan["preserveHoodieMetadata"] is True and plan["version"] == 1
    groups = plan["inputGroups"]
    assert [len(g["slices"]) for g in groups] == [2, 1, 2]
    assert [g["slices"][0]["partitionPath"] for g in groups] == ["region=apac", "region=eu", "region=us"]
    assert all(g["numOutputFileGroups"] == 1 for g in groups)
    planned = {(s["partitionPath"], s["fileId"]) for g in groups for s in g["slices"]}
    meta = table.timeline.metadata(inst)
    assert meta.operation_type == "CLUSTER"
    assert meta.replaced_file_ids == planned
    assert {st.partition_path for st in meta.write_stats} == {"region=apac", "region=eu", "region=us"}
    assert all(st.path.endswith(f"_{instant}.parquet") for st in meta.write_stats)
    # the replaced groups are gone from the latest snapshot, the new ones are read
    live = {s.file_id for s in table.file_slices()}
    assert not live & {fid for _, fid in planned}
    assert {st.file_id for st in meta.write_stats} <= live


def test_our_clustering_plan_has_hudis_fields(tmp_path, fixture_tables):
    hudi_req = hudi.open_table(str(fixture_tables(FIXTURE))).timeline.plan(FIXTURE_CLUSTERING)
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 8)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config)
    ours = hudi.open_table(str(path)).timeline.plan(inst)
    assert set(ours) == set(hudi_req)
    op, hp = ours["clusteringPlan"], hudi_req["clusteringPlan"]
    assert set(op) == set(hp)
    assert set(op["inputGroups"][0]) == set(hp["inputGroups"][0])
    assert set(op["inputGroups"][0]["slices"][0]) == set(hp["inputGroups"][0]["slices"][0])
    assert set(op["inputGroups"][0]["metrics"]) == set(hp["inputGroups"][0]["metrics"])
    assert set(op["strategy"]) == set(hp["strategy"])
    for key in ("version", "preserveHoodieMetadata", "missingSchedulePartitions", "extraMetadata"):
        assert op[key] == hp[key], key
    assert ours["operationType"] == hudi_req["operationType"] and ours["version"] == hudi_req["version"]
    assert op["inputGroups"][0]["slices"][0]["dataFilePath"].startswith("file:/")
    done = run_clustering(t.storage, t.config)
    meta = hudi.open_table(str(path)).timeline.metadata(done).raw
    hudi_meta = hudi.open_table(str(fixture_tables(FIXTURE))).timeline.metadata(FIXTURE_CLUSTERING).raw
    # Hudi 1.1's HoodieReplaceCommitMetadata also has "compacted"; the bundled schema does not
    assert set(meta) <= set(hudi_meta) and set(hudi_meta) - set(meta) <= {"compacted"}
    assert set(next(iter(meta["partitionToWriteStats"].values()))[0]) == \
        set(next(iter(hudi_meta["partitionToWriteStats"].values()))[0])


def test_v6_clustering_plan_uses_the_0x_schema(tmp_path, fixture_tables):
    """Hudi 0.x's HoodieClusteringPlan has no missingSchedulePartitions; its groups have
    extraMetadata (as the v6 fixtures' replacecommit plans show)."""
    v6 = fixture_tables("sample_table__cow__v6_simplekeygen_nonhivestyle_overwritetable")
    raw = (v6 / ".hoodie" / "20240707001303088.replacecommit.requested").read_bytes()
    hudi_schema = fastavro.reader(io.BytesIO(raw)).writer_schema
    path = tmp_path / "t"
    small_files(path, "COPY_ON_WRITE", 6)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config)
    ours = fastavro.reader(io.BytesIO(t.storage.read_bytes(f".hoodie/{inst.timestamp}.replacecommit.requested")))

    def names(schema):
        out = {}

        def walk(node):
            if isinstance(node, dict):
                if node.get("type") == "record":
                    out[node["name"].rsplit(".", 1)[-1]] = [f["name"] for f in node["fields"]]
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(schema)
        return out
    assert names(ours.writer_schema) == names(hudi_schema)
    assert list(ours)[0]["clusteringPlan"]["inputGroups"]
