"""Known gaps of hudi-rs (``pip`` package ``hudi``), pinned so we notice when hudi-rs fixes them.

Each gap is a strict ``xfail``: while hudi-rs still has the gap the test fails as expected;
once hudi-rs is fixed the test passes, the strict xfail turns that into a failure, and the gap
(and the workaround in ``tests/support/soak_concurrency.py``) can go.
"""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.services import pending_compaction_base_instants, schedule_compaction
from writemodel import hudi_rs_read

ROWS = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])


def _write(path, op: str, value: int) -> None:
    data = pa.table({"id": ["k1", "k2"], "p": ["a", "b"], "ts": [value] * 2, "v": [value] * 2}, schema=ROWS)
    hudi.write(path, data, operation=op, record_key="id", ordering_field="ts", partition_by="p",
               table_type="MERGE_ON_READ", table_version=6)


def _values(table: pa.Table) -> dict:
    return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


@pytest.fixture
def v6_write_during_pending_compaction(tmp_path):
    """v6 MOR: insert, upsert, schedule a compaction, upsert again (its log files are named
    with the pending compaction's instant, as Hudi 0.x writes them)."""
    path = str(tmp_path / "t")
    _write(path, "insert", 1)
    _write(path, "upsert", 2)
    t = hudi.open_table(path)
    pending = schedule_compaction(t.storage, t.config)
    assert pending is not None
    _write(path, "upsert", 3)
    t = hudi.open_table(path)
    assert set(pending_compaction_base_instants(t.storage, t.config).values()) == {pending.timestamp}
    logs = [f for s in t.file_slices() for f in s.log_files
            if f"_{pending.timestamp}.log." in posixpath.basename(f)]
    assert logs, "the last upsert did not name its log files with the pending compaction instant"
    return path


def test_our_reader_merges_the_pending_compaction_slice(v6_write_during_pending_compaction):
    assert _values(hudi.open_table(v6_write_during_pending_compaction).read(columns=["id", "v"])) == \
        {"k1": 3, "k2": 3}


def test_hudi_rs_without_the_gap_before_the_compaction_is_scheduled(tmp_path):
    """The same writes with no pending compaction: hudi-rs and our reader agree."""
    path = str(tmp_path / "t")
    _write(path, "insert", 1)
    _write(path, "upsert", 2)
    _write(path, "upsert", 3)
    assert _values(hudi_rs_read(path)) == _values(hudi.open_table(path).read(columns=["id", "v"])) == \
        {"k1": 3, "k2": 3}


@pytest.mark.xfail(strict=True, reason="hudi-rs 0.5 skips the log files of a v6 file group named with "
                   "a pending compaction's instant (it does not merge the pending compaction's slice "
                   "with the one before it, cf. HUDI-2480, HUDI-3194): it returns the value before "
                   "the last upsert")
def test_hudi_rs_reads_log_files_of_a_pending_compaction_v6(v6_write_during_pending_compaction):
    path = v6_write_during_pending_compaction
    ours = _values(hudi.open_table(path).read(columns=["id", "v"]))
    assert _values(hudi_rs_read(path)) == ours


def test_hudi_rs_gap_is_the_value_before_the_last_upsert(v6_write_during_pending_compaction):
    """Pins the gap's shape (older value, no lost row): what the soak counts as ``known_gap``."""
    got = _values(hudi_rs_read(v6_write_during_pending_compaction))
    if got == {"k1": 3, "k2": 3}:
        pytest.skip("hudi-rs no longer has the gap (see the strict xfail above)")
    assert got == {"k1": 2, "k2": 2}


# -- the concurrency soak's checker on the same situation ----------------------------------------


def test_soak_checker_counts_the_gap_apart_and_the_listing_by_log_blocks(tmp_path):
    """The soak's checks (``soak_concurrency.check``) on a v6 table written to while a compaction
    is pending: hudi-rs's older values are a ``known_gap``, not lost/stale rows; the metadata
    listing judges the pending compaction's log files by the deltacommit in their block headers
    (committed), not by the pending compaction instant in their names, so nothing is ``extra``."""
    from soak_concurrency import SEED_KEYS, check, clean, create, rows
    url = str(tmp_path / "t")
    create(url, "MERGE_ON_READ", 6)
    ledgers = [[]]
    for value in (1, 2):
        if value == 2:
            t = hudi.open_table(url)
            assert schedule_compaction(t.storage, t.config) is not None
        hudi.write(url, rows(SEED_KEYS, value), operation="upsert", record_key="id", ordering_field="ts",
                   partition_by="p")
        ledgers[0].append({"op": "upsert", "keys": SEED_KEYS, "value": value, "ok": True, "error": None})
    report = check(url, ledgers)
    assert report["metadata_listing"] == {"files": report["metadata_listing"]["files"], "missing": 0,
                                          "extra": 0, "examples": []}, report
    assert report["ours"]["lost"] == report["ours"]["stale"] == 0, report
    rs = report["hudi_rs"]
    assert rs["lost"] == rs["stale"] == 0, report
    assert rs["gap_keys"] == len(SEED_KEYS), report
    # while hudi-rs has the gap, it shows the value before the last upsert
    assert rs["known_gap"] in (0, len(SEED_KEYS)), report
    assert clean(report), report


def test_soak_checker_excuses_nothing_but_the_gap(tmp_path):
    """The gap excuses exactly what hudi-rs should show without the pending compaction's log
    files (or the acknowledged value, once hudi-rs reads them); any other value there is stale
    or lost as usual and fails the run, and so is a key outside the gap."""
    from soak_concurrency import SEED_KEYS, clean, outcome
    ledgers = [[{"op": "upsert", "keys": SEED_KEYS[:1], "value": 2, "ok": True, "error": None},
                {"op": "insert", "keys": ["w0_1"], "value": 2, "ok": True, "error": None}]]
    gap = {SEED_KEYS[0]: 1, "w0_1": None}   # upserted / inserted in the pending compaction's log files
    rest = SEED_KEYS[1:]

    def judged(shown: dict) -> dict:
        return outcome(pa.table({"id": pa.array(list(shown), pa.string()), "v": pa.array(list(shown.values()), pa.int64())}),
                       ledgers, gap)

    with_gap = judged({SEED_KEYS[0]: 1, **dict.fromkeys(rest, 0)})
    assert (with_gap["known_gap"], with_gap["lost"], with_gap["stale"]) == (2, 0, 0), with_gap
    fixed = judged({SEED_KEYS[0]: 2, "w0_1": 2, **dict.fromkeys(rest, 0)})
    assert (fixed["known_gap"], fixed["lost"], fixed["stale"]) == (0, 0, 0), fixed
    wrong = judged({SEED_KEYS[0]: 0, **dict.fromkeys(rest, 0)})      # neither: an older value
    assert (wrong["known_gap"], wrong["stale"]) == (1, 1), wrong
    outside = judged({SEED_KEYS[0]: 1, **dict.fromkeys(rest[1:], 0)})  # a seed key lost
    assert (outside["known_gap"], outside["lost"]) == (2, 1), outside
    ours = dict(fixed, unreadable_slices=[])
    for rs, ok in ((with_gap, True), (fixed, True), (wrong, False), (outside, False)):
        report = {"metadata_listing": {"missing": 0, "extra": 0}, "ours": ours,
                  "hudi_rs": dict(rs, unreadable_slices=[])}
        assert clean(report) is ok, rs


# -- a Merge-on-Read column widened after log blocks were written (the torture's evolving runs) --

def _widened_after_logs(path: str, version: int) -> None:
    """Insert, upsert (a log block with ``n`` an int), then an insert elsewhere that adds a
    column and widens ``n`` to a long, as Hudi's compatible schema evolution allows; the old
    slice keeps its int log block, which lacks the new column."""
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ",
              table_version=version)
    narrow = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("n", pa.int32())])
    hudi.write(path, pa.table({"id": ["k1", "k2"], "p": ["a", "a"], "ts": [1, 1], "n": [1, 2]}, schema=narrow),
               operation="insert", **kw)
    hudi.write(path, pa.table({"id": ["k1"], "p": ["a"], "ts": [2], "n": [3]}, schema=narrow), **kw)
    hudi.write(path, pa.table({"id": ["k3"], "p": ["b"], "ts": [3], "n": pa.array([1 << 40], pa.int64()),
                               "extra": ["x"]}), operation="insert", **kw)


@pytest.mark.parametrize("version", [6, 8])
def test_our_reader_merges_log_blocks_written_before_a_widening(tmp_path, version):
    path = str(tmp_path / "t")
    _widened_after_logs(path, version)
    got = hudi.open_table(path).read(columns=["id", "n"])
    assert got.schema.field("n").type == pa.int64()
    assert dict(zip(got.column("id").to_pylist(), got.column("n").to_pylist())) == {"k1": 3, "k2": 2, "k3": 1 << 40}


@pytest.mark.xfail(strict=True, reason="hudi-rs 0.5 takes a log block without the table's newer column "
                   "for a partial update and then fails on its narrower column (\"partial-update column "
                   "'n' has type Int32 but the table schema expects Int64\"); the torture tolerates "
                   "exactly that error on its evolving runs")
@pytest.mark.parametrize("version", [6, 8])
def test_hudi_rs_reads_log_blocks_written_before_a_widening(tmp_path, version):
    path = str(tmp_path / "t")
    _widened_after_logs(path, version)
    got = hudi_rs_read(path)
    assert dict(zip(got.column("id").to_pylist(), got.column("n").to_pylist())) == {"k1": 3, "k2": 2, "k3": 1 << 40}
