"""The conformance suite: our engine passes every case, hudi-rs runs every read case, the
external-command protocol works, reports say per feature what passes, and the suite's own
checks (row comparison, model, layout validation) catch what they should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from conformance.adapters import get_engine
from conformance.cases import fixture_cases, write_cases
from conformance.generate import GENERATED
from conformance.layout import validate_layout
from conformance.model import Model, arrow_schema, expected_rows, rows_to_arrow
from conformance.report import feature_table, to_json, to_markdown
from conformance.runner import ERROR, FAIL, PASS, SKIP, Suite, compare_rows, run

ROOT = Path(__file__).resolve().parents[1]

# one worker under pytest-xdist: the module's fixtures (the suite's tables, both engines' runs)
# are built once, not once per worker
pytestmark = pytest.mark.xdist_group("conformance")

# What hudi-rs 0.5 is known not to do (checked below so that a new failure is noticed):
# incremental queries do not consult the archived timeline, and MOR incremental queries return
# log records without merging them with the base file under event-time ordering.
HUDI_RS_KNOWN = {
    "archived_history_cow_v8/incremental/": "archived timeline",
    "archived_history_mor_v6/incremental/": "archived timeline",
    "event_time_ordering_mor_v8/incremental/": "event-time merge in incremental queries",
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    s = Suite(tmp_path_factory.mktemp("conformance"))
    s.prepare()
    yield s


@pytest.fixture(scope="module")
def ours(suite):
    engine = get_engine("hudi_format")
    return run(engine, suite)


@pytest.fixture(scope="module")
def theirs(suite):
    engine = get_engine("hudi-rs")
    return run(engine, suite)


def _bad(results):
    return [f"{r.case}: {r.status}: {r.message}" for r in results if r.status != PASS]


def test_suite_covers_every_fixture_and_generated_table(suite):
    tables = {c.table for c in suite.read_cases}
    fixture_tables = {t.key for t in fixture_cases()[0]}
    assert fixture_tables <= tables
    assert {f"generated:{n}" for n in GENERATED} <= tables
    kinds = {c.query["kind"] for c in suite.read_cases}
    assert kinds == {"snapshot", "read_optimized", "time_travel", "incremental", "lookup"}
    assert not [t.error for t in suite.tables.values() if t.error]
    features = {f for c in suite.read_cases for f in c.features}
    for feature in ("bloom-index", "record-index", "clustering", "cleaning", "archived-timeline",
                    "schema-evolution", "rollback-command-blocks", "hfile-log-blocks", "compaction",
                    "log-compaction", "v6", "v8", "v9", "cow", "mor"):
        assert feature in features
    assert len(suite.write_cases) == len(list((ROOT / "conformance" / "write_cases").glob("*.json"))) >= 5


def test_hudi_format_passes_every_case(ours, suite):
    assert len(ours) == len(suite.read_cases) + len(suite.write_cases)
    assert _bad(ours) == []


def test_hudi_rs_runs_every_read_case(theirs, suite):
    reads = [r for r in theirs if r.kind == "read"]
    assert len(reads) == len(suite.read_cases)
    # hudi-rs cannot write: write cases are skipped, not failed
    assert {r.status for r in theirs if r.kind == "write"} == {SKIP}
    # the fixtures' expected results were produced by hudi-rs 0.5: it passes all of them
    assert [r.case for r in reads if "fixture" in r.features and r.status != PASS] == []
    unexpected = [f"{r.case}: {r.message}" for r in reads if r.status in (FAIL, ERROR)
                  and not any(r.case.startswith(k) for k in HUDI_RS_KNOWN)]
    assert unexpected == []
    assert [r.case for r in reads if r.status == SKIP] == ["record_index_mor_v8/lookup"]
    for prefix in HUDI_RS_KNOWN:  # still failing, so the note above stays true
        assert any(r.case.startswith(prefix) and r.status == FAIL for r in reads), prefix


def test_report_lists_features_per_engine(ours, theirs, tmp_path):
    runs = {"hudi_format": {"version": "x", "results": ours, "seconds": 1.0},
            "hudi-rs": {"version": "y", "results": theirs, "seconds": 1.0}}
    md = to_markdown(runs)
    assert "| feature | hudi_format | hudi-rs |" in md
    ours_features = feature_table(ours)
    line = next(ln for ln in md.splitlines() if ln.startswith("| archived-timeline |"))
    counts = ours_features["archived-timeline"]
    assert line.split("|")[2].strip() == f"{counts[PASS]}/{counts[PASS] + counts[FAIL] + counts[ERROR]}"
    assert "**" in line.split("|")[3]  # hudi-rs misses some archived-timeline cases: highlighted
    data = to_json(runs)
    assert data["engines"]["hudi-rs"]["summary"][FAIL] >= 1
    assert len(data["engines"]["hudi_format"]["cases"]) == len(ours)
    assert json.loads(json.dumps(data)) == data


def test_external_command_engine_speaks_the_protocol(suite, tmp_path):
    engine = get_engine(f"cmd:{sys.executable} -m conformance serve --engine hudi_format")
    try:
        assert engine.name == "hudi_format" and engine.can_write
        sub = Suite(tmp_path / "cmd", generated=False,
                    select=r"(sample_table__mor__parquet__v6_complexkeygen_hivestyle|v9_txns_simple_meta)/"
                           r"|write/cow_v8_upsert_delete")
        sub.prepare()
        results = run(engine, sub)
    finally:
        engine.close()
    assert engine.proc.returncode == 0
    assert {r.kind for r in results} == {"read", "write"}
    assert len(results) > 20
    assert _bad(results) == []


def test_command_engine_reports_unsupported_and_errors(tmp_path):
    script = tmp_path / "engine.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    if req['op'] == 'hello':\n"
        "        out = {'ok': True, 'engine': 'toy', 'capabilities': ['read']}\n"
        "    elif req['op'] == 'bye':\n"
        "        break\n"
        "    elif req['query']['kind'] == 'snapshot':\n"
        "        out = {'ok': True, 'rows': [{'id': 1}]}\n"
        "    elif req['query']['kind'] == 'incremental':\n"
        "        out = {'ok': False, 'error': 'boom'}\n"
        "    else:\n"
        "        out = {'ok': False, 'unsupported': True, 'reason': 'no time travel'}\n"
        "    print(json.dumps(out), flush=True)\n")
    engine = get_engine(f"cmd:{sys.executable} {script}")
    sub = Suite(tmp_path / "toy", generated=False, writes=True, select=r"^sample_table__cow__v8_nonpartitioned/|^write/")
    sub.prepare()
    try:
        results = {r.case.split("/", 1)[1].split("/")[0]: r for r in run(engine, sub)}
    finally:
        engine.close()
    assert results["snapshot"].status == FAIL and "expected" in results["snapshot"].message
    assert results["as_of"].status == SKIP and "no time travel" in results["as_of"].message
    assert results["incremental"].status == ERROR and "boom" in results["incremental"].message
    writes = [r for r in results.values() if r.kind == "write"]
    assert writes and {r.status for r in writes} == {SKIP}


def test_conformance_command_line_writes_reports(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "conformance", "run", "--engine", "hudi_format",
                          "--engine", "hudi-rs", "--no-generated", "--no-writes",
                          "--only", "sample_table__cow__v8_simplekeygen_nonhivestyle/",
                          "--report-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "conformance.json").read_text())
    assert set(data["engines"]) == {"hudi_format", "hudi-rs"}
    for eng in data["engines"].values():
        assert eng["summary"][PASS] == len(eng["cases"]) > 3
        assert "time-travel" in eng["features"]
    md = (tmp_path / "conformance.md").read_text()
    assert "## Per feature" in md and "sample_table__cow__v8_simplekeygen_nonhivestyle/snapshot" in md
    work = tmp_path / "work"
    bad = subprocess.run([sys.executable, "-m", "conformance", "run", "--engine", "hudi_format", "--engine", "nope",
                          "--workdir", str(work), "--keep"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown engine" in bad.stderr
    assert not work.exists() or not any(work.iterdir())    # refused before any table was generated


# -- the suite's own machinery ---------------------------------------------------------------------
def test_compare_rows_explains_differences():
    want = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert compare_rows(pa.table({"id": [2, 1], "v": ["b", "a"]}), want, None) is None
    msg = compare_rows(pa.table({"id": [1, 3], "v": ["a", "c"]}), want, None)
    assert "1 expected rows missing" in msg and '"id": 2' in msg and "1 unexpected rows" in msg
    assert "columns differ" in compare_rows(pa.table({"id": [1, 2]}), want, None)
    assert compare_rows(pa.table({"id": [1, 2], "v": ["a", "b"], "x": [0, 0]}), want, ["id", "v"]) is None
    assert "lacks columns" in compare_rows(pa.table({"id": [1, 2]}), want, ["id", "v"])
    assert "multiplicity" in compare_rows([{"id": 1, "v": "a"}, {"id": 1, "v": "a"}, {"id": 2, "v": "b"}],
                                          want + [want[1]], None)


def test_model_follows_hudi_semantics():
    schema = arrow_schema("standard")
    m = Model()
    m.apply("insert", rows_to_arrow({"ids": [0, 6], "ts": 5}, schema), 0)
    m.apply("upsert", rows_to_arrow([{"ids": [0, 2], "ts": 4, "seed": 1}, {"ids": [2, 4], "ts": 6, "seed": 1}],
                                    schema), 1)
    assert {k[1]: w for k, w in m.writer.items()} == {"k00000": 0, "k00001": 0, "k00002": 1, "k00003": 1,
                                                       "k00004": 0, "k00005": 0}
    m.apply("delete", rows_to_arrow({"ids": [4, 5], "ts": 9}, schema), 2)
    m.apply("delete_partition", None, 3, partitions=["a"])  # k00000 and k00003 live in "a"
    assert sorted(k[1] for k in m.rows) == ["k00001", "k00002", "k00005"]
    m.revert_to(1)
    assert len(m.rows) == 6
    rows = expected_rows(m.rows, schema, ["id", "amount", "when"])
    assert rows[0] == {"id": "k00000", "amount": "0.00", "when": "2024-01-01T00:00:00+00:00"}


def test_layout_validation_catches_broken_tables(tmp_path):
    import hudi_format as hudi
    schema = arrow_schema("standard")
    path = tmp_path / "t"
    spec = {"table": {"table_type": "MERGE_ON_READ", "table_version": 8, "record_key": "id", "partition_by": "p"}}
    hudi.write(path, rows_to_arrow({"ids": [0, 9], "ts": 1}, schema), operation="insert", record_key="id",
               ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ")
    assert validate_layout(path, spec) == []
    wrong = {"table": {**spec["table"], "table_version": 6, "record_key": "uuid"}}
    problems = validate_layout(path, wrong)
    assert any("hoodie.table.version is 8" in p for p in problems)
    assert any("recordkey.fields" in p for p in problems)
    (path / "a" / "stray.txt").write_text("x")
    base = next((path / "b").glob("*.parquet"))
    base.rename(base.with_name("not-a-hudi-name.parquet"))
    completed = next(p for p in (path / ".hoodie" / "timeline").iterdir() if p.name.endswith(".deltacommit"))
    completed.write_bytes(b"Obj\x01garbage")
    problems = validate_layout(path, spec)
    assert any("stray.txt" in p for p in problems)
    assert any("not-a-hudi-name.parquet" in p for p in problems)
    assert any(completed.name in p and "Avro" in p for p in problems)


def test_write_cases_are_well_formed():
    cases = write_cases()
    for case in cases:
        assert case.spec["steps"] and case.spec["table"]["record_key"]
        for step in case.spec["steps"]:
            assert ("write" in step) != ("service" in step), (case.id, step)
    features = {f for c in cases for f in c.features}
    for feature in ("cow", "mor", "v6", "v8", "compaction", "clustering", "cleaning", "archival", "rollback",
                    "savepoint", "restore", "delete-partition", "insert-overwrite-table", "schema-evolution"):
        assert feature in features
