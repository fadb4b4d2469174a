"""A 36-commit stream of small upserts with the services inline keeps the active timeline
within its bounds and the files per partition bounded, and the table stays correct."""

from __future__ import annotations

import pytest

from benchmarks.streaming_bench import OPTIONS, batch, stream

import hudi_format as hudi
from writemodel import hudi_rs_read

pytestmark = pytest.mark.slow


COMMITS = 36    # three archival cycles (keep.max.commits 10) and seven inline compactions


def test_a_long_stream_stays_bounded(tmp_path):
    path = str(tmp_path / "stream")
    stats = list(stream(path, COMMITS, timed_read=False))
    max_active = int(OPTIONS["hoodie.keep.max.commits"])
    # the active timeline: write instants within keep.max, plus the services' own instants
    assert max(s[2] for s in stats[COMMITS // 2:]) <= 4 * max_active
    late_files = max(s[3] for s in stats[COMMITS // 2:])
    assert late_files <= max(s[3] for s in stats[:COMMITS // 2]) + 2   # no growth with the stream length
    table = hudi.open_table(path)
    assert table.timeline.archived().write_instants()       # history went to the archive
    expected = {}
    for c in range(COMMITS):
        for r in batch(c, 500, 4096).to_pylist():
            expected[r["id"]] = r["ts"]
    got = {r["id"]: r["ts"] for r in table.read(columns=["id", "ts"]).to_pylist()}
    assert got == expected
    theirs = hudi_rs_read(path).select(["id", "ts"]).to_pylist()
    assert {r["id"]: r["ts"] for r in theirs} == expected
