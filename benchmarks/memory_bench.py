"""Peak memory of large writes (issue 13), each measured in a child process of its own.

A process's peak RSS never goes down, so every case runs in a fresh interpreter
(``python -m benchmarks.memory_bench <json>``) that reports its own high-water mark
(``VmHWM`` of ``/proc/self/status``) and its RSS just before the measured call (interpreter,
imports and, for upserts, the upsert's own rows: the same for both sides). Tables the cases
need are built by other children, so their memory does not count.

- streaming bulk_insert of ``rows`` rows from a ``RecordBatchReader`` whose batches are generated
  lazily (the whole input never exists unless the writer keeps it): target peak < 1 GB at 5M
  rows; deltalake writing the same stream is shown as the reference. The RSS when the reader
  was exhausted tells whether the writer streamed: a writer that collects the input first holds
  all of it at that moment (compare with the input's Arrow size);
- a 10% upsert (half updates, half inserts) into a ``rows``-row table, COW and MOR, vs
  deltalake's ``merge`` of the same rows into the same data: target ours <= deltalake.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from .common import Result, print_table, versions

MB = 1 << 20
GB_TARGET_MB = 1024.0
KEY: dict[str, Any] = dict(record_key="id", ordering_field="ts", partition_by="city")


def _status(field: str) -> int:
    """``VmHWM``/``VmRSS`` of this process in bytes (``ru_maxrss`` where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- the child side -------------------------------------------------------------------------------
def _child(case: str, path: str, rows: int, codec: str, table_type: str = "COPY_ON_WRITE") -> dict[str, Any]:
    """Run one case in this (fresh) process; return its figures."""
    import pyarrow as pa

    from .common import batches, make_data, upsert_batch
    opts = {"hoodie.parquet.compression.codec": codec}
    out: dict[str, Any] = {}

    def stream() -> pa.RecordBatchReader:
        def gen() -> Iterator[pa.RecordBatch]:
            for b in batches(rows):
                out["input_bytes"] = out.get("input_bytes", 0) + b.nbytes
                yield b
            out["rss_at_exhaustion"] = _status("VmRSS")
        return pa.RecordBatchReader.from_batches(make_data(0).schema, gen())

    if case in ("hudi_stream", "hudi_base"):
        import hudi_format as hudi
        call: Any = lambda: hudi.write(path, stream(), operation="bulk_insert", table_type=table_type,  # noqa: E731
                                       options=opts, **KEY)
    elif case in ("delta_stream", "delta_base"):
        import deltalake as dl
        props = dl.WriterProperties(compression=codec.upper())  # type: ignore[arg-type]
        call = lambda: dl.write_deltalake(path, stream(), partition_by=["city"],  # noqa: E731
                                          writer_properties=props)
    elif case == "hudi_upsert":
        import hudi_format as hudi
        batch = upsert_batch(rows, rows // 10)
        call = lambda: hudi.write(path, batch, operation="upsert", options=opts)  # noqa: E731
    elif case == "delta_merge":
        import deltalake as dl
        batch = upsert_batch(rows, rows // 10)
        props = dl.WriterProperties(compression=codec.upper())  # type: ignore[arg-type]

        def call() -> None:
            (dl.DeltaTable(path).merge(batch, predicate="t.id = s.id AND t.city = s.city", source_alias="s",
                                       target_alias="t", writer_properties=props)
             .when_matched_update_all().when_not_matched_insert_all().execute())
    else:
        raise ValueError(f"unknown memory case {case!r}")
    out["baseline"] = _status("VmRSS")
    t0 = time.perf_counter()
    call()
    out["seconds"] = time.perf_counter() - t0
    out["peak"] = _status("VmHWM")
    return out


def measure(case: str, path: Path, rows: int, codec: str, table_type: str = "COPY_ON_WRITE") -> dict[str, Any]:
    """Run ``case`` in a child interpreter and return what it reports."""
    arg = json.dumps(dict(case=case, path=str(path), rows=rows, codec=codec, table_type=table_type))
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "benchmarks.memory_bench", arg], env=env, cwd=root,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"memory case {case} failed:\n{done.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


# -- the parent side ------------------------------------------------------------------------------
def _mb(x: float) -> float:
    return x / MB


def run(rows: int = 5_000_000, codec: str = "snappy") -> list[Result]:
    """Peak RSS of the streaming bulk_insert and of the 10% upserts, ours vs deltalake."""
    print(versions())
    results: list[Result] = []
    details: list[tuple[str, dict[str, Any]]] = []
    root = Path(tempfile.mkdtemp(prefix="hudi-memory-bench-"))
    try:
        ours = measure("hudi_stream", root / "hudi_stream", rows, codec)
        shutil.rmtree(root / "hudi_stream", ignore_errors=True)
        peer = measure("delta_stream", root / "delta_stream", rows, codec)
        shutil.rmtree(root / "delta_stream", ignore_errors=True)
        details += [("hudi_format bulk_insert (RecordBatchReader)", ours),
                    ("deltalake write_deltalake (RecordBatchReader)", peer)]
        results.append(Result(f"streaming bulk_insert of {rows:,} rows, peak RSS (peer: deltalake, for reference)",
                              _mb(ours["peak"]), _mb(peer["peak"]), GB_TARGET_MB, absolute=True, strict=True,
                              unit="MB"))

        measure("delta_base", root / "delta", rows, codec)
        merge = measure("delta_merge", root / "delta", rows, codec)
        shutil.rmtree(root / "delta", ignore_errors=True)
        details.append(("deltalake merge (10% upsert)", merge))
        for table_type, kind in (("COPY_ON_WRITE", "COW"), ("MERGE_ON_READ", "MOR")):
            path = root / kind
            measure("hudi_base", path, rows, codec, table_type)
            up = measure("hudi_upsert", path, rows, codec, table_type)
            shutil.rmtree(path, ignore_errors=True)
            details.append((f"hudi_format upsert {kind} (10%)", up))
            results.append(Result(f"10% upsert into {rows:,} rows {kind}, peak RSS vs deltalake merge",
                                  _mb(up["peak"]), _mb(merge["peak"]), 1.0, unit="MB"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(f"memory benchmark: {rows:,} rows, codec {codec}, one child process per case", results, unit="MB")
    print("\n| case | seconds | RSS before the call MB | peak RSS MB | RSS when the input ran out MB | input (Arrow) MB |")
    print("|---|---|---|---|---|---|")
    for name, d in details:
        exhausted = f"{_mb(d['rss_at_exhaustion']):.0f}" if "rss_at_exhaustion" in d else "-"
        size = f"{_mb(d['input_bytes']):.0f}" if "input_bytes" in d else "-"
        print(f"| {name} | {d['seconds']:.1f} | {_mb(d['baseline']):.0f} | {_mb(d['peak']):.0f} | {exhausted} | {size} |")
    return results


if __name__ == "__main__":
    print(json.dumps(_child(**json.loads(sys.argv[1]))))
