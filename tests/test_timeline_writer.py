"""Writing the timeline: file names, payloads, create-if-absent and the instant clock.

Truth is the timelines Apache Hudi wrote in the fixture tables: replaying a fixture's instants
through ``TimelineWriter`` must give the same file names and the same payloads (JSON byte for
byte; Avro record for record, and datum bytes where the schemas agree), and re-encoding a
fixture's commit metadata must give Hudi's bytes whatever order its maps arrive in.
(Crashes, races and create-if-absent: test_timeline_writer_races.py; the instant clock:
test_instant_clock.py.)
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURE_TABLES, has_metadata_table
from hudi_format.config import TableConfig
from hudi_format.errors import TimelineError
from hudi_format.storage import Storage
from hudi_format.table_init import create_table
from hudi_format.timeline import (CommitMetadata, Instant, State, Timeline, comparable_action,
                                  decode_payload, parse_file_name)
from hudi_format.timeline.avro_schemas import read_avro_container
from hudi_format.timeline.write_stat import WriteStat
from hudi_format.timeline.writer import (TimelineWriter, commit_metadata, encode_commit_metadata,
                                         encode_plan, jackson_json, java_hashmap_order)

V6_V8_V9 = [n for n in FIXTURE_TABLES if re.search(r"__v[689]_", n)]


TIMELINES = [(n, False) for n in V6_V8_V9] + [(n, True) for n in V6_V8_V9 if has_metadata_table(n)]


# -- helpers ----------------------------------------------------------------------------------

def _timeline_dir(base: Path) -> Path:
    return base / ".hoodie" / "timeline" if (base / ".hoodie" / "timeline").is_dir() else base / ".hoodie"


def _timeline_files(base: Path) -> dict[str, bytes]:
    d = _timeline_dir(base)
    if not d.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in d.iterdir()
            if p.is_file() and not p.name.startswith((".", "hoodie.properties"))}


def _avro_datum(container: bytes) -> bytes:
    """The serialized record of a one-record Avro container (no header, no sync marker)."""
    def varint(pos):
        shift = result = 0
        while True:
            b = container[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1), pos
    assert container[:4] == b"Obj\x01"
    pos = 4
    while True:
        n, pos = varint(pos)
        if n == 0:
            break
        if n < 0:
            _, pos = varint(pos)
            n = -n
        for _ in range(2 * n):
            length, pos = varint(pos)
            pos += length
    pos += 16
    count, pos = varint(pos)
    size, pos = varint(pos)
    assert count == 1
    return container[pos:pos + size]


def _shuffled(meta: dict, seed: int) -> dict:
    """The same metadata with its maps in another order (Hudi's order must be restored)."""
    rnd = random.Random(seed)
    out = dict(meta)
    for key in ("partitionToWriteStats", "extraMetadata", "partitionToReplaceFileIds"):
        if isinstance(out.get(key), dict):
            items = list(out[key].items())
            rnd.shuffle(items)
            out[key] = dict(items)
    return out


def _project(theirs, ours):
    """``theirs`` limited to the record fields ``ours`` has (newer Hudi adds fields)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if set(ours) <= set(theirs):
            return {k: _project(theirs[k], ours[k]) for k in ours}
        return theirs
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [_project(a, b) for a, b in zip(theirs, ours)]
    return theirs


def replay(src: Path, dst: Path) -> TableConfig:
    """Re-create ``src``'s active timeline in ``dst`` through TimelineWriter."""
    (dst / ".hoodie").mkdir(parents=True)
    shutil.copy(src / ".hoodie" / "hoodie.properties", dst / ".hoodie" / "hoodie.properties")
    storage = Storage(dst)
    cfg = TableConfig.load(storage)
    writer = TimelineWriter(storage, cfg)
    groups: dict[tuple[str, str], dict[State, tuple[Instant, bytes]]] = {}
    for name, data in _timeline_files(src).items():
        inst = parse_file_name(name, cfg.version)
        key = (inst.timestamp, comparable_action(inst.action, cfg.version))
        groups.setdefault(key, {})[inst.state] = (inst, data)

    def payload(data: bytes):
        return decode_payload(data, "fixture") if data else None

    for key in sorted(groups):
        states = groups[key]
        current = None
        if State.REQUESTED in states:
            inst, data = states[State.REQUESTED]
            current = writer.create_requested(inst.action, inst.timestamp, payload(data))
        if State.INFLIGHT in states:
            inst, data = states[State.INFLIGHT]
            if inst.action == "savepoint":
                current = writer.create_requested("savepoint", inst.timestamp)
            else:
                current = writer.transition_to_inflight(current, payload(data))
        if State.COMPLETED in states:
            inst, data = states[State.COMPLETED]
            writer.complete(current, payload(data),
                            completion_time=inst.completion_time if cfg.version >= 8 else None)
    return cfg


# -- replaying Hudi's timelines -----------------------------------------------------------------

@pytest.mark.parametrize("name, metadata_table", TIMELINES)
def test_replayed_timeline_equals_fixture(fixture_tables, tmp_path, name, metadata_table):
    base = fixture_tables(name)
    if metadata_table:
        base = base / ".hoodie" / "metadata"
    cfg = replay(base, tmp_path / "t")
    theirs, ours = _timeline_files(base), _timeline_files(tmp_path / "t")
    assert sorted(ours) == sorted(theirs)  # exactly Hudi's file names
    for fname, data in theirs.items():
        mine = ours[fname]
        if not data or data[:4] != b"Obj\x01":
            assert mine == data, fname  # empty files and v6 JSON: byte for byte
            continue
        rec, schema = read_avro_container(data, fname)
        our_rec, our_schema = read_avro_container(mine, fname)
        assert our_schema == schema, fname
        if cfg.version == 8 or schema == "HoodieCommitMetadata":
            assert our_rec == rec, fname
            assert _avro_datum(mine) == _avro_datum(data), fname
        else:  # Hudi 1.1 writes a few fields our (1.0) schemas do not have
            assert our_rec == _project(rec, our_rec), fname
    # and our reader sees the same timeline
    got = Timeline.load(Storage(tmp_path / "t"), cfg)
    ref = Timeline.load(Storage(base))
    assert [(i.timestamp, i.action, i.state, i.completion_time) for i in got.instants] == \
        [(i.timestamp, i.action, i.state, i.completion_time) for i in ref.instants]


def _fixture_commit_files(versions: tuple[int, ...]):
    for name in V6_V8_V9:
        if name.endswith("_empty"):
            continue
        if int(re.search(r"__v(\d)_", name).group(1)) in versions:
            yield name


@pytest.mark.parametrize("name", list(_fixture_commit_files((6,))))
def test_v6_commit_json_is_byte_identical(fixture_tables, name):
    base = fixture_tables(name)
    checked = 0
    for fname, data in _timeline_files(base).items():
        if not data or data[:4] == b"Obj\x01":
            continue
        inst = parse_file_name(fname, 6)
        meta = json.loads(data)
        for seed in range(3):
            out = encode_commit_metadata(_shuffled(meta, seed), 6, inst.action,
                                         replace=inst.is_completed and inst.action == "replacecommit")
            assert out == data, fname
        assert encode_commit_metadata(CommitMetadata.from_dict(meta), 6, inst.action,
                                      replace="partitionToReplaceFileIds" in meta) == data
        checked += 1
    assert checked


@pytest.mark.parametrize("name", list(_fixture_commit_files((8, 9))))
def test_avro_commit_metadata_matches_fixture(fixture_tables, name):
    base = fixture_tables(name)
    for fname, data in _timeline_files(base).items():
        if data[:4] != b"Obj\x01":
            continue
        rec, schema = read_avro_container(data, fname)
        if schema not in ("HoodieCommitMetadata", "HoodieReplaceCommitMetadata"):
            continue
        out = encode_commit_metadata(_shuffled(rec, 7), 8, "commit",
                                     replace=schema == "HoodieReplaceCommitMetadata")
        ours, our_schema = read_avro_container(out, fname)
        assert our_schema == schema
        if schema == "HoodieCommitMetadata":
            assert ours == rec
            assert _avro_datum(out) == _avro_datum(data)  # the record's bytes, not just values
        else:
            assert ours == {k: v for k, v in rec.items() if k != "compacted"}  # 1.1-only field


def test_v6_json_converts_to_v8_avro(fixture_tables):
    """Commit metadata read from a v6 table re-encodes as the Avro Hudi 1.x writes."""
    base = fixture_tables("sample_table__cow__v6_simplekeygen_nonhivestyle")
    data = next(d for n, d in _timeline_files(base).items() if n.endswith(".commit"))
    rec, _ = read_avro_container(encode_commit_metadata(json.loads(data), 8, "commit"), "x")
    stat = next(iter(rec["partitionToWriteStats"].values()))[0]
    assert stat["numUpdates"] == 0 and stat["totalLogReadTimeMs"] == 0  # POJO defaults
    assert stat["totalLogFiles"] is None and stat["logFiles"] is None and stat["prevBaseFile"] is None
    assert rec["version"] is None and rec["compacted"] is False


# -- write stats -------------------------------------------------------------------------------

def _stat_kwargs(s: dict) -> dict:
    kw = dict(file_id=s["fileId"], path=s["path"], partition_path=s["partitionPath"],
              prev_commit=None if s["prevCommit"] == "null" else s["prevCommit"],
              num_writes=s["numWrites"], num_deletes=s["numDeletes"],
              num_update_writes=s["numUpdateWrites"], num_inserts=s["numInserts"],
              total_write_bytes=s["totalWriteBytes"], file_size_in_bytes=s["fileSizeInBytes"],
              runtime_stats=s["runtimeStats"])
    if "logFiles" in s:
        kw.update(log_files=s["logFiles"], base_file=s["baseFile"], log_version=s["logVersion"],
                  log_offset=s["logOffset"])
    return kw


@pytest.mark.parametrize("name, suffix", [
    ("sample_table__cow__v6_simplekeygen_nonhivestyle", ".commit"),
    ("quickstart_trips_table__mor__avro__v6_trips_8i1u", ".deltacommit"),
])
def test_write_stat_builder_reproduces_hudi_stats(fixture_tables, name, suffix):
    base = fixture_tables(name)
    files = sorted((n, d) for n, d in _timeline_files(base).items() if n.endswith(suffix))
    seen_delta = False
    for fname, data in files:
        meta = json.loads(data)
        stats = [s for ss in meta["partitionToWriteStats"].values() for s in ss]
        rebuilt = [WriteStat(**_stat_kwargs(s)).to_dict() for s in stats]
        # the one class reads them back to the same mapping
        assert [WriteStat.from_dict(s, p).to_dict() for p, ss in meta["partitionToWriteStats"].items() for s in ss] == stats
        assert rebuilt == stats  # same keys, order and values
        assert [list(r) for r in rebuilt] == [list(s) for s in stats]
        seen_delta |= any("logFiles" in s for s in stats)
        again = commit_metadata(rebuilt, operation_type=meta["operationType"],
                                extra_metadata=meta["extraMetadata"], compacted=meta["compacted"])
        assert encode_commit_metadata(again, 6, suffix[1:]) == data
    assert seen_delta == (suffix == ".deltacommit")


def test_partial_stats_get_hudi_defaults():
    out = json.loads(encode_commit_metadata(
        {"partitionToWriteStats": {"p": [{"fileId": "f", "numWrites": 2}]}}, 6, "commit"))
    stat = out["partitionToWriteStats"]["p"][0]
    assert list(out) == ["partitionToWriteStats", "compacted", "extraMetadata", "operationType"]
    assert out["operationType"] == "UNKNOWN" and out["compacted"] is False
    assert stat["prevCommit"] == "null" and stat["numWrites"] == 2 and stat["totalLogBlocks"] == 0
    assert list(stat)[:4] == ["fileId", "path", "cdcStats", "prevCommit"]
    assert "logFiles" not in stat


def test_java_collection_orders():
    # Java: new HashMap<>() with "10","20","30" iterates 30, 20, 10 (buckets 13, 14, 15)
    assert java_hashmap_order(["10", "20", "30"]) == ["30", "20", "10"]
    assert java_hashmap_order(["schema", "_hoodie.spark.sql.writes.prepped"]) == \
        ["schema", "_hoodie.spark.sql.writes.prepped"]
    # more than 12 keys: the table grows to 32 buckets
    keys = [f"p{i}" for i in range(20)]
    assert sorted(java_hashmap_order(keys)) == sorted(keys)


def test_jackson_pretty_printer_scalars():
    assert jackson_json({}) == "{ }"
    assert jackson_json({"a": []}) == '{\n  "a" : [ ]\n}'
    assert jackson_json({"a": [1, "x"], "b": {"c": None}}) == \
        '{\n  "a" : [ 1, "x" ],\n  "b" : {\n    "c" : null\n  }\n}'
    # Double.toString
    assert jackson_json([1.0, 1e7, 12345678.9, 0.001, 0.0001, -2.5, 0.0]) == \
        "[ 1.0, 1.0E7, 1.23456789E7, 0.001, 1.0E-4, -2.5, 0.0 ]"
    # Jackson's escapes: short forms, \\u00XX (upper case) for other controls, UTF-8 as is
    assert jackson_json(["q\"\\/\n\t\x01é"]) == '[ "q\\"\\\\/\\n\\t\\u0001é" ]'


# -- transitions and file names ----------------------------------------------------------------

def _table(tmp_path: Path, version: int, table_type: str = "COPY_ON_WRITE") -> tuple[Storage, TableConfig]:
    storage = Storage(tmp_path / f"t{version}{table_type[0]}")
    cfg = create_table(storage, table_name="t", table_type=table_type, record_key_fields="id",
                       partition_fields="p", table_version=version)
    return storage, cfg


def _names(storage: Storage, cfg: TableConfig) -> list[str]:
    return sorted(i.name for i in storage.list(cfg.timeline_dir)
                  if not i.is_dir and not i.name.startswith((".", "hoodie.properties")))


@pytest.mark.parametrize("version, action, requested, inflight, completed", [
    (6, "commit", "{t}.commit.requested", "{t}.inflight", "{t}.commit"),
    (6, "deltacommit", "{t}.deltacommit.requested", "{t}.deltacommit.inflight", "{t}.deltacommit"),
    (6, "replacecommit", "{t}.replacecommit.requested", "{t}.replacecommit.inflight", "{t}.replacecommit"),
    (6, "clustering", "{t}.replacecommit.requested", "{t}.replacecommit.inflight", "{t}.replacecommit"),
    (6, "compaction", "{t}.compaction.requested", "{t}.compaction.inflight", "{t}.commit"),
    (6, "logcompaction", "{t}.logcompaction.requested", "{t}.logcompaction.inflight", "{t}.deltacommit"),
    (6, "clean", "{t}.clean.requested", "{t}.clean.inflight", "{t}.clean"),
    (6, "rollback", "{t}.rollback.requested", "{t}.rollback.inflight", "{t}.rollback"),
    (8, "commit", "{t}.commit.requested", "{t}.inflight", "{t}_{c}.commit"),
    (8, "deltacommit", "{t}.deltacommit.requested", "{t}.deltacommit.inflight", "{t}_{c}.deltacommit"),
    (8, "replacecommit", "{t}.replacecommit.requested", "{t}.replacecommit.inflight", "{t}_{c}.replacecommit"),
    (8, "clustering", "{t}.clustering.requested", "{t}.clustering.inflight", "{t}_{c}.replacecommit"),
    (8, "compaction", "{t}.compaction.requested", "{t}.compaction.inflight", "{t}_{c}.commit"),
    (8, "logcompaction", "{t}.logcompaction.requested", "{t}.logcompaction.inflight", "{t}_{c}.deltacommit"),
    (8, "clean", "{t}.clean.requested", "{t}.clean.inflight", "{t}_{c}.clean"),
    (8, "rollback", "{t}.rollback.requested", "{t}.rollback.inflight", "{t}_{c}.rollback"),
])
def test_transition_file_names(tmp_path, version, action, requested, inflight, completed):
    storage, cfg = _table(tmp_path, version)
    writer = TimelineWriter(storage, cfg)
    ts = writer.clock.new_instant_time()
    req = writer.create_requested(action, ts)
    assert _names(storage, cfg) == [requested.format(t=ts)]
    assert req.file_name == requested.format(t=ts) and req.is_requested
    infl = writer.transition_to_inflight(req)
    assert infl.file_name == inflight.format(t=ts)
    assert set(_names(storage, cfg)) == {requested.format(t=ts), inflight.format(t=ts)}
    meta = commit_metadata([], operation_type="UPSERT") if action in (
        "commit", "deltacommit", "replacecommit", "clustering", "compaction", "logcompaction") \
        else None
    done = writer.complete(infl, meta)
    assert done.is_completed and done.action == comparable_action(action, version) \
        or (version < 8 and action == "clustering" and done.action == "replacecommit")
    if version >= 8:
        assert done.completion_time and done.completion_time > ts
    else:
        assert done.completion_time is None
    assert done.file_name == completed.format(t=ts, c=done.completion_time)
    assert set(_names(storage, cfg)) == {requested.format(t=ts), inflight.format(t=ts),
                                         completed.format(t=ts, c=done.completion_time)}
    # requested and inflight files of a commit without a plan or workload are empty
    for name in (requested, inflight):
        if action in ("commit", "deltacommit"):
            assert storage.read_bytes(f"{cfg.timeline_dir}/{name.format(t=ts)}") == b""
    loaded = Timeline.load(storage, cfg)
    assert [(i.timestamp, i.state, i.completion_time) for i in loaded.instants] == \
        [(ts, State.COMPLETED, done.completion_time)]


@pytest.mark.parametrize("version", [6, 8])
def test_savepoint_has_no_requested_file(tmp_path, version):
    storage, cfg = _table(tmp_path, version)
    writer = TimelineWriter(storage, cfg)
    sp = writer.create_requested("savepoint", "20240101000000000")
    assert sp.is_inflight and _names(storage, cfg) == ["20240101000000000.savepoint.inflight"]
    meta = {"savepointedBy": "me", "savepointedAt": 1, "comments": "", "partitionMetadata": {}, "version": 1}
    done = writer.complete(writer.transition_to_inflight(sp), meta)
    rec, schema = read_avro_container(storage.read_bytes(f"{cfg.timeline_dir}/{done.file_name}"), "x")
    assert schema == "HoodieSavepointMetadata" and rec["savepointedBy"] == "me"


@pytest.mark.parametrize("version", [6, 8])
def test_commit_payloads_per_state(tmp_path, version):
    storage, cfg = _table(tmp_path, version, "MERGE_ON_READ")
    writer = TimelineWriter(storage, cfg)
    ts = writer.clock.new_instant_time()
    workload = commit_metadata([WriteStat(file_id="", path=None, partition_path=None, num_inserts=3)],
                               operation_type="UPSERT")
    infl = writer.transition_to_inflight(writer.create_requested("deltacommit", ts), workload)
    stat = WriteStat(file_id="f-0", path="p=1/.f-0_1.log.1_0-1-1", partition_path="p=1",
                      num_writes=3, num_inserts=3, total_write_bytes=99,
                      log_files=[".f-0_1.log.1_0-1-1"], base_file="", log_version=1)
    final = commit_metadata([stat], operation_type="UPSERT", extra_metadata={"schema": "{}"})
    done = writer.complete(infl, final)
    raw_infl = storage.read_bytes(f"{cfg.timeline_dir}/{infl.file_name}")
    raw_done = storage.read_bytes(f"{cfg.timeline_dir}/{done.file_name}")
    if version >= 8:
        assert raw_infl[:4] == raw_done[:4] == b"Obj\x01"
        assert read_avro_container(raw_done, "x")[1] == "HoodieCommitMetadata"
    else:
        assert raw_infl.startswith(b'{\n  "partitionToWriteStats" : {') and raw_done[:1] == b"{"
        assert not raw_done.endswith(b"\n")
    meta = Timeline.load(storage, cfg).metadata(done)
    (ws,) = meta.write_stats
    assert ws.file_id == "f-0" and ws.log_files == (".f-0_1.log.1_0-1-1",) and ws.num_inserts == 3
    assert meta.schema == "{}" and meta.operation_type == "UPSERT"


@pytest.mark.parametrize("version", [6, 8])
def test_replacecommit_plan_and_metadata(tmp_path, version):
    storage, cfg = _table(tmp_path, version)
    writer = TimelineWriter(storage, cfg)
    ts = writer.clock.new_instant_time()
    plan = {"operationType": "INSERT_OVERWRITE", "extraMetadata": {}, "version": 1}
    req = writer.create_requested("replacecommit", ts, plan)
    rec, schema = read_avro_container(storage.read_bytes(f"{cfg.timeline_dir}/{req.file_name}"), "x")
    assert schema == "HoodieRequestedReplaceMetadata" and rec["operationType"] == "INSERT_OVERWRITE"
    infl = writer.transition_to_inflight(req, commit_metadata([], operation_type="INSERT_OVERWRITE"))
    meta = commit_metadata([], operation_type="INSERT_OVERWRITE", replaced_file_ids={"p=1": ["a-0", "b-0"]})
    done = writer.complete(infl, meta)
    raw_infl = storage.read_bytes(f"{cfg.timeline_dir}/{infl.file_name}")
    raw_done = storage.read_bytes(f"{cfg.timeline_dir}/{done.file_name}")
    # the inflight holds plain commit metadata, the completed file the replace metadata
    assert b"partitionToReplaceFileIds" not in raw_infl and b"partitionToReplaceFileIds" in raw_done
    loaded = Timeline.load(storage, cfg).metadata(done)
    assert loaded.replaced_file_ids == {("p=1", "a-0"), ("p=1", "b-0")}


def test_compaction_plan_is_avro(tmp_path):
    storage, cfg = _table(tmp_path, 8, "MERGE_ON_READ")
    writer = TimelineWriter(storage, cfg)
    plan = {"operations": [{"baseInstantTime": "1", "deltaFilePaths": ["a.log"], "dataFilePath": None,
                            "fileId": "f", "partitionPath": "p", "metrics": {"z": 1.0, "a": 2.0},
                            "bootstrapFilePath": None}],
            "extraMetadata": None, "version": 2}
    req = writer.create_requested("compaction", "20240101000000000", plan)
    data = storage.read_bytes(f"{cfg.timeline_dir}/{req.file_name}")
    rec, schema = read_avro_container(data, "x")
    assert schema == "HoodieCompactionPlan" and rec["operations"][0]["deltaFilePaths"] == ["a.log"]
    # Avro maps are written in Java HashMap order
    assert list(rec["operations"][0]["metrics"]) == java_hashmap_order(["z", "a"])
    assert encode_plan("HoodieCompactionPlan", plan)[:4] == b"Obj\x01"


def test_transition_preconditions(tmp_path):
    storage, cfg = _table(tmp_path, 8)
    writer = TimelineWriter(storage, cfg)
    ts = "20240101000000000"
    with pytest.raises(TimelineError, match="does not exist"):
        writer.transition_to_inflight(Instant(ts, "commit", State.REQUESTED))
    with pytest.raises(TimelineError, match="does not exist"):
        writer.complete(Instant(ts, "commit", State.INFLIGHT), {})
    req = writer.create_requested("commit", ts)
    with pytest.raises(TimelineError, match="already exists"):
        writer.create_requested("commit", ts)
    with pytest.raises(TimelineError, match="only an inflight"):
        writer.complete(req, {})
    infl = writer.transition_to_inflight(req)
    with pytest.raises(TimelineError, match="already exists"):
        writer.transition_to_inflight(req)
    writer.complete(infl, {})
    with pytest.raises(TimelineError, match="already completed"):
        writer.complete(infl, {})
    with pytest.raises(TimelineError, match="already completed"):
        writer.create_requested("commit", ts)
    with pytest.raises(TimelineError):
        writer.create_requested("nope", "20240101000000001")
    with pytest.raises(TimelineError):
        writer.create_requested("commit", "2024-01-01")


# -- syncs ---------------------------------------------------------------------------------------

def test_a_write_syncs_the_files_with_content_only(tmp_path, monkeypatch):
    """Completed instants, properties and plans reach the disk before their name appears; markers
    and empty requested/inflight files hold nothing a power loss could lose, and a sync of each
    was half of a write's syncs."""
    import hudi_format as hudi
    import pyarrow as pa
    from hudi_format.storage import SYNC_ENV
    monkeypatch.setenv(SYNC_ENV, "1")   # the suite runs without syncs (conftest.py)
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_size), real(fd))[1])
    path = str(tmp_path / "t")
    data = pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "p": ["x", "y", "x"]})
    hudi.write(path, data, operation="insert", record_key="id", ordering_field="ts", partition_by="p")
    synced.clear()
    hudi.write(path, data, operation="upsert")
    assert synced and min(synced) > 0
    assert len(synced) >= 2   # at least the data table's and the metadata table's completed commits
    markers = list((tmp_path / "t" / ".hoodie").glob("**/*.marker.*"))
    assert not markers   # markers were created (unsynced) and removed at the commit
    monkeypatch.setenv(SYNC_ENV, "0")
    synced.clear()
    hudi.write(path, data, operation="upsert")
    assert synced == []   # the switch the suite uses (PostgreSQL's fsync=off) syncs nothing


def test_jackson_strings_escape_as_the_character_rule_says():
    """Random strings of quotes, backslashes, control and non-ASCII characters quoted as
    Jackson's rule reads, one character at a time: ``\\"``, ``\\\\``, the short forms of
    ``\\b\\f\\n\\r\\t``, ``\\u00XX`` for every other control, anything else as it is."""
    import random
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

    def by_character(s: str) -> str:
        return '"' + "".join(short.get(c) or ("\\u%04X" % ord(c) if ord(c) < 0x20 else c) for c in s) + '"'
    rng = random.Random(5)
    alphabet = [chr(i) for i in range(0x30)] + list("az\\\"/é€\u2028\x7f😀")
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        assert jackson_json(s) == by_character(s), repr(s)
