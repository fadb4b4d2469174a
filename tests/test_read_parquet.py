"""read.parquet: the fast base-file read returns exactly what a plain pyarrow read returns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi_format.errors import CorruptFileError, StorageError
from hudi_format.read.parquet import dictionary_columns, open_base_file, read_base_file
from hudi_format.storage import Storage

N = 5000


def _data() -> pa.Table:
    idx = np.arange(N)
    few = np.array(["alpha", "beta", "gamma"], dtype=object)
    return pa.table({
        "const": pa.array(["20240101000000000"] * N),
        "few": pa.array(few[idx % 3]),
        "few_nulls": pa.array([None if i % 7 == 0 else f"v{i % 5}" for i in range(N)]),
        "unique": pa.array([f"key-{i:08d}-{'x' * 20}" for i in range(N)]),
        "blob": pa.array([bytes([i % 4]) * 3 for i in range(N)], pa.binary()),
        "big": pa.array([f"s{i % 2}" for i in range(N)], pa.large_string()),
        "n": pa.array(idx, pa.int64()),
        "all_null": pa.array([None] * N, pa.string()),
    }, metadata={b"hoodie_min_record_key": b"a"})


@pytest.fixture
def table_dir(tmp_path):
    data = _data()
    # small row groups and a dictionary page limit the unique column exceeds (plain fallback)
    pq.write_table(data, tmp_path / "f.parquet", row_group_size=1200, dictionary_pagesize_limit=4096)
    pq.write_table(data, tmp_path / "plain.parquet", use_dictionary=False)
    return tmp_path


def test_dictionary_columns_are_the_dictionary_only_strings(table_dir):
    pf = pq.ParquetFile(table_dir / "f.parquet")
    assert pf.metadata.num_row_groups > 1
    picked = dictionary_columns(pf, pf.schema_arrow.names)
    assert {"const", "few", "few_nulls", "blob", "big", "all_null"} == set(picked)
    assert "unique" not in picked and "n" not in picked   # plain fallback; not a string
    assert dictionary_columns(pq.ParquetFile(table_dir / "plain.parquet"), pf.schema_arrow.names) == []


@pytest.fixture(params=["small", "wide"])
def wide_reads(request, monkeypatch):
    """Both roads for the other strings: read as they are (a small file), or with 64-bit
    offsets and turned back (what a file of a megabyte or more of strings takes)."""
    import hudi_format.read.parquet as rp
    if request.param == "wide":
        if not rp._BINARY_TYPE:
            pytest.skip("this pyarrow reads no binary_type")
        monkeypatch.setattr(rp, "_WIDE_MIN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("name", ["f.parquet", "plain.parquet"])
@pytest.mark.parametrize("columns", [None, ["few", "n", "missing"], ["unique", "const"], [], ["n", "few", "n"]])
def test_read_equals_plain_read(table_dir, name, columns, wide_reads):
    storage = Storage(str(table_dir))
    want_cols = None if columns is None else [c for c in columns if c != "missing"]
    want = pq.ParquetFile(table_dir / name).read(columns=want_cols)
    got = read_base_file(storage, name, columns)
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.equals(want)
    with open_base_file(storage, name) as reader:
        batches = list(reader.iter_batches(700, columns))
    streamed = pa.Table.from_batches(batches, schema=batches[0].schema)
    assert streamed.schema.equals(want.schema, check_metadata=False)
    assert streamed.equals(want)


def test_missing_and_corrupt_files(table_dir):
    storage = Storage(str(table_dir))
    with pytest.raises(StorageError, match="not found"):
        read_base_file(storage, "nope.parquet")
    (table_dir / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(CorruptFileError, match="bad.parquet"):
        read_base_file(storage, "bad.parquet")
    whole = (table_dir / "f.parquet").read_bytes()
    (table_dir / "cut.parquet").write_bytes(whole[: len(whole) // 2] + whole[-8:])
    with pytest.raises(CorruptFileError, match="cut.parquet"):
        read_base_file(storage, "cut.parquet")


# -- base pieces holding dictionaries through the merge ---------------------------------------------
MERGE_SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("s", pa.string()),
                          ("_hoodie_is_deleted", pa.bool_())])


def _rows(rng, n: int, keys: int, dup_ok: bool) -> pa.Table:
    ks = [f"k{rng.randrange(keys)}" for _ in range(n)] if dup_ok else [f"k{i}" for i in rng.sample(range(keys), n)]
    return pa.table({"_hoodie_record_key": ks, "ts": [rng.choice([None, 0, 1, 2]) for _ in ks],
                     "s": [rng.choice([None, "x", "y", "zz"]) for _ in ks],
                     "_hoodie_is_deleted": [rng.random() < 0.1 or None for _ in ks]}, schema=MERGE_SCHEMA)


@pytest.mark.parametrize("seed", range(30))
def test_merge_of_a_dictionary_base_equals_the_plain_merge(seed):
    """The carried string column of the base piece stays a dictionary through the merge (as
    merge_file_slice hands it over) and comes out decoded: same schema, rows and order."""
    import random

    from hudi_format.read.merge import MergeSpec, merge_pieces
    rng = random.Random(seed)
    keys = rng.choice([5, 40, 300])
    base = _rows(rng, rng.randrange(0, min(keys, 80) + 1), keys, dup_ok=seed % 3 == 0)   # dups: the full merge
    pieces: list = [base]
    deletes = []
    for _ in range(rng.randrange(0, 4)):
        if rng.random() < 0.3:
            n = rng.randrange(0, 6)
            deletes.append((len(pieces), pa.table({
                "record_key": pa.array([f"k{rng.randrange(keys)}" for _ in range(n)], pa.string()),
                "partition_path": [""] * n, "ordering_value": pa.array([rng.choice([None, 0, 3]) for _ in range(n)],
                                                                         pa.int64())})))
            pieces.append(None)
        else:
            pieces.append(_rows(rng, rng.randrange(0, 20), keys, True))
    encoded = base.set_column(2, pa.field("s", pa.dictionary(pa.int32(), pa.string())),
                              base.column("s").dictionary_encode())
    for event_time in (True, False):
        spec = MergeSpec(("id",), ("ts",), event_time=event_time, has_meta_fields=True)
        want = merge_pieces(pieces, deletes, MERGE_SCHEMA, spec)
        got = merge_pieces([encoded] + pieces[1:], deletes, MERGE_SCHEMA, spec)
        assert got.schema.equals(want.schema) and got.equals(want)


def test_wide_columns_and_threshold(table_dir, monkeypatch):
    import hudi_format.read.parquet as rp
    if not rp._BINARY_TYPE:
        pytest.skip("this pyarrow reads no binary_type")
    pf = pq.ParquetFile(table_dir / "f.parquet")
    assert rp.wide_columns(pf, pf.schema_arrow.names) == []   # under a megabyte of strings
    monkeypatch.setattr(rp, "_WIDE_MIN_BYTES", 0)
    assert rp.wide_columns(pf, pf.schema_arrow.names) == ["const", "few", "few_nulls", "unique", "blob", "all_null"]


def test_mor_table_reads_the_same_with_and_without_dictionary_reads(tmp_path, monkeypatch, wide_reads):
    """A MOR table whose base files hold dictionary-only strings (partition path, commit time,
    a low-cardinality column) reads the same rows through the dictionary road as without it."""
    import hudi_format as hudi
    import hudi_format.read.parquet as rp

    n = 6000
    data = pa.table({"id": [f"id-{i}" for i in range(n)], "ts": pa.array([1] * n, pa.int64()),
                     "color": [("red", "green", "blue")[i % 3] for i in range(n)],
                     "part": [("p1", "p2")[i % 2] for i in range(n)]})
    path = str(tmp_path / "t")
    hudi.write(path, data, operation="insert", table_type="MERGE_ON_READ", record_key="id", ordering_field="ts",
               partition_by="part")
    upd = data.slice(0, 300).set_column(1, "ts", pa.array([2] * 300, pa.int64())) \
        .set_column(2, "color", pa.array(["violet"] * 300))
    hudi.write(path, upd, operation="upsert")
    hudi.write(path, data.slice(300, 50), operation="delete")
    table = hudi.open_table(path)
    assert any(s.log_files for s in table.file_slices())
    taken = []
    real = rp.dictionary_columns
    monkeypatch.setattr(rp, "dictionary_columns", lambda pf, cols: taken.append(real(pf, cols)) or taken[-1])
    fast = {c: table.read(columns=None if c is None else list(c)) for c in (None, ("id", "color"))}
    assert any("color" in t for t in taken)
    monkeypatch.setattr(rp, "dictionary_columns", lambda pf, cols: [])
    monkeypatch.setattr(rp, "wide_columns", lambda pf, cols: [])
    for cols, got in fast.items():
        want = table.read(columns=None if cols is None else list(cols))
        assert got.schema.equals(want.schema) and got.equals(want)
    assert fast[None].num_rows == n - 50
    assert fast[None].filter(pa.compute.equal(fast[None].column("ts"), 2)).column("color").unique().to_pylist() \
        == ["violet"]
    batches = list(table.scan(batch_size=1000))
    assert pa.Table.from_batches(batches).sort_by("id").equals(fast[None].sort_by("id"))
