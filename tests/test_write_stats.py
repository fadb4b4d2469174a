"""The write stats a copy-on-write merge records: updates, inserts and deletes per file group.

Hudi's merge handle counts a record as an update when it replaces a stored record of the file,
as an insert when its key is new to the file, and a delete when a stored key is gone; a
record that loses to the stored one (event-time ordering) is neither.
"""

from __future__ import annotations

import pyarrow as pa

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline

OPTS = dict(record_key="id", ordering_field="ts", partition_by="part")


def _rows(ids: list[str], ts: int, part: str = "p1") -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array([ts] * len(ids), pa.int64()),
                     "part": [part] * len(ids), "v": [f"{i}-{ts}" for i in ids]})


def _last_stats(path: str) -> dict[str, tuple[int, int, int, int]]:
    storage = Storage(path)
    tl = Timeline.load(storage, TableConfig.load(storage))
    md = tl.metadata(tl.write_instants()[-1])
    return {p: tuple(sum(getattr(s, f) or 0 for s in stats)
                     for f in ("num_writes", "num_update_writes", "num_inserts", "num_deletes"))
            for p, stats in md.partition_to_write_stats.items()}


def test_cow_merge_counts_updates_inserts_and_deletes(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, _rows([f"k{i:03d}" for i in range(100)], 1), operation="insert", **OPTS)
    # 10 updates, 5 new keys, and an older version of k050 that loses to the stored one
    upd = pa.concat_tables([_rows([f"k{i:03d}" for i in range(10)], 2), _rows([f"n{i}" for i in range(5)], 2),
                            _rows(["k050"], 0)])
    hudi.write(path, upd, operation="upsert")
    assert _last_stats(path) == {"p1": (105, 10, 5, 0)}
    hudi.write(path, _rows(["k020", "k021", "k022", "missing"], 3), operation="delete")
    assert _last_stats(path) == {"p1": (102, 0, 0, 3)}
    rows = hudi.open_table(path).read()
    assert rows.num_rows == 102
    assert sorted(rows.filter(pa.compute.equal(rows.column("id"), "k050")).column("v").to_pylist()) == ["k050-1"]
