"""Archival on tables we write (COW/MOR x v8/v6): the active timeline stays between
``hoodie.keep.min.commits`` and ``hoodie.keep.max.commits``, the LSM history (v8) / archived log
(v6) holds the rest in Hudi's layout, our archived timeline reads every instant back with its
metadata, and time travel and incremental reads reaching into the archive return what they
returned before archiving.

hudi-rs (0.5.0) is checked for time travel into the archived range, where it returns the same
rows. Its incremental queries return no rows once their window starts before the active
timeline, on our archives and on Hudi-layout ones alike (``test_hudi_rs_incremental_...``
documents that), so incremental results are compared with our own pre-archival reads only.
"""

from __future__ import annotations

import io
import json
import re
import struct
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.options import values
from hudi_format.services import archival, cleaning
from hudi_format.timeline import State, Timeline, TimelineWriter
from hudi_format.timeline.history_writer import LSMTimelineWriter, ActiveAction
from test_cleaning import (VARIANTS, data_files, decode_reference, reference_schema,
                           storage_config)
from writemodel import DATA_COLS, hudi_rs_read, make_rows

LOW = {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5, "hoodie.cleaner.commits.retained": 1,
       "hoodie.timeline.compaction.batch.size": 3, "hoodie.compact.inline.max.delta.commits": 1,
       "hoodie.commits.archival.batch": 4}
LSM_NAME = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")


# the tests drive the services; the metadata table compacts after every deltacommit, because
# archival never passes its latest compaction (Hudi's TimelineArchiverV2 step 4)
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
          "hoodie.metadata.compact.max.delta.commits": "1"}


def _opts(table_type, version):
    return dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
                table_version=version, options=MANUAL)


def _bound(version, inst):
    return inst.completion_time if version >= 8 else inst.timestamp


def _rows(table):
    return canonical_rows(table.select(DATA_COLS))


class Recorder:
    """What the table read as of every commit and incrementally into it, before archival."""

    def __init__(self, path, version):
        self.path, self.version = str(path), version
        self.as_of, self.incremental, self.metadata, self.actions = {}, {}, {}, {}

    def record(self):
        table = hudi.open_table(self.path)
        writes = table.timeline.write_instants()
        prev = "0"
        for inst in writes:
            b = _bound(self.version, inst)
            if inst.timestamp not in self.as_of:
                self.as_of[inst.timestamp] = _rows(table.read(as_of=b))
                self.incremental[inst.timestamp] = (prev, b, _rows(table.read_incremental(prev, b)))
                self.metadata[inst.timestamp] = table.timeline.metadata(inst)
                self.actions[inst.timestamp] = (inst.action, inst.completion_time)
            prev = b


def _grow(path, table_type, version, n, options, recorder=None, archive_each=True):
    """``n`` small upserts into the same file groups (MOR: compacted every 4th commit), archiving
    after every write; returns the number of completed commits seen after each archival."""
    from hudi_format.services.compaction import compact
    counts = []
    for i in range(n):
        hudi.write(str(path), make_rows(range(i % 7, i % 7 + 6), ts=i, seed=i), **_opts(table_type, version))
        st, cfg = storage_config(path)
        if table_type == "MERGE_ON_READ" and i % 4 == 3:
            compact(st, cfg, {"hoodie.compact.inline.max.delta.commits": 1})
        if recorder is not None:
            recorder.record()
        if archive_each:
            archival.archive(st, cfg, options)
            counts.append(len(Timeline.load(st, cfg).write_instants()))
    return counts


# -- independent decoders of the two archive layouts ------------------------------------------
def _read_lsm(path, cfg) -> tuple[int, list[str], list[dict]]:
    history = Path(path) / cfg.history_dir
    version = int((history / "_version_").read_text())
    manifest = json.loads((history / f"manifest_{version}").read_text())
    names = [f["fileName"] for f in manifest["files"]]
    for f in manifest["files"]:
        assert (history / f["fileName"]).stat().st_size == f["fileLen"]
    rows = []
    for name in names:
        m = LSM_NAME.match(name)
        assert m, name
        t = pq.read_table(history / name)
        assert t.schema.names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
        file_rows = t.to_pylist()
        assert m.group(1) == min(r["instantTime"] for r in file_rows)
        assert m.group(2) == max(r["instantTime"] for r in file_rows)
        avro = json.loads(pq.read_metadata(history / name).metadata[b"parquet.avro.schema"])
        assert avro["name"].endswith("HoodieLSMTimelineInstant")
        rows += [dict(r, _level=int(m.group(3))) for r in file_rows]
    return version, names, rows


def _read_v6_log(data: bytes) -> list[dict]:
    """Parse #HUDI# Avro data blocks by the spec; decode records with the reference schema."""
    out, pos = [], 0
    reader_schema = reference_schema("HoodieArchivedMetaEntry")
    while pos < len(data):
        assert data[pos:pos + 6] == b"#HUDI#"
        size = struct.unpack_from(">q", data, pos + 6)[0]
        p = pos + 14
        version, btype = struct.unpack_from(">ii", data, p)
        assert (version, btype) == (1, 3)  # log format 1, AVRO_DATA_BLOCK
        p += 8
        (count,) = struct.unpack_from(">i", data, p)
        p += 4
        header = {}
        for _ in range(count):
            key, length = struct.unpack_from(">ii", data, p)
            header[key] = data[p + 8:p + 8 + length].decode()
            p += 8 + length
        assert list(header) == [2]  # only SCHEMA
        writer_schema = fastavro.parse_schema(json.loads(header[2]))
        (clen,) = struct.unpack_from(">q", data, p)
        content = data[p + 8:p + 8 + clen]
        cver, n = struct.unpack_from(">ii", content, 0)
        assert cver == 3
        q = 8
        for _ in range(n):
            (rlen,) = struct.unpack_from(">i", content, q)
            out.append(fastavro.schemaless_reader(io.BytesIO(content[q + 4:q + 4 + rlen]), writer_schema,
                                                  reader_schema))
            q += 4 + rlen
        total = struct.unpack_from(">q", data, pos + 6 + 8 + size - 8)[0]
        assert total == size + 6
        pos += 14 + size
    return out


# -- the main scenario ------------------------------------------------------------------------
@pytest.mark.parametrize("table_type,version", VARIANTS)
def test_archival_bounds_the_timeline_and_keeps_reads(tmp_path, table_type, version):
    path = tmp_path / "t"
    rec = Recorder(path, version)
    counts = _grow(path, table_type, version, 26, LOW, rec)
    assert max(counts) <= LOW["hoodie.keep.max.commits"]
    assert min(counts[10:]) >= LOW["hoodie.keep.min.commits"]
    st, cfg = storage_config(path)
    table = hudi.open_table(str(path))
    active = {i.timestamp for i in table.timeline.write_instants()}
    archived = table.timeline.archived()
    archived_writes = {i.timestamp for i in archived.write_instants()}
    assert archived_writes and not (active & archived_writes)
    assert archived_writes | active == set(rec.as_of)
    # every archived instant reads back with its action, completion time and metadata
    for ts in archived_writes:
        inst = archived.get(ts)
        assert (inst.action, inst.completion_time) == rec.actions[ts]
        assert archived.metadata(inst) == rec.metadata[ts]
        assert table.timeline.metadata(ts) == rec.metadata[ts]
    # reads as of every commit, archived or not, and incrementally into each, are unchanged
    for ts, rows in rec.as_of.items():
        b = _bound(version, table.timeline.get(ts))
        assert _rows(table.read(as_of=b)) == rows, f"our time travel to {ts}"
        assert _rows(hudi_rs_read(str(path), as_of=b)) == rows, f"hudi-rs time travel to {ts}"
        start, end, inc = rec.incremental[ts]
        assert _rows(table.read_incremental(start, end)) == inc, f"incremental into {ts}"
    assert _rows(table.read()) == _rows(hudi_rs_read(str(path)))

    if version >= 8:
        v, names, rows = _read_lsm(path, cfg)
        assert [r["instantTime"] for r in rows if r["action"] in ("commit", "deltacommit", "replacecommit")] \
            and {r["instantTime"] for r in rows} >= archived_writes
        assert len({r["instantTime"] for r in rows}) == len(rows)  # each instant once per snapshot
        levels = [int(LSM_NAME.match(n).group(3)) for n in names]
        assert max(levels) >= 1, "level 0 files were compacted into level 1"
        assert levels.count(0) < LOW["hoodie.timeline.compaction.batch.size"]
        for r in rows:
            if r["action"] in ("commit", "deltacommit"):
                meta = decode_reference(r["metadata"], "HoodieCommitMetadata")
                assert meta["partitionToWriteStats"]
            assert r["version"] == 1 and r["completionTime"]
        history = Path(path) / cfg.history_dir
        manifests = sorted(int(p.name.split("_")[1]) for p in history.glob("manifest_*"))
        assert manifests[-1] == v and len(manifests) <= 3 + max(levels)
    else:
        logs = sorted((Path(path) / cfg.archive_dir).glob(".commits_.archive.*_1-0-1"))
        assert logs
        records = [r for f in logs for r in _read_v6_log(f.read_bytes())]
        completed = {r["commitTime"] for r in records if r["actionState"] == "COMPLETED"
                     and r["actionType"] in ("commit", "deltacommit")}
        assert completed == archived_writes
        for r in records:
            if r["actionState"] == "COMPLETED" and r["actionType"] in ("commit", "deltacommit"):
                assert r["hoodieCommitMetadata"]["partitionToWriteStats"]
            if r["actionType"] == "compaction" and r["actionState"] == "REQUESTED":
                assert r["hoodieCompactionPlan"]["operations"]


def test_hudi_rs_incremental_does_not_read_archives(tmp_path):
    """Documents the hudi-rs 0.5.0 limitation: incremental windows reaching before the active
    timeline return nothing (our reader returns the rows)."""
    path = tmp_path / "t"
    rec = Recorder(path, 8)
    _grow(path, "COPY_ON_WRITE", 8, 10, LOW, rec)
    first = sorted(rec.incremental)[1]
    start, end, rows = rec.incremental[first]
    assert rows and _rows(hudi.open_table(str(path)).read_incremental(start, end)) == rows
    opts = HudiReadOptions().with_query_type(HudiQueryType.Incremental) \
        .with_start_timestamp(start).with_end_timestamp(end)
    got = sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(path)).build().read(opts))
    assert got == 0


# -- what archival must not pass ---------------------------------------------------------------
def _archived_times(path) -> set[str]:
    st, cfg = storage_config(path)
    return {i.timestamp for i in Timeline.load(st, cfg).archived().instants}


@pytest.mark.parametrize("version", [8, 6])
def test_never_past_a_savepoint(tmp_path, version):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", version, 4, LOW, archive_each=False)
    table = hudi.open_table(str(path))
    sp = table.timeline.write_instants()[1].timestamp
    table.savepoint(sp)
    _grow(path, "COPY_ON_WRITE", version, 10, LOW)
    archived = _archived_times(path)
    assert archived and all(t < sp for t in archived)
    st, cfg = storage_config(path)
    tl = Timeline.load(st, cfg)
    assert tl.get(sp, "savepoint").is_completed and tl.get(sp, "commit").is_completed
    # beyond savepoint: later commits go, the savepointed commit stays active
    archival.archive(st, cfg, {**LOW, "hoodie.archive.beyond.savepoint": True})
    tl = Timeline.load(st, cfg)
    assert any(t > sp for t in _archived_times(path))
    assert tl.get(sp, "commit") is not None and sp not in _archived_times(path)


@pytest.mark.parametrize("version", [8, 6])
def test_never_past_a_pending_instant(tmp_path, version):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", version, 3, LOW, archive_each=False)
    st, cfg = storage_config(path)
    writes = [i.timestamp for i in Timeline.load(st, cfg).write_instants()]
    pending = str(int(writes[1]) + 1)
    TimelineWriter(st, cfg).create_requested("commit", pending)
    for i in range(10):  # more commits, without the write recovery that would roll it back
        from hudi_format.writer.client import WriteClient
        WriteClient(st, cfg, {}).write(make_rows(range(i, i + 4), ts=100 + i, seed=i), "upsert")
    archival.archive(st, cfg, LOW)
    # the cleaner cannot retain from later than the pending write, and archival keeps what the
    # cleaner retains (plus 2): nothing goes
    assert _archived_times(path) == set()
    # without a commit-based cleaner, the pending write itself is the bound: only what completed
    # before the last commit before it goes
    archival.archive(st, cfg, {**LOW, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"})
    assert _archived_times(path) == {writes[0]}
    assert Timeline.load(st, cfg).get(pending).is_requested


def test_never_past_the_last_cleans_earliest_retained_commit(tmp_path):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", 8, 14, LOW, archive_each=False)
    st, cfg = storage_config(path)
    done = cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 9})
    ectr = Timeline.load(st, cfg).raw_metadata(done)["earliestCommitToRetain"]
    assert ectr
    archival.archive(st, cfg, LOW)  # archival's own cleaner setting (1) would allow more
    archived = _archived_times(path)
    assert archived and all(t < ectr for t in archived)
    assert max(i.timestamp for i in Timeline.load(st, cfg).archived().write_instants()) < ectr


def test_pending_compaction_blocks_archival(tmp_path):
    from hudi_format.services.compaction import schedule_compaction
    path = tmp_path / "t"
    _grow(path, "MERGE_ON_READ", 8, 10, LOW, archive_each=False)
    st, cfg = storage_config(path)
    planned = schedule_compaction(st, cfg, {"hoodie.compact.inline.max.delta.commits": 1})
    assert planned is not None
    from hudi_format.writer.client import WriteClient
    for i in range(8):
        WriteClient(st, cfg, {}).write(make_rows(range(i, i + 4), ts=100 + i, seed=i), "upsert")
    tl = Timeline.load(st, cfg)
    last_before = max(i.timestamp for i in tl.write_instants() if i.timestamp < planned.timestamp)
    archival.archive(st, cfg, {**LOW, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"})
    archived = _archived_times(path)
    assert archived and all(t < last_before for t in archived)
    tl = Timeline.load(st, cfg)
    assert tl.get(last_before).is_completed and tl.get(planned.timestamp).is_requested


def test_replacecommit_stays_until_its_victims_are_cleaned(tmp_path):
    path = tmp_path / "t"
    opts = _opts("COPY_ON_WRITE", 8)
    hudi.write(str(path), make_rows(range(30), ts=0), operation="insert", **opts)
    replace = hudi.write(str(path), make_rows([0, 3], ts=1, seed=1), operation="insert_overwrite", **opts)
    _grow(path, "COPY_ON_WRITE", 8, 8, LOW)
    archived = _archived_times(path)
    assert replace.timestamp not in archived and all(t < replace.timestamp for t in archived)
    st, cfg = storage_config(path)
    cleaning.clean(st, cfg, {"hoodie.cleaner.commits.retained": 2})
    archival.archive(st, cfg, LOW)
    assert replace.timestamp in _archived_times(path)
    table = hudi.open_table(str(path))
    assert _rows(table.read()) == _rows(hudi_rs_read(str(path)))


# -- crash safety and options ---------------------------------------------------------------------
def test_lsm_crash_after_commit_before_deleting_active_files(tmp_path):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", 8, 8, LOW, archive_each=False)
    st, cfg = storage_config(path)
    tl = Timeline.load(st, cfg)
    chosen = archival.instants_to_archive(tl, LOW)
    assert chosen
    LSMTimelineWriter(st, cfg, 3).write([ActiveAction.of(tl, i) for i in chosen], tl.timeline_dir)
    # ... the process died before deleting the active files: both timelines hold them
    table = hudi.open_table(str(path))
    rows = _rows(table.read(as_of=chosen[0].completion_time))
    assert len(table.timeline.write_instants(include_archived=True)) == 8
    again = archival.archive(st, cfg, LOW)
    assert [i.timestamp for i in again] == [i.timestamp for i in chosen]
    history = Path(path) / cfg.history_dir
    assert len(list(history.glob("*.parquet"))) == 1 and (history / "_version_").read_text() == "1"
    table.refresh()
    assert len(table.timeline.write_instants(include_archived=True)) == 8
    assert _rows(table.read(as_of=chosen[0].completion_time)) == rows


def test_min_max_follow_the_cleaner(tmp_path):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", 8, 14, LOW, archive_each=False)
    st, cfg = storage_config(path)
    tl = Timeline.load(st, cfg)
    opts = values({"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5}, archival.OPTION_KEYS)
    # the default cleaner keeps 10 commits: 9 after its earliest retained one, + 2
    assert archival.min_max_to_keep(tl, opts) == (11, 13)
    assert len(archival.archive(st, cfg, {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5})) == 3
    assert len(Timeline.load(st, cfg).write_instants()) == 11
    with pytest.raises(Exception, match="hoodie.keep.max.commits"):
        archival.archive(st, cfg, {"hoodie.keep.min.commits": 5, "hoodie.keep.max.commits": 5})


def test_min_raised_warns_of_the_setting_not_of_a_pending_instant(tmp_path, caplog):
    """A keep.min.commits at or below the cleaner's retained commits is a setting to fix (a
    warning); a pending write or service that pins the cleaner (every commit since it retained
    while it runs, so archival keeps them too) is the table at work, logged at debug only."""
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", 8, 14, LOW, archive_each=False)
    st, cfg = storage_config(path)
    few = values({"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 5}, archival.OPTION_KEYS)
    ok = values({"hoodie.keep.min.commits": 6, "hoodie.keep.max.commits": 8,
                 "hoodie.cleaner.commits.retained": 4}, archival.OPTION_KEYS)
    with caplog.at_level("DEBUG", logger="hudi_format.services.archival"):
        assert archival.min_max_to_keep(Timeline.load(st, cfg), ok) == (6, 8)
        assert not caplog.records
        archival.min_max_to_keep(Timeline.load(st, cfg), few)
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        caplog.clear()
        second = Timeline.load(st, cfg).write_instants()[1].timestamp   # a write pending since then
        pinned = str(int(second) + 1)
        (Path(path) / cfg.timeline_dir / f"{pinned}.commit.requested").write_bytes(b"")
        lo, hi = archival.min_max_to_keep(Timeline.load(st, cfg), ok)
        assert lo > 6 and hi - lo == 2
        assert [r.levelname for r in caplog.records] == ["DEBUG"]


def test_nothing_to_archive_below_max(tmp_path):
    path = tmp_path / "t"
    _grow(path, "COPY_ON_WRITE", 6, 5, LOW, archive_each=False)
    st, cfg = storage_config(path)
    before = sorted(p.name for p in (Path(path) / ".hoodie").iterdir())
    assert archival.archive(st, cfg, LOW) == []
    assert sorted(p.name for p in (Path(path) / ".hoodie").iterdir()) == before
    assert data_files(path)


def test_service_options():
    o = values({}, archival.OPTION_KEYS)
    assert o["hoodie.keep.min.commits"] == 20 and o["hoodie.keep.max.commits"] == 30
    assert o["hoodie.timeline.compaction.batch.size"] == 10
    assert o["hoodie.archive.automatic"] is True


@pytest.mark.parametrize("version", [6, 8])
def test_a_timeline_listed_before_an_archival_still_reads_what_it_moved(tmp_path, version):
    """Another process archives between our listing and our read of an instant (found by the
    services soak: clustering failed with "cannot read timeline file"): archival writes the
    archive before it deletes the active files, so the instant is read from the archive."""
    path = str(tmp_path / "t")
    for i in range(8):
        hudi.write(path, make_rows(range(i * 10, i * 10 + 10), ts=i), operation="upsert",
                   **_opts("COPY_ON_WRITE", version))
    before = hudi.open_table(path).timeline
    first = before.completed[0]
    assert hudi.open_table(path).archive(LOW)
    after = hudi.open_table(path).timeline
    assert first not in after.completed   # archived since ``before`` was listed
    assert before.raw_metadata(first) == after.raw_metadata(first)
    assert before.metadata(first).partition_to_write_stats
    with pytest.raises(hudi.HudiError):   # an instant neither active nor archived still fails
        before.metadata("20000101000000000")


def _plan_files(plan, action):
    """What a service plan is about, for comparing an active read with an archived one."""
    if action == "clean":
        return plan.get("policy"), (plan.get("earliestInstantToRetain") or {}).get("timestamp")
    if "operations" in plan:   # compaction
        return sorted(op["fileId"] for op in plan["operations"])
    groups = (plan.get("clusteringPlan") or {}).get("inputGroups") or ()
    return sorted(s["fileId"] for g in groups for s in g["slices"])


@pytest.mark.parametrize("version", [6, 8])
def test_a_timeline_listed_before_an_archival_still_reads_the_plans_it_moved(tmp_path, version):
    """As above for plans (requested/inflight files): archival deletes them with the completed
    file, and plans of completed services are read (archival reads the last clean's plan); the
    archive keeps compaction, clustering and clean plans. A plan file still there but unreadable,
    or a plan the archive does not hold, still fails naming the file."""
    path = str(tmp_path / "t")
    opts = _opts("MERGE_ON_READ", version)

    def write(i, keys):
        hudi.write(path, make_rows(keys, ts=i), operation="upsert", **opts)

    for i in range(3):
        write(i, range(i * 10, i * 10 + 10))
    one = {"hoodie.compact.inline.max.delta.commits": 1}
    compaction = hudi.open_table(path).compact(one)
    clustering = hudi.open_table(path).cluster()
    for i in range(3, 6):
        write(i, range(i * 10, i * 10 + 10))
    clean = hudi.open_table(path).clean({"hoodie.cleaner.commits.retained": 1})
    for i in range(6, 12):
        write(i, range(10))
    last_compaction = hudi.open_table(path).compact(one)
    last_clean = hudi.open_table(path).clean({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                              "hoodie.cleaner.fileversions.retained": 1})
    for i in range(12, 14):
        write(i, range(10))
    services = [compaction, clustering, clean]
    assert all(services) and last_compaction and last_clean
    witness = hudi.open_table(path).timeline
    active_plans = {i.timestamp: _plan_files(witness.plan(i), i.action) for i in services}
    before, broken = hudi.open_table(path).timeline, hudi.open_table(path).timeline
    moved = hudi.open_table(path).archive(LOW)
    assert {i.timestamp for i in services} <= {i.timestamp for i in moved}
    after = hudi.open_table(path).timeline
    for inst in moved:
        assert before.plan(inst) == after.plan(inst), inst
    for inst in services:
        assert _plan_files(before.plan(inst), inst.action) == active_plans[inst.timestamp]
        assert before.plan(inst.timestamp, State.REQUESTED) == after.plan(inst.timestamp, State.REQUESTED)
    tdir = Path(path) / after.timeline_dir
    # a plan file that is there but unreadable is not replaced by the archived copy
    garbage = before.files_of(clustering)[State.REQUESTED]
    (tdir / garbage).write_bytes(b"not a plan")
    with pytest.raises(hudi.TimelineError, match=re.escape(garbage)):
        broken.plan(clustering)
    # a plan gone from an instant the archive does not hold (its writer removed it)
    gone = after.files_of(last_clean)[State.REQUESTED]
    (tdir / gone).unlink()
    with pytest.raises(hudi.TimelineError, match=re.escape(gone) + ".*not found"):
        broken.plan(last_clean)
