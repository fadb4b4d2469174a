"""The benchmark suites run end to end at tiny sizes (one repetition): they build their tables,
check that the two sides of each comparison return the same rows, and print their tables.
No timing is asserted here; figures belong to ``python -m benchmarks``. The run-throughs take
about 10 s of wall clock on the shared machine, so they are marked slow."""

from __future__ import annotations

import math

import pyarrow.compute as pc
import pytest

from benchmarks import index_bench, memory_bench, write_bench
from benchmarks.common import Result, batch_reader, make_data, upsert_batch


def test_data_shape():
    data = make_data(1_000)
    assert data.num_columns == 6
    assert pc.count_distinct(data.column("city")).as_py() == 4
    batch = upsert_batch(1_000, 100)
    ids = set(batch.column("id").to_pylist())
    existing = set(data.column("id").to_pylist())
    assert len(ids) == 100 and len(ids & existing) == 50
    # the updates touch every partition
    updated = batch.filter(pc.is_in(batch.column("id"), value_set=data.column("id")))
    assert pc.count_distinct(updated.column("city")).as_py() == 4
    assert sum(b.num_rows for b in batch_reader(2_500, batch_rows=1_000)) == 2_500


def test_result_verdicts():
    assert Result("x", 1.0, 2.0, target=0.5).met() == "yes"
    assert Result("x", 1.0, 2.0, target=0.4).met() == "NO"
    assert Result("x", 1.0, 1.0, target=1.0, strict=True).met() == "NO"
    assert Result("x", 0.05, 1.0, target=0.1, absolute=True).met() == "yes"
    assert Result("x", 1.0, 2.0, target=0.4, record=True).met() == "(NO)"
    assert math.isnan(Result("x", 1.0, float("nan")).ratio)


@pytest.mark.slow
def test_write_suite_runs(capsys):
    pytest.importorskip("deltalake")
    pytest.importorskip("hudi")
    results = write_bench.run(2_000, repeat=1)
    # 12 targeted or compared rows, plus seven for the record: the insert with bloom filters off,
    # the upserts that keep the record index (COW, MOR), the deletes (COW, MOR), the MOR read
    # after the delete, the compaction and the MOR read after 20 small upserts
    assert len(results) == 19
    assert sum(r.case.startswith("compaction of the MOR table") for r in results) == 1
    assert sum("20 log blocks a slice" in r.case for r in results) == 1
    assert sum("-key delete from" in r.case for r in results) == 2
    assert sum("keeping the record index" in r.case for r in results) == 2
    assert all("DIFFER" not in r.case for r in results)
    assert "| case" in capsys.readouterr().out


@pytest.mark.slow
def test_index_suite_runs():
    results = index_bench.run(2_000, updates=200, lookups=20, repeat=1)
    assert [r.case.split(": ")[-1] for r in results][:3] == [
        "bloom (footers) vs simple (global)", "bloom (metadata table) vs simple (global)",
        "record index vs simple (global)"]


@pytest.mark.slow
def test_memory_case_in_child(tmp_path):
    got = memory_bench.measure("hudi_stream", tmp_path / "t", 2_000, "snappy")
    assert got["peak"] >= got["baseline"] > 0 and got["input_bytes"] > 0
