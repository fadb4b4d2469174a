"""Clustering on tables we write (COW and MOR, v8 and v6), checked with our reader and hudi-rs
before and after, as of earlier instants, against Apache Hudi's plans in the v9 fixtures, and
the Z-order / Hilbert curves against values derived from Hudi's own functions."""

from __future__ import annotations

import io
import random
import struct

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


# -- the curves, value by value ---------------------------------------------------------------


def test_binary_util_mappings_by_hand():
    """``BinaryUtil``: sign bit flipped for ints/longs, IEEE tricks for doubles, zero-left-padded
    UTF-8 for strings."""
    assert sc.long_to_8(-1) == bytes.fromhex("7fffffffffffffff")
    assert sc.long_to_8(0) == bytes.fromhex("8000000000000000")
    assert sc.int_to_8(1) == bytes.fromhex("0000000080000001")
    assert sc.int_to_8(-2147483648) == bytes.fromhex("0000000000000000")
    assert sc.double_to_8(1.0) == bytes.fromhex("bff0000000000000")
    assert sc.double_to_8(-1.0) == bytes.fromhex("400fffffffffffff")
    assert sc.double_to_8(0.0) == bytes(8)
    assert sc.utf8_to_8("ab") == bytes.fromhex("0000000000006162")
    assert sc.utf8_to_8("abcdefghij") == b"abcdefgh"
    assert sc.byte_to_8(-1) == bytes.fromhex("00000000000000ff")
    assert sc.bytes_to_long(b"\xff" * 8) == -1


def test_zorder_interleaving_by_hand():
    """``BinaryUtil.interleaving`` of intTo8Byte(1) and intTo8Byte(2): bytes 0-3 are zero in
    both (8 zero bytes out), byte 4 is 0x80 in both (bits 1,1 then zeros: c0 00), bytes 5-6
    zero (4 zero bytes), byte 7 is 0x01 / 0x02 (a7=1 at position 14, b6=1 at 13: 00 06)."""
    got = sc.interleaving([sc.int_to_8(1), sc.int_to_8(2)])
    assert got == bytes(8) + bytes.fromhex("c000") + bytes(4) + bytes.fromhex("0006")
    assert sc.interleaving([b"\xf0" + bytes(7), bytes(8)]) == bytes.fromhex("aa00") + bytes(14)
    three = sc.interleaving([b"\x80" + bytes(7), b"\x40" + bytes(7), b"\x20" + bytes(7)])
    assert three[:2] == bytes.fromhex("8880") and three[2:] == bytes(22)   # a0 at 0, b1 at 4, c2 at 8


def test_hilbert_index_matches_the_curve_library():
    """``HilbertCurve.index`` (davidmoten/hilbert-curve, used by ``HilbertCurveUtils``): the
    library's own expected 4x4 grid for bits=2 (indexes-2d-bits-2.txt, row i = index(i, j))
    and its test values index(1, 2) = 7 (bits 2), index(0, 16) = 256 (bits 5)."""
    grid = [[0, 3, 4, 5], [1, 2, 7, 6], [14, 13, 8, 9], [15, 12, 11, 10]]
    assert [[sc.hilbert_index([i, j], 2) for j in range(4)] for i in range(4)] == grid
    assert sc.hilbert_index([1, 2], 2) == 7
    assert sc.hilbert_index([0, 16], 5) == 256
    # 63 bits, as Hudi: a bijection that keeps neighbours on the curve adjacent in space
    pts = {sc.hilbert_index([i, j], 3): (i, j) for i in range(8) for j in range(8)}
    assert sorted(pts) == list(range(64))
    for d in range(63):
        (a, b), (c, e) = pts[d], pts[d + 1]
        assert abs(a - c) + abs(b - e) == 1
    # indexBytes: BigInteger.toByteArray left-padded to 63 bytes
    assert sc.hilbert_index_bytes([0, 1]) == bytes(62) + b"\x01"
    assert len(sc.hilbert_index_bytes([-1, -1])) == 63


def test_vectorised_keys_equal_the_scalar_reference():
    rng = random.Random(3)
    n = 300
    ints = [rng.randint(-2**31, 2**31 - 1) for _ in range(n - 1)] + [None]
    longs = [rng.randint(-2**63, 2**63 - 1) for _ in range(n - 1)] + [None]
    dbls = [rng.uniform(-1e9, 1e9) for _ in range(n - 4)] + [0.0, -0.0, float("nan"), None]
    strs = ["".join(rng.choice("aé€z") for _ in range(rng.randint(0, 12))) for _ in range(n - 1)] + [None]
    bools = [rng.choice([True, False]) for _ in range(n - 1)] + [None]
    table = pa.table({"i": pa.array(ints, pa.int32()), "l": pa.array(longs, pa.int64()),
                      "d": pa.array(dbls, pa.float64()), "s": pa.array(strs, pa.string()),
                      "b": pa.array(bools, pa.bool_())})

    def zbytes(col, v):
        if col == "i":
            return sc.int_to_8(sc.INT_MAX if v is None else v)
        if col == "l":
            return sc.long_to_8(sc.LONG_MAX if v is None else v)
        if col == "d":
            return sc.double_to_8(sc.DOUBLE_MAX if v is None else v)
        if col == "s":
            return sc.utf8_to_8("" if v is None else v)
        return sc.int_to_8(1 if v else 0)

    def hlong(col, v):
        if col == "b":
            return sc.LONG_MAX if v else 0
        if v is None:
            return sc.LONG_MAX
        if col == "d":
            return 0x7FF8000000000000 if v != v else struct.unpack(">q", struct.pack(">d", v))[0]
        if col == "s":
            return sc.bytes_to_long(v.encode())
        return v

    for cols in (["i", "l"], ["d", "s"], ["i", "d", "s", "b"], ["l", "b"]):
        z = sc.zorder_keys([table.column(c) for c in cols])
        h = sc.hilbert_keys([table.column(c) for c in cols])
        width = 63 * len(cols)
        for r in range(n):
            vals = [table.column(c)[r].as_py() for c in cols]
            assert sc.words_to_bytes(z, r) == sc.interleaving([zbytes(c, v) for c, v in zip(cols, vals)])
            got = int.from_bytes(sc.words_to_bytes(h, r), "big") >> (64 * len(h) - width)
            assert got == sc.hilbert_index([hlong(c, v) for c, v in zip(cols, vals)])


def test_other_types_map_like_spark():
    import datetime as dt
    import decimal
    t = pa.table({
        "ts": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999500), None], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(1970, 1, 2), None], pa.date32()),
        "dec": pa.array([decimal.Decimal("-7.9"), None], pa.decimal128(5, 1)),
        "bin": pa.array([b"\x01\x02", None], pa.binary()),
        "small": pa.array([-3, None], pa.int16()),
    })
    z = lambda c: [w.as_py() for w in sc.zorder_word(t.column(c))]  # noqa: E731
    as_long = lambda b: int.from_bytes(b, "big")  # noqa: E731
    assert z("ts") == [as_long(sc.long_to_8(-1)), as_long(sc.long_to_8(sc.LONG_MAX))]   # floor to ms
    assert z("day") == [as_long(sc.long_to_8(86_400_000)), as_long(sc.long_to_8(sc.LONG_MAX))]
    assert z("dec") == [as_long(sc.long_to_8(-7)), as_long(sc.long_to_8(sc.LONG_MAX))]  # longValue truncates
    assert z("bin") == [0x0102, 0]
    assert z("small") == [as_long(sc.int_to_8(-3)), as_long(sc.int_to_8(sc.INT_MAX))]
    h = [w.as_py() for w in sc.hilbert_word(t.column("small"))]
    assert h == [(-3) & sc.MASK64, sc.LONG_MAX]


def test_java_hashmap_column_order():
    assert sc.java_int_hashmap_order([11, 10]) == [10, 11]
    assert sc.java_int_hashmap_order([3, 17]) == [17, 3]          # 17 & 15 = 1 < 3
    assert sc.java_int_hashmap_order([3, 20, 5]) == [3, 20, 5]    # 20 & 15 = 4
    assert sc.java_int_hashmap_order(list(range(20, 7, -1))) == sorted(range(8, 21))  # resized to 32


def test_sort_indices_linear_nulls_first_and_one_column_curve_is_linear():
    t = pa.table({"a": pa.array([3, None, 1, 2], pa.int64()), "b": pa.array([1, 2, 3, 4], pa.int64())})
    assert sc.sort_indices(t, ["a"]).to_pylist() == [1, 2, 3, 0]
    assert sc.sort_indices(t, ["a"], "z-order").to_pylist() == [1, 2, 3, 0]
    z = sc.sort_indices(t, ["a", "b"], "z-order").to_pylist()
    keys = [sc.interleaving([sc.long_to_8(sc.LONG_MAX if a is None else a), sc.long_to_8(b)])
            for a, b in zip(t.column("a").to_pylist(), t.column("b").to_pylist())]
    assert [keys[i] for i in z] == sorted(keys)


def _killed_upsert(path, monkeypatch, rows, version, jobs=None):
    """An upsert stopped after writing its files, before its commit: pending, markers left
    behind (``jobs`` receives its job, for the abort it would have run)."""
    import hudi_format.writer.client as client

    class Killed(BaseException):
        pass

    def die(job, *args, **kwargs):
        if jobs is not None:
            jobs.append(job)
        raise Killed()
    with monkeypatch.context() as m:
        m.setattr(client, "commit_write", die)
        m.setattr(client, "abort_write", lambda job: None)
        with pytest.raises(Killed):
            write(path, rows, version=version)
    pending = hudi.open_table(str(path)).timeline.pending
    assert len(pending) == 1
    return pending[0]


def _planned_groups(t, inst) -> set:
    plan = t.timeline.plan(inst)["clusteringPlan"]
    return {(s["partitionPath"], s["fileId"]) for g in plan["inputGroups"] for s in g["slices"]}


@pytest.mark.parametrize("version", [6, 8])
def test_clustering_leaves_out_file_groups_a_write_in_flight_touches(tmp_path, monkeypatch, version):
    """A write in flight appends to a file group: clustering it would abort that write at its
    commit (or be aborted by it), and in v6 its plan would name a log file the write's rollback
    deletes. The plan leaves such file groups out; the write's rollback then costs nothing."""
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", version)
    before = both(path)
    pending = _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), version)
    t = hudi.open_table(str(path))
    from hudi_format.transaction.markers import read_markers
    touched = set()
    for data, _ in read_markers(t.storage, pending.timestamp):
        part, name = data.rsplit("/", 1)
        touched.add((part, name.lstrip(".").split("_")[0]))
    assert touched
    inst = schedule_clustering(t.storage, t.config, "score",
                               {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    assert inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and not planned & touched
    from hudi_format.services.rollback import rollback
    rollback(t.storage, t.config, pending.timestamp)
    assert run_clustering(t.storage, t.config).timestamp == inst.timestamp
    assert both(path) == before


def test_clustering_aborts_when_a_planned_log_file_is_rolled_back_under_it(tmp_path, monkeypatch):
    """v6 names a log file by its slice, not its writer, so a plan can name the log file of a
    write in flight (one that had not left its marker when the plan was made). When that write
    fails and removes its files while the clustering runs, the file is gone: the clustering
    aborts and drops its plan (a conflict, retried by the next clustering); no row is lost."""
    from hudi_format.services import clustering as cl
    from hudi_format.writer.job import abort_write
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    jobs = []
    _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6, jobs)
    t = hudi.open_table(str(path))
    monkeypatch.setattr(cl, "in_flight_file_groups", lambda ts: set())
    inst = schedule_clustering(t.storage, t.config, "score",
                               {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    plan = hudi.open_table(str(path)).timeline.plan(inst)
    logs = [p for g in plan["clusteringPlan"]["inputGroups"] for s in g["slices"] for p in s["deltaFilePaths"]]
    assert any(posixpath_name(p).startswith(".") for p in logs)
    read_group = cl._read_group

    def rolled_back_meanwhile(*args, **kwargs):
        # after the clustering checked its file groups, before it reads the first of them, the
        # write fails (at its conflict check, say) and removes what it wrote
        if jobs:
            abort_write(jobs.pop())
        return read_group(*args, **kwargs)
    monkeypatch.setattr(cl, "_read_group", rolled_back_meanwhile)
    monkeypatch.setattr(cl.os, "cpu_count", lambda: 1)   # groups one after another
    with pytest.raises(ServiceConflictError, match="is gone .*file not found"):
        run_clustering(t.storage, t.config)
    monkeypatch.undo()
    t = hudi.open_table(str(path))
    assert t.timeline.pending == []
    assert both(path) == before
    assert cluster(t.storage, t.config, "score") is not None
    assert both(path) == before


def posixpath_name(p: str) -> str:
    return p.rsplit("/", 1)[-1]


def test_a_log_only_file_group_of_a_pending_write_is_no_file_slice_v6(tmp_path, monkeypatch):
    """Version 6 names a log file after its slice's base instant; a file group a pending write
    started with log files only (Flink, bucket index) shows the write's own instant there.
    Hudi's view drops a slice whose base instant is not committed (``isFileSliceCommitted``):
    the storage-listed view of the services leaves it out, so no clustering plans it (its
    blocks would be read as nothing, and the write's rollback deletes the file under the plan)."""
    import shutil
    from hudi_format.services import clustering as cl
    from hudi_format.transaction.snapshot import TableSnapshot
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    pending = _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6)
    t = hudi.open_table(str(path))
    mine = next(path.rglob(".*.log.*"))
    orphan_id = "ffffffff-0000-0000-0000-000000000000-0"
    shutil.copy(mine, mine.with_name(f".{orphan_id}_{pending.timestamp}.log.1_0-1-0"))
    listed = {s.file_id for s in TableSnapshot(t.storage, t.config).latest_slices()}
    assert listed and orphan_id not in listed
    assert both(path) == before
    monkeypatch.setattr(cl, "in_flight_file_groups", lambda ts: set())   # no marker names it
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    assert inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and orphan_id not in {fid for _, fid in planned}


@pytest.mark.parametrize("version", [6, 8])
def test_a_write_in_flight_on_a_planned_group_neither_aborts_the_clustering_nor_commits(tmp_path, monkeypatch,
                                                                                      version):
    """A write planned before the clustering was, writes its log file into a planned file
    group (v6 names it after the slice, so storage lists it in the slice) and is still in
    flight when the clustering runs. The clustering checks its groups against what is
    *committed*: a file a pending write's marker names is no change, so the clustering
    completes; the write then loses its commit-time conflict check and leaves nothing. Before,
    the clustering saw a changed slice and aborted too: both lost (the v6 soak's aborted
    clusterings)."""
    import hudi_format.writer.client as client
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", version)
    before = both(path)
    t = hudi.open_table(str(path))
    real_write, real_commit, clustering = client.WriteClient._write_buckets, client.commit_write, []

    def schedule_then_write(self, job, buckets):      # the write has planned; no file written yet
        clustering.append(schedule_clustering(t.storage, t.config, "score",
                                              {"hoodie.clustering.plan.strategy.max.num.groups": "30"}))
        return real_write(self, job, buckets)

    def cluster_then_commit(job, results, *a, **k):   # its files written, the write still pending
        mine = {(r.partition, r.stat.file_id) for r in results}
        assert mine & _planned_groups(hudi.open_table(str(path)), clustering[0])
        clustering.append(run_clustering(t.storage, t.config, clustering[0].timestamp))
        return real_commit(job, results, *a, **k)
    monkeypatch.setattr(client.WriteClient, "_write_buckets", schedule_then_write)
    monkeypatch.setattr(client, "commit_write", cluster_then_commit)
    with pytest.raises(hudi.ConcurrentWriteError, match="conflicts with"):
        write(path, make_rows(range(0, 2), ts=70, seed=7), version=version)
    after = hudi.open_table(str(path))
    assert clustering[1] is not None and after.timeline.pending == []
    assert clustering[1].timestamp in {i.timestamp for i in after.timeline.completed}
    assert both(path) == before


def test_a_write_beginning_while_a_clustering_plans_is_left_out_of_the_plan(tmp_path, monkeypatch):
    """A write that begins after the clustering listed the timeline but before it listed the
    file slices (v6: its log file is then in the slice the plan would name) is seen by the
    pending writes and markers listed after the slices, and its file groups are left out."""
    from hudi_format.transaction.markers import read_markers
    from hudi_format.transaction.snapshot import TableSnapshot
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    real, began = TableSnapshot.latest_slices, []

    def begin_a_write_then_list(self, *a, **k):
        if not began:
            began.append(None)
            began.append(_killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6))
        return real(self, *a, **k)
    monkeypatch.setattr(TableSnapshot, "latest_slices", begin_a_write_then_list)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    touched = {(data.rsplit("/", 1)[0], posixpath_name(data).lstrip(".").split("_")[0])
               for data, _ in read_markers(t.storage, began[1].timestamp)}
    assert touched and inst is not None
    planned = _planned_groups(hudi.open_table(str(path)), inst)
    assert planned and not planned & touched


def test_a_write_aborting_while_a_clustering_plans_is_left_out_of_the_plan(tmp_path, monkeypatch):
    """A write in flight whose files the clustering listed in its slices, and which aborted
    (files, then instant and markers removed) before the clustering listed the writes in
    flight: its file is gone, so its file group is left out of the plan, instead of a plan
    naming a file that is not there (the clustering then aborted when it ran: the v6 soak)."""
    from hudi_format.transaction.snapshot import TableSnapshot
    from hudi_format.writer.job import abort_write
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    jobs = []
    _killed_upsert(path, monkeypatch, make_rows(range(0, 2), ts=70, seed=7), 6, jobs)
    real = TableSnapshot.latest_slices

    def list_then_abort_the_write(self, *a, **k):
        listed = real(self, *a, **k)
        if jobs:
            abort_write(jobs.pop())
        return listed
    monkeypatch.setattr(TableSnapshot, "latest_slices", list_then_abort_the_write)
    t = hudi.open_table(str(path))
    inst = schedule_clustering(t.storage, t.config, "score", {"hoodie.clustering.plan.strategy.max.num.groups": "30"})
    monkeypatch.setattr(TableSnapshot, "latest_slices", real)
    assert not jobs and inst is not None
    assert run_clustering(t.storage, t.config, inst.timestamp) is not None
    assert both(path) == before


def test_a_write_in_flight_aborting_while_the_clustering_reads_does_not_abort_it(tmp_path, monkeypatch):
    """The clustering reads the files its plan names (with today's sizes), not a log file a
    write in flight added to a planned group since: that write may abort and remove it while
    the clustering reads (v6 soak: "a file it planned to rewrite is gone")."""
    import hudi_format.writer.client as client
    from hudi_format.services import clustering as cl
    path = tmp_path / "t"
    small_files(path, "MERGE_ON_READ", 6)
    before = both(path)
    t = hudi.open_table(str(path))
    real_write, real_commit, real_read, clustering = client.WriteClient._write_buckets, client.commit_write, \
        cl._read_group, []

    def schedule_then_write(self, job, buckets):
        clustering.append(schedule_clustering(t.storage, t.config, "score",
                                              {"hoodie.clustering.plan.strategy.max.num.groups": "30"}))
        return real_write(self, job, buckets)

    def cluster_then_commit(job, results, *a, **k):
        mine = [r.stat.path for r in results]

        def abort_then_read(*ra, **rk):      # the write gives up while the clustering reads
            for rel in mine:
                if t.storage.exists(rel):
                    t.storage.delete(rel)
            return real_read(*ra, **rk)
        monkeypatch.setattr(cl, "_read_group", abort_then_read)
        clustering.append(run_clustering(t.storage, t.config, clustering[0].timestamp))
        return real_commit(job, results, *a, **k)
    monkeypatch.setattr(client.WriteClient, "_write_buckets", schedule_then_write)
    monkeypatch.setattr(client, "commit_write", cluster_then_commit)
    with pytest.raises(hudi.ConcurrentWriteError, match="conflicts with"):
        write(path, make_rows(range(0, 2), ts=70, seed=7), version=6)
    assert clustering[1] is not None and hudi.open_table(str(path)).timeline.pending == []
    assert both(path) == before
