"""spark_adapter on a cluster of separate executor JVMs, with executors lost mid-write.

The other Spark tests run in local mode, where the executors are threads of the driver's JVM
and none can be lost. Here ``tests/support/spark_cluster_child.py`` runs a
``local-cluster[2,1,1024]`` Spark (a standalone master, two workers, an executor JVM each) in a
child process and kills an executor JVM during writes: after an upsert's records were tagged and
kept on the executors (they are computed again), and from inside a write task of a bulk insert
and of an upsert once it wrote a file group (the attempt dies with its files unreported; the
retry writes them again). Every write must be acknowledged and the tables must hold exactly the
rows written, for our reader, hudi-rs and the cluster's own read
(``spark.read.format("hudi_format")``), with no file outside a commit, no marker left and the
metadata table's listing equal to storage.
The first table is then streamed through the streaming source into a new table by the sink,
whose first write task kills its executor: the copy must equal the first table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hudi_format as hudi
from hudi_format.cli.validate import ERROR, record_index_problems

from spark_cluster_child import STREAM_COPY, TABLES, batches
from writemodel import hudi_rs_read, metadata_listing_problem

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = Path(__file__).parent / "support" / "spark_cluster_child.py"
COLUMNS = ["id", "p", "ts", "v"]


def _expected(first: str, writes: int) -> list[tuple]:
    rows: dict = {}
    for op, batch in batches(first)[:writes]:
        for r in batch.to_pylist():
            if op == "delete":
                rows.pop(r["id"], None)
            else:
                rows[r["id"]] = r
    return sorted(tuple(r[c] for c in COLUMNS) for r in rows.values())


def _rows(table) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in table.select(COLUMNS).to_pylist())


def _data_files(path: str) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out.update(os.path.relpath(os.path.join(root, f), path) for f in files
                   if not f.startswith(".hoodie_partition_metadata"))
    return out


def _check_table(path: str, want: list[tuple]) -> None:
    """Rows (our reader, hudi-rs), files (exactly those the commits name), markers, metadata
    listing and instants of a table the cluster wrote."""
    table = hudi.open_table(path)
    assert _rows(table.read(columns=COLUMNS)) == want, path
    assert _rows(hudi_rs_read(path)) == want, path
    assert metadata_listing_problem(path) is None
    assert [p for p in record_index_problems(path) if p.severity == ERROR] == []
    assert not list(Path(path, ".hoodie", ".temp").glob("*/record-index-keys/*"))
    named = {st.path for i in table.timeline.write_instants()
             for stats in table.timeline.metadata(i).partition_to_write_stats.values() for st in stats}
    assert _data_files(path) == named, f"{path}: files no commit names"
    assert not list(Path(path, ".hoodie", ".temp").glob("*/**/*.marker.*"))
    assert all(i.state.name == "COMPLETED" for i in table.timeline.instants)


def test_executors_lost_mid_write_lose_nothing(spark_java_home, tmp_path):
    env = {**os.environ, "JAVA_HOME": spark_java_home, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, str(CHILD), str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=420)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["master"].startswith("local-cluster")
    for name, (_, _, first, kills) in TABLES.items():
        want = _expected(first, len(kills))
        writes = report["tables"][name]
        assert [w["op"] for w in writes] == [op for op, _ in batches(first)[:len(kills)]]
        failed = [w for w in writes if not w["ok"]]
        assert not failed, f"{name}: {failed}"
        # each planned kill happened during the write it was meant for
        assert [w["kills"] for w in writes] == [[k] if k else [] for k in kills]
        assert [tuple(r) for r in report["spark_read"][name]] == want, name
        _check_table(str(tmp_path / name), want)
    # the first table streamed into a new one, an executor lost in the sink's first write
    assert report["stream"]["ok"], report["stream"]
    assert report["stream"]["kills"] == ["in_task"]
    _, _, first, kills = next(iter(TABLES.values()))
    _check_table(str(tmp_path / STREAM_COPY), _expected(first, len(kills)))
