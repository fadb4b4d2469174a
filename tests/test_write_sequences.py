"""Writes that Apache Hudi's readers must agree with: each operation sequence is checked after
every commit against a model, with our reader and with hudi-rs (snapshot, time travel to every
commit, incremental between commits)."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from writemodel import Model, check_all, make_rows

LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]


def _ids(layout):
    return f"{layout[0]}-v{layout[1]}"


def _writer(path, table_type, version, model, **kw):
    instants = []

    def write(op, data, partitions=None, **extra):
        opts = dict(kw.get("options", {}))
        opts.update(extra.get("options", {}))
        if op == "delete_partition" and data is None:
            opts["hoodie.datasource.write.partitions.to.delete"] = ",".join(partitions)
        inst = hudi.write(path, data, operation=op, record_key="id", ordering_field="ts",
                          partition_by=kw.get("partition_by", "p"), table_type=table_type,
                          table_version=version, options=opts or None)
        instants.append(inst)
        model.apply(op, data, len(instants) - 1, partitions)
        check_all(path, model, instants)
        return inst

    return write


@pytest.mark.parametrize("layout", LAYOUTS, ids=_ids)
def test_insert_upsert_delete_upsert(tmp_path, layout):
    table_type, version = layout
    event_time = version >= 8  # v6 tables merge with the 0.x default payload: latest write wins
    model = Model(event_time)
    write = _writer(str(tmp_path / "t"), table_type, version, model)
    write("insert", make_rows(range(0, 60), ts=10))
    upd = make_rows(range(40, 80), ts=20, seed=1)           # 20 updates + 20 new keys
    write("upsert", upd)
    write("delete", make_rows(range(0, 10), ts=0).select(["id", "p"]))
    stale = make_rows(range(50, 55), ts=5, seed=2)          # lower ordering value than stored
    fresh = make_rows(range(55, 65), ts=30, seed=3)
    import pyarrow as pa
    write("upsert", pa.concat_tables([stale, fresh]))


@pytest.mark.parametrize("layout", LAYOUTS, ids=_ids)
def test_overwrite_operations(tmp_path, layout):
    table_type, version = layout
    model = Model(version >= 8)
    write = _writer(str(tmp_path / "t"), table_type, version, model)
    write("insert", make_rows(range(0, 30), ts=1))
    write("insert_overwrite", make_rows(range(100, 110), ts=2, partitions=("a",)))
    write("upsert", make_rows(range(20, 25), ts=3, seed=4))
    write("delete_partition", None, partitions=["b"])
    write("insert_overwrite_table", make_rows(range(200, 212), ts=4))


@pytest.mark.parametrize("layout", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 6)], ids=_ids)
def test_dedup_on_upsert_takes_highest_ordering_value(tmp_path, layout):
    import pyarrow as pa
    table_type, version = layout
    path = str(tmp_path / "t")
    batch = pa.concat_tables([make_rows(range(5), ts=3, seed=1), make_rows(range(5), ts=7, seed=2),
                              make_rows(range(5), ts=5, seed=3)])
    hudi.write(path, batch, record_key="id", ordering_field="ts", partition_by="p",
               table_type=table_type, table_version=version, operation="upsert")
    got = {r["id"]: r["ts"] for r in hudi.open_table(path).read(columns=["id", "ts"]).to_pylist()}
    assert got == {f"k{i:05d}": 7 for i in range(5)}
