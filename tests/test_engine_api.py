"""The public engine API (hudi_format.engine) as an engine other than Spark would use it:
scan tasks and write buckets shipped to worker processes, stats committed in the parent;
and spark_adapter reaching into no private name of the core."""

from __future__ import annotations

import ast
import multiprocessing
import pathlib
import pickle
from concurrent.futures import ProcessPoolExecutor, wait

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

import hudi_format as hudi
from hudi_format import engine

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPTS = {"hoodie.copyonwrite.insert.split.size": "40", "hoodie.copyonwrite.insert.auto.split": "false",
        "hoodie.parquet.small.file.limit": "0"}


def rows(ids, ts: int, fare: float) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "ts": pa.array([ts] * len(ids), pa.int64()),
                     "fare": [fare + i for i in ids], "city": ["sf" if i % 2 else "nyc" for i in ids]})


# -- worker functions (run in spawned processes: nothing shared with the parent but pickles) ----
def write_in_worker(bucket: engine.WriteBucket, data: pa.Table, deletes: pa.Table) -> engine.BucketResult:
    return engine.write_bucket(bucket, data, deletes=deletes)


def write_then_fail(bucket: engine.WriteBucket, data: pa.Table, deletes: pa.Table) -> engine.BucketResult:
    engine.write_bucket(bucket, data, deletes=deletes)     # its files are on storage...
    raise RuntimeError("worker lost")                        # ...and the worker dies


def read_in_worker(task: engine.ScanTask) -> pa.Table:
    return pa.Table.from_batches(list(engine.read_task(task)), task.schema)


def distributed_write(pool, path: str, data: pa.Table, operation: str, worker=write_in_worker, **kw):
    """Driver: begin, plan, ship each bucket and its rows to a worker, commit (or abort once
    every worker has stopped: a worker still writing would leave files behind the abort)."""
    job = engine.begin_write(path, operation, schema=data.schema, options=OPTS, **kw)
    futures = []
    try:
        buckets = engine.plan_write(job, data)
        for b in buckets:
            write_rows, delete_rows = job.rows_of(b)
            fn = worker if b.index == 0 else write_in_worker
            futures.append(pool.submit(fn, b, data.take(write_rows), data.take(delete_rows)))
        return job, engine.commit(job, [f.result() for f in futures])
    except BaseException:
        wait(futures)
        engine.abort(job)
        raise


def canonical(table: pa.Table) -> list[tuple]:
    t = table.select(["id", "ts", "fare", "city"])
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def hudi_rs(path: str) -> pa.Table:
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions()))


def files_of(path: str) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in pathlib.Path(path).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as p:
        yield p


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_distributed_write_and_read_in_a_process_pool(tmp_path, pool, table_type):
    path = str(tmp_path / "t")
    first = rows(range(200), ts=1, fare=0.5)
    job, done = distributed_write(pool, path, first, "upsert", record_key="id", ordering_field="ts",
                                  partition_by="city", table_type=table_type)
    assert len(job.buckets) >= 6 and all(b.kind == "create" for b in job.buckets)   # 100 rows/partition, 40/group
    update = rows(list(range(0, 60)) + list(range(300, 320)), ts=2, fare=9.0)
    job2, done2 = distributed_write(pool, path, update, "upsert")
    assert {b.kind for b in job2.buckets} >= {"append" if table_type == "MERGE_ON_READ" else "merge"}
    gone = rows(range(100, 110), ts=3, fare=0.0)
    _, done3 = distributed_write(pool, path, gone, "delete")

    model = {r[0]: r for r in canonical(first)}
    model.update({r[0]: r for r in canonical(update)})
    for r in canonical(gone):
        model.pop(r[0])
    expected = sorted(model.values())

    table = hudi.open_table(path)
    assert [i.timestamp for i in table.timeline.write_instants()] == [done.timestamp, done2.timestamp,
                                                                       done3.timestamp]
    assert canonical(table.read()) == expected                       # our reader
    assert canonical(hudi_rs(path)) == expected                      # hudi-rs

    plan = engine.plan_scan(path, columns=["id", "ts", "fare", "city"], filters=[("ts", ">=", 2)])
    assert plan.tasks and pickle.loads(pickle.dumps(plan)).schema == plan.schema
    got = pa.concat_tables(pool.map(read_in_worker, plan.tasks))       # read in the workers
    assert canonical(got) == [r for r in expected if r[1] >= 2]
    inc = engine.plan_scan(table, incremental=(done.timestamp, done2.timestamp))
    got = pa.concat_tables([engine.read_task_table(t) for t in inc.tasks])
    assert sorted(got.column("id").to_pylist()) == sorted(table.read_incremental(
        done.timestamp, done2.timestamp).column("id").to_pylist())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_failed_worker_aborts_and_leaves_the_table_unchanged(tmp_path, pool, table_type):
    path = str(tmp_path / "t")
    first = rows(range(120), ts=1, fare=0.5)
    distributed_write(pool, path, first, "upsert", record_key="id", ordering_field="ts",
                      partition_by="city", table_type=table_type)
    before_files, before = files_of(path), canonical(hudi.open_table(path).read())
    timeline_before = [(i.timestamp, i.action, i.state) for i in hudi.open_table(path).timeline.instants]

    update = rows(list(range(0, 50)) + list(range(500, 600)), ts=2, fare=7.0)
    with pytest.raises(RuntimeError, match="worker lost"):
        distributed_write(pool, path, update, "upsert", worker=write_then_fail)

    table = hudi.open_table(path)
    assert canonical(table.read()) == before and canonical(hudi_rs(path)) == before
    assert not table.timeline.pending
    assert [(i.timestamp, i.action, i.state) for i in table.timeline.instants] == timeline_before
    # every file the workers wrote (the failed one's too), the markers and the instant are gone
    assert files_of(path) == before_files
    # and the table takes the next write as usual
    _, done = distributed_write(pool, path, update, "upsert")
    model = {r[0]: r for r in before}
    model.update({r[0]: r for r in canonical(update)})
    assert canonical(hudi.open_table(path).read()) == sorted(model.values()) == canonical(hudi_rs(path))


def test_write_buckets_and_scan_tasks_pickle_small(tmp_path):
    """A bucket carries its spec, not the rows; a task carries its slice, not the timeline."""
    path = str(tmp_path / "t")
    data = rows(range(100), ts=1, fare=1.0)
    hudi.write(path, data, record_key="id", ordering_field="ts", partition_by="city")
    job = engine.begin_write(path, "upsert", schema=data.schema)
    try:
        buckets = engine.plan_write(job, data)
        assert len(pickle.dumps(buckets)) < 20_000 + 2_000 * len(buckets)
        assert sum(len(job.rows_of(b)[0]) for b in buckets) == 100
    finally:
        engine.abort(job)
    assert not hudi.open_table(path).timeline.pending
    for task in engine.plan_scan(path).tasks:
        assert len(pickle.dumps(task)) < 20_000
        assert pickle.loads(pickle.dumps(task)).file_slice == task.file_slice


def test_plan_write_from_keys_routes_rows_by_bucket(tmp_path):
    """An engine whose rows stay on the workers plans from (key, partition) only."""
    path = str(tmp_path / "t")
    hudi.write(path, rows(range(50), ts=1, fare=1.0), record_key="id", ordering_field="ts", partition_by="city")
    update = rows(range(40, 70), ts=2, fare=3.0)
    job = engine.begin_write(path, "upsert", schema=update.schema)
    keys, parts = job.spec.keys(job.spec.conform(update))
    buckets = engine.plan_write(job, keys=keys, partitions=parts)
    results = []
    for b in buckets:
        idx, _ = job.rows_of(b)
        results.append(engine.write_bucket(b, update.take(idx), write_token=f"{b.index}-7-{b.index}"))
    engine.commit(job, results)
    assert all("-7-" in r.stat.path for r in results)
    model = {r[0]: r for r in canonical(rows(range(50), ts=1, fare=1.0))}
    model.update({r[0]: r for r in canonical(update)})
    assert canonical(hudi.open_table(path).read()) == sorted(model.values()) == canonical(hudi_rs(path))


# -- spark_adapter uses only public names of the core --------------------------------------------
def private_core_uses(package: pathlib.Path) -> list[str]:
    """``_private`` names of hudi_format that ``package`` imports, or reads as attributes of
    anything but its own objects (attributes it defines itself, and pyspark's ``_df``, ``_jdf``)."""
    trees = {p: ast.parse(p.read_text()) for p in sorted(package.glob("*.py"))}
    # pyspark's, not the core's: DataFrameWriter._df (the DataFrame being written) and
    # DataFrame._jdf (its JVM side, to release a local checkpoint's blocks)
    own: set[str] = {"_df", "_jdf"}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Assign):
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
    core = {a.asname or a.name for tree in trees.values() for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hudi_format")
            for a in node.names}
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) in core for b in node.bases):
                found += [f"{path.name}:{f.lineno} overrides {f.name}" for f in node.body
                          if isinstance(f, ast.FunctionDef) and f.name.startswith("_")
                          and not f.name.startswith("__")]
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hudi_format"):
                parts = node.module.split(".") + [a.name for a in node.names]
                found += [f"{where} from {node.module} import {p}" for p in parts if p.startswith("_")]
            elif isinstance(node, ast.Import):
                found += [f"{where} import {a.name}" for a in node.names
                          if a.name.startswith("hudi_format") and any(p.startswith("_") for p in a.name.split("."))]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and node.attr not in own:
                found.append(f"{where} .{node.attr}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr") \
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and str(node.args[1].value).startswith("_") and node.args[1].value not in own \
                    and not str(node.args[1].value).startswith("__"):
                found.append(f"{where} getattr {node.args[1].value}")
    return found


def test_spark_adapter_reaches_no_private_name_of_the_core():
    assert private_core_uses(ROOT / "spark_adapter") == []


def test_the_private_name_check_catches_private_reach(tmp_path):
    pkg = tmp_path / "adapter"
    pkg.mkdir()
    (pkg / "a.py").write_text("from hudi_format.writer.client import _json, WriteClient\n"
                              "from hudi_format.table import _recover\n"
                              "def f(table, c):\n    c._plan(1)\n    return table._read_slice\n"
                              "class Planner(WriteClient):\n    def _measured_record_size(self):\n        pass\n")
    assert len(private_core_uses(pkg)) == 5


@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM", "GLOBAL_SIMPLE"])
def test_a_lookup_whose_files_a_concurrent_service_removed_is_a_conflict(tmp_path, index):
    """Between an engine's lookup plan (driver) and its lookups (workers), clustering replaced
    the file group planned and the cleaner removed it: the lookup raises the
    ``ConcurrentWriteError`` the write paths retry (``hoodie.write.num.retries.on.conflict.failures``),
    as the core's own write does, not a bare missing-file error."""
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.index.type": index,
            "hoodie.bloom.index.use.metadata": "false"}
    data = rows(range(4), ts=1, fare=1.0)
    hudi.write(path, data, operation="upsert", record_key="id", ordering_field="ts", partition_by="city",
               options=opts)
    hudi.write(path, rows(range(4, 6), ts=1, fare=1.0), operation="upsert", options=opts)
    job = engine.begin_write(path, "upsert", schema=data.schema, options=opts)
    lookup = engine.plan_index_lookup(job, ["sf", "nyc"])
    assert lookup.tasks
    hudi.open_table(path).cluster(options=dict(opts, **{"hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}))
    hudi.write(path, rows([0, 1], ts=2, fare=2.0), operation="upsert", options=opts)   # cleans inline
    gone = [t for t in lookup.tasks if not (tmp_path / "t" / t.file_slice.base_file).exists()]
    assert gone, "the test needs a planned file the cleaner removed"
    with pytest.raises(hudi.ConcurrentWriteError, match="retry"):
        engine.lookup(gone[0], pa.array(["k0000"]))
    if index == "BLOOM":
        with pytest.raises(hudi.ConcurrentWriteError, match="retry"):
            engine.lookup_key_range(gone[0])
    engine.abort(job)


def _two_commits(path: str, opts: dict, operation: str, table_type: str = "COPY_ON_WRITE", first: int = 4) -> pa.Table:
    """A table of two commits (keys ``0..first-1``, then two more; partitions by parity) and
    the incoming upsert, or delete, of keys 0 and 1."""
    hudi.write(path, rows(range(first), ts=1, fare=1.0), operation="upsert", record_key="id", ordering_field="ts",
               partition_by="city", table_type=table_type, options=opts)
    hudi.write(path, rows(range(first, first + 2), ts=1, fare=1.0), operation="upsert", options=opts)
    incoming = rows(range(2), ts=2, fare=2.0)
    return incoming.select(["id", "city"]) if operation == "delete" else incoming


RI = {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("operation", ["delete", "upsert"])
def test_a_record_index_newer_than_the_plan_is_a_conflict_not_missing_keys(tmp_path, table_type, operation):
    """The record index is read after the write loaded the table (the executors' lookups
    seconds later): a clustering that completed in between placed the keys in file groups the
    write's table state does not have. Those keys are not absent -- taken so, a delete did
    nothing and an upsert wrote a second copy (found by ``soak_spark``). The lookup raises
    ``ConcurrentWriteError`` instead, and the write run again on the table as it is then
    deletes or updates them."""
    path = str(tmp_path / "t")
    opts = dict(RI, **{"hoodie.clean.automatic": "false"})
    incoming = _two_commits(path, opts, operation, table_type, first=6)

    def clustered() -> None:
        hudi.open_table(path).cluster(options=dict(opts, **{"hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}))

    job = engine.begin_write(path, operation, schema=incoming.schema, options=opts)
    lookup = engine.plan_index_lookup(job)
    clustered()
    with pytest.raises(hudi.ConcurrentWriteError, match="retry"):
        for task in lookup.tasks:      # the executors' side
            engine.lookup(task, pa.array(["k0000", "k0001"]))
    with pytest.raises(hudi.ConcurrentWriteError, match="retry"):
        engine.plan_write(job, incoming)   # the single-process planner's side
    engine.abort(job)
    hudi.write(path, incoming, operation=operation, options=opts)   # run again: the table as it is
    got = {r["id"]: r["fare"] for r in hudi.open_table(path).read(columns=["id", "fare"]).to_pylist()}
    want = {r["id"]: r["fare"] for r in rows(range(8), ts=1, fare=1.0).to_pylist()}
    if operation == "delete":
        del want["k0000"], want["k0001"]
    else:
        want.update({r["id"]: r["fare"] for r in incoming.to_pylist()})
    assert got == want
    assert sorted(r["id"] for r in hudi_rs(path).select(["id"]).to_pylist()) == sorted(want)


CLUSTER_ALL = {"hoodie.clustering.plan.strategy.small.file.limit": str(100 << 20)}


def _clustered_and_cleaned(path: str, opts: dict) -> None:
    """Another process: clustering replaces every file group, a commit follows, the cleaner
    removes the replaced groups."""
    hudi.open_table(path).cluster(options=dict(opts, **CLUSTER_ALL))
    hudi.write(path, rows([6], ts=1, fare=1.0), operation="upsert", options=opts)
    assert hudi.open_table(path).clean(options=opts) is not None


def _expected(operation: str, incoming: pa.Table) -> dict:
    want = {r["id"]: r["fare"] for r in rows(range(7), ts=1, fare=1.0).to_pylist()}
    if operation == "delete":
        del want["k0000"], want["k0001"]
    else:
        want.update({r["id"]: r["fare"] for r in incoming.to_pylist()})
    return want


def _rows_of(path: str) -> list:
    return sorted((r["id"], r["fare"]) for r in hudi.open_table(path).read(columns=["id", "fare"]).to_pylist())


def _check_rows(path: str, want: dict) -> None:
    got = [(r["id"], r["fare"]) for r in hudi.open_table(path).read(columns=["id", "fare"]).to_pylist()]
    assert sorted(got) == sorted(want.items())     # no key twice, none missing
    assert sorted(r["id"] for r in hudi_rs(path).select(["id"]).to_pylist()) == sorted(want)


@pytest.mark.parametrize("index", ["SIMPLE", "GLOBAL_SIMPLE", "BLOOM"])
@pytest.mark.parametrize("operation", ["delete", "upsert"])
def test_a_listing_taken_after_a_concurrent_clean_is_a_conflict_not_missing_keys(tmp_path, index, operation):
    """The write loaded the table; before it listed the files (Spark's driver plans the lookups
    after a job counted the input), clustering replaced the file groups holding the keys and the
    cleaner removed them: the listing holds neither the old groups (deleted) nor the new ones
    (committed after the write's timeline). Taken as it was, the keys were absent: a delete did
    nothing and an upsert wrote second copies (found by ``soak_spark``). The commit checks the
    listing against the cleans begun since the table was loaded (on the timeline its conflict
    check loads) and raises ``ConcurrentWriteError``, leaving the table as it was; the write run
    again deletes or updates the keys."""
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false",
            "hoodie.index.type": index, "hoodie.bloom.index.use.metadata": "false"}
    incoming = _two_commits(path, opts, operation)
    job = engine.begin_write(path, operation, schema=incoming.schema, options=opts)
    _clustered_and_cleaned(path, opts)
    before = _rows_of(path)
    results = []
    for b in engine.plan_write(job, incoming):     # lists the partitions now: torn
        write_rows, delete_rows = job.rows_of(b)
        results.append(engine.write_bucket(b, incoming.take(write_rows), deletes=incoming.take(delete_rows)))
    with pytest.raises(hudi.ConcurrentWriteError, match="removed by clean .* retry"):
        engine.commit(job, results)
    assert _rows_of(path) == before and not hudi.open_table(path).timeline.pending
    hudi.write(path, incoming, operation=operation, options=opts)   # run again: the table as it is
    _check_rows(path, _expected(operation, incoming))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("operation", ["delete", "upsert"])
def test_a_write_whose_listing_a_concurrent_clean_tore_runs_again(tmp_path, monkeypatch, operation, table_type):
    """The same race inside ``hudi.write``: the clean lands between loading the table and
    listing it; the write loses the conflict and, with a retry allowed, runs again on the
    table as it is then."""
    import hudi_format.writer.client as client
    path = str(tmp_path / "t")
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false"}
    incoming = _two_commits(path, opts, operation, table_type)
    plan, raced = client.plan_write, []

    def racing(job, data):
        if not raced:
            raced.append(job)
            _clustered_and_cleaned(path, opts)
        return plan(job, data)
    monkeypatch.setattr(client, "plan_write", racing)
    hudi.write(path, incoming, operation=operation,
               options=dict(opts, **{"hoodie.write.num.retries.on.conflict.failures": "1"}))
    assert raced
    _check_rows(path, _expected(operation, incoming))
