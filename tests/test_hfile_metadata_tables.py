"""HFiles of metadata tables Hudi 1.1 wrote (v9 fixtures), and hudi-rs reading HFiles we write in their place."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import zipfile

import fastavro
import pytest

from conftest import FIXTURE_TABLES, TABLES
from hudi_format.hfile import HFileReader, write_hfile
from hudi_format.storage import Storage


def _has_metadata_hfiles(name):
    with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
        return any("/.hoodie/metadata/" in m and m.endswith(".hfile") for m in zf.namelist())


V9_META_TABLES = [n for n in FIXTURE_TABLES if "_v9_" in n and _has_metadata_hfiles(n)]


def _metadata_hfiles(root):
    md = root / ".hoodie" / "metadata"
    return sorted(p.relative_to(md).as_posix() for p in md.glob("*/*.hfile"))


@pytest.mark.parametrize("name", V9_META_TABLES)
def test_metadata_table_hfiles_open_and_scan(name, fixture_tables):
    root = fixture_tables(name)
    files = _metadata_hfiles(root)
    assert files
    st = Storage(str(root / ".hoodie" / "metadata"))
    for rel in files:
        r = HFileReader(st, rel)
        items = list(r.items())
        assert len(items) == r.num_entries, rel
        keys = [k for k, _ in items]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), rel
        schema = json.loads(r.avro_schema)
        assert schema["name"] == "HoodieMetadataRecord"
        assert r.file_info[b"bloomFilterTypeCode"] == b"DYNAMIC_V0"
        assert r.meta_block("bloomFilter")  # Hudi's bloom filter, base64 text
        if items:
            assert r.file_info[b"minRecordKey"] == keys[0] == r.first_key
            assert r.file_info[b"maxRecordKey"] == keys[-1] == r.last_key
        parsed = fastavro.parse_schema(schema, _ignore_default_error=True)
        for k, v in items:
            assert r.get(k) == v
            rec = fastavro.schemaless_reader(io.BytesIO(v), parsed, None)
            assert rec["key"] == ""  # Hudi blanks the key inside the value
            assert rec["type"] in (1, 2, 3, 4, 5, 6, 7)
        partition = rel.split("/")[0]
        if partition == "files" and items:
            assert b"__all_partitions__" in keys


def _rs_reader(md):
    import hudi

    return hudi.HudiFileGroupReader(str(md))


@pytest.mark.parametrize("name", ["sample_table__cow__v9_txns_simple_meta",
                                  "sample_table__mor__avro__v9_txns_nonpart_meta"])
def test_hudi_rs_reads_hfiles_we_write(name, fixture_tables, tmp_path):
    """Each metadata HFile re-encoded by us (several layouts) reads the same in hudi-rs."""
    root = tmp_path / "t"
    shutil.copytree(fixture_tables(name), root)
    md = root / ".hoodie" / "metadata"
    st = Storage(str(md))
    rs = _rs_reader(md)
    layouts = [{}, dict(compression="NONE", checksum="CRC32C"),
               dict(block_size=128, index_block_max_size=256, index_min_entries=2)]
    checked = 0
    for rel in _metadata_hfiles(root):
        r = HFileReader(st, rel)
        if rel.startswith("secondary_index") or r.num_entries == 0:
            continue
        theirs = rs.read_file_slice_from_paths(rel, []).drop_columns(["_hoodie_file_name"])
        items = list(r.items())
        info = {k: v for k, v in r.file_info.items()
                if not k.startswith(b"hfile.") and k not in (b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY")}
        for i, layout in enumerate(layouts):
            ours_rel = rel.replace(".hfile", f"{i}.hfile")
            write_hfile(st, ours_rel, items, file_info=info,
                        meta_blocks={"bloomFilter": r.meta_block("bloomFilter")}, **layout)
            ours = rs.read_file_slice_from_paths(ours_rel, []).drop_columns(["_hoodie_file_name"])
            assert ours.equals(theirs), (rel, layout)
            st.delete(ours_rel)
        checked += 1
    assert checked >= 10


def _column_stats_hfile(fixture_tables, tmp_path):
    """A copy of a Hudi 1.1 table's metadata table: (its folder, storage, the relative path of
    a column_stats HFile, that file's reader)."""
    root = tmp_path / "t"
    shutil.copytree(fixture_tables("sample_table__cow__v9_txns_nonpart_meta"), root)
    md = root / ".hoodie" / "metadata"
    st = Storage(str(md))
    rel = next(p for p in _metadata_hfiles(root) if p.startswith("column_stats"))
    return md, st, rel, HFileReader(st, rel)


def test_hudi_rs_reads_long_keys_and_deep_indexes(fixture_tables, tmp_path):
    """Keys over 127 bytes (two-byte vint lengths in the root) and 3-level indexes, via hudi-rs."""
    md, st, rel, r = _column_stats_hfile(fixture_tables, tmp_path)
    value_bytes = next(iter(r.items()))[1]
    entries = [(b"k" * 150 + b"%06d" % i, value_bytes) for i in range(3000)]
    rs = _rs_reader(md)
    for i, layout in enumerate([{}, dict(block_size=1024, index_block_max_size=2048, index_min_entries=4),
                                dict(block_size=1024, index_block_max_size=2048, index_min_entries=4,
                                     shorten_index_keys=False, compression="NONE")]):
        out = rel.replace(".hfile", f"9{i}.hfile")
        write_hfile(st, out, entries, file_info={"schema": r.file_info[b"schema"]}, **layout)
        ours = HFileReader(st, out)
        assert ours.trailer.num_data_index_levels == (1 if i == 0 else 3)
        batch = rs.read_file_slice_from_paths(out, [])
        assert batch.column("key").to_pylist() == [k.decode() for k, _ in entries]
    # and hudi-rs refuses a damaged one, so the check above can fail
    raw = (md / out).read_bytes()
    (md / out).write_bytes(raw[:len(raw) // 2])
    with pytest.raises(Exception):
        rs.read_file_slice_from_paths(out, [])


def _rs_slices(base, metadata=True, as_of=None):
    import hudi

    b = hudi.HudiTableBuilder.from_base_uri(str(base))
    if metadata:
        b = b.with_hudi_option("hoodie.metadata.enable", "true")
    options = hudi.HudiReadOptions()
    if as_of:
        options = options.with_as_of_timestamp(as_of)
    return sorted((s.partition_path, s.file_id, s.base_file_relative_path(),
                   tuple(s.log_files_relative_paths())) for s in b.build().get_file_slices(options))


def test_hudi_rs_lists_the_table_from_our_files_partition_hfile(fixture_tables, tmp_path):
    """Re-encode the files partition's base HFile; hudi-rs's metadata listing is unchanged.

    Listing as of the last commit the base file covers depends on the base file alone (later
    commits' log blocks restate every partition), so that listing shows a damaged base.
    """
    import hudi

    root = tmp_path / "t"
    shutil.copytree(fixture_tables("sample_table__cow__v9_txns_simple_meta"), root)
    md = root / ".hoodie" / "metadata"
    st = Storage(str(md))
    rel = max(p for p in _metadata_hfiles(root) if p.startswith("files/"))
    base_instant = re.search(r"_(\d{17})\.hfile$", rel).group(1)
    timeline = hudi.HudiTableBuilder.from_base_uri(str(root)).build().get_timeline()
    as_of = max(i.timestamp for i in timeline.get_completed_commits() if i.timestamp < base_instant)
    original = (md / rel).read_bytes()
    expected_latest, expected_as_of = _rs_slices(root), _rs_slices(root, as_of=as_of)
    assert expected_latest == _rs_slices(root, metadata=False) and len(expected_latest) >= 3
    assert expected_as_of == _rs_slices(root, metadata=False, as_of=as_of)
    r = HFileReader.from_bytes(original, rel)
    items = list(r.items())
    info = {k: v for k, v in r.file_info.items()
            if not k.startswith(b"hfile.") and k not in (b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY")}
    bloom = r.meta_block("bloomFilter")
    for layout in ({}, dict(compression="NONE", checksum="CRC32C", block_size=64)):
        write_hfile(st, rel, items, file_info=info, meta_blocks={"bloomFilter": bloom}, **layout)
        assert (md / rel).read_bytes() != original
        assert _rs_slices(root) == expected_latest
        assert _rs_slices(root, as_of=as_of) == expected_as_of
    # drop one partition's record: hudi-rs lists that partition without its files
    dropped = next(k for k, _ in items if k.startswith(b"region="))
    write_hfile(st, rel, [(k, v) for k, v in items if k != dropped], file_info=info,
                meta_blocks={"bloomFilter": bloom})
    changed = _rs_slices(root, as_of=as_of)
    assert changed == [s for s in expected_as_of if s[0] != dropped.decode()] != expected_as_of
    # and a truncated file fails the listing
    (md / rel).write_bytes(original[: len(original) // 2])
    with pytest.raises(Exception, match="HFile"):
        _rs_slices(root)


def _block_on_chunk_edge(values):
    """Entries filling one GZ data block whose size sits where hudi-rs misjudges checksums."""
    import random

    from hudi_format.hfile.blocks import _gzip, _misjudged, make_key

    rng = random.Random(7)

    def cells(entries):
        return b"".join(struct.pack(">ii", len(make_key(k)), len(v)) + make_key(k) + v + b"\x00"
                        for k, v in entries)

    entries = [(b"key-%06d-%s" % (i, bytes(rng.choice(b"abcdefghijklmnop") for _ in range(8))),
                values[i % len(values)]) for i in range(4000)]
    lo, hi = 1, len(entries)  # fewest entries whose gzip reaches the first chunk edge
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if len(_gzip(cells(entries[:mid]))) < 16384 - 33 - 300 else (lo, mid)
    base = entries[:lo]
    for n in range(600):
        tail = (b"zz-" + bytes(rng.choice(b"0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(n)),
                values[0])
        if _misjudged(len(_gzip(cells(base + [tail])))):
            return base + [tail]
    raise AssertionError("no block size on the edge found")


def test_gz_blocks_on_a_checksum_chunk_edge_stay_readable_by_hudi_rs(fixture_tables, tmp_path):
    """hudi-rs cuts 4 bytes off such gzip payloads; we pad the gzip header so it never has to."""
    from hudi_format.hfile.blocks import _misjudged

    md, st, rel, r = _column_stats_hfile(fixture_tables, tmp_path)
    entries = _block_on_chunk_edge([v for _, v in r.items()])
    out = rel.replace(".hfile", "77.hfile")
    write_hfile(st, out, entries, file_info={"schema": r.file_info[b"schema"]}, block_size=1 << 30)
    raw = (md / out).read_bytes()
    ours = HFileReader.from_bytes(raw)
    assert ours.trailer.data_index_count == 1 and list(ours.items()) == entries
    on_disk_data = struct.unpack(">i", raw[29:33])[0] - 33
    assert raw[33 + 3] == 0x04 and not _misjudged(on_disk_data)  # FEXTRA-padded gzip member
    batch = _rs_reader(md).read_file_slice_from_paths(out, [])
    assert batch.column("key").to_pylist() == [k.decode() for k, _ in entries]
