"""Reading Apache Hudi's metadata table: keys, files listing, column stats, record index, bloom
filters, staleness, and reads through it (fixture tables written by Hudi 1.1 with the metadata
table enabled)."""

from __future__ import annotations

import decimal
import glob
import io
import json
import logging
import os
import shutil
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import FIXTURE_TABLES, expected
from hudi_format.base_file import read_footer
from hudi_format.config import TableConfig
from hudi_format.hfile import HFileReader, write_hfile
from hudi_format.metadata import keys as K
from hudi_format.metadata.reader import MetadataTable
from hudi_format.writer.index import (candidate_slices_by_metadata_bloom, record_index_locations,
                                      usable_metadata_table)
from hudi_format.metadata.records import ColumnStats, combine, decode_entries, stats_scalar
from hudi_format.read.filters import parse_filters, stats_may_match
from hudi_format.read.snapshot import ReadState
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from hudi_format.view import FileSystemView
from hudi_format.view.file_names import parse_base_file_name, parse_log_file_name

META = [n for n in FIXTURE_TABLES if n.endswith("_meta")]
PARTITIONED_META = [n for n in META if "nonpart" not in n]


def _open(path):
    storage = Storage(str(path))
    config = TableConfig.load(storage)
    timeline = Timeline.load(storage, config)
    return storage, config, timeline, MetadataTable(storage, config, timeline)


def _copy(fixture_tables, name, tmp_path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(fixture_tables(name), dest)
    return dest


def _mdt_entries(mdt: MetadataTable, partition: str):
    """Every (key, record) of the base HFiles and log HFile blocks of a metadata partition."""
    from hudi_format.log import BlockType, read_log_file
    out = []
    for s in mdt.file_slices(partition):
        if s.base_file:
            r = HFileReader(mdt.mdt_storage, s.base_file, verify_checksums=False)
            if r.num_entries:
                out += [(s.file_id, k, rec) for k, rec in decode_entries(r.items(), r.avro_schema)]
        for lf in s.log_files:
            for b in read_log_file(mdt.mdt_storage, lf):
                if b.block_type == BlockType.HFILE_DATA:
                    r = HFileReader.from_bytes(b.content(), verify_checksums=False)
                    if r.num_entries:
                        out += [(s.file_id, k, rec) for k, rec in decode_entries(r.items(), b.schema_json)]
    return out


# -- keys -----------------------------------------------------------------------------------------
def test_xxhash64_reference_vectors():
    assert K.xxhash64(b"", 0) == 0xEF46DB3751D8E999
    # > 32 bytes exercises the four-lane loop (python-xxhash's documented example)
    assert K.xxhash64(b"Nobody inspects the spammish repetition", 0) == 0xFBCEA83C8A378BF1
    # Hudi's seed is the Java int 0xdabadaba widened with its sign
    assert K.HASH_SEED == 0xFFFFFFFFDABADABA


def test_java_string_hash_and_file_group_mapping():
    assert K.java_string_hash("") == 0
    assert K.java_string_hash("Hudi") == ((72 * 31 + 117) * 31 + 100) * 31 + 105
    assert K.java_string_hash("Aa") == K.java_string_hash("BB") == 2112
    assert K.java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert K.file_group_index("polygenelubricants", 10) == 8  # |MIN % 10| = 8
    assert K.java_string_hash("\U0001F600") == 1772899  # surrogate pair: 31*0xD83D + 0xDE00
    assert all(0 <= K.file_group_index(f"key-{i}", 7) < 7 for i in range(200))
    assert K.file_group_id(K.RECORD_INDEX, 3) == "record-index-0003-0"
    assert K.file_group_id("secondary_index_txn_date_idx", 12) == "secondary-index-txn-date-idx-0012-0"
    assert K.file_group_id(K.COLUMN_STATS, 0) == "col-stats-0000-0"


def test_record_index_file_id_round_trip():
    for fid in ("c3b646cc-8602-47c5-b010-3fe002241298-0", "c3b646cc-8602-47c5-b010-3fe002241298",
                "c3b646cc-8602-47c5-b010-3fe002241298-17", "not-a-uuid-0", "files-0000-0"):
        info = K.encode_record_index_file_id(fid)
        assert K.decode_record_index_file_id(info) == fid
    assert K.encode_record_index_file_id("not-a-uuid-0")["fileIdEncoding"] == K.FILEID_ENCODING_RAW_STRING
    assert K.encode_record_index_file_id("c3b646cc-8602-47c5-b010-3fe002241298")["fileIndex"] == -1


def test_secondary_index_key_escaping():
    key = K.secondary_index_key("a$b\\c", "k$1")
    assert key == "a\\$b\\\\c$k\\$1"
    assert K.split_secondary_index_key(key) == ("a$b\\c", "k$1")
    assert K.split_secondary_index_key(K.secondary_index_key(None, "k")) == (None, "k")


@pytest.mark.parametrize("name", META)
def test_keys_match_every_stored_key(fixture_tables, name):
    """Our key functions give exactly the keys Hudi stored, and every key sits in the file group
    our mapping assigns (record index, secondary indexes, column/partition stats, files)."""
    _, config, _, mdt = _open(fixture_tables(name))
    partitions = mdt.partition_paths()
    by_id = {K.partition_index_id(p): p for p in partitions}
    checked = 0
    for partition in config.metadata_partitions:
        slices = mdt.file_slices(partition)
        ids = [s.file_id for s in slices]
        assert ids == K.file_group_ids(partition, len(ids))
        for file_id, key, rec in _mdt_entries(mdt, partition):
            assert rec["type"] == K.record_type(partition) or (
                partition == K.FILES and key == K.RECORDKEY_PARTITION_LIST and rec["type"] == 1)
            if partition.startswith(K.SECONDARY_INDEX_PREFIX):
                expect = K.secondary_key_file_group_index(key, len(ids))
            else:
                expect = K.file_group_index(key, len(ids))
            assert file_id == ids[expect], (partition, key)
            cs = rec.get("ColumnStatsMetadata")
            if partition == K.COLUMN_STATS:
                p = by_id[key[12:24]]
                assert key == K.column_stats_key(p, cs["fileName"], cs["columnName"])
            elif partition == K.PARTITION_STATS:
                assert key == K.partition_stats_key(cs["fileName"], cs["columnName"])
            elif partition == K.FILES and key != K.RECORDKEY_PARTITION_LIST:
                assert key in [K.files_key(p) for p in partitions]
            elif partition.startswith(K.SECONDARY_INDEX_PREFIX):
                sk, rk = K.split_secondary_index_key(key)
                assert K.secondary_index_key(sk, rk) == key
            checked += 1
    assert checked > 50


# -- files --------------------------------------------------------------------------------------
def _committed_storage_files(storage, config, timeline) -> dict[str, dict[str, int]]:
    """Data files on storage written by instants completed on the data timeline."""
    state = ReadState(config, timeline)
    out = {}
    for partition, infos in FileSystemView(storage, config).listing.items():
        files = {}
        for f in infos:
            parsed = parse_log_file_name(f.name) if f.name.startswith(".") else parse_base_file_name(f.name)
            if parsed is not None and state.visible(parsed.instant_time):
                files[f.name] = f.size
        out[partition] = files
    return out


@pytest.mark.parametrize("name", META)
def test_files_listing_equals_storage(fixture_tables, name):
    storage, config, timeline, mdt = _open(fixture_tables(name))
    assert mdt.staleness() is None
    listing = mdt.files_listing()
    got = {p: {f.name: f.size for f in infos} for p, infos in listing.items()}
    assert got == _committed_storage_files(storage, config, timeline)
    assert all(f.path == (f"{p}/{f.name}" if p else f.name) for p, infos in listing.items() for f in infos)
    # and the file slices the view builds from it are the ones it builds from storage
    state = ReadState(config, timeline)
    from_mdt = state.file_slices(FileSystemView(storage, config, listing))
    from_storage = state.file_slices(FileSystemView(storage, config))
    assert from_mdt == from_storage and from_mdt


@pytest.mark.parametrize("name", META)
def test_record_index_maps_every_snapshot_key(fixture_tables, name):
    _, _, _, mdt = _open(fixture_tables(name))
    rows = expected(name)["snapshot"]
    everything = mdt.all_record_locations()
    assert set(everything) == {r["_hoodie_record_key"] for r in rows}
    locations = mdt.record_locations([r["_hoodie_record_key"] for r in rows] + ["NO-SUCH-KEY"])
    assert "NO-SUCH-KEY" not in locations and len(locations) == len(rows)
    for r in rows:
        loc = locations[r["_hoodie_record_key"]]
        file_name = r["_hoodie_file_name"]
        parsed = parse_base_file_name(file_name) or parse_log_file_name(file_name)
        assert (loc.partition, loc.file_id) == (r["_hoodie_partition_path"], parsed.file_id)
        assert everything[r["_hoodie_record_key"]] == loc


@pytest.mark.parametrize("name", META)
def test_reads_through_metadata_listing(fixture_tables, name, monkeypatch):
    path = fixture_tables(name)

    real = FileSystemView._discover

    def no_listing(self):
        if ".hoodie/metadata" not in self.storage.url:  # the metadata table lists itself
            raise AssertionError("storage was listed although the metadata table is up to date")
        return real(self)

    monkeypatch.setattr(FileSystemView, "_discover", no_listing)
    table = hudi.open_table(path)
    assert canonical_rows(table.read()) == sort_expected(expected(name)["snapshot"])
    assert table._view._listing == table.metadata_table.files_listing()


def _latest_synced_write(timeline) -> str:
    return max(i.timestamp for i in timeline.instants if i.is_completed and i.is_write)


@pytest.mark.parametrize("name", META)
def test_stale_metadata_table_falls_back_to_listing(fixture_tables, name, tmp_path, caplog):
    path = _copy(fixture_tables, name, tmp_path)
    storage, config, timeline, _ = _open(path)
    latest = _latest_synced_write(timeline)
    timeline_dir = path / ".hoodie/metadata/.hoodie/timeline"
    removed = [f for f in os.listdir(timeline_dir) if f.startswith(latest + "_") and f.endswith(".deltacommit")]
    assert len(removed) == 1
    os.remove(timeline_dir / removed[0])

    mdt = MetadataTable(storage, config, timeline)
    assert latest in (mdt.staleness() or "")
    # the stale listing really is wrong: it misses what the latest commit wrote
    state = ReadState(config, timeline)
    stale = state.file_slices(FileSystemView(storage, config, mdt.files_listing()))
    assert stale != state.file_slices(FileSystemView(storage, config))

    with caplog.at_level(logging.WARNING, logger="hudi_format.table"):
        table = hudi.open_table(path)
        got = table.read()
    assert canonical_rows(got) == sort_expected(expected(name)["snapshot"])
    assert any("not using the metadata table" in r.getMessage() for r in caplog.records)
    # lookups no longer trust the record index either, and stay right
    keys = [r["_hoodie_record_key"] for r in expected(name)["snapshot"]][:3]
    assert sorted(hudi.open_table(path).lookup(keys).column("_hoodie_record_key").to_pylist()) == sorted(keys)


@pytest.mark.parametrize("name", PARTITIONED_META[:1] + [n for n in META if "nonpart" in n][:1])
def test_metadata_enable_false_lists_storage(fixture_tables, name, monkeypatch):
    calls = []
    real = FileSystemView._discover
    monkeypatch.setattr(FileSystemView, "_discover",
                        lambda self: calls.append(self.storage.url) or real(self))
    table = hudi.open_table(fixture_tables(name), options={"hoodie.metadata.enable": "false"})
    assert table.metadata_table is None
    assert canonical_rows(table.read()) == sort_expected(expected(name)["snapshot"])
    assert calls and not any(".hoodie/metadata" in c for c in calls)


def test_log_blocks_of_instants_pending_on_the_data_timeline_do_not_count(fixture_tables, tmp_path):
    name = "sample_table__mor__avro__v9_txns_simple_meta"
    path = _copy(fixture_tables, name, tmp_path)
    storage, config, timeline, mdt = _open(path)
    latest = _latest_synced_write(timeline)
    written = {n for infos in mdt.files_listing().values() for n in (f.name for f in infos)
               if latest in n}
    assert written  # the latest deltacommit wrote files the metadata table lists
    # the data commit fails to complete after the metadata table committed
    (completed,) = glob.glob(str(path / f".hoodie/timeline/{latest}_*.deltacommit"))
    os.remove(completed)
    storage, config, timeline, mdt = _open(path)
    assert timeline.get(latest) is not None and not timeline.get(latest).is_completed
    assert latest not in mdt.valid_instants
    assert mdt.staleness() is None
    listed = {n for infos in mdt.files_listing().values() for n in (f.name for f in infos)}
    assert not (listed & written)
    table = hudi.open_table(path)
    exp = expected(name)
    previous = [i for i in exp["completed_write_instants"] if i["timestamp"] != latest][-1]
    assert canonical_rows(table.read()) == sort_expected(exp["time_travel"][previous["timestamp"]])


# -- column stats ---------------------------------------------------------------------------------
def _data_files_opened(monkeypatch, root) -> list[str]:
    """Record every data file (not under .hoodie) the table's storage reads."""
    opened: list[str] = []
    root = str(root)

    def wrap(method):
        real = getattr(Storage, method)

        def spy(self, rel, *args, **kwargs):
            full = self.full(rel)
            if full.startswith(root) and "/.hoodie/" not in full[len(root):] + "/" and \
                    not rel.startswith(".hoodie"):
                opened.append(os.path.basename(rel))
            return real(self, rel, *args, **kwargs)
        monkeypatch.setattr(Storage, method, spy)

    for m in ("open", "open_input", "read_bytes", "read_range"):   # open_input: base files
        wrap(m)
    return opened


def _expected_filtered(rows, column, pred):
    return [r for r in rows if r[column] is not None and pred(r[column])]


@pytest.mark.parametrize("name", META)
@pytest.mark.parametrize("flt,column,pred", [
    (("currency", "=", "EUR"), "currency", lambda v: v == "EUR"),
    (("txn_ts", ">=", 1700700000015), "txn_ts", lambda v: v >= 1700700000015),
    (("txn_date", "<", "2024-01-16"), "txn_date", lambda v: v < "2024-01-16"),
    (("amount", "in", ["8900.00", "99999.99"]), "amount", lambda v: v in ("8900.00", "99999.99")),
])
def test_filter_skips_files_by_column_stats(fixture_tables, name, flt, column, pred, monkeypatch):
    path = fixture_tables(name)
    rows = expected(name)["snapshot"]
    want = sort_expected(_expected_filtered(rows, column, pred))

    table = hudi.open_table(path)
    all_slices = table.file_slices()
    kept = table.file_slices(filters=[flt])
    opened = _data_files_opened(monkeypatch, path)
    got = table.read(filters=[flt])
    assert canonical_rows(got) == want
    files_of = lambda slices: {os.path.basename(f) for s in slices
                               for f in ([s.base_file] if s.base_file else []) + list(s.log_files)}
    assert set(opened) <= files_of(kept)
    assert len(kept) < len(all_slices), "the stats should rule out some file groups"
    assert set(opened) and set(opened) < files_of(all_slices)

    # the same filter without the metadata table opens every file group, same rows
    opened.clear()
    plain = hudi.open_table(path, options={"hoodie.metadata.enable": False})
    assert canonical_rows(plain.read(filters=[flt])) == want
    assert set(opened) == files_of(all_slices)


@pytest.mark.parametrize("name", META)
def test_column_stats_agree_with_data(fixture_tables, name):
    """Every base file's stats bound its rows (checked against the expected snapshot rows of
    base-only slices)."""
    storage, config, timeline, mdt = _open(fixture_tables(name))
    table = hudi.open_table(fixture_tables(name))
    schema = table.schema()
    slices = [s for s in table.file_slices() if s.base_file and not s.log_files]
    stats = mdt.column_stats(["txn_ts", "amount", "txn_date", "currency"])
    assert slices
    for s in slices:
        cols = stats[(s.partition_path, s.base_file_name)]
        rows = table._read_slice(s, ReadState(config, timeline), list(schema.names), [])
        for c, cs in cols.items():
            typ = schema.field(c).type
            lo, hi = stats_scalar(cs, "min", typ), stats_scalar(cs, "max", typ)
            values = rows.column(c).drop_null()
            assert cs.null_count == rows.column(c).null_count
            assert lo is not None and hi is not None, (c, cs)
            assert lo.as_py() == pa.compute.min(values).as_py()
            assert hi.as_py() == pa.compute.max(values).as_py()


def _stats(lo, hi, nulls=0, count=3):
    return [(lo, hi, nulls, count)]


@pytest.mark.parametrize("op,value,lo,hi,nulls,count,may", [
    ("=", 5, 1, 4, 0, 3, False), ("=", 4, 1, 4, 0, 3, True), ("=", 0, 1, 4, 0, 3, False),
    ("!=", 3, 3, 3, 0, 3, False), ("!=", 3, 3, 3, 2, 3, False), ("!=", 3, 2, 3, 0, 3, True),
    ("<", 1, 1, 4, 0, 3, False), ("<=", 1, 1, 4, 0, 3, True), (">", 4, 1, 4, 0, 3, False),
    (">=", 4, 1, 4, 0, 3, True), ("in", (0, 9), 1, 4, 0, 3, False), ("in", (0, 2), 1, 4, 0, 3, True),
    ("in", (0, None), 1, 4, 0, 3, False), ("in", (0, None), 1, 4, 1, 3, True),
    ("not in", (3,), 3, 3, 0, 3, False), ("not in", (3,), 3, 3, 1, 3, True),
    ("not in", (3, None), 3, 3, 1, 3, False), ("not in", (3,), 2, 3, 0, 3, True),
    ("=", 3, None, None, 3, 3, False),  # only nulls
    ("=", 3, None, None, 0, 0, False),  # no values (a log of deletes)
    ("=", 3, None, None, 0, 3, True),  # unknown bounds
    ("<", None, 1, 4, 0, 3, False),  # a comparison with null passes nothing
])
def test_stats_may_match(op, value, lo, hi, nulls, count, may):
    (flt,) = parse_filters([("x", op, value)])
    s = lambda v: None if v is None else pa.scalar(v, pa.int64())
    assert stats_may_match(flt, pa.int64(), _stats(s(lo), s(hi), nulls, count)) is may


def test_stats_may_match_over_a_slice_and_nan():
    (flt,) = parse_filters([("x", "=", 7.0)])
    f = lambda v: pa.scalar(v, pa.float64())
    assert stats_may_match(flt, pa.float64(), [(f(1.0), f(2.0), 0, 2), (f(6.0), f(8.0), 0, 2)])
    assert not stats_may_match(flt, pa.float64(), [(f(1.0), f(2.0), 0, 2), (f(8.0), f(9.0), 0, 2)])
    assert stats_may_match(flt, pa.float64(), [(f(1.0), f(float("nan")), 0, 2)])


def test_stats_scalar_types():
    def cs(v, typ=None, vt=None, info=None):
        return ColumnStats("f", "c", v, v, typ, typ, 0, 1, False, False, vt, info)
    assert stats_scalar(cs(b"\x01\xe8H", "BytesWrapper", 10, "15,2"), "min", pa.decimal128(15, 2)).as_py() \
        == decimal.Decimal("1250.00")
    assert stats_scalar(cs(19737, "IntWrapper", 12), "min", pa.date32()).as_py().isoformat() == "2024-01-15"
    ts = stats_scalar(cs(1705336200000000, "LongWrapper", 16), "max", pa.timestamp("us", "UTC"))
    assert ts.as_py().isoformat() == "2024-01-15T16:30:00+00:00"
    ms = stats_scalar(cs(1705336200000, "LongWrapper", 15), "max", pa.timestamp("us", "UTC"))
    assert ms == ts
    assert stats_scalar(cs(b"\x00", "BytesWrapper", 8), "min", pa.decimal128(10, 2)) is None
    assert stats_scalar(cs("x", "StringWrapper", 7), "min", pa.int64()) is None


def test_combine_files_and_stats():
    base = {"type": 2, "filesystemMetadata": {"a": {"size": 10, "isDeleted": False},
                                              "b": {"size": 5, "isDeleted": False}}}
    log1 = {"type": 2, "filesystemMetadata": {"a": {"size": 0, "isDeleted": True},
                                              "c": {"size": 7, "isDeleted": False},
                                              "b": {"size": 3, "isDeleted": False}}}
    merged = combine(base, log1)["filesystemMetadata"]
    assert merged == {"b": {"size": 5, "isDeleted": False}, "c": {"size": 7, "isDeleted": False}}
    tomb = combine(None, {"type": 2, "filesystemMetadata": {"z": {"size": 0, "isDeleted": True}}})
    assert tomb["filesystemMetadata"]["z"]["isDeleted"]
    assert combine(base, None) is None and combine(None, log1) is log1

    def st(lo, hi, n, deleted=False, tight=False):
        return {"type": 3, "ColumnStatsMetadata": {
            "minValue": ("x.LongWrapper", {"value": lo}), "maxValue": ("x.LongWrapper", {"value": hi}),
            "valueCount": n, "nullCount": 0, "totalSize": 1, "totalUncompressedSize": 1,
            "isDeleted": deleted, "isTightBound": tight}}
    m = combine(st(3, 9, 2), st(1, 5, 3))["ColumnStatsMetadata"]
    assert (m["minValue"][1]["value"], m["maxValue"][1]["value"], m["valueCount"]) == (1, 9, 5)
    assert combine(st(3, 9, 2), st(4, 5, 1, tight=True))["ColumnStatsMetadata"]["valueCount"] == 1
    assert combine(st(3, 9, 2), st(0, 0, 0, deleted=True))["ColumnStatsMetadata"]["isDeleted"]


# -- bloom filters ----------------------------------------------------------------------------------
def _metadata_schema(mdt: MetadataTable) -> str:
    s = mdt.file_slices(K.FILES)[0]
    return HFileReader(mdt.mdt_storage, s.base_file, verify_checksums=False).avro_schema


def _add_bloom_partition(path: Path, num_groups: int = 2, drop: tuple[str, ...] = ()) -> dict:
    """Write a bloom_filters partition (as Hudi lays it out) from the base files' footers."""
    storage, config, timeline, mdt = _open(path)
    schema_json = _metadata_schema(mdt)
    parsed = fastavro.parse_schema(json.loads(schema_json))
    table = hudi.open_table(path)
    footers = {}
    groups: dict[int, list[tuple[bytes, bytes]]] = {}
    for s in table.file_slices():
        if not s.base_file:
            continue
        footer = read_footer(storage, s.base_file)
        assert footer.bloom_filter is not None
        footers[(s.partition_path, s.base_file_name)] = footer.bloom_filter
        key = K.bloom_filter_key(s.partition_path, s.base_file_name)
        rec = {f["name"]: None for f in json.loads(schema_json)["fields"]}
        rec.update({"key": "", "type": K.TYPE_BLOOM_FILTER, "BloomFilterMetadata": {
            "type": footer.metadata.get("hoodie_bloom_filter_type_code", "DYNAMIC_V0"),
            "timestamp": s.base_instant, "bloomFilter": footer.bloom_filter.serialize().encode(),
            "isDeleted": s.base_file_name in drop}})
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        groups.setdefault(K.file_group_index(key, num_groups), []).append((key.encode(), buf.getvalue()))
    mstore = mdt.mdt_storage
    mstore.write_bytes(f"{K.BLOOM_FILTERS}/.hoodie_partition_metadata",
                       mstore.read_bytes(f"{K.FILES}/.hoodie_partition_metadata"))
    init = min(i.timestamp for i in mdt.mdt_timeline.instants if i.is_completed)
    for g in range(num_groups):
        items = sorted(groups.get(g, []))
        write_hfile(mstore, f"{K.BLOOM_FILTERS}/{K.file_group_id(K.BLOOM_FILTERS, g)}_0-0-0_{init}.hfile",
                    items, file_info={"schema": schema_json})
    props = (path / ".hoodie/hoodie.properties").read_text()
    props = props.replace("hoodie.table.metadata.partitions=",
                          "hoodie.table.metadata.partitions=bloom_filters,")
    (path / ".hoodie/hoodie.properties").write_text(props)
    return footers


@pytest.mark.parametrize("name", META)
def test_bloom_filters_from_metadata_equal_footers(fixture_tables, name, tmp_path):
    path = _copy(fixture_tables, name, tmp_path)
    footers = _add_bloom_partition(path)
    storage, config, timeline, mdt = _open(path)
    assert K.BLOOM_FILTERS in config.metadata_partitions
    got = mdt.bloom_filters(list(footers) + [("nope", "x.parquet")])
    assert set(got) == set(footers)
    for ident, bloom in footers.items():
        assert got[ident] == bloom
    # the writer-side helpers answer from the same place
    usable = usable_metadata_table(storage, config, timeline, K.BLOOM_FILTERS)
    assert usable is not None
    table = hudi.open_table(path)
    keys = pa.array([expected(name)["snapshot"][0]["_hoodie_record_key"]])
    cands = candidate_slices_by_metadata_bloom(usable, table.file_slices(), keys)
    assert any(s.file_id in expected(name)["snapshot"][0]["_hoodie_file_name"] for s in cands)


def test_tombstoned_bloom_filter_is_absent(fixture_tables, tmp_path):
    name = PARTITIONED_META[0]
    path = _copy(fixture_tables, name, tmp_path)
    table = hudi.open_table(path)
    victim = next(s.base_file_name for s in table.file_slices() if s.base_file)
    footers = _add_bloom_partition(path, num_groups=3, drop=(victim,))
    _, _, _, mdt = _open(path)
    got = mdt.bloom_filters(footers)
    assert set(got) == {k for k in footers if k[1] != victim}


def test_record_index_tagging_helper(fixture_tables):
    name = PARTITIONED_META[0]
    storage = Storage(str(fixture_tables(name)))
    config = TableConfig.load(storage)
    timeline = Timeline.load(storage, config)
    mdt = usable_metadata_table(storage, config, timeline, K.RECORD_INDEX)
    rows = expected(name)["snapshot"]
    keys = pa.array([r["_hoodie_record_key"] for r in rows] + ["NEW-KEY"])
    got = record_index_locations(mdt, hudi.open_table(str(fixture_tables(name))).file_slices(), keys, lambda: False)
    assert got.schema.names == ["key", "partition", "file_id"]
    assert sorted(got.to_pylist(), key=lambda r: r["key"]) == sorted(
        ({"key": r["_hoodie_record_key"], "partition": r["_hoodie_partition_path"],
          "file_id": (parse_base_file_name(r["_hoodie_file_name"])
                      or parse_log_file_name(r["_hoodie_file_name"])).file_id} for r in rows),
        key=lambda r: r["key"])
    assert usable_metadata_table(storage, config, timeline, K.BLOOM_FILTERS) is None  # not declared


# -- secondary indexes ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", META)
def test_secondary_indexes_match_snapshot(fixture_tables, name):
    import datetime as dt
    _, config, _, mdt = _open(fixture_tables(name))
    rows = expected(name)["snapshot"]
    assert "secondary_index_merchant_idx" in config.metadata_partitions
    want: dict = {}
    for r in rows:
        want.setdefault(r["merchant_name"], []).append(r["_hoodie_record_key"])
    got = mdt.secondary_index_keys("merchant_idx", list(want) + ["NO SUCH MERCHANT"])
    assert got == {k: sorted(v) for k, v in want.items()}
    # dates are indexed as their epoch day, as Hudi stores them
    days = lambda s: str((dt.date.fromisoformat(s) - dt.date(1970, 1, 1)).days)
    want = {}
    for r in rows:
        want.setdefault(days(r["txn_date"]), []).append(r["_hoodie_record_key"])
    got = mdt.secondary_index_keys("secondary_index_txn_date_idx", list(want))
    assert got == {k: sorted(v) for k, v in want.items()}
