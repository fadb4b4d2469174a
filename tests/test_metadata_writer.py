"""The metadata table we write: layout and encodings as Hudi's, in step with every data commit,
compacted and cleaned, and read by hudi-rs (metadata listing on) with the same rows.

Truth comes from outside our writer: Hudi 1.1's own metadata tables in the fixtures (schema text,
file names, properties, deltacommit shapes), the reference Avro schema (every record decodes
with it), the storage listing of committed files, the data files themselves (bloom filters in
their footers, column values, record keys), and hudi-rs.
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
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

import hudi_format as hudi
from hudi_format.base_file import read_footer
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
from hudi_format.view.file_names import parse_base_file_name, parse_log_file_name
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


# -- indexes ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_record_index_maps_every_key_to_its_file_group(tmp_path, ttype):
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    _write(path, make_rows(range(60), ts=0), ttype=ttype, options=opts)
    _write(path, make_rows(range(50, 80), ts=1, seed=1), ttype=ttype, options=opts)
    _write(path, make_rows(range(0, 7), ts=2), op="delete", ttype=ttype, options=opts)
    moved = make_rows(range(20, 24), ts=3, partitions=("c",))   # keys move partitions (global)
    _write(path, moved, ttype=ttype, options=opts)
    st, cfg = _st(path)
    snap = hudi.open_table(str(path)).read(columns=["_hoodie_record_key", "_hoodie_partition_path",
                                                    "_hoodie_file_name"])
    expected = {}
    for k, p, f in zip(*(snap.column(c).to_pylist() for c in snap.column_names)):
        expected[k] = (p, f.split("_")[0] if not f.startswith(".") else f[1:].split("_")[0])
    got = {k: (loc.partition, loc.file_id) for k, loc in MetadataTable(st, cfg).all_record_locations().items()}
    assert got == expected
    assert all(got[f"k{k:05d}"][0] == "c" for k in range(20, 24))


@pytest.mark.parametrize("version,mode", [(6, None), (8, "COMMIT_TIME_ORDERING"), (8, "EVENT_TIME_ORDERING")])
def test_record_index_drops_soft_deleted_keys_of_a_log_where_the_delete_always_wins(tmp_path, version, mode):
    """Merge-on-Read logs records flagged ``_hoodie_is_deleted`` as deletes carrying their
    ordering value. Under commit-time ordering (version 6's default payload too) the delete wins
    whatever the stored record, so the index drops the key; under event-time ordering it may
    lose to the stored record, so the key stays (a warning of ``validate``, never an error). A
    key re-inserted in a later block than its delete stays, at its file group."""
    from hudi_format.cli.validate import record_index_problems
    path = tmp_path / "t"
    opts = {**ALL_INDEXES, "hoodie.index.type": "RECORD_INDEX", **({"hoodie.record.merge.mode": mode} if mode else {})}
    _write(path, make_rows(range(20), ts=0), ttype="MERGE_ON_READ", version=version, options=opts)
    flagged = make_rows(range(0, 6), ts=1).append_column("_hoodie_is_deleted", pa.array([True] * 3 + [False] * 3))
    _write(path, flagged, ttype="MERGE_ON_READ", version=version, options=opts)
    back = make_rows(range(1, 2), ts=2).append_column("_hoodie_is_deleted", pa.array([False]))
    _write(path, back, ttype="MERGE_ON_READ", version=version, options=opts)
    assert sorted(hudi.open_table(str(path)).read(columns=["id"]).column("id").to_pylist()) == \
        [f"k{k:05d}" for k in range(1, 20) if k != 2]
    st, cfg = _st(path)
    indexed = set(MetadataTable(st, cfg).all_record_locations())
    kept = mode == "EVENT_TIME_ORDERING"
    assert ("k00000" in indexed) == kept and ("k00002" in indexed) == kept and "k00001" in indexed
    problems = record_index_problems(str(path))
    assert [p.severity for p in problems] == (["warning"] if kept else []), problems


def test_bloom_filters_equal_the_base_file_footers(tmp_path):
    path = tmp_path / "t"
    for i in range(3):
        _write(path, make_rows(range(i * 20, i * 20 + 30), ts=i, seed=i), options=ALL_INDEXES)
    st, cfg = _st(path)
    files = [(p, n) for p, fs in committed_files(path).items() for n in fs if n.endswith(".parquet")]
    blooms = MetadataTable(st, cfg).bloom_filter_entries(files)
    assert set(blooms) == set(files)
    for (p, n), entry in blooms.items():
        footer = read_footer(st, f"{p}/{n}")
        assert entry.filter() == footer.bloom_filter
        assert entry.filter().serialize() == footer.bloom_filter.serialize()
        assert entry.type_code == footer.metadata["hoodie_bloom_filter_type_code"]


def test_column_stats_equal_the_data(tmp_path):
    path = tmp_path / "t"
    rows = make_rows(range(40), ts=0)
    rows = rows.set_column(rows.schema.get_field_index("score"), "score",
                           pa.array([None if i % 7 == 0 else i * 0.5 for i in range(40)], pa.float64()))
    _write(path, rows, options=ALL_INDEXES)
    _write(path, make_rows(range(30, 50), ts=1, seed=3), options=ALL_INDEXES)
    st, cfg = _st(path)
    cols = ["_hoodie_commit_time", "_hoodie_record_key", "id", "ts", "amount", "score", "n", "when", "day", "flag"]
    stats = MetadataTable(st, cfg).column_stats(cols)
    files = [(p, n) for p, fs in committed_files(path).items() for n in fs]
    assert set(stats) == set(files)
    for (p, n), by_col in stats.items():
        data = pq.read_table(st.full(f"{p}/{n}"))
        assert set(by_col) >= set(cols)
        assert "tags" not in by_col and "info" not in by_col     # nested columns are not indexed
        for c in cols:
            s, col = by_col[c], data.column(c)
            assert s.null_count == col.null_count and s.value_count == len(col)
            if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
                col = pc.cast(col, pa.int64() if pa.types.is_timestamp(col.type) else pa.int32())
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            # raw micros for timestamps (LongWrapper), epoch days for dates (DateWrapper)
            wrapper = {"amount": "DecimalWrapper", "when": "LongWrapper", "day": "DateWrapper",
                       "flag": "BooleanWrapper", "n": "IntWrapper", "ts": "LongWrapper",
                       "score": "DoubleWrapper"}.get(c, "StringWrapper")
            assert (s.min_type, s.max_type) == (wrapper, wrapper)
            assert (s.min_value, s.max_value) == (lo, hi), (n, c)


def test_filter_on_indexed_column_skips_files(tmp_path, monkeypatch):
    path = tmp_path / "t"
    for i in range(4):
        _write(path, make_rows(range(i * 100, i * 100 + 30), ts=i), op="insert", options=ALL_INDEXES)
    opened = set()

    def counting(real):
        def call(self, rel, *a, **k):
            if rel.endswith(".parquet"):
                opened.add(rel)
            return real(self, rel, *a, **k)
        return call

    for name in ("open", "open_input"):   # base files are opened natively where they can be
        monkeypatch.setattr(Storage, name, counting(getattr(Storage, name)))
    got = hudi.open_table(str(path)).read(filters=[("n", ">=", 300)])
    assert sorted(got.column("id").to_pylist()) == [f"k{k:05d}" for k in range(300, 330)]
    assert len(opened) == 3   # the last commit's file in each partition; 9 others skipped
    opened.clear()
    hudi.open_table(str(path)).read(filters=[("flag", "=", True)])
    assert len(opened) == 12  # every file has true flags: nothing to skip


# -- lifecycle -------------------------------------------------------------------------------------------------
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


# -- tagging through the metadata table --------------------------------------------------------------------
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_record_index_tags_without_reading_keys(tmp_path, monkeypatch, ttype):
    from hudi_format.writer import index
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.index.type": "RECORD_INDEX"})
    model = Model(event_time=True)
    rows = make_rows(range(60), ts=0)
    _write(path, rows, ttype=ttype, options=opts)
    model.apply("upsert", rows, 0)

    def no_scan(*a, **k):
        raise AssertionError("the record index should have tagged these keys")

    monkeypatch.setattr(index, "matching_keys", no_scan)
    for i, (op, rows) in enumerate((("upsert", make_rows(range(40, 80), ts=1, seed=1)),
                                    ("delete", make_rows(range(0, 5), ts=2)),
                                    ("upsert", make_rows(range(10, 14), ts=3, partitions=("c",))))):
        _write(path, rows, op=op, ttype=ttype, options=opts)
        model.apply(op, rows, i + 1)
        check_in_step(path, model)
    # the keys moved to partition c (a global index): one record each, in c
    snap = hudi.open_table(str(path)).read(columns=["id", "p"])
    moved = [p for k, p in zip(snap.column("id").to_pylist(), snap.column("p").to_pylist())
             if k in {f"k{k:05d}" for k in range(10, 14)}]
    assert moved == ["c"] * 4


def test_bloom_index_from_the_metadata_table(tmp_path, monkeypatch):
    from hudi_format.writer import index
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.index.type": "BLOOM", "hoodie.bloom.index.use.metadata": "true"})
    model = Model(event_time=True)
    for i in range(3):
        rows = make_rows(range(i * 30, i * 30 + 30), ts=i)
        _write(path, rows, op="insert", options=opts)
        model.apply("insert", rows, i)
    seen = []
    real = index.matching_keys

    def spy(storage, slices, *a, **k):
        seen.append(len(slices))
        return real(storage, slices, *a, **k)

    def no_footers(*a, **k):
        raise AssertionError("bloom filters should come from the metadata table")

    monkeypatch.setattr(index, "matching_keys", spy)
    monkeypatch.setattr(index, "candidate_slices_by_bloom", no_footers)
    rows = make_rows(range(30, 36), ts=5, seed=5)      # only the second commit's files hold these
    _write(path, rows, options=opts)
    model.apply("upsert", rows, 5)
    assert seen == [3]    # of 9 base files, only the 3 holding keys 30..35 were read for keys
    check_in_step(path, model)


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


@pytest.mark.parametrize("key_len", [12, 300])
def test_record_index_hfiles_take_small_blocks_and_stay_one_level(tmp_path, key_len):
    """Record index HFiles (base files and log blocks) are cut into small blocks for point
    lookups, yet never so many that the block index goes multi-level (Hudi 1.0's reader reads
    the root index only); the other partitions keep Hudi's 1 MiB blocks."""
    from hudi_format.hfile.blocks import HEADER_SIZE
    from hudi_format.metadata.hfiles import RECORD_INDEX_BLOCK_SIZE, hfile_data_block, write_base_hfile
    n = 60000 if key_len > 100 else 20000
    items = [(b"k%0*d" % (key_len - 1, i), b"v" * 40) for i in range(n)]
    storage = Storage(str(tmp_path))

    def blocks_of(reader: HFileReader) -> list[int]:
        """Uncompressed payload sizes of the data blocks (from their headers)."""
        assert reader.trailer.num_data_index_levels == 1
        return [int.from_bytes(reader._read(o, HEADER_SIZE)[12:16], "big") for _, o, _ in reader.data_blocks()]

    write_base_hfile(storage, "ri.hfile", items, K.RECORD_INDEX)
    write_base_hfile(storage, "files.hfile", items, K.FILES)
    block = next(iter(read_log_file(storage, _write_log(storage, hfile_data_block(items, "1", K.RECORD_INDEX)))))
    for reader in (HFileReader(storage, "ri.hfile"), HFileReader.from_bytes(block.content())):
        sizes = blocks_of(reader)
        if key_len < 100:
            assert all(RECORD_INDEX_BLOCK_SIZE <= s < RECORD_INDEX_BLOCK_SIZE + 400 for s in sizes[:-1])
        else:  # 16 KiB blocks would need a multi-level index: larger blocks instead
            assert len(sizes) > 300 and min(sizes[:-1]) > 2 * RECORD_INDEX_BLOCK_SIZE
        probe = [items[i][0] for i in range(0, n, 997)]
        found, values = reader.lookup_arrays(pa.array(probe, pa.binary()))
        assert found.to_pylist() == probe and set(values.to_pylist()) == {b"v" * 40}
    assert min(blocks_of(HFileReader(storage, "files.hfile"))[:-1]) >= 1 << 20  # Hudi's 1 MiB blocks


def _write_log(storage: Storage, block: bytes) -> str:
    with storage.open("x.log", "wb") as f:
        f.write(block)
    return "x.log"
