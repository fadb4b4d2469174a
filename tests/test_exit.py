"""Processes that read the archived (LSM) timeline exit cleanly (issue 11, defect 10).

The abort ("terminate called without an active exception", SIGABRT) came from reading LSM
timeline files with ``pq.read_table(io.BytesIO(...))``: the dataset scan behind it leaves its
file reader, pre-buffered ranges holding Python-owned memory included, to be released by an
Arrow worker thread after the call returned. When the process exits just then, that worker's
``PyGILState_Ensure`` finds the interpreter finalizing and ends the thread with ``pthread_exit``,
whose forced unwind through Arrow's ``noexcept`` worker loop calls ``std::terminate`` (seen in a
core dump: ``~PyBuffer`` <- ``ReadRangeCache`` <- ``SerializedFile`` on a pool thread during
``Py_FinalizeEx``). The race lost in about 1 of 40-200 processes, more under load, so this runs
a batch of them at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import pyarrow as pa
import pyarrow.parquet as pq

import hudi_format as hudi
from hudi_format.base_file import read_parquet_bytes
from writemodel import make_rows

pytestmark = pytest.mark.slow

PROCESSES = 9     # three of each read; the race itself is gone by construction (read_parquet_bytes)
# archival never passes the metadata table's latest compaction: let it compact every deltacommit
OPTIONS = {"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4", "hoodie.clean.automatic": "false",
           "hoodie.metadata.compact.max.delta.commits": "1"}


def test_read_parquet_bytes_owns_its_memory():
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", None]}), sink)
    table = read_parquet_bytes(sink.getvalue().to_pybytes(), columns=["b"])
    assert table.column_names == ["b"] and table.column("b").to_pylist() == ["x", "y", None]


def test_processes_reading_archived_timeline_exit_cleanly(tmp_path):
    path = str(tmp_path / "t")
    instants = [hudi.write(path, make_rows(range(i % 5, i % 5 + 4), ts=i, seed=i), record_key="id",
                           ordering_field="ts", partition_by="p", table_version=8, options=OPTIONS)
                for i in range(10)]
    table = hudi.open_table(path)
    active_start = table.timeline.instants[0].timestamp
    archived = [i for i in instants if i.timestamp < active_start]
    assert len(archived) >= 3, "archival moved instants to the LSM timeline"
    as_of = archived[1].completion_time
    expected = table.read(as_of=as_of).num_rows
    assert expected > 0
    reads = [f"n = t.read(as_of={as_of!r}).num_rows",
             f"n = t.read_incremental('0', {as_of!r}).num_rows",
             "n = len(t.timeline.archived().instants)"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def run(i: int):
        code = f"import hudi_format as h; t = h.open_table({path!r}); {reads[i % len(reads)]}; print(n)"
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout.strip(), p.stderr[-500:]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, range(PROCESSES)))
    bad = [r for r in results if r[0] != 0]
    assert not bad, f"{len(bad)} of {PROCESSES} processes failed: {bad[0]}"
    assert {int(out) for code, out, _ in results[0::3]} == {expected}
