"""``_hoodie_commit_seqno`` built in NumPy equals Hudi's ``<instant>_<task>_<index>`` strings."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.seqno import commit_seqnos


@pytest.mark.parametrize("start,n", [(0, 0), (0, 1), (0, 10), (0, 11), (9, 2), (95, 10), (999_990, 30),
                                     (2**31 - 5, 10), (0, 1234)])
def test_sequence_ids_cross_every_digit_boundary(start, n):
    got = commit_seqnos("20261128203707753", 3, start, n)
    got.validate(full=True)
    assert got.type == pa.string()
    assert got.to_pylist() == [f"20261128203707753_3_{i}" for i in range(start, start + n)]


def test_random_ranges_and_tasks():
    rng = random.Random(7)
    for _ in range(200):
        start = rng.choice([0, rng.randrange(100), rng.randrange(10**8)])
        n, task = rng.randrange(500), rng.choice([0, 7, "12"])
        assert commit_seqnos("001", task, start, n).to_pylist() == [f"001_{task}_{i}" for i in range(start, start + n)]


def test_written_files_number_their_records_from_zero(tmp_path):
    n = 1500
    hudi.write(str(tmp_path / "t"), pa.table({"id": [f"k{i}" for i in range(n)], "ts": [1] * n}),
               record_key="id", operation="insert")
    slices = hudi.open_table(str(tmp_path / "t")).file_slices()
    assert len(slices) == 1
    meta = pq.read_table(str(tmp_path / "t" / slices[0].base_file),
                         columns=["_hoodie_commit_time", "_hoodie_commit_seqno"])
    instant = meta.column("_hoodie_commit_time")[0].as_py()
    seqnos = meta.column("_hoodie_commit_seqno").to_pylist()
    task = seqnos[0].split("_")[1]
    assert seqnos == [f"{instant}_{task}_{i}" for i in range(n)]
