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
