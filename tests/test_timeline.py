"""The active timeline against tables and payloads written by Apache Hudi (0.14/0.15, 1.0, 1.1)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURE_TABLES, UNITS, expected
from hudi_format.config import TableConfig
from hudi_format.errors import TimelineError
from hudi_format.storage import Storage
from hudi_format.timeline import (CommitMetadata, Instant, State, Timeline, decode_commit_metadata,
                                  decode_payload, encode_avro, format_file_name,
                                  format_instant_time, instant_file_name, parse_file_name,
                                  schema_json)

TIMELINE_UNITS = UNITS / "timeline"
COMMIT_UNITS = UNITS / "commit_metadata"


def _timeline(path: Path) -> Timeline:
    return Timeline.load(Storage(str(path)))


def _table(fixture_tables, name: str) -> Timeline:
    return _timeline(fixture_tables(name))


# -- every fixture table ------------------------------------------------------------------------
@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_write_instants_match_expected(fixture_tables, name):
    tl = _table(fixture_tables, name)
    got = [{"timestamp": i.timestamp, "completion_time": i.completion_time, "action": i.action}
           for i in tl.write_instants()]
    assert got == expected(name)["completed_write_instants"]
    assert not tl.archive_loaded  # nothing reached before the active timeline


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_every_payload_decodes(fixture_tables, name):
    tl = _table(fixture_tables, name)
    for inst in tl.instants:
        if inst.is_write:
            md = tl.metadata(inst)
            assert md.write_stats, f"{inst} wrote no files"
            assert json.loads(md.schema)["type"] == "record"
        elif inst.is_completed:
            assert isinstance(tl.raw_metadata(inst), dict)
        assert isinstance(tl.plan(inst), dict)


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_file_names_round_trip(fixture_tables, name):
    base = fixture_tables(name)
    config = TableConfig.load(Storage(str(base)))
    names = [p.name for p in (base / config.timeline_dir).iterdir()
             if p.is_file() and not p.name.startswith("hoodie.properties")]
    for file_name in names:
        inst = parse_file_name(file_name, config.version)
        assert inst.file_name == file_name
        assert instant_file_name(inst, config.version) == file_name


def test_v6_layout_and_queries(fixture_tables):
    tl = _table(fixture_tables, "sample_table__cow__v6_simplekeygen_nonhivestyle_overwritetable")
    assert tl.table_version == 6 and tl.timeline_dir == ".hoodie"
    assert [(i.timestamp, i.action, i.state) for i in tl.instants] == [
        ("20240707001301554", "commit", State.COMPLETED),
        ("20240707001302376", "commit", State.COMPLETED),
        ("20240707001303088", "replacecommit", State.COMPLETED)]
    assert all(i.completion_time is None for i in tl.instants)
    first = tl.instants[0]
    assert first.file_name == "20240707001301554.commit"
    assert tl.file_path(first, State.INFLIGHT) == ".hoodie/20240707001301554.inflight"
    assert tl.file_path(first, State.REQUESTED) == ".hoodie/20240707001301554.commit.requested"
    assert tl.files_of("20240707001303088") == {
        State.REQUESTED: "20240707001303088.replacecommit.requested",
        State.INFLIGHT: "20240707001303088.replacecommit.inflight",
        State.COMPLETED: "20240707001303088.replacecommit"}
    assert tl.completion_time("20240707001302376") == "20240707001302376"  # v6: the instant time
    assert tl.is_completed("20240707001302376")
    assert not tl.is_completed("20240707001302377")
    assert tl.get("20240707001302377") is None
    assert tl.latest_completed_write().timestamp == "20240707001303088"
    in_range = tl.instants_in_range("20240707001301554", "20240707001303088")
    assert [i.timestamp for i in in_range] == ["20240707001302376", "20240707001303088"]
    # before the first active instant: the (empty) archive is consulted, lazily
    assert not tl.archive_loaded
    assert not tl.is_completed("20200101000000000")
    assert tl.archive_loaded
    assert [i.timestamp for i in tl.instants_in_range(None, "20240707001302376")] == [
        "20240707001301554", "20240707001302376"]


def test_v9_layout_and_queries(fixture_tables):
    tl = _table(fixture_tables, "sample_table__mor__avro__v9_txns_simple_meta")
    assert tl.timeline_dir == ".hoodie/timeline"
    # compaction completes as a commit, clustering as a replacecommit, indexing stays
    assert str(tl.get("20260307162618152")) == \
        "[20260307162618152__commit__COMPLETED__20260307162619230]"
    assert tl.get("20260307162619269").action == "replacecommit"
    assert tl.get("20260307162621933").action == "indexing"
    assert tl.get("20260307162621933", action="commit") is None
    assert tl.completion_time("20260307162557587") == "20260307162601961"
    assert tl.get("20260307162618152").file_name == "20260307162618152_20260307162619230.commit"
    assert tl.file_path("20260307162618152", State.REQUESTED) == \
        ".hoodie/timeline/20260307162618152.compaction.requested"
    assert [i.action for i in tl.completed][-2:] == ["indexing", "indexing"]
    assert tl.pending == []
    assert tl.latest_completed_write().timestamp == "20260307162620509"
    window = tl.instants_in_range("20260307162616433", "20260307162620442")
    assert [(i.timestamp, i.action) for i in window] == [
        ("20260307162616932", "deltacommit"), ("20260307162618152", "commit"),
        ("20260307162619269", "replacecommit")]
    assert [i.action for i in tl.instants_in_range("20260307162620442", None, actions=None)] == [
        "deltacommit", "indexing", "indexing"]
    assert not tl.archive_loaded


def test_compaction_and_clustering_plans_decode(fixture_tables):
    tl = _table(fixture_tables, "sample_table__mor__avro__v9_txns_simple_meta")
    compaction = tl.plan("20260307162618152")
    assert [(op["fileId"], op["baseInstantTime"], op["partitionPath"]) for op in compaction["operations"]] == [
        ("3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0", "20260307162557587", "region=us"),
        ("c3b646cc-8602-47c5-b010-3fe002241298-0", "20260307162557587", "region=apac")]
    assert compaction["operations"][0]["deltaFilePaths"] == [
        ".3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0_20260307162604102.log.1_0-52-126",
        ".3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0_20260307162606034.log.1_0-78-180"]
    clustering = tl.plan("20260307162619269")
    assert clustering["operationType"] == "CLUSTER"
    groups = clustering["clusteringPlan"]["inputGroups"]
    assert len(groups) == 3
    assert {s["fileId"] for s in groups[0]["slices"]} == {
        "4961954a-a3bc-4dce-9a77-e68f3f344913-0", "c3b646cc-8602-47c5-b010-3fe002241298-0"}
    # the completed clustering's metadata lists the file groups it replaced
    replaced = tl.metadata("20260307162619269").replaced_file_ids
    assert {f for g in groups for f in (s["fileId"] for s in g["slices"])} == {f for _, f in replaced}
    # every compaction/clustering plan in the v9 fixtures decodes
    for name in FIXTURE_TABLES:
        if "__v9_" not in name:
            continue
        t = _table(fixture_tables, name)
        for inst in t.instants:
            requested = t.files_of(inst).get(State.REQUESTED, "")
            if requested.endswith(".compaction.requested"):
                assert t.plan(inst)["operations"]
            elif requested.endswith(".clustering.requested"):
                assert t.plan(inst)["clusteringPlan"]["inputGroups"]


def test_rollback_fixture(fixture_tables):
    tl = _table(fixture_tables, "sample_table__mor__avro__v9_nonpartitioned_rollback")
    rb = tl.get("20260403184259077")
    assert (rb.action, rb.completion_time) == ("rollback", "20260403184300219")
    meta = tl.raw_metadata(rb)
    assert meta["commitsRollback"] == ["20260403184242950"]
    # the payload carries a field the bundled schema lacks: read with the writer schema
    assert "logFilesFromFailedCommit" in meta["partitionMetadata"][""]
    assert tl.plan(rb)["instantToRollback"] == {"commitTime": "20260403184242950", "action": "deltacommit"}
    assert tl.rolled_back_instants() == {"20260403184242950"}
    with pytest.raises(TimelineError, match="rollback, which has no commit metadata"):
        tl.metadata(rb)


@pytest.mark.parametrize("name", [n for n in FIXTURE_TABLES if "overwrite" in n])
def test_replacecommit_lists_replaced_file_groups(fixture_tables, name):
    tl = _table(fixture_tables, name)
    *writes, overwrite = tl.write_instants()
    assert overwrite.action == "replacecommit"
    md = tl.metadata(overwrite)
    assert md.operation_type == "INSERT_OVERWRITE_TABLE"
    written_before = {(p, s.file_id) for w in writes for p, stats in tl.metadata(w).partition_to_write_stats.items()
                      for s in stats}
    assert md.replaced_file_ids == written_before  # insert_overwrite_table replaces every file group
    assert all(ids for ids in md.partition_to_replace_file_ids.values())
    assert tl.plan(overwrite) == {"operationType": None, "clusteringPlan": None,
                                  "extraMetadata": None, "version": None}


def test_v6_overwrite_replaced_ids(fixture_tables):
    tl = _table(fixture_tables, "sample_table__cow__v6_simplekeygen_nonhivestyle_overwritetable")
    md = tl.metadata("20240707001303088")
    assert md.partition_to_replace_file_ids == {
        "30": ["d398fae1-c0e6-4098-8124-f55f7098bdba-0"],
        "20": ["88163884-fef0-4aab-865d-c72327a8a1d5-0"],
        "10": ["4f2685a3-614f-49ca-9b2b-e1cb9fb61f27-0"]}


def test_metadata_table_timelines(fixture_tables):
    """The metadata tables of v9 fixtures are more real v9 timelines (deltacommits, compaction)."""
    base = fixture_tables("sample_table__cow__v9_txns_complex_meta") / ".hoodie" / "metadata"
    tl = _timeline(base)
    assert [i.timestamp for i in tl.instants[:5]] == [f"0000000000000000{d}" for d in range(5)]
    assert tl.completion_time("00000000000000001") == "20260307162506022"
    compaction = tl.get("20260307162518840")
    assert (compaction.action, compaction.completion_time) == ("commit", "20260307162519508")
    plan = tl.plan(compaction)
    assert plan["operations"] and all(op["partitionPath"] for op in plan["operations"])
    assert tl.metadata(compaction).operation_type == "COMPACT"
    assert all(i.action in ("deltacommit", "commit") for i in tl.write_instants())


# -- units/timeline: small v6 timelines incl. broken payloads ----------------------------------
def _unit(case: str) -> Timeline:
    """A units/timeline case. Four of them ship an empty hoodie.properties (they are hudi-rs
    timeline stubs); their files use the v6 layout, so a minimal v6 config stands in."""
    storage = Storage(str(TIMELINE_UNITS / case))
    if (TIMELINE_UNITS / case / ".hoodie" / "hoodie.properties").read_text().strip():
        return Timeline.load(storage)
    return Timeline.load(storage, TableConfig({"hoodie.table.name": case, "hoodie.table.version": "6"}))


def test_invalid_commit_content_fails_only_when_read():
    tl = _unit("commits_with_invalid_content")
    assert [i.timestamp for i in tl.write_instants()] == ["20240402123035233", "20240402144910683"]
    with pytest.raises(TimelineError, match=r"20240402123035233\.commit: file is empty"):
        tl.metadata("20240402123035233")
    with pytest.raises(TimelineError, match=r"20240402144910683\.commit: metadata must be a JSON object"):
        tl.metadata("20240402144910683")
    assert tl.plan("20240402144910683") == {}  # empty requested and inflight files are normal


def test_empty_json_object_is_empty_metadata():
    tl = _unit("commits_with_empty_commit_metadata")
    md = tl.metadata("20240402144910683")
    assert (md.partition_to_write_stats, md.extra_metadata, md.operation_type, md.schema) == ({}, {}, None, None)


def test_no_schema_and_no_write_stats():
    md = _unit("commits_with_no_schema_and_write_stats").metadata("20240402144910683")
    assert (md.operation_type, md.schema, md.write_stats, md.compacted) == ("BULK_INSERT", None, [], False)


def test_schema_in_commit_metadata():
    md = _unit("commits_with_valid_schema_in_commit_metadata").metadata("20240402144910683")
    schema = json.loads(md.schema)
    assert [f["name"] for f in schema["fields"]] == ["ts", "uuid", "rider", "driver", "fare", "city"]


def test_cow_unit_write_stats_and_inflight_plan():
    tl = _unit("commits_load_schema_from_base_file_cow")
    md = tl.metadata("20250628002223107")
    stat = md.partition_to_write_stats["city=san_francisco"][0]
    assert (stat.file_id, stat.prev_commit, stat.num_inserts, stat.num_writes, stat.total_write_bytes) == (
        "b271b5f8-29df-463d-ba4d-feedbe6e09ed-0", None, 4, 4, 436228)
    assert stat.path == ("city=san_francisco/b271b5f8-29df-463d-ba4d-feedbe6e09ed-0_0-13-35_"
                         "20250628002223107.parquet")
    assert sorted(md.partitions) == ["city=chennai", "city=san_francisco", "city=sao_paulo"]
    # empty requested file, then the bare "<ts>.inflight" with the JSON workload profile
    plan = tl.plan("20250628002223107")
    assert plan["partitionToWriteStats"]["city=san_francisco"][0]["numInserts"] == 4
    assert tl.plan("20250628002223107", State.REQUESTED) == {}


def test_mor_unit_delta_write_stats():
    tl = _unit("commits_load_schema_from_base_file_mor")
    assert [i.action for i in tl.write_instants()] == ["deltacommit", "deltacommit"]
    stat = tl.metadata("20250331030645735").write_stats[0]
    assert stat.prev_commit == "20250331030642808"
    assert stat.base_file == "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet"
    assert stat.log_files == (".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85",)
    assert (stat.num_update_writes, stat.num_inserts, stat.file_size_in_bytes) == (1, 0, 1148)


# -- units/commit_metadata ---------------------------------------------------------------------
def test_v6_json_commit_metadata():
    md = decode_commit_metadata((COMMIT_UNITS / "v6_commit.json").read_bytes(), "v6_commit.json")
    assert md.operation_type == "UPSERT" and md.compacted is False
    (stat,) = md.partition_to_write_stats[""]
    assert (stat.file_id, stat.prev_commit, stat.num_writes, stat.num_update_writes, stat.num_inserts,
            stat.num_deletes, stat.total_write_bytes, stat.file_size_in_bytes, stat.partition_path) == (
        "a079bdb3-731c-4894-b855-abfcd6921007-0", "20240418173550988", 4, 1, 1, 0, 441520, 441520, "")
    assert stat.file_name == "a079bdb3-731c-4894-b855-abfcd6921007-0_0-203-274_20240418173551906.parquet"
    assert stat.runtime_stats["totalUpsertTime"] == 105
    assert json.loads(md.schema)["name"] == "v6_nonpartitioned_record"


def test_v8_avro_deltacommit_metadata():
    md = decode_commit_metadata((COMMIT_UNITS / "v8_deltacommit.avro").read_bytes(), "v8_deltacommit.avro")
    assert md.operation_type == "UPSERT"
    got = {p: [(s.file_id, s.prev_commit, s.num_inserts, s.total_write_bytes) for s in stats]
           for p, stats in md.partition_to_write_stats.items()}
    assert got == {
        "city=san_francisco": [("87a4c895-1f59-4518-972f-27f49a92c7b4-0", None, 4, 436413)],
        "city=sao_paulo": [("f362fd72-680f-4a16-ade8-c3e20bc2026c-0", None, 2, 436216)],
        "city=chennai": [("58fccab1-a55c-4b22-b74e-22b747ad4a44-0", None, 2, 436193)]}
    assert md.write_stats[0].path.endswith("_0-252-389_20250713011913147.parquet")
    assert [f["name"] for f in json.loads(md.schema)["fields"]] == [
        "ts", "uuid", "rider", "driver", "fare", "city"]


def test_corrupt_avro_payload_names_the_source():
    data = (COMMIT_UNITS / "v8_deltacommit.avro").read_bytes()
    with pytest.raises(TimelineError, match="x.deltacommit: cannot decode Avro payload"):
        decode_commit_metadata(data[: len(data) // 2], "x.deltacommit")
    with pytest.raises(TimelineError, match="y.commit: neither Avro nor valid JSON"):
        decode_payload(b"\x00\x01garbage", "y.commit")


def test_avro_round_trip_with_bundled_schema():
    """Payloads encoded with the bundled schemas decode again, with a self-contained schema."""
    original = decode_payload((COMMIT_UNITS / "v8_deltacommit.avro").read_bytes(), "v8")
    original["partitionToWriteStats"]["city=chennai"][0].pop("numUpdates", None)
    again = decode_commit_metadata(encode_avro("HoodieCommitMetadata", original), "re-encoded")
    assert again == CommitMetadata.from_dict(original)
    schema = json.loads(schema_json("HoodieReplaceCommitMetadata"))
    stats = schema["fields"][0]["type"][1]["values"]["items"]
    assert stats["name"] == "org.apache.hudi.avro.model.HoodieWriteStat"  # inlined from another file


# -- file names ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, version, expected_instant", [
    ("20240418173213674.commit", 6, Instant("20240418173213674", "commit", State.COMPLETED)),
    ("20240418173213674.inflight", 6, Instant("20240418173213674", "commit", State.INFLIGHT)),
    ("20240418173213674.commit.requested", 6, Instant("20240418173213674", "commit", State.REQUESTED)),
    ("20240418173213674.deltacommit.inflight", 6, Instant("20240418173213674", "deltacommit", State.INFLIGHT)),
    ("20240101000000.clean", 6, Instant("20240101000000", "clean", State.COMPLETED)),
    ("20250713010139392_20250713010140981.commit", 8,
     Instant("20250713010139392", "commit", State.COMPLETED, "20250713010140981")),
    ("20260307162524292.clustering.requested", 9, Instant("20260307162524292", "clustering", State.REQUESTED)),
    ("00000000000000001_20260307162506022.deltacommit", 9,
     Instant("00000000000000001", "deltacommit", State.COMPLETED, "20260307162506022")),
    ("20240101000000000.savepoint.inflight", 8, Instant("20240101000000000", "savepoint", State.INFLIGHT)),
    ("20240101000000000.commit", 8,  # 0.x name in a v8 timeline: request time stands in
     Instant("20240101000000000", "commit", State.COMPLETED, "20240101000000000")),
])
def test_parse_file_names(name, version, expected_instant):
    assert parse_file_name(name, version) == expected_instant


@pytest.mark.parametrize("name, version", [
    ("hoodie.properties", 6), ("20240101.foo", 8), ("abc.commit", 8), ("20240101.commit.done", 8),
    ("20240101_20240102.commit", 6), ("20240101_20240102.commit.inflight", 8), ("20240101.requested", 8),
    ("20240101.commit.requested.crc", 8), ("", 8)])
def test_garbage_file_names_are_rejected(name, version):
    with pytest.raises(TimelineError):
        parse_file_name(name, version)


def test_format_file_names():
    assert format_file_name("1", "compaction", State.COMPLETED, 9, "2") == "1_2.commit"
    assert format_file_name("1", "logcompaction", State.COMPLETED, 8, "2") == "1_2.deltacommit"
    assert format_file_name("1", "clustering", State.COMPLETED, 8, "2") == "1_2.replacecommit"
    assert format_file_name("1", "clustering", State.INFLIGHT, 8) == "1.clustering.inflight"
    assert format_file_name("1", "compaction", State.COMPLETED, 6) == "1.commit"
    assert format_file_name("1", "commit", State.INFLIGHT, 6) == "1.inflight"
    assert format_file_name("1", "savepoint", State.REQUESTED, 8) == "1.savepoint.inflight"
    with pytest.raises(TimelineError, match="needs a completion time"):
        format_file_name("1", "commit", State.COMPLETED, 8)


def test_format_instant_time():
    import datetime as dt
    assert format_instant_time("20240101000000000") == "20240101000000000"
    assert format_instant_time(dt.datetime(2024, 1, 2, 3, 4, 5, 678900)) == "20240102030405678"
    utc = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert format_instant_time(utc, "UTC") == "20240102010405000"
    with pytest.raises(TimelineError):
        format_instant_time("2024-01-01")


# -- robustness ----------------------------------------------------------------------------------
def test_junk_in_timeline_folder_is_ignored(fixture_tables, tmp_path, caplog):
    src = fixture_tables("sample_table__cow__v8_nonpartitioned")
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    tdir = dst / ".hoodie" / "timeline"
    for junk in ("README.txt", "20250101000000000.unknownaction", "abc.commit",
                 "20250713010535797.commit.requested.bak", "20250101000000000_1.commit.inflight"):
        (tdir / junk).write_bytes(b"junk")
    (tdir / ".20250713010535797_20250713010536200.commit.crc").write_bytes(b"crc")
    (tdir / "somedir").mkdir()
    (tdir / "somedir" / "20250101000000000.commit").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="hudi_format.timeline"):
        tl = _timeline(dst)
    assert [i.timestamp for i in tl.write_instants()] == ["20250713010535797", "20250713010536861"]
    assert len(tl) == 2
    warned = " ".join(r.getMessage() for r in caplog.records)
    for junk in ("README.txt", "unknownaction", "abc.commit", "requested.bak", "_1.commit.inflight"):
        assert junk in warned
    assert ".crc" not in warned and "somedir" not in warned


def test_v8_orders_by_completion_time(tmp_path):
    """Spec-built v8 timeline where a later request completes first."""
    base = tmp_path / "t"
    (base / ".hoodie" / "timeline").mkdir(parents=True)
    (base / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t\nhoodie.table.version=8\nhoodie.table.type=MERGE_ON_READ\n")
    for name in ("100_400.deltacommit", "200_300.deltacommit", "250.deltacommit.requested",
                 "250.deltacommit.inflight", "260.compaction.requested", "270.clean.requested"):
        (base / ".hoodie" / "timeline" / name).write_bytes(b"")
    tl = _timeline(base)
    assert [i.timestamp for i in tl.instants] == ["100", "200", "250", "260", "270"]
    assert [i.timestamp for i in tl.completed] == ["200", "100"]
    assert [(i.timestamp, i.state, i.action) for i in tl.pending] == [
        ("250", State.INFLIGHT, "deltacommit"), ("260", State.REQUESTED, "compaction"),
        ("270", State.REQUESTED, "clean")]
    assert [i.timestamp for i in tl.instants_in_range("300", "400")] == ["100"]
    assert [i.timestamp for i in tl.instants_in_range("250", "350")] == ["200"]
    assert tl.completion_time("100") == "400" and tl.completion_time("250") is None
    assert not tl.is_completed("250")
    assert tl.latest_completed_write().timestamp == "100"
    with pytest.raises(TimelineError, match="not completed"):
        tl.metadata("250")
    with pytest.raises(TimelineError, match="file is empty"):
        tl.metadata("100")
    assert tl.plan("260") == {}


def test_timeline_on_memory_filesystem(fixture_tables):
    import fsspec
    src = fixture_tables("sample_table__cow__v9_txns_simple_overwrite")
    fs = fsspec.filesystem("memory")
    root = "/timeline_mem_test"
    for path in src.rglob("*"):
        if path.is_file() and ".hoodie" in path.parts and "metadata" not in path.parts:
            fs.pipe(f"{root}/{path.relative_to(src).as_posix()}", path.read_bytes())
    try:
        tl = Timeline.load(Storage(f"memory://{root}"))
        assert [i.timestamp for i in tl.write_instants()] == [
            e["timestamp"] for e in expected("sample_table__cow__v9_txns_simple_overwrite")["completed_write_instants"]]
        assert tl.metadata(tl.latest_completed_write()).operation_type == "INSERT_OVERWRITE_TABLE"
    finally:
        fs.rm(root, recursive=True)
