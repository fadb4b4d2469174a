"""Streamed insert and bulk_insert (hudi_format/writer/stream.py).

A RecordBatchReader, a Dataset or an iterator of batches is written batch by batch. What the
stream writes must be what the same rows written as one table give: the same rows (read by us
and by hudi-rs), the same file layout (records per file group in each partition), a metadata
table that agrees with storage; a bad batch late in the stream fails the write and leaves the
table as it was; and the input is pulled lazily, never held whole.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

import hudi_format as hudi
from hudi_format.base_file import read_footer
from hudi_format.errors import HudiError, SchemaError
from hudi_format.metadata.reader import MetadataTable
from hudi_format.storage import Storage
from hudi_format.config import TableConfig
from hudi_format.writer import planning, stream
from canonical import canonical_rows
from test_metadata_writer import ALL_INDEXES, mdt_files
from writemodel import committed_files

KW = dict(record_key="id", ordering_field="ts", partition_by="city")
VOLATILE = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")
SAMPLE = 3_000     # the rows bulk_insert sizes files from (50,000 by default): small tables here
# bloom filters sized for small files (Hudi's 60,000 entries take 320 KB of footer per file)
SMALL_BLOOM = {"hoodie.index.bloom.num_entries": 1_000, "hoodie.bloom.index.filter.dynamic.max.entries": 20_000}


@pytest.fixture(autouse=True)
def _small_sample(monkeypatch):
    """Both paths sample the same rows; the stream then opens its instant after a few batches,
    so most of each test's input arrives after the instant is open."""
    monkeypatch.setattr(planning, "SAMPLE_ROWS", SAMPLE)
    monkeypatch.setattr(stream, "SAMPLE_ROWS", SAMPLE)


def make_rows(n: int, start: int = 0, ts: int = 1) -> pa.Table:
    idx = pc.add(pa.array(range(n), pa.int64()), start)
    return pa.table({
        "id": pc.binary_join_element_wise(pa.scalar("trip-"), pc.cast(idx, pa.string()), ""),
        "ts": pa.repeat(pa.scalar(ts, pa.int64()), n),
        "city": pc.binary_join_element_wise(pa.scalar("city-"), pc.cast(pc.bit_wise_and(idx, 3), pa.string()), ""),
        "fare": pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(idx, 7919), 65535), pa.float64()), 100.0),
        "rider": pa.array([None if i % 11 == 0 else f"rider-{i % 97}" for i in range(start, start + n)]),
        "distance": pc.cast(pc.bit_wise_and(pc.multiply(idx, 31), 1023), pa.int32()),
    })


def batches(table: pa.Table, size: int = 1_000, pulled: list | None = None):
    """A generator of ``table``'s batches; ``pulled`` counts them as they are pulled."""
    for b in table.to_batches(max_chunksize=size):
        if pulled is not None:
            pulled.append(b.num_rows)
        yield b


def reader(table: pa.Table, size: int = 1_000) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, batches(table, size))


def rows(path) -> list[dict]:
    t = hudi.open_table(str(path)).read()
    return canonical_rows(t.drop_columns([c for c in VOLATILE if c in t.column_names]))


def rs_rows(path) -> list[dict]:
    t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(path)).build().read(HudiReadOptions()))
    return canonical_rows(t.select(["id", "ts", "city", "fare", "rider", "distance"]))


def layout(path) -> dict[str, list[int]]:
    """Per partition, the record counts of the latest base files, sorted."""
    table = hudi.open_table(str(path))
    out: dict[str, list[int]] = {}
    for s in table.file_slices():
        if s.base_file:
            out.setdefault(s.partition_path, []).append(pq.read_metadata(str(Path(path) / s.base_file)).num_rows)
    return {p: sorted(v) for p, v in out.items()}


def data_files(path) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*")
            if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_partition")}


# -- same result as a table ----------------------------------------------------------------------------
# every pair of (operation, table type, version) values once: four runs, not eight
@pytest.mark.parametrize("op,ttype,version", [
    ("bulk_insert", "COPY_ON_WRITE", 8), ("insert", "MERGE_ON_READ", 8),
    ("insert", "COPY_ON_WRITE", 6), ("bulk_insert", "MERGE_ON_READ", 6)])
def test_a_reader_writes_what_the_table_writes(tmp_path, op, ttype, version):
    data = make_rows(20_000)
    opts = {"hoodie.parquet.max.file.size": 40_000, "hoodie.copyonwrite.record.size.estimate": 20}
    args = dict(KW, operation=op, table_type=ttype, table_version=version, options=opts)
    hudi.write(str(tmp_path / "table"), data, **args)
    pulled: list[int] = []
    hudi.write(str(tmp_path / "stream"), pa.RecordBatchReader.from_batches(data.schema, batches(data, 700, pulled)),
               **args)
    assert sum(pulled) == data.num_rows and len(pulled) > 20
    want = rows(tmp_path / "table")
    assert len(want) == data.num_rows
    assert rows(tmp_path / "stream") == want
    assert rs_rows(tmp_path / "stream") == rs_rows(tmp_path / "table")
    # the same files: every partition rolled over into files of the same record counts
    got = layout(tmp_path / "stream")
    assert got == layout(tmp_path / "table")
    assert all(len(v) >= 3 for v in got.values()), got
    t = hudi.open_table(str(tmp_path / "stream"))
    assert t.version == version and t.table_type == ttype


@pytest.mark.parametrize("case", ["non-partitioned", "no meta fields"])
def test_other_table_layouts(tmp_path, case):
    kw: dict = dict(record_key="id", ordering_field="ts")
    if case == "no meta fields":
        kw.update(partition_by="city", options={"hoodie.populate.meta.fields": "false",
                                                "hoodie.parquet.max.file.size": 100_000})
    data = make_rows(12_000)
    hudi.write(str(tmp_path / "table"), data, operation="bulk_insert", **kw)
    hudi.write(str(tmp_path / "stream"), reader(data, 999), operation="bulk_insert", **kw)
    assert rows(tmp_path / "stream") == rows(tmp_path / "table")
    assert len(rows(tmp_path / "stream")) == 12_000
    assert layout(tmp_path / "stream") == layout(tmp_path / "table")
    assert rs_rows(tmp_path / "stream") == rs_rows(tmp_path / "table")


def test_files_roll_over_at_the_max_file_size(tmp_path):
    data = make_rows(30_000)
    small = dict(SMALL_BLOOM, **{"hoodie.parquet.max.file.size": 30_000})
    hudi.write(str(tmp_path / "t"), reader(data), operation="bulk_insert", options=small, **KW)
    hudi.write(str(tmp_path / "big"), reader(data), operation="bulk_insert", **KW)
    sizes = layout(tmp_path / "t")
    per_file = max(max(v) for v in sizes.values())
    # every partition: full files of one size, then the rest
    for counts in sizes.values():
        assert len(counts) > 2 and counts.count(per_file) == len(counts) - 1 and sum(counts) == 7_500
    files = [Path(tmp_path / "t") / s.base_file for s in hudi.open_table(str(tmp_path / "t")).file_slices()]
    assert 10_000 < max(f.stat().st_size for f in files) < 2 * 30_000
    assert layout(tmp_path / "big") == {f"city-{i}": [7_500] for i in range(4)}


def test_sequence_numbers_and_keys_count_on_across_batches(tmp_path):
    hudi.write(str(tmp_path / "t"), reader(make_rows(8_000), 333), operation="bulk_insert", **KW)
    t = hudi.open_table(str(tmp_path / "t"))
    for s in t.file_slices():
        f = pq.read_table(str(tmp_path / "t" / s.base_file))
        seq = [int(x.rsplit("_", 1)[1]) for x in f.column("_hoodie_commit_seqno").to_pylist()]
        assert seq == list(range(f.num_rows))
        assert set(f.column("_hoodie_file_name").to_pylist()) == {posixpath.basename(s.base_file)}
        footer = read_footer(Storage(str(tmp_path / "t")), s.base_file)
        keys = f.column("_hoodie_record_key").to_pylist()
        assert (footer.min_key, footer.max_key) == (min(keys), max(keys))
        assert all(footer.bloom_filter.might_contain(k) for k in keys[::97])


# -- inserts top up small files --------------------------------------------------------------------------
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_streamed_insert_fills_small_files_first(tmp_path, ttype):
    opts = dict(SMALL_BLOOM, **{"hoodie.parquet.max.file.size": 200_000, "hoodie.parquet.small.file.limit": 150_000,
                                "hoodie.copyonwrite.record.size.estimate": 20})
    for name in ("table", "stream"):
        hudi.write(str(tmp_path / name), make_rows(4_000), operation="insert", table_type=ttype, options=opts, **KW)
    before = {p: len(v) for p, v in layout(tmp_path / "stream").items()}
    more = make_rows(6_000, start=4_000, ts=2)
    hudi.write(str(tmp_path / "table"), more, operation="insert", options=opts)
    pulled: list[int] = []
    hudi.write(str(tmp_path / "stream"), batches(more, 500, pulled), operation="insert", options=opts)
    assert len(pulled) == 12
    assert rows(tmp_path / "stream") == rows(tmp_path / "table")
    assert len(rows(tmp_path / "stream")) == 10_000
    assert rs_rows(tmp_path / "stream") == rs_rows(tmp_path / "table")
    t = hudi.open_table(str(tmp_path / "stream"))
    meta = t.timeline.metadata(t.timeline.completed[-1])
    stats = [st for sts in meta.partition_to_write_stats.values() for st in sts]
    topped = [st for st in stats if st.prev_commit is not None]
    # each partition's small file took inserts (merged into a new base file / appended as a log)
    assert len(topped) == 4 and all(st.num_inserts > 0 for st in topped)
    if ttype == "MERGE_ON_READ":
        assert all(st.log_files for st in topped)
    groups = {(s.partition_path, s.file_id) for s in t.file_slices()}
    assert len(groups) == sum(before.values()) == 4     # no new file group: the small files took them all


def test_small_files_take_no_more_than_the_budget_holds(tmp_path, monkeypatch):
    """A small file whose inserts outgrow the memory budget is written with what it has; the
    rest go to new file groups. No row is lost or written twice."""
    opts = {"hoodie.parquet.max.file.size": 50_000_000, "hoodie.parquet.small.file.limit": 40_000_000,
            "hoodie.copyonwrite.record.size.estimate": 20}
    hudi.write(str(tmp_path / "t"), make_rows(2_000), operation="insert", options=opts, **KW)
    real = stream.write_stream
    monkeypatch.setattr("hudi_format.writer.client.write_stream",
                        lambda *a, **k: real(*a, **dict(k, buffer_bytes=300_000)))
    hudi.write(str(tmp_path / "t"), batches(make_rows(20_000, start=2_000, ts=2), 1_000), operation="insert",
               options=opts)
    got = rows(tmp_path / "t")
    assert len(got) == 22_000 and len({r["id"] for r in got}) == 22_000
    t = hudi.open_table(str(tmp_path / "t"))
    meta = t.timeline.metadata(t.timeline.completed[-1])
    stats = [st for sts in meta.partition_to_write_stats.values() for st in sts]
    assert any(st.prev_commit is not None for st in stats) and any(st.prev_commit is None for st in stats)


# -- failures ----------------------------------------------------------------------------------------------
def _with_bad_batch(good: pa.Table, bad: pa.RecordBatch, seen: dict, path):
    for b in good.to_batches(max_chunksize=1_000):
        yield b
    seen["files"] = data_files(path)     # what the write had written when the bad batch came
    yield bad


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("fault", ["null key", "other columns"])
def test_a_bad_later_batch_fails_and_leaves_the_table_as_it_was(tmp_path, ttype, fault):
    path = tmp_path / "t"
    opts = {"hoodie.parquet.max.file.size": 30_000}
    hudi.write(str(path), make_rows(1_000), operation="insert", table_type=ttype, **KW)
    before_rows, before_files = rows(path), data_files(path)
    instants = [i.timestamp for i in hudi.open_table(str(path)).timeline.instants]
    good = make_rows(4_000, start=10_000)
    bad = make_rows(10, start=50_000).to_batches()[0]
    if fault == "null key":
        bad = bad.set_column(0, "id", pa.array([None] * 10, pa.string()))
        expected: type = HudiError
    else:
        bad = bad.set_column(1, "ts", pc.cast(bad.column(1), pa.string()))
        expected = SchemaError
    seen: dict = {}
    for op in ("bulk_insert", "insert"):
        with pytest.raises(expected):
            hudi.write(str(path), _with_bad_batch(good, bad, seen, path), operation=op, options=opts)
        assert len(seen["files"]) > len(before_files)     # it had written files when the bad batch came
        assert rows(path) == before_rows
        assert data_files(path) == before_files           # the failed write's files are gone
        t = hudi.open_table(str(path))
        assert [i.timestamp for i in t.timeline.instants] == instants
        assert not t.timeline.pending
    # and the table takes the next write
    hudi.write(str(path), reader(good), operation="insert")
    assert len(rows(path)) == 5_000


def test_a_bad_first_batch_writes_nothing(tmp_path):
    path = tmp_path / "t"
    hudi.write(str(path), make_rows(100), operation="insert", **KW)
    listing = sorted(str(p) for p in Path(path).rglob("*"))
    bad = make_rows(100, start=500).to_batches()[0]
    bad = bad.set_column(0, "id", pa.array([None] * 100, pa.string()))
    with pytest.raises(HudiError, match="null"):
        hudi.write(str(path), iter([bad]), operation="bulk_insert")
    assert sorted(str(p) for p in Path(path).rglob("*")) == listing


def test_an_iterator_of_something_else_is_refused(tmp_path):
    with pytest.raises(HudiError, match="RecordBatch"):
        hudi.write(str(tmp_path / "t"), iter([{"id": "a"}]), operation="bulk_insert", **KW)
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


# -- other inputs, other operations ------------------------------------------------------------------------
def test_a_dataset_is_streamed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    data = make_rows(9_000)
    for i in range(3):
        pq.write_table(data.slice(i * 3_000, 3_000), src / f"part-{i}.parquet")
    ds = pads.dataset(str(src))
    hudi.write(str(tmp_path / "t"), ds, operation="bulk_insert", **KW)
    hudi.write(str(tmp_path / "scan"), ds.scanner(batch_size=500), operation="insert", **KW)
    hudi.write(str(tmp_path / "want"), data, operation="bulk_insert", **KW)
    assert rows(tmp_path / "t") == rows(tmp_path / "want") == rows(tmp_path / "scan")


def test_upsert_and_delete_read_a_reader_whole(tmp_path):
    path = tmp_path / "t"
    hudi.write(str(path), reader(make_rows(3_000)), operation="bulk_insert", **KW)
    hudi.write(str(path), reader(make_rows(1_000, start=2_500, ts=2)), operation="upsert")
    hudi.write(str(path), batches(make_rows(100, start=0)), operation="delete")
    got = {r["id"]: r["ts"] for r in rows(path)}
    assert len(got) == 3_400 and got["trip-2999"] == 2 and "trip-50" not in got and got["trip-200"] == 1


def test_precombining_inserts_read_the_input_whole(tmp_path):
    dup = pa.concat_tables([make_rows(1_000), make_rows(1_000, ts=5)])
    hudi.write(str(tmp_path / "t"), reader(dup), operation="insert",
               options={"hoodie.combine.before.insert": "true"}, **KW)
    got = rows(tmp_path / "t")
    assert len(got) == 1_000 and {r["ts"] for r in got} == {5}


def test_an_empty_reader_commits_an_empty_write(tmp_path):
    schema = make_rows(1).schema
    hudi.write(str(tmp_path / "t"), pa.RecordBatchReader.from_batches(schema, []), operation="bulk_insert", **KW)
    t = hudi.open_table(str(tmp_path / "t"))
    assert t.read().num_rows == 0 and len(t.timeline.completed) == 1
    assert t.schema().names[5:] == schema.names


# -- metadata table --------------------------------------------------------------------------------------
@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_metadata_table_agrees_with_streamed_files(tmp_path, ttype):
    path = tmp_path / "t"
    opts = dict(ALL_INDEXES, **{"hoodie.parquet.max.file.size": 40_000, "hoodie.parquet.small.file.limit": 30_000})
    hudi.write(str(path), reader(make_rows(8_000)), operation="bulk_insert", table_type=ttype, options=opts, **KW)
    hudi.write(str(path), reader(make_rows(6_000, start=8_000, ts=2)), operation="insert", options=opts)
    assert mdt_files(path) == committed_files(str(path))
    st = Storage(str(path))
    cfg = TableConfig.load(st)
    mt = MetadataTable(st, cfg)
    stats = mt.column_stats(["id", "fare", "distance"])
    base = [(p, n) for p, fs in committed_files(str(path)).items() for n in fs if n.endswith(".parquet")]
    assert set(base) <= set(stats)
    for p, n in base:
        data = pq.read_table(st.full(f"{p}/{n}"))
        for c in ("id", "fare", "distance"):
            mm = pc.min_max(data.column(c))
            assert (stats[(p, n)][c].min_value, stats[(p, n)][c].max_value) == (mm["min"].as_py(), mm["max"].as_py())
            assert stats[(p, n)][c].value_count == data.num_rows
    assert set(mt.all_record_locations()) == {f"trip-{i}" for i in range(14_000)}
    assert len(rows(path)) == 14_000
    assert rs_rows(path) == rows_of(path)


def rows_of(path) -> list[dict]:
    return canonical_rows(hudi.open_table(str(path)).read(
        columns=["id", "ts", "city", "fare", "rider", "distance"]))


# -- the input is pulled as it is written ------------------------------------------------------------------
def test_the_input_is_pulled_lazily_and_not_held(tmp_path, monkeypatch):
    """With a small budget, the Arrow memory held while batches are pulled stays far below the
    input's size, and files are finished while the input is still coming."""
    path = tmp_path / "t"
    real = stream.write_stream
    monkeypatch.setattr("hudi_format.writer.client.write_stream",
                        lambda *a, **k: real(*a, **dict(k, buffer_bytes=1_000_000)))
    base = pa.total_allocated_bytes()
    held: list[int] = []
    finished: list[int] = []
    total = [0]

    def gen():
        for i in range(30):
            b = make_rows(5_000, start=i * 5_000).to_batches()[0]
            total[0] += b.nbytes
            held.append(pa.total_allocated_bytes() - base)
            finished.append(len([f for f in data_files(path) if f.endswith(".parquet")]) if path.exists() else 0)
            yield b

    hudi.write(str(path), gen(), operation="bulk_insert", options=dict(SMALL_BLOOM, **{"hoodie.parquet.max.file.size": 200_000}),
               **KW)
    assert len(rows(path)) == 150_000
    assert total[0] > 7_500_000
    assert max(held) < total[0] / 3, (max(held), total[0])
    assert finished[15] > 0 and finished[-1] > finished[15]
    # row groups were cut to fit the budget (the largest file: a partition's last file may be a
    # small tail with one row group; slices come in file-id order, which is random)
    s = max(hudi.open_table(str(path)).file_slices(), key=lambda f: f.base_file_size)
    assert pq.read_metadata(str(path / s.base_file)).num_row_groups > 1


@pytest.mark.parametrize("ttype", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_scan_holds_one_file_slice_at_a_time(tmp_path, ttype):
    """``Table.scan`` reads slice by slice: the Arrow memory it holds while its batches are
    consumed stays near one slice (MOR slices with logs merged whole), far from the table."""
    path = str(tmp_path / "t")
    opts = dict(SMALL_BLOOM, **{"hoodie.parquet.max.file.size": 400_000})
    hudi.write(path, reader(make_rows(120_000), 5_000), operation="bulk_insert", table_type=ttype, options=opts,
               **KW)
    hudi.write(path, make_rows(30_000, ts=2), operation="upsert")
    t = hudi.open_table(path)
    slices = t.file_slices()
    assert len(slices) >= 16 and (ttype == "COPY_ON_WRITE" or any(s.log_files for s in slices))
    whole = t.read().nbytes
    base = pa.total_allocated_bytes()
    held, n = 0, 0
    for b in t.scan(batch_size=4_096):
        held = max(held, pa.total_allocated_bytes() - base)
        n += b.num_rows
    assert n == 120_000
    assert held < whole / 4, (held, whole)
