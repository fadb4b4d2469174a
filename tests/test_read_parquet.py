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


@pytest.mark.parametrize("name", ["f.parquet", "plain.parquet"])
@pytest.mark.parametrize("columns", [None, ["few", "n", "missing"], ["unique", "const"], []])
def test_read_equals_plain_read(table_dir, name, columns):
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
