"""The metadata table's record index, bloom filters and column stats: equal to the data files, used to tag writes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.base_file import read_footer
from hudi_format.hfile import HFileReader
from hudi_format.log import read_log_file
from hudi_format.metadata import keys as K
from hudi_format.metadata.reader import MetadataTable
from hudi_format.storage import Storage
from test_metadata_writer import ALL_INDEXES, _st, _write, check_in_step
from writemodel import Model, committed_files, make_rows


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
