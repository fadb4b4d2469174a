"""The metadata table's own instants never take a time the data table may use.

A data instant's metadata-table deltacommit carries the data instant's time, so an instant the
metadata table makes for itself (a clean) must not come from a clock of its own: two clocks
issue the same millisecond (seen in a 120 s soak, COW v6, four processes: the metadata table
cleaned at the very time of a data clean, and a writer that then applied its deltacommit tried
to remove the "leftover" clean and failed). As Hudi does, a version-6 metadata clean is named
after its latest deltacommit with the suffix ``002`` (compaction takes ``001``), and a version-8
one takes a time from the data table's clock, which every instant of both timelines shares."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from hudi_format.timeline import clock as clock_module
from hudi_format.config import TableConfig
from writemodel import hudi_rs_read, make_rows


@pytest.mark.parametrize("version", [6, 8])
def test_metadata_cleans_take_times_the_data_table_never_uses(tmp_path, monkeypatch, version):
    path = str(tmp_path / "t")
    issued: list[tuple[str, str]] = []
    original = clock_module.InstantClock.new_instant_time

    def recording(self, *a, **k):
        ts = original(self, *a, **k)
        issued.append((self.storage.url.rstrip("/"), ts))
        return ts

    monkeypatch.setattr(clock_module.InstantClock, "new_instant_time", recording)
    opts = {"hoodie.metadata.compact.max.delta.commits": "2", "hoodie.metadata.cleaner.commits.retained": "1",
            "hoodie.clean.automatic": "false"}
    for i in range(8):
        hudi.write(path, make_rows(range(i * 3, i * 3 + 6), ts=i), operation="upsert", record_key="id",
                   ordering_field="ts", partition_by="p", table_version=version, options=opts)
    md = Storage(f"{path}/.hoodie/metadata")
    md_tl = Timeline.load(md, TableConfig.load(md))
    cleans = [i for i in md_tl.instants if i.action == "clean"]
    assert cleans, "the metadata table never cleaned: the test exercises nothing"
    data_times = {i.timestamp for i in Timeline.load(Storage(path), TableConfig.load(Storage(path))).instants}
    md_clock = {ts for url, ts in issued if url.endswith("/.hoodie/metadata")}
    deltas = sorted(i.timestamp for i in md_tl.instants if i.action == "deltacommit")
    for c in cleans:
        assert c.timestamp not in data_times
        assert c.timestamp not in md_clock                   # not from a clock of the metadata table's own
        if version == 6:
            assert c.timestamp.endswith("002") and c.timestamp[:-3] in deltas
        else:
            assert (path, c.timestamp) in [(u, t) for u, t in issued]   # the data table's clock
    assert sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist()) == \
        sorted(hudi_rs_read(path).column("id").to_pylist())


def test_a_metadata_instant_of_another_action_at_the_data_time_is_never_removed(tmp_path):
    """Defence in depth: a metadata-table instant of another action at a data instant's time
    (a table from a writer with the old clock) fails that write, which is undone, instead of
    being rolled back or deleted as a leftover of the write's own deltacommit."""
    from hudi_format import engine
    path = str(tmp_path / "t")
    kw = dict(record_key="id", ordering_field="ts", partition_by="p")
    hudi.write(path, make_rows(range(6), ts=1), operation="insert", **kw)
    before = sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist())
    rows = make_rows(range(6, 9), ts=2)
    job = engine.begin_write(path, "upsert", schema=rows.schema, **kw)
    buckets = engine.plan_write(job, rows)
    ts = job.instant_time
    md = Storage(f"{path}/.hoodie/metadata")
    clean = f".hoodie/timeline/{ts}.clean.requested"
    md.write_bytes(clean, b"")
    results = [engine.write_bucket(b, **job.inputs_of(b)) for b in buckets]
    with pytest.raises(hudi.HudiError, match="clean at"):
        engine.commit(job, results)
    assert md.exists(clean)
    assert sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist()) == before
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == before
