"""The ``hudi-format`` command line, every command run on real tables, its results checked
through the library (and hudi-rs) rather than by reading its own output back.

Commands run in this process through ``cli.main(argv)`` (a subprocess per command cost a second
of imports each); the entry points themselves, ``python -m hudi_format.cli`` and the installed
``hudi-format`` script, are run as subprocesses below."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conformance.fixtures import expected, extract_table, table_names
from damage import garble_footer_name

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CITIES = ("sf", "nyc", "la")


def cli(*args, code: int = 0) -> subprocess.CompletedProcess:
    """``hudi-format ARGS`` run in this process: its exit code, stdout and stderr."""
    from hudi_format.cli import main
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:   # argparse: usage errors, --help, --version
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:   # main's logging.basicConfig must not keep writing to this call's stderr
        root.handlers[:] = handlers
        root.setLevel(level)
    done = subprocess.CompletedProcess(["hudi-format", *argv], rc, out.getvalue(), err.getvalue())
    assert rc == code, f"exit {rc}, wanted {code}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return done


def cli_json(*args, code: int = 0):
    return json.loads(cli(*args, "--json", code=code).stdout)


def trips(ids, ts=1, fare_seed=0.0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:03d}" for i in ids], "ts": [ts] * len(ids),
                     "city": [CITIES[i % 3] for i in ids], "fare": [i * 1.5 + fare_seed for i in ids]})


def rows_by_id(path) -> dict[str, dict]:
    return {r["id"]: r for r in hudi.open_table(path).read(columns=["id", "ts", "city", "fare"]).to_pylist()}


@pytest.fixture(scope="module")
def mor_table(tmp_path_factory) -> Path:
    """A MOR table written through the CLI: insert from parquet, upsert from CSV."""
    base = tmp_path_factory.mktemp("cli")
    src = base / "trips.parquet"
    pq.write_table(trips(range(60)), src)
    path = base / "trips"
    out = cli_json("write", path, src, "--operation", "insert", "--record-key", "id", "--ordering-field", "ts",
                   "--partition-by", "city", "--table-type", "MOR", "--no-progress",
                   "--option", "hoodie.metadata.enable=true")
    assert out["rows"] == 60 and out["instant"]["action"] == "deltacommit"
    up = base / "up.csv"
    with open(up, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "ts", "city", "fare"])
        w.writerows([["k001", 2, "nyc", 99.5], ["k100", 2, "la", 1.25]])
    out = cli_json("write", path, up, "--no-progress")
    assert out["operation"] == "upsert" and out["instant"]["state"] == "COMPLETED"
    return path


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def test_write_creates_the_table_and_upserts(mor_table):
    table = hudi.open_table(mor_table)
    assert table.table_type == "MERGE_ON_READ" and table.version == 8
    assert table.config.record_key_fields == ["id"] and table.config.partition_fields == ["city"]
    rows = rows_by_id(mor_table)
    assert len(rows) == 61
    assert rows["k001"] == {"id": "k001", "ts": 2, "city": "nyc", "fare": 99.5}
    assert rows["k100"]["fare"] == 1.25 and rows["k002"]["fare"] == 3.0
    # an independent reader agrees
    from hudi import HudiTableBuilder, HudiReadOptions
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(mor_table)).build().read(HudiReadOptions()))
    assert canonical_rows(theirs.select(["id", "ts", "city", "fare"])) == canonical_rows(
        hudi.open_table(mor_table).read(columns=["id", "ts", "city", "fare"]))


def test_info(mor_table):
    info = cli_json("info", mor_table, "--properties")
    table = hudi.open_table(mor_table)
    assert info["table_type"] == "MERGE_ON_READ" and info["version"] == 8
    assert info["record_key_fields"] == ["id"] and info["partition_fields"] == ["city"]
    assert info["completed_writes"] == 2 and info["partitions"] == 3
    assert info["latest_commit"]["timestamp"] == table.timeline.write_instants()[-1].timestamp
    slices = table.file_slices()
    assert info["file_groups"] == len(slices)
    assert info["latest_slices_bytes"] == sum(s.total_size for s in slices) > 0
    assert info["log_files"] == sum(len(s.log_files) for s in slices) >= 1
    on_disk = [f for f in mor_table.rglob("*") if f.is_file()]
    assert info["data_files_bytes"] + info["hoodie_dir_bytes"] == sum(f.stat().st_size for f in on_disk)
    assert info["hoodie_dir_bytes"] == sum(f.stat().st_size for f in on_disk if ".hoodie" in f.relative_to(mor_table).parts[:1])
    assert info["properties"]["hoodie.table.name"] == table.config.name
    assert [f["name"] for f in info["schema"]] == table.schema().names
    text = cli("info", mor_table).stdout
    assert "MERGE_ON_READ, table version 8" in text and "partitioned by city" in text


def test_timeline(mor_table):
    rows = cli_json("timeline", mor_table)
    want = hudi.open_table(mor_table).timeline.instants
    assert [(r["timestamp"], r["action"], r["state"], r["completion_time"]) for r in rows] == \
        [(i.timestamp, i.action, i.state.name, i.completion_time) for i in want]
    text = cli("timeline", mor_table).stdout
    assert all(i.timestamp in text for i in want) and "deltacommit" in text


def test_files_now_and_as_of(mor_table):
    table = hudi.open_table(mor_table)
    first = table.timeline.write_instants()[0]
    now = cli_json("files", mor_table)
    assert {(r["partition"], r["file_id"], r["base_file"], tuple(r["log_files"])) for r in now} == \
        {(s.partition_path, s.file_id, s.base_file, tuple(s.log_files)) for s in table.file_slices()}
    before = cli_json("files", mor_table, "--as-of", first.completion_time)
    assert before and all(r["log_files"] == [] for r in before)  # the upsert's logs came later
    assert sum(r["total_size"] for r in before) == sum(s.total_size for s in table.file_slices(as_of=first.completion_time))
    only = cli_json("files", mor_table, "--partition", "nyc")
    assert {r["partition"] for r in only} == {"nyc"}


def test_show_with_columns_filters_and_as_of(mor_table):
    rows = cli_json("show", mor_table, "--columns", "id,fare", "--filter", "city = nyc", "--filter", "fare > 50",
                    "-n", "100")
    want = hudi.open_table(mor_table).read(columns=["id", "fare"], filters=[("city", "=", "nyc"), ("fare", ">", 50)])
    assert canonical_rows(rows) == canonical_rows(want) and len(rows) > 3
    first = hudi.open_table(mor_table).timeline.write_instants()[0]
    old = cli_json("show", mor_table, "--as-of", first.completion_time, "--filter", "id in k001,k002",
                   "--columns", "id,fare")
    assert sorted((r["id"], r["fare"]) for r in old) == [("k001", 1.5), ("k002", 3.0)]
    assert len(cli_json("show", mor_table, "-n", "5")) == 5
    inc = cli_json("show", mor_table, "--incremental", first.completion_time, "--columns", "id")
    assert sorted(r["id"] for r in inc) == ["k001", "k100"]
    text = cli("show", mor_table, "-n", "3", "--columns", "id,city").stdout
    assert text.splitlines()[0].split() == ["id", "city"] and "3 rows" in text


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_export(mor_table, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    res = cli_json("export", mor_table, out, "--columns", "id,ts,city,fare", "--filter", "city != la")
    want = hudi.open_table(mor_table).read(columns=["id", "ts", "city", "fare"], filters=[("city", "!=", "la")])
    assert res["rows"] == want.num_rows and res["format"] == fmt
    if fmt == "parquet":
        got = pq.read_table(out)
    elif fmt == "csv":
        import pyarrow.csv as pcsv
        got = pcsv.read_csv(out)
    else:
        got = pa.Table.from_pylist([json.loads(line) for line in out.read_text().splitlines()])
    assert canonical_rows(got) == canonical_rows(want)


def test_export_csv_refuses_nested_columns(tmp_path):
    path = tmp_path / "nested"
    hudi.write(path, pa.table({"id": ["a"], "ts": [1], "tags": [["x", "y"]]}), record_key="id", ordering_field="ts")
    err = cli("export", path, tmp_path / "o.csv", code=2).stderr
    assert "nested" in err and "tags" in err
    cli("export", path, tmp_path / "o.jsonl")
    assert json.loads((tmp_path / "o.jsonl").read_text())["tags"] == ["x", "y"]


def test_compact_cluster_clean_archive(mor_table, tmp_path):
    path = _copy(mor_table, tmp_path)
    before = canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "fare"]))
    out = cli_json("compact", path)
    assert out["instant"]["action"] == "commit"
    table = hudi.open_table(path)
    assert all(not s.log_files for s in table.file_slices())
    assert canonical_rows(table.read(read_optimized=True, columns=["id", "ts", "city", "fare"])) == before
    assert "nothing to do" in cli("compact", path).stdout
    as_of = table.timeline.write_instants()[1].completion_time
    old_files = {f for s in hudi.open_table(path).file_slices(as_of=as_of) if s.log_files
                 for f in (s.base_file, *s.log_files)}
    assert old_files
    # the cleaner keeps the last slice before the commits it retains: one more write, then clean
    hudi.open_table(path).write(trips([1, 100], ts=3, fare_seed=7.0))
    before = canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "fare"]))
    opts = ["--option", "hoodie.cleaner.commits.retained=1"]
    out = cli_json("clean", path, *opts)
    assert out["instant"]["action"] == "clean"
    assert hudi.open_table(path).timeline.get(out["instant"]["timestamp"]).is_completed
    assert not any((path / f).exists() for f in old_files)  # the slices before the compaction are gone
    out = cli_json("cluster", path, "--sort-by", "fare")
    assert out["instant"]["action"] == "replacecommit"
    table = hudi.open_table(path)
    assert canonical_rows(table.read(columns=["id", "ts", "city", "fare"])) == before
    for s in table.file_slices():
        fares = pq.read_table(str(path / s.base_file), columns=["fare"])["fare"].to_pylist()
        assert fares == sorted(fares)
    # archival never passes the metadata table's latest compaction: rewrite the same rows with
    # the metadata table compacting first
    hudi.open_table(path).write(trips([1, 100], ts=3, fare_seed=7.0),
                                options={"hoodie.metadata.compact.max.delta.commits": 1})
    arch = ["--option", "hoodie.keep.min.commits=2", "--option", "hoodie.keep.max.commits=3", *opts]
    out = cli_json("archive", path, *arch)
    archived = {i["timestamp"] for i in out["instants"]}
    assert archived and not archived & {i.timestamp for i in hudi.open_table(path).timeline.instants}
    rows = cli_json("timeline", path, "--archived")
    assert archived <= {r["timestamp"] for r in rows if r["archived"]}
    assert canonical_rows(hudi.open_table(path).read(columns=["id", "ts", "city", "fare"])) == before
    assert cli("validate", path).returncode == 0


def test_savepoint_rollback_restore(mor_table, tmp_path):
    path = _copy(mor_table, tmp_path)
    first = hudi.open_table(path).timeline.write_instants()[0].timestamp
    after_first = {k: v for k, v in rows_by_id(path).items() if k != "k100"}
    out = cli_json("savepoint", path, first)
    assert out["instant"]["action"] == "savepoint"
    src = tmp_path / "del.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"k{i:03d}", "ts": 9, "city": CITIES[i % 3]}) for i in (3, 4)))
    cli("write", path, src, "--operation", "delete")
    assert "k003" not in rows_by_id(path)
    latest = hudi.open_table(path).timeline.write_instants()[-1].timestamp
    out = cli_json("rollback", path, latest)
    assert out["instant"]["action"] == "rollback"
    assert "k003" in rows_by_id(path)
    out = cli_json("restore", path, first)
    assert out["instant"]["action"] == "restore"
    got = rows_by_id(path)
    assert got.keys() == after_first.keys() and got["k001"]["fare"] == 1.5
    cli("savepoint", path, first, "--delete")
    assert not [i for i in hudi.open_table(path).timeline.instants if i.action == "savepoint"]


def test_validate_sound_and_broken_tables(mor_table, tmp_path):
    ok = cli_json("validate", mor_table)
    assert ok["ok"] and ok["errors"] == 0
    path = _copy(mor_table, tmp_path)
    tdir = path / ".hoodie" / "timeline"
    completed = sorted(p for p in tdir.iterdir() if p.name.endswith(".deltacommit"))[0]
    completed.write_bytes(b"Obj\x01" + b"\x00" * 20)
    victim = next(s for s in hudi.open_table(path, options={"hoodie.metadata.enable": "false"}).file_slices()
                  if s.log_files)
    (path / victim.log_files[0]).unlink()
    mdt_dir = path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    mdt_completed = sorted(p for p in mdt_dir.iterdir() if p.name.endswith(".deltacommit"))[-1]
    mdt_completed.write_bytes(b"{not json")
    res = cli_json("validate", path, code=1)
    assert not res["ok"] and res["errors"] >= 3
    paths = {p["path"] for p in res["problems"] if p["severity"] == "error"}
    assert f".hoodie/timeline/{completed.name}" in paths
    assert victim.log_files[0] in paths
    assert f".hoodie/metadata/.hoodie/timeline/{mdt_completed.name}" in paths
    text = cli("validate", path, code=1).stdout
    assert "FAILED" in text and completed.name in text


def test_validate_finds_duplicate_keys_and_bad_properties(tmp_path):
    path = tmp_path / "dups"
    hudi.write(path, trips(range(5)), operation="insert", record_key="id", ordering_field="ts", partition_by="city")
    hudi.open_table(path).write(trips(range(2)), operation="bulk_insert")  # bulk inserts do not deduplicate
    res = cli_json("validate", path)  # Apache Hudi's inserts make duplicates too: a warning
    assert res["ok"] and [(p["severity"], p["check"]) for p in res["problems"]] == [("warning", "duplicate-keys")]
    assert "2 of 7 snapshot rows repeat a record key" in res["problems"][0]["message"]
    assert cli_json("validate", path, "--strict", code=1)["errors"] == 1
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.checksum=", "hoodie.table.checksum=1"))
    res = cli_json("validate", path, code=1)
    assert res["problems"][0]["check"] == "properties" and "checksum" in res["problems"][0]["message"]


def test_fixture_table_read_by_the_cli(tmp_path):
    name = "sample_table__mor__parquet__v6_complexkeygen_hivestyle"
    path = extract_table(name, tmp_path)
    exp = expected(name)
    assert canonical_rows(cli_json("show", path, "-n", "1000")) == sort_expected(exp["snapshot"])
    assert canonical_rows(cli_json("show", path, "--read-optimized", "-n", "1000")) == \
        sort_expected(exp["read_optimized"])
    ts = sorted(exp["time_travel"])[0]
    assert canonical_rows(cli_json("show", path, "--as-of", ts, "-n", "1000")) == sort_expected(exp["time_travel"][ts])
    info = cli_json("info", path)
    assert info["version"] == 6 and info["table_type"] == "MERGE_ON_READ"
    assert info["completed_writes"] == len(exp["completed_write_instants"])
    assert cli_json("validate", path)["ok"]


def test_errors_and_exit_codes(mor_table, tmp_path):
    err = cli("info", tmp_path / "missing", code=1).stderr
    assert "TableNotFoundError" in err and "missing" in err
    assert "bad filter" in cli("show", mor_table, "--filter", "fare >>", code=2).stderr
    assert "unknown column" in cli("show", mor_table, "--columns", "nope", code=1).stderr
    src = tmp_path / "x.parquet"
    pq.write_table(trips(range(2)), src)
    assert "hoodie.bogus" in cli("write", mor_table, src, "--option", "hoodie.bogus=1", code=2).stderr
    assert "does not exist" in cli("write", mor_table, tmp_path / "nope.parquet", code=2).stderr
    data = src.read_bytes()       # an input whose column name is not UTF-8, one cut short
    (tmp_path / "garbled.parquet").write_bytes(garble_footer_name(data, b"fare"))
    (tmp_path / "cut.parquet").write_bytes(data[:-20])
    for bad in ("garbled", "cut"):
        assert f"cannot read {tmp_path / bad}.parquet" in cli("write", mor_table, tmp_path / f"{bad}.parquet",
                                                               code=2).stderr
    assert "--format" in cli("write", mor_table, tmp_path / "data.txt", code=2).stderr
    assert "creating a table needs record_key" in cli("write", tmp_path / "new", src, code=2).stderr
    assert "usage:" in cli("show", code=2).stderr
    assert "KEY=VALUE" in cli("info", mor_table, "--storage-option", "novalue", code=2).stderr
    assert cli("--version").stdout.startswith("hudi-format ")


def test_module_entry_point_runs_as_a_process(mor_table):
    out = subprocess.run([sys.executable, "-m", "hudi_format.cli", "info", str(mor_table), "--json"], cwd=ROOT,
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["table_type"] == "MERGE_ON_READ"
    bad = subprocess.run([sys.executable, "-m", "hudi_format.cli", "info", "/nonexistent/table"], cwd=ROOT,
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and bad.stderr


def test_console_script_is_declared_and_installed():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'hudi-format = "hudi_format.cli:console_main"' in text
    script = Path(sys.executable).with_name("hudi-format")
    if not script.exists():
        pytest.skip("the package was installed before the console script was declared (pip install -e .)")
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 0 and "validate" in out.stdout


@pytest.mark.parametrize("name", table_names())
def test_validate_finds_no_errors_in_tables_apache_hudi_wrote(fixture_tables, name):
    from hudi_format.cli.validate import ERROR, validate_table
    problems = validate_table(str(fixture_tables(name)))
    assert [str(p) for p in problems if p.severity == ERROR] == []
    # the only oddity Hudi leaves in these tables: duplicate keys from INSERT INTO
    assert {p.check for p in problems} <= {"duplicate-keys"}


def test_validate_checks_the_record_index_against_the_snapshot(tmp_path, monkeypatch):
    """A key the record index lacks, one it keeps after its delete, one it misplaces: each an error."""
    from hudi_format.metadata.reader import MetadataTable
    path = tmp_path / "ri"
    opts = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"}
    hudi.write(path, trips(range(20)), operation="insert", record_key="id", ordering_field="ts",
               partition_by="city", options=opts)
    hudi.open_table(path).write(trips(range(15, 25)), options=opts)
    assert cli_json("validate", path)["problems"] == []
    real = MetadataTable.record_index_entries
    rows = real(MetadataTable(hudi.open_table(path).storage, hudi.open_table(path).config)).to_pylist()
    some, other = sorted(r["key"] for r in rows)[:2]

    def damaged(self):    # (read_failure hands what it read, damaged, to the check: idempotent)
        out = {r["key"]: r for r in real(self).to_pylist()}
        out.pop(some, None)
        out["gone"] = dict(out[other], key="gone")
        out[other] = dict(out[other], file_id="00000000-0000-0000-0000-000000000000-0")
        return pa.Table.from_pylist(list(out.values()), schema=real(self).schema)

    monkeypatch.setattr(MetadataTable, "record_index_entries", damaged)
    from hudi_format.cli.validate import validate_table
    problems = [p for p in validate_table(str(path)) if p.check == "record-index"]
    assert sorted(p.severity for p in problems) == ["error", "error", "warning"], problems
    text = " ".join(p.message for p in problems)
    assert f"{some!r}" in text and "'gone'" in text and f"{other!r}" in text


def test_write_takes_its_operation_from_the_option_when_none_is_given(tmp_path):
    """``--option hoodie.datasource.write.operation=...`` (a Hudi job's options) is the
    operation without ``--operation``; both, naming different ones, exit 2 and write nothing."""
    src = tmp_path / "trips.parquet"
    pq.write_table(trips(range(10)), src)
    path = tmp_path / "t"
    keys = ["--record-key", "id", "--ordering-field", "ts", "--no-progress"]
    cli("write", path, src, *keys)
    out = cli_json("write", path, src, *keys, "--option", "hoodie.datasource.write.operation=bulk_insert")
    assert out["operation"] == "bulk_insert"
    assert hudi.open_table(path).read().num_rows == 20      # bulk_insert looks no key up
    err = cli("write", path, src, *keys, "--operation", "upsert", "--option",
              "hoodie.datasource.write.operation=bulk_insert", code=2).stderr
    assert "different operations" in err
    assert hudi.open_table(path).read().num_rows == 20
