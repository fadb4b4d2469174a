"""The archived timeline: LSM history (v8+) and archive log files (v6).

No fixture table has archived instants, so these archives are *spec-built, not Hudi-written*:
the tests archive the oldest instants of real fixture tables the way Hudi's archivers lay them
out (``LSMTimelineWriter`` / ``MetadataConversionUtils.createLSMTimelineInstant`` for v8+,
``HoodieTimelineArchiver`` writing ``HoodieArchivedMetaEntry`` records into ``#HUDI#`` log
blocks for v6), remove them from the active timeline, and read them back. The payload bytes
inside are the real Hudi-written files of those instants.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import expected
from hudi_format.errors import TimelineError
from hudi_format.storage import Storage
from hudi_format.timeline import State, Timeline, decode_commit_metadata, latest_manifest, schema_json

V9_TABLE = "sample_table__mor__avro__v9_txns_simple_meta"
V6_TABLE = "sample_table__cow__v6_simplekeygen_nonhivestyle_overwritetable"

# HoodieLSMTimelineInstant as AvroParquetWriter lays it out
LSM_SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()), pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False)])


# -- v8+: LSM history ---------------------------------------------------------------------------
def _lsm_row(tdir: Path, ts: str) -> tuple[dict, list[Path]]:
    """One HoodieLSMTimelineInstant row for the instant requested at ``ts`` (as Hudi builds it:
    metadata = completed file bytes; plan = clean/compaction plan, or for replacecommit and
    clustering the requested file overridden by a non-empty inflight file)."""
    files = sorted(tdir.glob(f"{ts}*"))
    completed = next(f for f in files if "_" in f.name)
    done, action = completed.name.split("_", 1)[1].split(".", 1)
    plan = None
    by_suffix = {f.name[len(ts) + 1:]: f for f in files}
    for suffix in ("compaction.requested", "logcompaction.requested", "clean.requested",
                   "replacecommit.requested", "clustering.requested",
                   "replacecommit.inflight", "clustering.inflight"):  # inflight last: it wins
        f = by_suffix.get(suffix)
        if f is not None and (suffix.endswith("requested") or f.stat().st_size):
            plan = f.read_bytes()
    return ({"instantTime": ts, "completionTime": done, "action": action,
             "metadata": completed.read_bytes(), "plan": plan, "version": 1}, files)


def _write_lsm_file(history: Path, rows: list[dict], level: int = 0) -> tuple[str, int]:
    name = f"{min(r['instantTime'] for r in rows)}_{max(r['completionTime'] for r in rows)}_{level}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=LSM_SCHEMA), history / name)
    return name, (history / name).stat().st_size


def _write_manifest(history: Path, version: int, files: list[tuple[str, int]]) -> None:
    body = {"files": [{"fileName": n, "fileLen": size} for n, size in files]}
    (history / f"manifest_{version}").write_text(json.dumps(body, indent=2))


@pytest.fixture()
def lsm_table(fixture_tables, tmp_path):
    """The v9 MOR table with its first 11 instants (up to the compaction) moved into the LSM
    history: two L0 files, manifest_1 (first file) and manifest_2 (both), ``_version_`` = 2.
    Returns (base path, original completed-file bytes by request time)."""
    base = tmp_path / "lsm"
    shutil.copytree(fixture_tables(V9_TABLE), base)
    tdir = base / ".hoodie" / "timeline"
    history = tdir / "history"
    history.mkdir(exist_ok=True)
    writes = expected(V9_TABLE)["completed_write_instants"]
    archived_ts = [w["timestamp"] for w in writes[:11]]
    assert archived_ts[-1] == "20260307162618152"  # the compaction
    rows, originals = [], {}
    for ts in archived_ts:
        row, files = _lsm_row(tdir, ts)
        rows.append(row)
        originals[ts] = row["metadata"]
        for f in files:
            f.unlink()
    first = _write_lsm_file(history, rows[:5])
    second = _write_lsm_file(history, rows[5:])
    _write_manifest(history, 1, [first])
    _write_manifest(history, 2, [first, second])
    (history / "_version_").write_text("2")
    return base, originals


def test_lsm_history_reads_back(lsm_table):
    base, originals = lsm_table
    tl = Timeline.load(Storage(str(base)))
    writes = expected(V9_TABLE)["completed_write_instants"]
    assert [i.timestamp for i in tl.write_instants()] == [w["timestamp"] for w in writes[11:]]
    assert not tl.archive_loaded
    got = [{"timestamp": i.timestamp, "completion_time": i.completion_time, "action": i.action}
           for i in tl.write_instants(include_archived=True)]
    assert got == writes
    archived = tl.archived()
    assert len(archived) == 11 and all(i.is_completed for i in archived)
    for ts, data in originals.items():
        assert archived.metadata(ts) == decode_commit_metadata(data, ts)
        assert tl.metadata(ts) == archived.metadata(ts)  # reached through the active timeline
    compaction = archived.get("20260307162618152")
    assert compaction.file_name == "20260307162618152_20260307162619230.commit"
    assert [op["fileId"] for op in tl.plan(compaction)["operations"]] == [
        "3e93c8a9-fda0-4e8a-91dc-b4ade7dab76d-0", "c3b646cc-8602-47c5-b010-3fe002241298-0"]
    # insert-overwrite replacecommit: the plan is the (non-empty) inflight commit metadata
    replace = tl.get("20260307162614221")
    assert replace.action == "replacecommit"
    assert tl.metadata(replace).replaced_file_ids
    assert "partitionToWriteStats" in tl.plan(replace)
    assert archived.plan("20260307162557587") == {}  # plain deltacommits archive no plan


def test_lsm_archive_is_loaded_only_when_needed(lsm_table):
    base, _ = lsm_table
    tl = Timeline.load(Storage(str(base)))
    assert tl.start == "20260307162619269"
    assert tl.is_completed("20260307162620509")
    assert [i.timestamp for i in tl.instants_in_range("20260307162619269", None)] == [
        "20260307162619269", "20260307162620509"]
    assert tl.get("20260307162700000") is None  # after the start: no need for the archive
    assert not tl.archive_loaded
    assert tl.completion_time("20260307162604102") == "20260307162605084"
    assert tl.archive_loaded


def test_lsm_range_spans_archive_and_active(lsm_table):
    base, _ = lsm_table
    tl = Timeline.load(Storage(str(base)))
    window = tl.instants_in_range("20260307162616433", "20260307162620442")
    assert [(i.timestamp, i.action) for i in window] == [
        ("20260307162616932", "deltacommit"), ("20260307162618152", "commit"),
        ("20260307162619269", "replacecommit")]
    assert len(tl.instants_in_range()) == len(expected(V9_TABLE)["completed_write_instants"])
    assert tl.latest_completed_write().timestamp == "20260307162620509"


def test_lsm_reads_the_version_named_snapshot(lsm_table):
    base, _ = lsm_table
    history = base / ".hoodie" / "timeline" / "history"
    # a newer manifest the version file does not name yet (half-written snapshot)
    _write_manifest(history, 3, [("20990101000000000_20990101000000001_0.parquet", 10)])
    # a parquet file no manifest lists
    pq.write_table(pa.Table.from_pylist([], schema=LSM_SCHEMA), history / "1_2_0.parquet")
    storage = Storage(str(base))
    version, files = latest_manifest(storage, ".hoodie/timeline/history")
    assert version == 2 and len(files) == 2
    assert len(Timeline.load(storage).archived()) == 11


def test_lsm_falls_back_to_newest_valid_manifest(lsm_table):
    base, _ = lsm_table
    history = base / ".hoodie" / "timeline" / "history"
    (history / "_version_").write_text("not a number")
    (history / "manifest_3").write_text("{ broken json")
    storage = Storage(str(base))
    assert latest_manifest(storage, ".hoodie/timeline/history")[0] == 2
    (history / "_version_").unlink()
    assert latest_manifest(storage, ".hoodie/timeline/history")[0] == 2
    (history / "_version_").write_text("1")
    assert Timeline.load(storage).archived().get("20260307162611195") is None  # only manifest_1
    assert len(Timeline.load(storage).archived()) == 5


def test_lsm_missing_listed_file_is_an_error(lsm_table):
    base, _ = lsm_table
    history = base / ".hoodie" / "timeline" / "history"
    listed = json.loads((history / "manifest_2").read_text())["files"][1]["fileName"]
    (history / listed).unlink()
    tl = Timeline.load(Storage(str(base)))
    with pytest.raises(TimelineError, match=listed):
        tl.archived()


def test_lsm_snapshot_cleaned_while_read_is_read_again(lsm_table, monkeypatch):
    """A reader lists a snapshot; before it reads the files, an archiver compacts them into a
    new snapshot and cleans them (busy tables archive on every commit): the reader reads the
    newest snapshot instead of failing (readers and writers fell back to listing storage, or
    tagged without the record index, in the kill soak)."""
    from hudi_format.config import TableConfig
    from hudi_format.timeline import archived as archived_module
    from hudi_format.timeline.history_writer import LSMTimelineWriter
    base, _ = lsm_table
    storage = Storage(str(base))
    history = ".hoodie/timeline/history"
    old = latest_manifest(storage, history)
    assert LSMTimelineWriter(storage, TableConfig.load(storage), batch_size=2).compact_and_clean()
    new = latest_manifest(storage, history)
    for name in set(old[1]) - set(new[1]):
        storage.delete(f"{history}/{name}")
    calls = []

    def listed_before_the_compaction(st, hdir):
        calls.append(hdir)
        return old if len(calls) == 1 else latest_manifest(st, hdir)
    monkeypatch.setattr(archived_module, "latest_manifest", listed_before_the_compaction)
    assert len(Timeline.load(storage).archived()) == 11
    assert len(calls) > 1   # the stale snapshot first, then the current one


def test_empty_history(fixture_tables):
    tl = Timeline.load(Storage(str(fixture_tables("sample_table__cow__v8_empty"))))
    assert tl.instants == [] and tl.archived().instants == []
    assert tl.latest_completed_write() is None
    assert latest_manifest(tl.storage, tl.config.history_dir) == (-1, [])


# -- v6: archive log files --------------------------------------------------------------------------
_MAGIC = b"#HUDI#"


def _metadata_bytes(entries: dict[int, str]) -> bytes:
    out = struct.pack(">i", len(entries))
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out += struct.pack(">ii", key, len(raw)) + raw
    return out


def _avro_log_block(schema: str, records: list[dict]) -> bytes:
    """One Avro data block exactly as HoodieLogFormatWriter lays it out (format version 1,
    block type 3 = AVRO_DATA_BLOCK, SCHEMA header key 2, Avro block version 3)."""
    parsed = fastavro.parse_schema(json.loads(schema))
    content = struct.pack(">ii", 3, len(records))
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        content += struct.pack(">i", len(buf.getvalue())) + buf.getvalue()
    header, footer = _metadata_bytes({2: schema}), _metadata_bytes({})
    body = struct.pack(">ii", 1, 3) + header + struct.pack(">q", len(content)) + content + footer
    block_length = len(body) + 8  # everything after the length field, incl. the reverse pointer
    block = _MAGIC + struct.pack(">q", block_length) + body
    return block + struct.pack(">q", len(block))


def _to_avro_commit(meta: dict) -> dict:
    """Jackson JSON commit metadata -> the Avro record, as MetadataConversionUtils converts it."""
    out = dict(meta)
    out["partitionToWriteStats"] = {p: [dict(s) for s in stats]
                                    for p, stats in (meta.get("partitionToWriteStats") or {}).items()}
    out.setdefault("version", 1)
    return out


def _entry(ts: str, action: str, state: str, **payload) -> dict:
    return {"commitTime": ts, "actionType": action, "actionState": state, "version": 1, **payload}


@pytest.fixture()
def v6_archive(fixture_tables, tmp_path):
    """The v6 COW overwrite table with its two commits moved into ``.commits_.archive.1_1-0-1``
    (one record per instant state), plus an archived clean and compaction for plans."""
    base = tmp_path / "v6"
    shutil.copytree(fixture_tables(V6_TABLE), base)
    hoodie = base / ".hoodie"
    records, originals = [], {}
    for ts in ("20240707001301554", "20240707001302376"):
        completed = json.loads((hoodie / f"{ts}.commit").read_bytes())
        inflight = json.loads((hoodie / f"{ts}.inflight").read_bytes())
        originals[ts] = (hoodie / f"{ts}.commit").read_bytes()
        records += [_entry(ts, "commit", "REQUESTED"),
                    _entry(ts, "commit", "INFLIGHT", hoodieCommitMetadata=_to_avro_commit(inflight)),
                    _entry(ts, "commit", "COMPLETED", hoodieCommitMetadata=_to_avro_commit(completed),
                           stateTransitionTime=ts)]
        for suffix in (".commit", ".inflight", ".commit.requested"):
            (hoodie / f"{ts}{suffix}").unlink()
    clean_plan = {"earliestInstantToRetain": {"timestamp": "20240707001301554", "action": "commit",
                                              "state": "COMPLETED"},
                  "policy": "KEEP_LATEST_COMMITS", "filesToBeDeletedPerPartition": {}, "version": 2}
    clean_meta = {"startCleanTime": "20240707001300000", "timeTakenInMillis": 5, "totalFilesDeleted": 0,
                  "earliestCommitToRetain": "20240707001301554", "partitionMetadata": {}, "version": 2}
    compaction_plan = {"operations": [{"baseInstantTime": "20240707001300500", "fileId": "f-1",
                                       "partitionPath": "10", "deltaFilePaths": [".f-1_x.log.1_0-1-1"]}],
                       "version": 2}
    records += [_entry("20240707001300000", "clean", "REQUESTED", hoodieCleanerPlan=clean_plan),
                _entry("20240707001300000", "clean", "COMPLETED", hoodieCleanMetadata=clean_meta),
                _entry("20240707001300500", "compaction", "REQUESTED", hoodieCompactionPlan=compaction_plan),
                _entry("20240707001300500", "commit", "COMPLETED",
                       hoodieCommitMetadata={"partitionToWriteStats": {}, "operationType": "COMPACT",
                                             "compacted": True, "extraMetadata": {}})]
    schema = schema_json("HoodieArchivedMetaEntry")
    (hoodie / "archived" / ".commits_.archive.1_1-0-1").write_bytes(
        _avro_log_block(schema, records[:6]) + _avro_log_block(schema, records[6:]))
    return base, originals


def test_v6_archive_reads_back(v6_archive):
    base, originals = v6_archive
    tl = Timeline.load(Storage(str(base)))
    assert [i.timestamp for i in tl.write_instants()] == ["20240707001303088"]
    assert not tl.archive_loaded
    archived = tl.archived()
    assert [(i.timestamp, i.action, i.state, i.completion_time) for i in archived.completed] == [
        ("20240707001300000", "clean", State.COMPLETED, None),
        ("20240707001300500", "commit", State.COMPLETED, None),
        ("20240707001301554", "commit", State.COMPLETED, None),
        ("20240707001302376", "commit", State.COMPLETED, None)]
    got = [{"timestamp": i.timestamp, "completion_time": i.completion_time, "action": i.action}
           for i in tl.write_instants(include_archived=True)]
    assert got[-3:] == expected(V6_TABLE)["completed_write_instants"]
    for ts, data in originals.items():
        assert tl.metadata(ts) == decode_commit_metadata(data, ts)
    stats = {s.file_id: s for s in tl.metadata("20240707001302376").write_stats}
    assert stats["4f2685a3-614f-49ca-9b2b-e1cb9fb61f27-0"].prev_commit == "20240707001301554"
    assert stats["4f2685a3-614f-49ca-9b2b-e1cb9fb61f27-0"].num_update_writes == 1
    assert stats["d398fae1-c0e6-4098-8124-f55f7098bdba-0"].prev_commit is None
    assert archived.get("20240707001301554").file_name == "20240707001301554.commit"


def test_v6_archive_plans_and_queries(v6_archive):
    base, _ = v6_archive
    tl = Timeline.load(Storage(str(base)))
    assert tl.is_completed("20240707001301554") and tl.archive_loaded
    assert tl.completion_time("20240707001301554") == "20240707001301554"
    assert tl.plan("20240707001300500")["operations"][0]["deltaFilePaths"] == [".f-1_x.log.1_0-1-1"]
    assert tl.plan("20240707001300000")["policy"] == "KEEP_LATEST_COMMITS"
    assert tl.raw_metadata("20240707001300000")["earliestCommitToRetain"] == "20240707001301554"
    inflight = tl.plan("20240707001301554", State.INFLIGHT)
    assert inflight["operationType"] == "UPSERT" or inflight["partitionToWriteStats"]
    assert tl.plan("20240707001301554", State.REQUESTED) == {}
    assert tl.metadata("20240707001300500").operation_type == "COMPACT"
    window = tl.instants_in_range("20240707001300500", "20240707001303088")
    assert [i.timestamp for i in window] == ["20240707001301554", "20240707001302376", "20240707001303088"]


def test_v6_archive_without_files_is_empty(fixture_tables):
    tl = Timeline.load(Storage(str(fixture_tables("sample_table__cow__v6_nonpartitioned"))))
    assert tl.archived().instants == []


def test_v6_corrupt_archive_names_the_file(v6_archive):
    base, _ = v6_archive
    path = base / ".hoodie" / "archived" / ".commits_.archive.2_1-0-1"
    path.write_bytes(b"not a log file at all")
    with pytest.raises(TimelineError, match=r"\.commits_\.archive\.2_1-0-1"):
        Timeline.load(Storage(str(base))).archived()


def test_v6_corrupt_block_is_skipped(v6_archive):
    base, originals = v6_archive
    path = base / ".hoodie" / "archived" / ".commits_.archive.1_1-0-1"
    data = path.read_bytes()
    path.write_bytes(data + data[: len(data) // 3])  # a torn copy of the first block at the end
    archived = Timeline.load(Storage(str(base))).archived()
    assert [i.timestamp for i in archived.write_instants()] == [
        "20240707001300500", "20240707001301554", "20240707001302376"]
    assert archived.metadata("20240707001301554") == decode_commit_metadata(
        originals["20240707001301554"], "x")
