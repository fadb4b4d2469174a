"""A writer killed (SIGKILL) at any point of a write never loses committed data and never shows
partial data: both readers see exactly the last committed state, and the next write rolls the
debris back and commits."""

from __future__ import annotations

import os
import signal
import sys
import json
from pathlib import Path

import pytest

import hudi_format as hudi
from preloaded import run_script
from writemodel import Model, data_rows, hudi_rs_read, make_rows, model_rows

pytestmark = pytest.mark.slow

CHILD = Path(__file__).parent / "support" / "faultchild.py"
POINTS = ["after_requested", "before_data", "mid_base_file", "mid_streamed_merge", "mid_log_append", "after_data",
          "mid_metadata_write", "after_metadata_commit", "after_commit"]
LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 6), ("COPY_ON_WRITE", 6)]


def _kill_write(path: str, point: str, table_type: str, version: int, extra: list[str] = ()) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = run_script(CHILD, [path, point, table_type, str(version), *extra], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay[0]}-v{lay[1]}")
@pytest.mark.parametrize("point", POINTS)
def test_killed_writer(tmp_path, layout, point):
    table_type, version = layout
    if point == "mid_log_append" and table_type == "COPY_ON_WRITE":
        pytest.skip("copy-on-write writes no log files")
    if point in ("mid_base_file", "mid_streamed_merge") and table_type == "MERGE_ON_READ":
        pytest.skip("this upsert appends to logs only (inserts pad the small file group)")
    path = str(tmp_path / "t")
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
              table_version=version)
    model = Model(version >= 8)
    first = make_rows(range(0, 20), ts=1)
    hudi.write(path, first, operation="insert", **kw)
    model.apply("insert", first, 0)

    _kill_write(path, point, table_type, version)
    upsert = make_rows(range(10, 30), ts=2, seed=1)
    committed = point == "after_commit"
    if committed:
        model.apply("upsert", upsert, 1)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)

    # The next writer recovers (the dead writer's heartbeat names a dead pid) and commits.
    nxt = make_rows(range(25, 35), ts=3, seed=2)
    hudi.write(path, nxt, operation="upsert", **kw)
    model.apply("upsert", nxt, 2)
    table = hudi.open_table(path)
    assert data_rows(table.read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    assert [i for i in table.timeline.pending if i.action in ("commit", "deltacommit")] == []
    rolled_back = set()
    for inst in table.timeline.completed:
        if inst.action == "rollback":
            rolled_back.update(table.timeline.raw_metadata(inst)["commitsRollback"])
    if not committed:
        assert rolled_back, "the failed write was not rolled back"
    # no data file of the killed instant is left behind
    for f in Path(path).rglob("*"):
        rel = str(f.relative_to(path))
        if f.is_file() and not rel.startswith(".hoodie") and (version >= 8 or f.suffix == ".parquet"):
            assert not any(ts in f.name for ts in rolled_back), rel


MOVES = {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
         "hoodie.record.index.update.partition.path": "true"}


def _check_moved(path: str, model: Model) -> None:
    """Both readers show the model; the record index places every key where the model has it."""
    from hudi_format.cli.validate import ERROR, record_index_problems
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
    keys = sorted(r["id"] for r in model.rows.values())
    found = hudi.open_table(path).lookup(keys, columns=["id", "p"])
    assert sorted(zip(found.column("id").to_pylist(), found.column("p").to_pylist())) == \
        sorted((r["id"], r["p"]) for r in model.rows.values())
    assert [p for p in record_index_problems(path) if p.severity == ERROR] == []


@pytest.mark.parametrize("layout,point", [
    (("MERGE_ON_READ", 8), p) for p in ("after_data", "after_metadata_commit")]
    + [(("COPY_ON_WRITE", 6), "after_metadata_commit")],
    ids=lambda v: f"{v[0]}-v{v[1]}" if isinstance(v, tuple) else v)
def test_killed_writer_moving_keys_under_the_record_index(tmp_path, layout, point):
    """An upsert that moves keys to other partitions (record index, partition path updates on)
    killed at any point: before any recovery, both readers and the record index's lookups show
    the last committed placement (a metadata-table commit of the dead write places nothing);
    the next write rolls it back and moves keys again, the index following."""
    table_type, version = layout
    path = str(tmp_path / "t")
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type=table_type,
              table_version=version, options=MOVES)
    model = Model(version >= 8)
    first = make_rows(range(0, 20), ts=1)
    hudi.write(path, first, operation="insert", **kw)
    model.apply("insert", first, 0)
    _kill_write(path, point, table_type, version, [json.dumps(MOVES), "moves"])
    if point == "after_commit":
        model.apply("upsert", make_rows(range(10, 30), ts=2, partitions=("b", "c", "a"), seed=1), 1)
    _check_moved(path, model)
    nxt = make_rows(range(5, 25), ts=3, partitions=("c", "a", "b"), seed=2)
    hudi.write(path, nxt, operation="upsert", **kw)
    model.apply("upsert", nxt, 2)
    _check_moved(path, model)
    assert [i for i in hudi.open_table(path).timeline.pending if i.action in ("commit", "deltacommit")] == []
