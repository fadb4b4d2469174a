"""Structured Streaming through ``hudi_format``: the sink commits every micro-batch exactly once
across restarts and replays (checked with hudi-rs too), the source streams a table's commits into
another table that ends up equal to it, and inline table services run while streaming."""

from __future__ import annotations

import pathlib
import time

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


import hudi_format as hudi  # noqa: E402
from hudi_format.errors import HudiError  # noqa: E402
from spark_adapter.streaming import (SINK_CHECKPOINT_KEY, MicroBatchSink, checkpoint_metadata,  # noqa: E402
                                     committed_batch, should_skip)
from spark_adapter.writer import write_dataframe  # noqa: E402
from writemodel import hudi_rs_read  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _stop_timeout(spark):
    """Queries stopped mid-batch get time to finish it (the shared session of conftest.py)."""
    spark.conf.set("spark.sql.streaming.stopTimeout", "60s")
    yield


OPTS = {"hoodie.table.name": "s", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.metadata.enable": "false"}
ROWS_PER_BATCH = 30


def rate(spark, keys: int | None = None):
    """``rate-micro-batch``: batch ``n`` holds values ``[n*30, (n+1)*30)``, the same on a replay."""
    df = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH)
          .option("numPartitions", 2).load())
    key = "value" if keys is None else f"value % {keys}"
    return df.selectExpr(f"cast({key} as long) as id", "cast(value as long) as ts",
                         f"cast(({key}) % 3 as string) as part")


def run_until(query, batch_id: int, timeout: float = 120) -> None:
    """Let ``query`` run until micro-batch ``batch_id`` completed, then stop it (possibly in
    the middle of the next batch: a stop at any point must keep the table exactly-once)."""
    deadline = time.monotonic() + timeout
    while (query.lastProgress or {}).get("batchId", -1) < batch_id:
        if query.exception() is not None:
            raise query.exception()
        assert time.monotonic() < deadline, "the stream did not progress"
        time.sleep(0.1)
    query.stop()


def checkpoints(path: str) -> list[int]:
    """The batch ids of the sink's commits, in commit order."""
    table = hudi.open_table(path)
    out = []
    for instant in table.timeline.write_instants():
        value = table.timeline.metadata(instant).extra_metadata.get(SINK_CHECKPOINT_KEY)
        if value:
            out.append(int(next(iter(__import__("json").loads(value).values()))))
    return out


def ids_of(path: str) -> list[int]:
    ours = sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist())
    theirs = sorted(hudi_rs_read(path).column("id").to_pylist())
    assert ours == theirs
    return ours


def test_rate_stream_stopped_restarted_and_replayed_is_exactly_once(spark, tmp_path):
    path, cp = str(tmp_path / "t"), str(tmp_path / "cp")
    opts = {**OPTS, "hoodie.datasource.write.operation": "insert"}   # a replay would duplicate keys

    def start():
        return (rate(spark).writeStream.format("hudi_format").options(**opts)
                .option("checkpointLocation", cp).trigger(processingTime="0 seconds").start(path))

    run_until(start(), 1)
    first = checkpoints(path)
    assert first[:2] == [0, 1]
    run_until(start(), first[-1] + 1)                   # restarted from the same checkpoint
    # Spark's commit log loses its last entry: Spark runs that batch again, the sink skips it
    commits = sorted(pathlib.Path(cp, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    replayed = int(commits[-1].name)
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)   # its Hadoop checksum too
    before = checkpoints(path)
    assert replayed in before
    q = start()
    run_until(q, replayed + 1)
    done = checkpoints(path)
    assert done == list(range(len(done))) and done[:len(before)] == before   # each batch once, in order
    n = (done[-1] + 1) * ROWS_PER_BATCH
    assert ids_of(path) == list(range(n))               # every key exactly once, no gap
    assert committed_batch(path, None, "default_single_writer")[0] == done[-1]


def test_a_batch_id_already_committed_is_skipped(spark, tmp_path):
    path = str(tmp_path / "t")
    sink = MicroBatchSink(path, {**OPTS, "hoodie.datasource.write.operation": "insert",
                                 "hoodie.datasource.write.streaming.checkpoint.identifier": "w1"})
    df = spark.range(0, 20).selectExpr("id", "id as ts", "cast(id % 2 as string) as part")
    sink(df, 0)
    sink(df, 0)                                  # the same batch again: nothing written
    assert checkpoints(path) == [0] and ids_of(path) == list(range(20))
    more = spark.range(20, 30).selectExpr("id", "id as ts", "cast(id % 2 as string) as part")
    sink(more, 1)
    sink(df, 0)                                  # an older batch: skipped too
    assert checkpoints(path) == [0, 1] and ids_of(path) == list(range(30))
    # another writer of the table (own identifier) is not skipped by w1's checkpoint
    other = MicroBatchSink(path, {**OPTS, "hoodie.datasource.write.operation": "upsert",
                                  "hoodie.datasource.write.streaming.checkpoint.identifier": "w2"})
    other(more.selectExpr("id", "ts + 1 as ts", "part"), 0)
    assert checkpoints(path) == [0, 1, 0] and committed_batch(path, None, "w1")[0] == 1
    assert committed_batch(path, None, "w2")[0] == 0


def test_a_failed_micro_batch_is_retried_then_dropped_or_raised_as_hudi_does(spark, tmp_path, monkeypatch):
    """``hoodie.datasource.write.streaming.retry.count`` attempts, ``retry.interval.ms`` apart
    (doubling); a retry whose earlier attempt committed after all writes nothing again; a batch
    failing every attempt fails the query, or with ``ignore.failed.batch`` is dropped."""
    import spark_adapter.writer as sw
    path = str(tmp_path / "t")
    real, calls = sw.write_dataframe, []

    def flaky(fails: int, after_commit: bool = False):
        def write(*a, **k):
            calls.append(1)
            if len(calls) <= fails:
                if after_commit:
                    real(*a, **k)
                raise HudiError(f"attempt {len(calls)} failed")
            return real(*a, **k)
        return write

    opts = {**OPTS, "hoodie.datasource.write.operation": "insert",
            "hoodie.datasource.write.streaming.retry.interval.ms": "1"}
    sink = MicroBatchSink(path, opts)
    batch = lambda lo, hi: spark.range(lo, hi).selectExpr("id", "id as ts", "cast(id % 2 as string) as part")  # noqa: E731
    monkeypatch.setattr(sw, "write_dataframe", flaky(2))
    sink(batch(0, 10), 0)                               # third attempt (of 3, the default) commits
    assert len(calls) == 3 and ids_of(path) == list(range(10)) and checkpoints(path) == [0]
    calls.clear()
    monkeypatch.setattr(sw, "write_dataframe", flaky(1, after_commit=True))
    sink(batch(10, 20), 1)                              # committed, then failed: not written twice
    assert len(calls) == 1 and ids_of(path) == list(range(20)) and checkpoints(path) == [0, 1]
    calls.clear()
    monkeypatch.setattr(sw, "write_dataframe", flaky(5))
    with pytest.raises(HudiError, match="attempt 2 failed"):
        MicroBatchSink(path, {**opts, "hoodie.datasource.write.streaming.retry.count": "2"})(batch(20, 30), 2)
    assert len(calls) == 2 and ids_of(path) == list(range(20))
    calls.clear()
    ignoring = MicroBatchSink(path, {**opts, "hoodie.datasource.write.streaming.ignore.failed.batch": "true"})
    ignoring(batch(20, 30), 2)                          # dropped after 3 attempts; the query goes on
    assert len(calls) == 3 and ids_of(path) == list(range(20))
    monkeypatch.setattr(sw, "write_dataframe", real)
    ignoring(batch(30, 40), 3)
    assert ids_of(path) == list(range(20)) + list(range(30, 40)) and checkpoints(path) == [0, 1, 3]


def test_a_new_query_reusing_an_identifier_fails_instead_of_skipping(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(0, 5).selectExpr("id", "id as ts", "'a' as part")
    write_dataframe(df, path, options=OPTS, extra_metadata=checkpoint_metadata("w", 3, "query-1"))
    assert should_skip(path, None, "w", 2, "query-1") and should_skip(path, None, "w", 3, None)
    assert not should_skip(path, None, "w", 4, "query-2") and not should_skip(path, None, "v", 0, "query-2")
    with pytest.raises(HudiError, match="hoodie.datasource.write.streaming.checkpoint.identifier"):
        should_skip(path, None, "w", 0, "query-2")


def _write_a(path: str, ids, ts: int, op: str = "upsert", **kw) -> None:
    rows = pa.table({"id": pa.array(list(ids), pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "part": pa.array([str(i % 3) for i in ids]), "v": pa.array([f"v{ts}-{i}" for i in ids])})
    hudi.write(path, rows, operation=op, options={**OPTS, "hoodie.table.name": "a"}, **kw)


def _rows(path: str) -> list[tuple]:
    t = hudi.open_table(path).read(columns=["id", "ts", "part", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "ts", "part", "v"))))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_table_a_through_the_source_into_table_b_equals_a(spark, tmp_path, table_type):
    a, b, cp = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "cp")
    _write_a(a, range(40), 1, table_type=table_type)
    _write_a(a, list(range(0, 40, 3)) + list(range(40, 50)), 2)      # updates and inserts
    stream = spark.readStream.format("hudi_format").load(a)
    q = (stream.writeStream.format("hudi_format").options(**{**OPTS, "hoodie.table.name": "b"})
         .option("hoodie.datasource.write.table.type", "MERGE_ON_READ").option("checkpointLocation", cp).start(b))
    try:
        q.processAllAvailable()
        assert _rows(b) == _rows(a)
        for ts in (3, 4):                                               # more commits while it runs
            _write_a(a, list(range(ts, 60, 5)), ts)
        q.processAllAvailable()
    finally:
        q.stop()
    assert _rows(b) == _rows(a) and len(_rows(b)) == 54
    assert sorted(hudi_rs_read(b).column("id").to_pylist()) == [r[0] for r in _rows(a)]
    # restarted later from its checkpoint: only the commits since
    _write_a(a, [7, 70], 5)
    q = (spark.readStream.format("hudi_format").load(a).writeStream.format("hudi_format")
         .options(**{**OPTS, "hoodie.table.name": "b"}).option("checkpointLocation", cp).start(b))
    try:
        q.processAllAvailable()
        assert q.lastProgress["numInputRows"] == 2
    finally:
        q.stop()
    assert _rows(b) == _rows(a)


@pytest.mark.parametrize("fallback", [None, "false"])
def test_a_replayed_batch_whose_commits_were_cleaned_still_gets_every_record(spark, tmp_path, fallback):
    """The driver died after Spark logged a micro-batch's offsets ``(b1, b3]`` and before the
    sink committed it; while it was down, table A's cleaner removed the files commits 2-3
    wrote. The restarted query replays exactly that range: the source reads those commits'
    records from A's latest snapshot (Hudi 1.x's fallback), so B still ends equal to A. The
    replay used to read nothing, without an error: the records only commits 2-3 wrote were lost.
    With the fallback turned off on the source, the query fails naming the option instead."""
    import json
    import random
    a, b, cp = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "cp")
    cleaning = {"hoodie.cleaner.commits.retained": "2", "hoodie.compact.inline": "true",
                "hoodie.compact.inline.max.delta.commits": "2"}

    def write_a(ids, ts) -> str:
        rows = pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                         "part": pa.array([str(i % 3) for i in ids]), "v": pa.array([f"v{ts}-{i}" for i in ids])})
        hudi.write(a, rows, operation="upsert", table_type="MERGE_ON_READ",
                   options={**OPTS, **cleaning, "hoodie.table.name": "a"})
        last = hudi.open_table(a).timeline.write_instants()[-1]
        return last.completion_time or last.timestamp    # the source's offset of this commit

    def stream_once():
        source = spark.readStream.format("hudi_format")
        if fallback is not None:
            source = source.option("hoodie.datasource.read.incr.fallback.fulltablescan.enable", fallback)
        q = (source.load(a).writeStream.format("hudi_format")
             .options(**{**OPTS, "hoodie.table.name": "b"}).option("checkpointLocation", cp).start(b))
        try:
            q.processAllAvailable()
        finally:
            q.stop()

    write_a(list(range(30)), 1)
    stream_once()                                        # batch 0: commit 1
    write_a(list(range(30, 45)), 2)
    end = write_a(list(range(45, 60)), 3)
    logged = pathlib.Path(cp, "offsets", "0").read_text().splitlines()
    pathlib.Path(cp, "offsets", "1").write_text("\n".join(logged[:-1] + [json.dumps({"instant": end})]))
    rng = random.Random(5)
    for ts in range(4, 14):                              # A goes on; its cleaner removes 2-3's files
        write_a(sorted(rng.sample(range(30), 8)), ts)
    if fallback == "false":
        with pytest.raises(Exception, match="hoodie.datasource.read.incr.fallback.fulltablescan.enable"):
            stream_once()
        return
    stream_once()                                        # replays batch 1 = (commit 1, commit 3]
    assert _rows(b) == _rows(a) and len(_rows(a)) == 60
    assert sorted(hudi_rs_read(b).column("id").to_pylist()) == [r[0] for r in _rows(a)]

def test_source_start_offsets(spark, tmp_path):
    a = str(tmp_path / "a")
    _write_a(a, range(10), 1)
    _write_a(a, range(10, 15), 2)
    table = hudi.open_table(a)
    first = table.timeline.write_instants()[0]
    bound = first.completion_time or first.timestamp

    def collect(name: str, **options) -> list[int]:
        q = (spark.readStream.format("hudi_format").options(**options).load(a).writeStream
             .format("memory").queryName(name).start())
        try:
            q.processAllAvailable()
            if name == "latest":
                assert spark.table(name).count() == 0
                _write_a(a, [99], 3)
                q.processAllAvailable()
        finally:
            q.stop()
        return sorted(r.id for r in spark.table(name).select("id").collect())

    assert collect("earliest") == list(range(15))
    assert collect("after_first", **{"hoodie.datasource.streaming.startOffset": bound}) == list(range(10, 15))
    assert collect("latest", **{"hoodie.datasource.streaming.startOffset": "latest"}) == [99]


def test_inline_compaction_and_clean_run_while_streaming(spark, tmp_path):
    path, cp = str(tmp_path / "t"), str(tmp_path / "cp")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
            "hoodie.cleaner.commits.retained": "1"}
    q = (rate(spark, keys=20).writeStream.format("hudi_format").options(**opts)
         .option("checkpointLocation", cp).trigger(processingTime="0 seconds").start(path))
    run_until(q, 4)
    table = hudi.open_table(path)
    actions = [i.action for i in table.timeline.completed]
    assert "commit" in actions and "clean" in actions, actions          # compaction, then clean
    done = checkpoints(path)
    assert done == list(range(len(done)))
    n = (done[-1] + 1) * ROWS_PER_BATCH
    expected = {v % 20: v for v in range(n)}                            # latest ts per key
    t = table.read(columns=["id", "ts"])
    assert dict(zip(t.column("id").to_pylist(), t.column("ts").to_pylist())) == expected
    rs = hudi_rs_read(path)
    assert dict(zip(rs.column("id").to_pylist(), rs.column("ts").to_pylist())) == expected


def test_bad_sink_options_fail_at_start(spark, tmp_path):
    with pytest.raises(HudiError, match="hoodie.cleaner.commits.retained"):
        (rate(spark).writeStream.format("hudi_format").options(**OPTS)
         .option("hoodie.clean.commits.retained", "1").option("checkpointLocation", str(tmp_path / "cp"))
         .start(str(tmp_path / "t")))
    assert not (tmp_path / "t").exists()


def test_stream_writer_api_without_the_hook_is_exactly_once(spark, tmp_path):
    """A stream reaching the data source itself (no PySpark hook: SQL, other drivers) goes
    through Spark's stream-writer API: staged rows, one commit per batch, the same checkpoint."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    path, cp = str(tmp_path / "t"), str(tmp_path / "cp")
    opts = {**OPTS, "hoodie.datasource.write.operation": "insert"}

    def start():
        w = (rate(spark).writeStream.format("hudi_format").options(**opts).option("checkpointLocation", cp)
             .trigger(processingTime="0 seconds"))
        return DataStreamWriter.start.__wrapped__(w, path)        # Spark's own start: the data source

    run_until(start(), 1)
    commits = sorted(pathlib.Path(cp, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()                                          # Spark replays that batch
    # and its Hadoop checksum file, or Spark's rename onto it fails ("Multiple streaming queries")
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_until(start(), int(commits[-1].name) + 1)
    done = checkpoints(path)
    assert done == list(range(len(done))) and len(done) >= 3
    assert ids_of(path) == list(range((done[-1] + 1) * ROWS_PER_BATCH))
    # staging of committed batches is removed; only the batch the stop cut off may leave its
    # task's file (a killed task can finish writing after the abort), removed by the next commit
    last_commit = max(p.stat().st_mtime for p in pathlib.Path(path, ".hoodie").rglob("*commit")
                      if ".temp" not in p.parts)
    assert all(p.stat().st_mtime >= last_commit
               for p in pathlib.Path(path, ".hoodie", ".temp").glob("spark-stream-*/*.arrow"))


def test_stream_killed_at_random_points_restarts_exactly_once(tmp_path):
    """The driver is SIGKILLed (no stop, no abort, no cleanup) at random points of a stream
    into a MERGE_ON_READ table with the metadata table, compaction, cleaning and archival
    inline (once; ``HUDI_FORMAT_CRASH_ALL=1``: four times, each JVM start costs seconds); each
    restart from the checkpoint recovers (rolls the cut-off write back,
    skips a batch committed before Spark recorded it) and the table ends with every id of
    every batch exactly once, for our reader and hudi-rs, and nothing left pending."""
    import json
    import os
    import random
    import signal
    import subprocess
    import sys

    child = pathlib.Path(__file__).parent / "support" / "streamchild.py"
    path, cp = str(tmp_path / "t"), str(tmp_path / "cp")
    opts = {**OPTS, "hoodie.metadata.enable": "true", "hoodie.datasource.write.operation": "insert",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "true",
            "hoodie.compact.inline.max.delta.commits": "2", "hoodie.cleaner.commits.retained": "1",
            "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(pathlib.Path(__file__).parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]))

    def start(*extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(child), path, cp, json.dumps(opts), *extra], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)

    rng = random.Random(7)
    for _ in range(4 if os.environ.get("HUDI_FORMAT_CRASH_ALL") else 1):
        proc = start()
        try:
            seen = 0
            wanted = rng.randint(1, 3)          # killed a little after the stream's n-th batch
            for line in proc.stdout:
                assert not line.startswith("error"), line
                seen += line.startswith("batch")
                if seen >= wanted:
                    break
            assert seen >= wanted, "the stream did not progress"
            time.sleep(rng.uniform(0, 1.0))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    last = max(checkpoints(path))
    done = subprocess.run([sys.executable, str(child), path, cp, json.dumps(opts), str(last + 2)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    batches = checkpoints(path)                  # the active timeline's (archival drops older ones)
    assert batches == list(range(batches[0], batches[-1] + 1)) and batches[-1] >= last + 2
    assert ids_of(path) == list(range((batches[-1] + 1) * ROWS_PER_BATCH))   # ours == hudi-rs too
    table = hudi.open_table(path)
    assert not [i for i in table.timeline.instants if i.state.name != "COMPLETED"]


def test_stream_writer_api_retries_a_batch_that_lost_a_conflict_or_failed(spark, tmp_path, monkeypatch):
    """The stream-writer API's commit retries as the foreachBatch sink does: a commit that
    lost to another writer over the same file groups runs again on the table as the winner
    left it (``retries.on.conflict.failures``), a failed attempt is tried again
    (``streaming.retry.count``) unless the batch committed after all, and with
    ``ignore.failed.batch`` a batch failing every attempt is dropped. Read by hudi-rs too."""
    from hudi_format import engine
    from spark_adapter.streaming import StagedStreamWriter
    path = str(tmp_path / "t")
    occ = {**OPTS, "hoodie.datasource.write.operation": "upsert",
           "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
           "hoodie.parquet.small.file.limit": "0", "hoodie.datasource.write.streaming.retry.interval.ms": "1"}
    core = {k: v for k, v in occ.items() if not k.startswith("hoodie.datasource.write.streaming.")}

    def batch(ids, ts):
        return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                         "part": pa.array([str(i % 3) for i in ids])})

    def other_writer(ids, ts):
        hudi.write(path, batch(ids, ts), record_key="id", ordering_field="ts", partition_by="part",
                   table_name="s", options={k: v for k, v in core.items()
                                            if not k.startswith(("hoodie.datasource.write.", "hoodie.table.name"))})

    other_writer(list(range(40)), 0)
    schema = spark.createDataFrame(batch([0], 0)).schema
    real_commit, attempts = engine.commit, []

    def losing_commit(job, *a, **k):
        attempts.append(1)
        if len(attempts) == 1:      # another writer commits over the same file groups first
            other_writer(list(range(0, 10)), 1)
        return real_commit(job, *a, **k)
    monkeypatch.setattr(engine, "commit", losing_commit)
    w = StagedStreamWriter({**occ, "path": path}, schema, overwrite=False)
    w.commit([w.write(iter(batch(list(range(5, 15)), 2).to_batches()))], 0)
    assert len(attempts) == 2 and checkpoints(path) == [0]
    want = {i: 2 if 5 <= i < 15 else 1 if i < 10 else 0 for i in range(40)}
    table = hudi.open_table(path).read(columns=["id", "ts"])
    assert dict(zip(*(table.column(c).to_pylist() for c in ("id", "ts")))) == want
    theirs = hudi_rs_read(path)
    assert dict(zip(*(theirs.column(c).to_pylist() for c in ("id", "ts")))) == want

    def failing(fails: int, after_commit: bool = False):
        def commit(job, *a, **k):
            attempts.append(1)
            if len(attempts) <= fails:
                if after_commit:
                    real_commit(job, *a, **k)
                raise HudiError(f"attempt {len(attempts)} failed")
            return real_commit(job, *a, **k)
        return commit
    attempts.clear()
    monkeypatch.setattr(engine, "commit", failing(1, after_commit=True))
    w.commit([w.write(iter(batch([100], 3).to_batches()))], 1)     # committed, then failed: once
    assert len(attempts) == 1 and checkpoints(path) == [0, 1]
    attempts.clear()
    monkeypatch.setattr(engine, "commit", failing(2))
    w.commit([w.write(iter(batch([101], 3).to_batches()))], 2)     # third attempt commits
    assert len(attempts) == 3 and checkpoints(path) == [0, 1, 2]
    attempts.clear()
    monkeypatch.setattr(engine, "commit", failing(5))
    with pytest.raises(HudiError, match="attempt 3 failed"):
        w.commit([w.write(iter(batch([102], 3).to_batches()))], 3)
    ignoring = StagedStreamWriter({**occ, "path": path,
                                   "hoodie.datasource.write.streaming.ignore.failed.batch": "true"},
                                  schema, overwrite=False)
    attempts.clear()
    ignoring.commit([ignoring.write(iter(batch([102], 3).to_batches()))], 3)    # dropped
    assert len(attempts) == 3 and checkpoints(path) == [0, 1, 2]
    assert 102 not in hudi.open_table(path).read(columns=["id"]).column("id").to_pylist()
    assert hudi.open_table(path).timeline.pending == []
    assert not list(pathlib.Path(path, ".hoodie", ".temp").glob("spark-stream-*/*.arrow"))
