"""The metadata table we write: layout and encodings as Hudi's, in step with every data commit,
compacted and cleaned, and read by hudi-rs (metadata listing on) with the same rows.

Truth comes from outside our writer: Hudi 1.1's own metadata tables in the fixtures (schema text,
file names, properties, deltacommit shapes), the reference Avro schema (every record decodes
with it), the storage listing of committed files, the data files themselves (bloom filters in
their footers, column values, record keys), and hudi-rs. (The indexes and tagging through them:
test_metadata_writer_indexes.py; bootstrap, rollback, restore and archival:
test_metadata_writer_lifecycle.py.)
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import shutil
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.hfile import HFileReader
from hudi_format.log import BlockType, read_log_file
from hudi_format.metadata import keys as K
from hudi_format.metadata import payloads as P
from hudi_format.metadata.init import metadata_table_properties
from hudi_format.metadata.reader import MetadataTable
from hudi_format.read.snapshot import ReadState
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from hudi_format.timeline.avro_schemas import strip_comments
from hudi_format.view.file_names import parse_log_file_name
from writemodel import Model, committed_files, data_rows, make_rows, model_rows

FIXTURE = "sample_table__cow__v9_txns_simple_meta"
ALL_INDEXES = {"hoodie.metadata.index.column.stats.enable": "true",
               "hoodie.metadata.index.bloom.filter.enable": "true",
               "hoodie.metadata.record.index.enable": "true",
               "hoodie.metadata.record.index.min.filegroup.count": "3"}


# -- helpers -------------------------------------------------------------------------------------
def _fixture_mdt(fixture_tables) -> Storage:
    root = fixture_tables(FIXTURE)
    props = next(root.rglob(".hoodie/metadata/.hoodie/hoodie.properties"))
    return Storage(str(props.parent.parent))


def _write(path, rows, op="upsert", ttype="COPY_ON_WRITE", version=8, options=None, **kw):
    opts = {"hoodie.parquet.small.file.limit": "0"}
    opts.update(options or {})
    kw.setdefault("partition_by", "p")
    return hudi.write(str(path), rows, operation=op, record_key="id", ordering_field="ts",
                      table_type=ttype, table_version=version, table_name="t", options=opts, **kw)


def _st(path) -> tuple[Storage, TableConfig]:
    st = Storage(str(path))
    return st, TableConfig.load(st)


def mdt_files(path) -> dict[str, dict[str, int]]:
    st, cfg = _st(path)
    mt = MetadataTable(st, cfg)
    assert mt.staleness() is None, mt.staleness()
    return {p: {posixpath.basename(f.path): f.size for f in infos}
            for p, infos in mt.files_listing().items() if infos}


def _rs_table(path, metadata: bool):
    """hudi-rs on the table; without the metadata table it must list storage: hudi-rs uses the
    metadata table whenever ``files`` is declared, so that case reads a copy declaring none."""
    if not metadata:
        copy = Path(str(path) + "-listing")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy, ignore=shutil.ignore_patterns("metadata"))
        props = copy / ".hoodie" / "hoodie.properties"
        props.write_text("".join(line for line in props.read_text().splitlines(True)
                                 if not line.startswith("hoodie.table.metadata.partitions")))
        path = copy
    return HudiTableBuilder.from_base_uri(str(path)).with_hudi_option(
        "hoodie.metadata.enable", "true" if metadata else "false").build()


def rs_rows(path, metadata: bool) -> list[dict]:
    t = _rs_table(path, metadata)
    batches = t.read()
    table = pa.Table.from_batches(batches) if batches else t.get_schema_with_meta_fields().empty_table()
    return data_rows(table)


def rs_slices(path, metadata: bool) -> list[tuple]:
    return sorted((s.partition_path, s.file_id, s.base_file_relative_path(),
                   tuple(s.log_files_relative_paths())) for s in _rs_table(path, metadata).get_file_slices())


def check_in_step(path, model: Model, hudi_rs: bool = True) -> None:
    """The MDT lists exactly the committed files; every reader returns the model's rows."""
    assert mdt_files(path) == {p: f for p, f in committed_files(path).items() if f}
    assert data_rows(hudi.open_table(str(path)).read()) == model_rows(model.rows)
    if hudi_rs:
        assert rs_slices(path, True) == rs_slices(path, False)
        assert rs_rows(path, True) == model_rows(model.rows) == rs_rows(path, False)


def reference_schema() -> dict:
    from importlib import resources
    text = (resources.files("hudi_format") / "avro" / "HoodieMetadata.avsc").read_text("utf-8")
    return fastavro.parse_schema(json.loads(strip_comments(text)))


def mdt_cells(path):
    """Every (partition, file, key, value bytes, schema) cell of the MDT's HFiles and blocks."""
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    for f in md.walk_files("", skip_dirs=(".hoodie",)):
        part, name = posixpath.split(f.path)
        if name.endswith(".hfile"):
            r = HFileReader(md, f.path)
            for k, v in r.items():
                yield part, f.path, k, v, r.file_info[b"schema"].decode()
        elif parse_log_file_name(name):
            for block in read_log_file(md, f.path):
                if block.block_type == BlockType.HFILE_DATA:
                    r = HFileReader.from_bytes(block.content(), f.path)
                    for k, v in r.items():
                        yield part, f.path, k, v, block.schema_json


# -- formats, against Hudi's own metadata table ------------------------------------------------------
def test_schema_text_is_what_hudi_writes(fixture_tables):
    md = _fixture_mdt(fixture_tables)
    logs = [f.path for f in md.walk_files("files") if ".log." in f.path]
    headers = {b.schema_json for p in logs for b in read_log_file(md, p) if b.block_type == BlockType.HFILE_DATA}
    assert headers == {P.SCHEMA_JSON}
    bases = [f.path for f in md.walk_files("") if f.path.endswith(".hfile")]
    assert {HFileReader(md, p).file_info[b"schema"].decode() for p in bases} == {P.SCHEMA_JSON}
    tl = Timeline.load(md, TableConfig.load(md))
    schemas = {tl.raw_metadata(i)["extraMetadata"]["schema"] for i in tl.completed
               if i.action in ("deltacommit", "commit")}
    assert schemas == {P.DATA_SCHEMA_JSON}


def test_record_index_cells_encode_byte_for_byte(fixture_tables):
    """Hudi's record index cells (log blocks: meta fields null) from their decoded content."""
    md = _fixture_mdt(fixture_tables)
    checked = 0
    for f in md.walk_files("record_index"):
        if ".log." not in f.path:
            continue
        for block in read_log_file(md, f.path):
            if block.block_type != BlockType.HFILE_DATA:
                continue
            for k, v in HFileReader.from_bytes(block.content(), f.path).items():
                rec = P.decode_value(v, k.decode(), P.SCHEMA_JSON)["recordIndexMetadata"]
                fid = K.decode_record_index_file_id(rec)
                assert P.encode_record_index_value(rec["partitionName"], fid, rec["instantTime"]) == v
                assert P.encode_value(P.record_index_record(k.decode(), rec["partitionName"], fid,
                                                            rec["instantTime"])) == v
                checked += 1
    assert checked >= 5


def test_files_records_decode_as_hudi_wrote_them(fixture_tables):
    """Our files-record encoder reproduces the fixture's cells from their decoded content."""
    md = _fixture_mdt(fixture_tables)
    base = next(f.path for f in md.walk_files("files") if f.path.endswith(".hfile")
                and "00000000000000000" not in f.path)
    r = HFileReader(md, base)
    for k, v in r.items():
        rec = P.decode_value(v, k.decode(), P.SCHEMA_JSON)
        # the compacted base file names itself in _hoodie_file_name; ours leaves it null
        fs = rec["filesystemMetadata"]
        ours = P.partition_list_record(fs) if k == b"__all_partitions__" else \
            P.files_record(k.decode(), {n: i["size"] for n, i in fs.items()})
        ours["_hoodie_file_name"] = rec["_hoodie_file_name"]
        assert P.encode_value(ours) == v


@pytest.mark.parametrize("version", [8, 6])
def test_metadata_table_properties_match_hudis(fixture_tables, tmp_path, version):
    _write(tmp_path / "t", make_rows(range(6), ts=0), version=version)
    md = Storage(str(tmp_path / "t")).sub(K.METADATA_TABLE_DIR)
    ours = dict(TableConfig.load(md))
    assert ours["hoodie.table.name"] == "t_metadata"
    assert ours["hoodie.table.version"] == str(version)
    if version == 8:
        fixture = dict(TableConfig.load(_fixture_mdt(fixture_tables)))
        same = {k for k in fixture if k not in ("hoodie.table.name", "hoodie.table.checksum",
                                                "hoodie.table.version", "hoodie.table.initial.version")}
        assert set(ours) == set(fixture)
        assert {k: ours[k] for k in same} == {k: fixture[k] for k in same}
        assert ours["hoodie.table.initial.version"] == "8"
    else:
        assert ours["hoodie.timeline.layout.version"] == "1"
        assert ours["hoodie.table.keygenerator.class"] == "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
        assert ours["hoodie.table.base.file.format"] == "HFILE"
    expected = metadata_table_properties(TableConfig.load(Storage(str(tmp_path / "t"))))
    assert {k: v for k, v in ours.items() if k != "hoodie.table.checksum"} == expected


def test_layout_mirrors_hudi_1x(tmp_path):
    """v8: init instants 00000000000000000.., first log files with an empty delete block, base
    HFiles of the bulk insert, file group names, then one deltacommit per data commit with the
    same instant time, completed before the data instant."""
    path = tmp_path / "t"
    first = _write(path, make_rows(range(30), ts=0), options=ALL_INDEXES)
    second = _write(path, make_rows(range(20, 40), ts=1, seed=1), options=ALL_INDEXES)
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    tl = Timeline.load(md, TableConfig.load(md))
    inits = [i for i in tl.completed if i.timestamp.startswith("0000000000000000")]
    assert [i.timestamp for i in inits] == ["00000000000000000", "00000000000000001",
                                            "00000000000000002", "00000000000000003"]
    ops = [tl.raw_metadata(i)["operationType"] for i in inits]
    assert ops == ["BULK_INSERT_PREPPED"] * 4
    names = {f.path for f in md.walk_files("", skip_dirs=(".hoodie",))}
    for part, prefix, n, init in (("files", "files-", 1, "0"), ("column_stats", "col-stats-", 2, "1"),
                                  ("bloom_filters", "bloom-filters-", 4, "2"),
                                  ("record_index", "record-index-", 3, "3")):
        for i in range(n):
            first_log = f"{part}/.{prefix}{i:04d}-0_0000000000000000{init}.log.1_0-0-0"
            assert first_log in names
            (block,) = list(read_log_file(md, first_log))
            assert block.block_type == BlockType.DELETE and block.deleted_keys().num_rows == 0
            assert dict(block.header) == {K_INSTANT: f"0000000000000000{init}"}
        assert f"{part}/.hoodie_partition_metadata" in names
    data_tl = Timeline.load(*_st(path))
    for inst in (first, second):
        mdt = next(i for i in tl.completed if i.timestamp == inst.timestamp)
        assert mdt.action == "deltacommit"
        data = next(i for i in data_tl.completed if i.timestamp == inst.timestamp)
        assert mdt.completion_time < data.completion_time
        meta = tl.raw_metadata(mdt)
        assert meta["operationType"] == "UPSERT_PREPPED"
        for part, stats in meta["partitionToWriteStats"].items():
            for st in stats:
                assert re.fullmatch(rf"{part}/\.{st['fileId']}_{inst.timestamp}\.log\.1_\d+-\d+-\d+", st["path"])
                assert st["logFiles"] == [posixpath.basename(st["path"])]
    assert {p: set(f) for p, f in committed_files(path).items()} == \
        {p: set(f) for p, f in mdt_files(path).items()}


K_INSTANT = __import__("hudi_format.log", fromlist=["HeaderKey"]).HeaderKey.INSTANT_TIME


def test_every_record_decodes_with_the_reference_schema(tmp_path):
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.metadata.compact.max.delta.commits": "2"})
    _write(path, make_rows(range(30), ts=0), ttype="MERGE_ON_READ", options=opts)
    _write(path, make_rows(range(10, 40), ts=1, seed=1), ttype="MERGE_ON_READ", options=opts)
    _write(path, make_rows(range(0, 5), ts=2), op="delete", ttype="MERGE_ON_READ", options=opts)
    ref = reference_schema()
    types = set()
    for part, fpath, k, v, schema in mdt_cells(path):
        assert schema == P.SCHEMA_JSON
        writer = fastavro.parse_schema(json.loads(schema))
        rec = fastavro.schemaless_reader(io.BytesIO(v), writer, ref)   # resolved to the reference
        assert rec["key"] == ""
        if part != "files":
            assert rec["type"] == K.record_type(part)
        else:
            assert rec["type"] == (1 if k == b"__all_partitions__" else 2)
        types.add((part, rec["type"]))
    assert types == {("files", 1), ("files", 2), ("column_stats", 3), ("bloom_filters", 4),
                     ("record_index", 5)}


# -- in step with the data table --------------------------------------------------------------------------
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("version", [8, 6])
def test_listing_follows_every_operation(tmp_path, ttype, version):
    path = tmp_path / "t"
    model = Model(event_time=True)
    opts = {"hoodie.metadata.compact.max.delta.commits": "3"}
    hudi_rs = version >= 8   # hudi-rs reads the metadata table of v8+ tables only

    def step(op, rows, partitions=None, **kw):
        _write(path, rows, op=op, ttype=ttype, version=version, options=dict(opts, **kw))
        model.apply(op, rows, 0, partitions)
        check_in_step(path, model, hudi_rs)

    step("insert", make_rows(range(40), ts=0))
    step("upsert", make_rows(range(30, 60), ts=1, seed=1))
    step("delete", make_rows(range(0, 10), ts=2))
    step("upsert", make_rows(range(5, 15), ts=3, seed=3))
    step("insert_overwrite", make_rows([100, 103], ts=4, partitions=("a",)))
    # a replaced file group stays listed until it is cleaned (as in Hudi); the view drops it
    st, cfg = _st(path)
    replaced = ReadState(cfg, Timeline.load(st, cfg)).replaced_file_groups
    assert replaced and any(f.startswith(fid) for p, fid in replaced for f in mdt_files(path).get(p, {}))
    step("upsert", make_rows(range(300, 303), ts=5, partitions=("c",)))
    table = hudi.open_table(str(path))
    table.clean(options={"hoodie.cleaner.commits.retained": 1})
    check_in_step(path, model, hudi_rs)
    assert not any(f.startswith(fid) for p, fid in replaced for f in mdt_files(path).get(p, {}))
    if ttype == "MERGE_ON_READ":
        hudi.open_table(str(path)).compact()
        check_in_step(path, model, hudi_rs)
    last = _write(path, make_rows(range(200, 205), ts=9), ttype=ttype, version=version, options=opts)
    hudi.open_table(str(path)).rollback(last.timestamp)
    check_in_step(path, model, hudi_rs)
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    md_tl = Timeline.load(md, TableConfig.load(md))
    assert any(i.action == "commit" for i in md_tl.completed), "the metadata table was never compacted"
    assert not any(i.timestamp == last.timestamp for i in md_tl.instants)
    data_tl = Timeline.load(*_st(path))
    rb = next(i for i in data_tl.completed if i.action == "rollback")
    assert any(i.timestamp == rb.timestamp and i.action == "rollback" for i in md_tl.completed)


def test_delete_partition_and_overwrite_table(tmp_path):
    path = tmp_path / "t"
    model = Model(event_time=True)
    for op, rows, parts in (("insert", make_rows(range(30), ts=0), None),
                            ("delete_partition", make_rows([0], ts=1), ["a"]),
                            ("insert_overwrite_table", make_rows(range(50, 56), ts=2), None)):
        _write(path, rows, op=op)
        model.apply(op, rows, 0, parts)
        check_in_step(path, model)
    hudi.open_table(str(path)).clean(options={"hoodie.cleaner.commits.retained": 1})
    check_in_step(path, model)


def test_hudi_rs_lists_from_our_metadata_table(tmp_path):
    """A data file left on storage under a committed instant but absent from the metadata
    table: hudi-rs reads it when listing storage, not with the metadata table -- so the
    metadata-table reads above really came from our files partition."""
    path = tmp_path / "t"
    inst = _write(path, make_rows(range(12), ts=0))
    rows_before = rs_rows(path, True)
    part = "a"
    src = next(n for n in committed_files(path)[part] if n.endswith(".parquet"))
    stray = f"{'0' * 8}-0000-0000-0000-000000000000-0_9-9-9_{inst.timestamp}.parquet"
    shutil.copy(path / part / src, path / part / stray)
    with_stray = rs_rows(path, False)
    assert len(with_stray) > len(rows_before)
    assert rs_rows(path, True) == rows_before
    assert any(s[2].endswith(stray) for s in rs_slices(path, False))
    assert not any(s[2].endswith(stray) for s in rs_slices(path, True))
    # ... and our reader, which lists through the metadata table too
    assert len(data_rows(hudi.open_table(str(path)).read())) == len(rows_before)


def test_crash_between_metadata_and_data_commit(tmp_path, monkeypatch):
    """The MDT deltacommit is completed, the data instant is not: readers ignore the MDT entry
    (ours and hudi-rs see the last commit); the rollback of the failed write undoes both."""
    from hudi_format.timeline.writer import TimelineWriter
    from hudi_format.transaction import Transaction

    path = tmp_path / "t"
    _write(path, make_rows(range(20), ts=0), ttype="MERGE_ON_READ")
    before = data_rows(hudi.open_table(str(path)).read())

    class Crash(BaseException):
        pass

    real_complete = TimelineWriter.complete

    def crashing(self, instant, metadata, completion_time=None, **kw):
        if not self.storage.url.rstrip("/").endswith(".hoodie/metadata"):
            raise Crash()
        return real_complete(self, instant, metadata, completion_time, **kw)

    monkeypatch.setattr(TimelineWriter, "complete", crashing)
    # a killed process cleans nothing (its heartbeat only stops)
    monkeypatch.setattr(Transaction, "abort", lambda self, *a, **k: self.heartbeat and self.heartbeat.stop())
    with pytest.raises(Crash):
        _write(path, make_rows(range(10, 30), ts=1, seed=1), ttype="MERGE_ON_READ")
    monkeypatch.undo()
    st, cfg = _st(path)
    md = st.sub(K.METADATA_TABLE_DIR)
    pending = [i for i in Timeline.load(st, cfg).instants if not i.is_completed]
    assert len(pending) == 1
    ts = pending[0].timestamp
    assert any(i.timestamp == ts and i.is_completed for i in Timeline.load(md, TableConfig.load(md)).instants)
    assert data_rows(hudi.open_table(str(path)).read()) == before
    assert rs_rows(path, True) == before == rs_rows(path, False)
    assert MetadataTable(st, cfg).files_listing() != {} and \
        all(ts not in f.path for fs in MetadataTable(st, cfg).files_listing().values() for f in fs)
    # the failed write's rollback (here: by hand) takes the MDT deltacommit away too
    hudi.open_table(str(path)).rollback(ts)
    assert not any(i.timestamp == ts for i in Timeline.load(md, TableConfig.load(md)).instants)
    model = Model(event_time=True)
    model.apply("insert", make_rows(range(20), ts=0), 0)
    check_in_step(path, model)
    _write(path, make_rows(range(10, 30), ts=1, seed=1), ttype="MERGE_ON_READ")
    model.apply("upsert", make_rows(range(10, 30), ts=1, seed=1), 1)
    check_in_step(path, model)


def test_failed_data_completion_undoes_the_metadata_deltacommit(tmp_path, monkeypatch):
    from hudi_format.timeline.writer import TimelineWriter

    path = tmp_path / "t"
    _write(path, make_rows(range(20), ts=0))
    real_complete = TimelineWriter.complete

    def failing(self, instant, metadata, completion_time=None, **kw):
        if not self.storage.url.rstrip("/").endswith(".hoodie/metadata") and instant.action == "commit":
            raise OSError("disk full")
        return real_complete(self, instant, metadata, completion_time, **kw)

    monkeypatch.setattr(TimelineWriter, "complete", failing)
    with pytest.raises(OSError):
        _write(path, make_rows(range(10, 30), ts=1, seed=1))
    monkeypatch.undo()
    model = Model(event_time=True)
    model.apply("insert", make_rows(range(20), ts=0), 0)
    check_in_step(path, model)


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_non_partitioned_table(tmp_path, ttype):
    """The non-partitioned table is the partition "." in the metadata table."""
    path = tmp_path / "t"
    model = Model(event_time=True)
    for i in range(4):
        rows = make_rows(range(i * 5, i * 5 + 10), ts=i, seed=i)
        _write(path, rows, ttype=ttype, options=ALL_INDEXES, partition_by=None)
        model.apply("upsert", rows, i)
        check_in_step(path, model)
    st, cfg = _st(path)
    mt = MetadataTable(st, cfg)
    assert sorted(mt.read(K.FILES)) == [".", "__all_partitions__"]
    assert {loc.partition for loc in mt.all_record_locations().values()} == {""}
    assert set(mt.all_record_locations()) == set(model.rows)


# -- the metadata table's own services ----------------------------------------------------------------------
def test_compaction_after_max_delta_commits_and_cleaning(tmp_path):
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.metadata.compact.max.delta.commits": "3",
                                "hoodie.metadata.cleaner.commits.retained": "2"})
    model = Model(event_time=True)
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    for i in range(10):
        rows = make_rows(range(i * 5, i * 5 + 8), ts=i, seed=i)
        _write(path, rows, ttype="MERGE_ON_READ", options=opts)
        model.apply("upsert", rows, i)
        tl = Timeline.load(md, TableConfig.load(md))
        compactions = [c for c in tl.completed if c.action == "commit"]
        last = max((c.completion_time for c in compactions), default="")
        regular = [d for d in tl.completed if d.action == "deltacommit"
                   and not d.timestamp.startswith("00000000000000") and d.completion_time > last]
        # compacted before a fourth deltacommit lands on top of three
        assert len(regular) <= 3 and (i < 3 or compactions)
    check_in_step(path, model)
    tl = Timeline.load(md, TableConfig.load(md))
    compactions = [c for c in tl.completed if c.action == "commit"]
    assert len(compactions) >= 3
    meta = tl.raw_metadata(compactions[-1])
    assert meta["operationType"] == "COMPACT" and meta["compacted"] is True
    # every file group of every partition got a base HFile at the last compaction
    c = compactions[-1].timestamp
    bases = {posixpath.basename(f.path) for f in md.walk_files("", skip_dirs=(".hoodie",))
             if f.path.endswith(f"_{c}.hfile")}
    groups = {st["fileId"] for stats in meta["partitionToWriteStats"].values() for st in stats}
    assert {b.split("_")[0] for b in bases} == groups
    assert {"files-0000-0", "record-index-0000-0", "col-stats-0000-0"} <= groups
    # cleaned: old file slices are gone, a clean instant sits on the metadata timeline
    assert any(i.action == "clean" for i in tl.completed)
    files = [f.path for f in md.walk_files("files")]
    assert "files/files-0000-0_0-0-0_00000000000000000.hfile" not in files
    assert not any(".files-0000-0_00000000000000000.log" in f for f in files)
    old = compactions[0].timestamp
    assert not any(f.endswith(f"_{old}.hfile") for f in files)


def test_v6_layout(tmp_path):
    path = tmp_path / "t"
    opts = {"hoodie.metadata.compact.max.delta.commits": "2"}
    first = _write(path, make_rows(range(10), ts=0), version=6, ttype="MERGE_ON_READ", options=opts)
    for i in range(3):
        _write(path, make_rows(range(i, i + 5), ts=i + 1), version=6, ttype="MERGE_ON_READ", options=opts)
    md = Storage(str(path)).sub(K.METADATA_TABLE_DIR)
    cfg = TableConfig.load(md)
    tl = Timeline.load(md, cfg)
    names = [i.timestamp for i in tl.completed]
    assert names[0] == "00000000000000010"     # SOLO_COMMIT_TIMESTAMP + "010": a new table
    assert first.timestamp in names
    compaction = next(i for i in tl.completed if i.action == "commit")
    delta = max(i.timestamp for i in tl.completed if i.action == "deltacommit" and i.timestamp < compaction.timestamp)
    assert compaction.timestamp == delta + "001"
    assert md.exists(f".hoodie/{names[0]}.deltacommit")           # v6 timeline layout
    for f in md.walk_files("files"):
        lf = parse_log_file_name(posixpath.basename(f.path))
        if lf is not None:   # v6 log files carry their slice's base instant
            assert lf.instant_time in ("00000000000000010", compaction.timestamp)
    model = Model(event_time=True)
    model.apply("insert", make_rows(range(10), ts=0), 0)
    for i in range(3):
        model.apply("upsert", make_rows(range(i, i + 5), ts=i + 1), i + 1)
    check_in_step(path, model, hudi_rs=False)
    assert rs_rows(path, False) == model_rows(model.rows)


def test_metadata_table_services_are_handed_in_by_the_services_layer(tmp_path):
    """The metadata layer never imports the table services (cleaning, archival, rollback plans)
    it runs on its own table: the services layer installs them in the transaction layer's
    default metadata hook; a writer built without them runs no services and refuses to roll
    back a metadata instant instead of leaving it half done."""
    from hudi_format.metadata.options import MetadataTableError
    from hudi_format.metadata.writer import MetadataWriter
    from hudi_format.services.metadata_table import MetadataTableServiceRunner
    from hudi_format.transaction import default_metadata_hook

    assert isinstance(default_metadata_hook().services, MetadataTableServiceRunner)
    path = tmp_path / "t"
    _write(path, make_rows(range(5), ts=0))
    w = MetadataWriter(*_st(path))
    w.run_table_services()
    plan = {"instantToRollback": {"commitTime": "1", "action": "deltacommit"}, "RollbackRequests": [], "version": 1}
    with pytest.raises(MetadataTableError, match="no table services"):
        w.execute_rollback_plan(plan, "2")
