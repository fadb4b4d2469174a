"""A writer killed (SIGKILL) at any point of a write never loses committed data and never shows
partial data: both readers see exactly the last committed state, and the next write rolls the
debris back and commits."""

from __future__ import annotations

import os
import signal
import sys
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


def _kill_write(path: str, point: str, table_type: str, version: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = run_script(CHILD, [path, point, table_type, str(version)], env=env, timeout=120)
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
