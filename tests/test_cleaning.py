"""Cleaning on tables we write (COW/MOR x v8/v6): exactly the slices each policy allows go, and
every reader within the retained commits (ours and hudi-rs) reads what it read before.

The expected deletions are computed here from the file names on storage and the list of
commits, independently of the planner; the plan and metadata files are decoded with the
reference Avro schemas in ../shared/reference/avro (not the copies the writer uses).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import posixpath
from collections import defaultdict
from pathlib import Path

import fastavro
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.config import TableConfig
from hudi_format.errors import HudiError, InvalidOptionError
from hudi_format.options import values
from hudi_format.services import cleaning
from hudi_format.transaction import ServiceBusyError
from hudi_format.storage import Storage
from hudi_format.timeline import State, Timeline, TimelineWriter
from hudi_format.timeline.avro_schemas import strip_comments
from hudi_format.view import parse_base_file_name, parse_log_file_name
from writemodel import DATA_COLS, hudi_rs_read, make_rows

REFERENCE_AVRO = Path("/work/shared/reference/avro")
VARIANTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]
IDS = range(30)


# -- helpers shared with test_archival ---------------------------------------------------------
def reference_schema(name: str):
    """A fastavro schema parsed from the reference .avsc files (named types resolved)."""
    raw = {}
    for p in REFERENCE_AVRO.glob("*.avsc"):
        raw[p.stem] = json.loads(strip_comments(p.read_text()))
    named: dict = {}
    pending = dict(raw)
    while pending:  # parse in dependency order: retry what refers to types not parsed yet
        progress = False
        for stem, schema in list(pending.items()):
            try:
                fastavro.parse_schema(schema, named_schemas=named)
            except fastavro.schema.UnknownType:
                continue
            del pending[stem]
            progress = True
        if not progress:
            raise AssertionError(f"unresolvable reference schemas: {sorted(pending)}")
    # the reader needs every named type inline: expand the references
    return fastavro.parse_schema(raw[name], named_schemas=dict(named), expand=True)


def decode_reference(data: bytes, name: str) -> dict:
    """Decode an Avro container payload with the reference schema as reader schema."""
    reader = fastavro.reader(io.BytesIO(data), reader_schema=reference_schema(name))
    (record,) = list(reader)
    return record


def data_files(path) -> set[str]:
    st = Storage(str(path))
    return {f.path for f in st.walk_files("", skip_dirs=(".hoodie",))
            if not f.name.startswith(".hoodie_partition_metadata")}


def bound(table, inst) -> str:
    return inst.completion_time if table.version >= 8 else inst.timestamp


CLEANED = "cleaned"   # our time travel to an instant whose slices the cleaner removed fails


def snapshot_reads(path) -> dict:
    """Our and hudi-rs' rows now and as of every completed write instant (ours: :data:`CLEANED`
    where the cleaner removed slices that instant needs)."""
    table = hudi.open_table(str(path))
    out = {"latest": (canonical_rows(table.read()), canonical_rows(hudi_rs_read(str(path)).select(DATA_COLS)))}
    for inst in table.timeline.write_instants():
        b = bound(table, inst)
        try:
            ours = canonical_rows(table.read(as_of=b))
        except hudi.FileMissingError:
            ours = CLEANED
        out[inst.timestamp] = (ours, canonical_rows(hudi_rs_read(str(path), as_of=b).select(DATA_COLS)))
    return out


def build_table(path, table_type: str, version: int, rounds: int) -> list[str]:
    """Insert 30 keys into 3 partitions, then ``rounds`` upserts of 12 of them. MOR tables are
    compacted after every upsert, so every round adds a slice to each file group. Returns the
    request times of the completed writes (and compactions), oldest first."""
    opts = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
                table_version=version)
    hudi.write(str(path), make_rows(IDS, ts=0), operation="insert", **opts)
    for r in range(1, rounds + 1):
        hudi.write(str(path), make_rows(range(12), ts=r, seed=r), **opts)
        if table_type == "MERGE_ON_READ":
            from hudi_format.services.compaction import compact
            st = Storage(str(path))
            assert compact(st, TableConfig.load(st), {"hoodie.compact.inline.max.delta.commits": 1})
    return [i.timestamp for i in hudi.open_table(str(path)).timeline.write_instants()]


def slices_on_storage(path, version: int) -> dict[tuple[str, str], list[tuple[str, list[str]]]]:
    """(partition, file id) -> [(base instant, [files of the slice])] oldest first, from names."""
    bases, logs = defaultdict(dict), defaultdict(list)
    for rel in data_files(path):
        part, name = posixpath.split(rel)
        bf = parse_base_file_name(name)
        if bf:
            bases[(part, bf.file_id)][bf.instant_time] = rel
            continue
        lf = parse_log_file_name(name)
        if lf:
            logs[(part, lf.file_id)].append((lf.instant_time, rel))
    out = {}
    for key in set(bases) | set(logs):
        instants = sorted(bases[key])
        slices = {i: [bases[key][i]] for i in instants}
        for t, rel in logs[key]:
            owner = max([i for i in instants if i <= t], default=None)
            slices.setdefault(owner, []).append(rel)
        out[key] = sorted(((i, files) for i, files in slices.items()), key=lambda x: x[0] or "")
    return out


def expected_by_commits(path, version, ectr: str, pinned=frozenset()) -> set[str]:
    doomed = set()
    for slices in slices_on_storage(path, version).values():
        newest = slices[-1][0]
        before = max((i for i, _ in slices if i < ectr), default=None)
        for i, files in slices:
            if i in (newest, before) or i >= ectr or any(posixpath.basename(f) in pinned for f in files):
                continue
            doomed.update(files)
    return doomed


def expected_by_versions(path, version, keep: int) -> set[str]:
    doomed = set()
    for slices in slices_on_storage(path, version).values():
        for _, files in slices[:-keep]:
            doomed.update(files)
    return doomed


def storage_config(path):
    st = Storage(str(path))
    return st, TableConfig.load(st)


def assert_reads_kept(path, before: dict, keys) -> None:
    """Reads as of ``keys`` (and now) are unchanged by the clean, for both readers; as of any
    other instant our read is unchanged too or fails as cleaned, never a different answer."""
    after = snapshot_reads(path)
    for k in ["latest", *keys]:
        assert after[k][0] == before[k][0], f"our read as of {k} changed"
        assert after[k][1] == before[k][1], f"hudi-rs read as of {k} changed"
        assert after[k][1] == canonical_rows([{c: r[c] for c in DATA_COLS} for r in after[k][0]])
    for k in after:
        assert after[k][0] in (before[k][0], CLEANED), f"our read as of {k} changed silently"


def clean_files(path, ts: str) -> tuple[dict, dict]:
    """(decoded plan, decoded metadata) of the clean requested at ``ts``, by reference schemas."""
    tl = Timeline.load(*storage_config(path))
    files = tl.files_of(tl.get(ts))
    tdir = Path(path) / tl.timeline_dir
    plan = decode_reference((tdir / files[State.REQUESTED]).read_bytes(), "HoodieCleanerPlan")
    meta = decode_reference((tdir / files[State.COMPLETED]).read_bytes(), "HoodieCleanMetadata")
    return plan, meta


# -- policies ---------------------------------------------------------------------------------
@pytest.mark.parametrize("table_type,version", VARIANTS)
def test_keep_latest_commits(tmp_path, table_type, version):
    path = tmp_path / "t"
    writes = build_table(path, table_type, version, rounds=5)
    before_reads = snapshot_reads(path)
    before = data_files(path)
    retained = 3
    ectr = writes[len(writes) - retained]
    doomed = expected_by_commits(path, version, ectr)
    assert doomed, "the scenario must leave something to clean"
    st, cfg = storage_config(path)
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": retained})
    assert done is not None and done.action == "clean" and done.is_completed
    assert data_files(path) == before - doomed
    assert_reads_kept(path, before_reads, [w for w in writes if w >= ectr])

    plan, meta = clean_files(path, done.timestamp)
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    action = Timeline.load(*storage_config(path)).get(ectr).action
    assert plan["earliestInstantToRetain"] == {"timestamp": ectr, "action": action, "state": "COMPLETED"}
    assert plan["lastCompletedCommitTimestamp"] == writes[-1]
    planned = {posixpath.join(p, posixpath.basename(f["filePath"]))
               for p, infos in plan["filePathsToBeDeletedPerPartition"].items() for f in infos}
    assert planned == doomed
    assert all(f["filePath"].startswith("file:/") for infos in plan["filePathsToBeDeletedPerPartition"].values()
               for f in infos)
    assert meta["totalFilesDeleted"] == len(doomed) and meta["earliestCommitToRetain"] == ectr
    assert meta["startCleanTime"] == done.timestamp and meta["lastCompletedCommitTimestamp"] == writes[-1]
    assert {posixpath.join(p, n) for p, m in meta["partitionMetadata"].items() for n in m["successDeleteFiles"]} == doomed
    assert all(not m["failedDeleteFiles"] and m["policy"] == "KEEP_LATEST_COMMITS"
               for m in meta["partitionMetadata"].values())

    # running clean again is a no-op: nothing planned, nothing deleted, no new instant
    n_instants = len(Timeline.load(st, cfg).instants)
    assert cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": retained}) is None
    assert data_files(path) == before - doomed
    assert len(Timeline.load(st, cfg).instants) == n_instants


def test_keep_latest_commits_default_keeps_ten(tmp_path):
    path = tmp_path / "t"
    writes = build_table(path, "COPY_ON_WRITE", 8, rounds=10)
    st, cfg = storage_config(path)
    assert len(writes) == 11
    before = data_files(path)
    doomed = expected_by_commits(path, 8, writes[1])
    assert cleaning.earliest_commit_to_retain(Timeline.load(st, cfg), "KEEP_LATEST_COMMITS", 10, 24).timestamp == writes[1]
    assert cleaning.clean(st, cfg) is None  # writes[0]'s slice is the latest before writes[1]: kept
    assert data_files(path) == before and not doomed


@pytest.mark.parametrize("table_type,version", VARIANTS)
def test_keep_latest_file_versions(tmp_path, table_type, version):
    path = tmp_path / "t"
    writes = build_table(path, table_type, version, rounds=4)
    before_reads = snapshot_reads(path)
    before = data_files(path)
    doomed = expected_by_versions(path, version, keep=2)
    assert doomed
    st, cfg = storage_config(path)
    opts = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": 2}
    done = cleaning.clean(st, cfg, opts)
    assert data_files(path) == before - doomed
    # every file group keeps its two newest slices, so the last two writes still read back
    assert_reads_kept(path, before_reads, writes[-2:])
    plan, meta = clean_files(path, done.timestamp)
    assert plan["earliestInstantToRetain"] is None and plan["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert meta["earliestCommitToRetain"] == "" and meta["totalFilesDeleted"] == len(doomed)
    assert cleaning.clean(st, cfg, opts) is None


def _epoch_ms(ts: str) -> int:
    local = dt.datetime.strptime(ts[:14], "%Y%m%d%H%M%S")  # LOCAL timeline timezone
    return int(local.timestamp()) * 1000 + int(ts[14:17])


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 6)])
def test_keep_latest_by_hours(tmp_path, monkeypatch, table_type, version):
    path = tmp_path / "t"
    writes = build_table(path, table_type, version, rounds=4)
    before_reads = snapshot_reads(path)
    before = data_files(path)
    ectr = writes[3]
    # "now" is one hour after writes[3] was requested: with 1 hour retained, it is the first kept
    monkeypatch.setattr(cleaning, "_now_ms", lambda: _epoch_ms(ectr) + 3_600_000)
    doomed = expected_by_commits(path, version, ectr)
    assert doomed
    st, cfg = storage_config(path)
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
                                    "hoodie.cleaner.hours.retained": 1})
    assert data_files(path) == before - doomed
    assert_reads_kept(path, before_reads, writes[3:])
    plan, _ = clean_files(path, done.timestamp)
    assert plan["policy"] == "KEEP_LATEST_BY_HOURS" and plan["earliestInstantToRetain"]["timestamp"] == ectr


def test_hours_retained_covering_everything_cleans_nothing(tmp_path):
    path = tmp_path / "t"
    build_table(path, "COPY_ON_WRITE", 8, rounds=3)
    st, cfg = storage_config(path)
    before = data_files(path)
    assert cleaning.clean(st, cfg, {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS"}) is None
    assert data_files(path) == before


# -- what is never deleted ----------------------------------------------------------------------
@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6)])
def test_savepointed_slices_survive(tmp_path, table_type, version):
    path = tmp_path / "t"
    writes = build_table(path, table_type, version, rounds=4)
    table = hudi.open_table(str(path))
    sp = writes[1]
    table.savepoint(sp)
    before_reads = snapshot_reads(path)
    before = data_files(path)
    st, cfg = storage_config(path)
    pinned = set()
    for part in (lambda tl: tl.raw_metadata(tl.get(sp, "savepoint")))(Timeline.load(st, cfg))["partitionMetadata"].values():
        pinned.update(part["savepointDataFile"])
    assert pinned
    ectr = writes[-1]
    doomed = expected_by_commits(path, version, ectr, pinned)
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 1})
    assert data_files(path) == before - doomed
    assert {posixpath.basename(f) for f in data_files(path)} >= pinned
    assert_reads_kept(path, before_reads, [sp, ectr])  # the savepoint still reads back, both readers
    plan, meta = clean_files(path, done.timestamp)
    assert plan["extraMetadata"] == {"savepointed_timestamps": sp}
    assert meta["extraMetadata"] == {"savepointed_timestamps": sp}


def test_pending_commit_bounds_the_earliest_commit_to_retain(tmp_path):
    path = tmp_path / "t"
    writes = build_table(path, "COPY_ON_WRITE", 8, rounds=5)
    st, cfg = storage_config(path)
    # a write requested between writes[2] and writes[3] that never finished
    pending = str(int(writes[2]) + 1)
    assert pending < writes[3]
    TimelineWriter(st, cfg).create_requested("commit", pending)
    tl = Timeline.load(st, cfg)
    ectr = cleaning.earliest_commit_to_retain(tl, "KEEP_LATEST_COMMITS", 1, 24)
    assert ectr.timestamp == writes[2]
    before = data_files(path)
    doomed = expected_by_commits(path, 8, writes[2])
    cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 1})
    assert data_files(path) == before - doomed


def _slice_of(path, version, at: str):
    """One file group's slice with base instant ``at``: (partition, file id, files)."""
    for (part, fid), slices in sorted(slices_on_storage(path, version).items()):
        for base, files in slices:
            if base == at:
                return part, fid, files
    raise AssertionError(f"no slice at {at}")


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 6)])
def test_pending_compaction_and_clustering_slices_survive(tmp_path, table_type, version):
    path = tmp_path / "t"
    writes = build_table(path, table_type, version, rounds=4)
    st, cfg = storage_config(path)
    base_instant = writes[1] if table_type == "COPY_ON_WRITE" else writes[2]
    part, fid, files = _slice_of(path, version, base_instant)
    writer = TimelineWriter(st, cfg)
    if table_type == "MERGE_ON_READ":
        op = {"baseInstantTime": base_instant, "deltaFilePaths": [posixpath.basename(f) for f in files[1:]],
              "dataFilePath": posixpath.basename(files[0]), "fileId": fid, "partitionPath": part,
              "metrics": {}, "bootstrapFilePath": None}
        writer.create_requested("compaction", plan={"operations": [op], "extraMetadata": None, "version": 2})
    else:
        sl = {"dataFilePath": files[0], "deltaFilePaths": [], "fileId": fid, "partitionPath": part,
              "bootstrapFilePath": "", "version": 1}
        plan = {"operationType": "CLUSTER", "version": 1, "extraMetadata": {},
                "clusteringPlan": {"inputGroups": [{"slices": [sl], "metrics": {}, "numOutputFileGroups": 1,
                                                    "extraMetadata": None, "version": 1}],
                                   "strategy": {"strategyClassName": "x", "strategyParams": {}, "version": 1},
                                   "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True}}
        writer.create_requested("clustering", plan=plan)
    before = data_files(path)
    doomed = expected_by_versions(path, version, keep=1)
    protected = set(files)
    if table_type == "MERGE_ON_READ":  # the compaction works on this slice and everything newer
        protected |= {f for (p, i), slices in slices_on_storage(path, version).items() if (p, i) == (part, fid)
                      for b, fs in slices if b >= base_instant for f in fs}
    assert protected & doomed, "without the guard the policy would delete the planned slice"
    cleaning.clean(st, cfg, {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                             "hoodie.cleaner.fileversions.retained": 1})
    assert data_files(path) == before - (doomed - protected)


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 8)])
def test_replaced_file_groups_go_after_retention(tmp_path, table_type, version):
    path = tmp_path / "t"
    opts = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type, table_version=version)
    hudi.write(str(path), make_rows(IDS, ts=0), operation="insert", **opts)
    replaced = {f for f in data_files(path) if f.startswith("a/")}
    hudi.write(str(path), make_rows([0, 3, 6], ts=1, seed=1), operation="insert_overwrite", **opts)
    for r in range(2, 5):
        hudi.write(str(path), make_rows([1, 2], ts=r, seed=r), **opts)
    writes = [i.timestamp for i in hudi.open_table(str(path)).timeline.write_instants()]
    before_reads = snapshot_reads(path)
    st, cfg = storage_config(path)
    # the replacecommit (writes[1]) is still within the 4 retained commits: its victims stay
    cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 4})
    assert replaced <= data_files(path)
    # with 2 retained, the replacecommit is older than the earliest retained commit: they go
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 2})
    assert done is not None and not (replaced & data_files(path))
    assert any(f.startswith("a/") for f in data_files(path))  # the new file group stays
    assert_reads_kept(path, before_reads, writes[-2:])
    _, meta = clean_files(path, done.timestamp)
    assert {posixpath.join("a", n) for n in meta["partitionMetadata"]["a"]["successDeleteFiles"]} >= replaced


def test_delete_partition_drops_the_folder(tmp_path):
    path = tmp_path / "t"
    opts = dict(record_key="id", ordering_field="ts", partition_by="p", table_version=8)
    hudi.write(str(path), make_rows(IDS, ts=0), operation="insert", **opts)
    hudi.write(str(path), None, operation="delete_partition",
               options={"hoodie.datasource.write.partitions.to.delete": "b"}, **opts)
    for r in range(2, 4):
        hudi.write(str(path), make_rows([0], ts=r, seed=r), **opts)
    before_reads = snapshot_reads(path)
    st, cfg = storage_config(path)
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 1})
    assert done is not None
    plan, meta = clean_files(path, done.timestamp)
    assert plan["partitionsToBeDeleted"] == ["b"] and meta["partitionMetadata"]["b"]["isPartitionDeleted"]
    assert not (Path(path) / "b").exists()
    assert_reads_kept(path, before_reads, [])


# -- crash safety -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [8, 6])
def test_crash_after_planning_is_finished_by_next_clean(tmp_path, version):
    path = tmp_path / "t"
    writes = build_table(path, "COPY_ON_WRITE", version, rounds=4)
    before_reads = snapshot_reads(path)
    st, cfg = storage_config(path)
    opts = {"hoodie.cleaner.commits.retained": 2}
    before = data_files(path)
    doomed = expected_by_commits(path, version, writes[-2])
    requested = cleaning.schedule_clean(st, cfg, opts)  # ... and the process dies here
    assert requested.state is State.REQUESTED and data_files(path) == before
    assert decode_reference((Path(path) / cfg.timeline_dir / requested.file_name).read_bytes(),
                            "HoodieCleanerPlan")["policy"] == "KEEP_LATEST_COMMITS"
    done = cleaning.clean(st, cfg, opts)
    assert done.timestamp == requested.timestamp  # the pending plan was executed, no new one
    assert data_files(path) == before - doomed
    assert [i.timestamp for i in Timeline.load(st, cfg).instants if i.action == "clean"] == [requested.timestamp]
    assert_reads_kept(path, before_reads, writes[-2:])


def test_crash_mid_execution_is_finished_by_run_clean(tmp_path):
    path = tmp_path / "t"
    writes = build_table(path, "MERGE_ON_READ", 8, rounds=4)
    st, cfg = storage_config(path)
    opts = {"hoodie.cleaner.commits.retained": 2}
    before = data_files(path)
    doomed = sorted(expected_by_commits(path, 8, writes[-2]))
    requested = cleaning.schedule_clean(st, cfg, opts)
    TimelineWriter(st, cfg).transition_to_inflight(requested)
    st.delete(doomed[0])  # the crashed run got as far as deleting one file
    done = cleaning.run_clean(st, cfg)
    assert done.timestamp == requested.timestamp
    assert data_files(path) == before - set(doomed)
    _, meta = clean_files(path, done.timestamp)
    failed = [posixpath.join(p, n) for p, m in meta["partitionMetadata"].items() for n in m["failedDeleteFiles"]]
    assert failed == [doomed[0]] and meta["totalFilesDeleted"] == len(doomed) - 1
    with pytest.raises(HudiError):
        cleaning.run_clean(st, cfg)  # nothing pending any more


def test_a_pending_clean_another_process_completes_is_skipped(tmp_path, monkeypatch):
    """Two processes list the same pending clean; one runs it. The other, reaching it after,
    skips it (found by a soak: it failed with "is not a pending clean") and goes on to plan."""
    path = tmp_path / "t"
    build_table(path, "COPY_ON_WRITE", 8, rounds=4)
    st, cfg = storage_config(path)
    opts = {"hoodie.cleaner.commits.retained": 2}
    requested = cleaning.schedule_clean(st, cfg, opts)
    listed = Timeline.load(st, cfg)                       # the slow process lists it pending
    done = cleaning.run_clean(st, cfg, requested.timestamp, opts)   # the other one runs it
    with pytest.raises(ServiceBusyError, match="completed by another process"):
        cleaning.run_clean(st, cfg, requested.timestamp, opts)
    monkeypatch.setattr(Timeline, "current", classmethod(lambda cls, *a, **k: listed))
    result = cleaning.clean(st, cfg, opts)     # skips the clean it listed pending; plans anew
    assert result is None or result.timestamp > done.timestamp
    assert [i.timestamp for i in Timeline.load(st, cfg).instants if i.action == "clean"][0] == done.timestamp
    with pytest.raises(InvalidOptionError, match="not a pending clean"):
        cleaning.run_clean(st, cfg, "20000101000000000", opts)


def test_trigger_max_commits(tmp_path):
    path = tmp_path / "t"
    writes = build_table(path, "COPY_ON_WRITE", 8, rounds=4)
    st, cfg = storage_config(path)
    opts = {"hoodie.cleaner.commits.retained": 1, "hoodie.clean.max.commits": 2}
    assert cleaning.clean(st, cfg, opts) is not None
    hudi.write(str(path), make_rows(range(12), ts=9, seed=9), record_key="id", ordering_field="ts", partition_by="p")
    assert cleaning.schedule_clean(st, cfg, opts) is None  # 1 commit since the last clean < 2
    hudi.write(str(path), make_rows(range(12), ts=10, seed=10), record_key="id", ordering_field="ts", partition_by="p")
    assert cleaning.schedule_clean(st, cfg, opts) is not None
    assert len(writes) == 5


def test_service_options():
    defaults = values({}, cleaning.OPTION_KEYS)
    assert defaults["hoodie.cleaner.commits.retained"] == 10
    assert defaults["hoodie.cleaner.fileversions.retained"] == 3
    assert defaults["hoodie.cleaner.hours.retained"] == 24
    assert defaults["hoodie.cleaner.policy"] == "KEEP_LATEST_COMMITS"
    with pytest.raises(InvalidOptionError):
        values({"hoodie.cleaner.policy": "KEEP_EVERYTHING"}, cleaning.OPTION_KEYS)
