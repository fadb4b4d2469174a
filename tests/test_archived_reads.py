"""Time travel and incremental queries reach back past the active timeline into the archive.

The archives are built from real fixture tables by moving their oldest instants into the LSM
history (v8+) or the archive log (v6), as ``tests/test_timeline_archived.py`` describes; the
expected rows are still the Hudi-checked ones of the original table.
"""

from __future__ import annotations

import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import expected
import shutil

from test_timeline_archived import (V6_TABLE, V9_TABLE, _lsm_row, _write_lsm_file,  # noqa: F401
                                    _write_manifest, lsm_table, v6_archive)


@pytest.fixture()
def archived_deltacommits(fixture_tables, tmp_path):
    """The v9 MOR table after Hudi-style archival of its 7 oldest deltacommits: what archival
    leaves behind in practice (the replacecommit and compaction after them stay active)."""
    base = tmp_path / "archived7"
    shutil.copytree(fixture_tables(V9_TABLE), base)
    tdir = base / ".hoodie" / "timeline"
    history = tdir / "history"
    history.mkdir(exist_ok=True)
    rows = []
    for inst in expected(V9_TABLE)["completed_write_instants"][:7]:
        row, files = _lsm_row(tdir, inst["timestamp"])
        rows.append(row)
        for f in files:
            f.unlink()
    _write_manifest(history, 1, [_write_lsm_file(history, rows)])
    (history / "_version_").write_text("1")
    return base


def test_snapshot_does_not_read_the_archive(archived_deltacommits):
    exp = expected(V9_TABLE)
    table = hudi.open_table(archived_deltacommits)
    assert canonical_rows(table.read(read_optimized=True)) == sort_expected(exp["read_optimized"])
    assert not table.timeline.archive_loaded
    # The archived deltacommits' log files lie beside newer base files (compaction, clustering):
    # which slice each joins depends on its completion time, which only the archive has
    # (Hudi's CompletionTimeQueryView loads it for this, lazily).
    assert canonical_rows(table.read()) == sort_expected(exp["snapshot"])
    # A time travel into the archived range has to read it, and gets the committed rows.
    first = exp["completed_write_instants"][0]
    got = table.read(as_of=first["completion_time"])
    assert canonical_rows(got) == sort_expected(exp["time_travel"][first["timestamp"]])
    assert table.timeline.archive_loaded


def test_lsm_time_travel_and_incremental(lsm_table):
    base, _ = lsm_table
    exp = expected(V9_TABLE)
    table = hudi.open_table(base)
    completion = {i["timestamp"]: i["completion_time"] for i in exp["completed_write_instants"]}
    active_start = table.timeline.instants[0].timestamp
    archived = [ts for ts in exp["time_travel"] if completion[ts] < active_start]
    assert len(archived) == 11
    # This fixture archived a replacecommit whose replaced files were never cleaned (Hudi's
    # archiver would not): only queries pinned inside the archived range see that replacement.
    for ts in archived:
        rows = exp["time_travel"][ts]
        assert canonical_rows(table.read(as_of=completion[ts])) == sort_expected(rows), ts
    for inc in exp["incremental"]:
        got = table.read_incremental(inc["start_exclusive"], inc["end_inclusive"])
        assert canonical_rows(got) == sort_expected(inc["rows"]), inc["end_inclusive"]
    assert table.timeline.archive_loaded


def test_v6_archive_time_travel_and_incremental(v6_archive):
    base, _ = v6_archive
    exp = expected(V6_TABLE)
    table = hudi.open_table(base)
    assert canonical_rows(table.read()) == sort_expected(exp["snapshot"])
    for ts, rows in exp["time_travel"].items():
        assert canonical_rows(table.read(as_of=ts)) == sort_expected(rows), ts
    for inc in exp["incremental"]:
        got = table.read_incremental(inc["start_exclusive"], inc["end_inclusive"])
        assert canonical_rows(got) == sort_expected(inc["rows"]), inc["end_inclusive"]


def test_time_travel_before_first_commit_is_empty(lsm_table):
    base, _ = lsm_table
    table = hudi.open_table(base)
    assert table.read(as_of="20000101000000000").num_rows == 0
