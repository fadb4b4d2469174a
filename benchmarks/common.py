"""What every benchmark suite shares: the generated data, best-of timing, the peers' versions and
the ratio table with its targets.

One place for the data so the write, index and memory suites measure the very same rows (6
columns, 4 partitions), and one table printer so every suite reports ``ours / peer`` against the
target issue 13 sets, with the verdict next to it rather than left to the reader.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARTITIONS = 4   # issue 13: 1M rows, 6 columns, 4 partitions


def rows_of(idx: pa.Array, ts: int = 1) -> pa.Table:
    """The trip-like records numbered ``idx`` (int64): 6 columns, ``city`` (the partition column)
    takes :data:`PARTITIONS` values. Built column-wise, no Python row loop."""
    return pa.table({
        "id": pc.binary_join_element_wise(pa.scalar("trip-"), pc.cast(idx, pa.string()), ""),
        "ts": pa.repeat(pa.scalar(ts, pa.int64()), len(idx)),
        "city": pc.binary_join_element_wise(pa.scalar("city-"),
                                            pc.cast(pc.bit_wise_and(idx, PARTITIONS - 1), pa.string()), ""),
        "fare": pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(idx, 7919), 65535), pa.float64()), 100.0),
        "rider": pc.binary_join_element_wise(pa.scalar("rider-"), pc.cast(pc.bit_wise_and(idx, 4095), pa.string()), ""),
        "distance": pc.cast(pc.bit_wise_and(pc.multiply(idx, 31), 1023), pa.int32()),
    })


def make_data(rows: int, start: int = 0, ts: int = 1) -> pa.Table:
    """``rows`` records with keys ``trip-<start>`` onwards (see :func:`rows_of`)."""
    return rows_of(pa.array(np.arange(start, start + rows, dtype=np.int64)), ts)


def upsert_batch(table_rows: int, n: int, ts: int = 2) -> pa.Table:
    """An upsert of ``n`` rows into a table of ``table_rows`` made by :func:`make_data`: half
    updates of existing keys (spread evenly over the key space, so every file group is touched),
    half new keys."""
    n_upd = min(n // 2, table_rows)
    step = max(1, table_rows // max(1, n_upd))
    step -= 1 if step % 2 == 0 else 0   # odd: consecutive updates cycle through the partitions
    idx = np.concatenate([np.arange(0, n_upd * step, step, dtype=np.int64)[:n_upd],
                          np.arange(table_rows, table_rows + n - n_upd, dtype=np.int64)])
    return rows_of(pa.array(idx), ts)


def batches(rows: int, batch_rows: int = 100_000, start: int = 0) -> Iterator[pa.RecordBatch]:
    """The rows of ``make_data(rows)`` generated lazily, one batch at a time: a stream whose
    whole never exists in memory unless the consumer keeps it."""
    for lo in range(0, rows, batch_rows):
        yield from make_data(min(batch_rows, rows - lo), start=start + lo).to_batches()


def batch_reader(rows: int, batch_rows: int = 100_000) -> pa.RecordBatchReader:
    """:func:`batches` as a ``RecordBatchReader`` (the input the streaming write takes)."""
    return pa.RecordBatchReader.from_batches(make_data(0).schema, batches(rows, batch_rows))


# -- timing ---------------------------------------------------------------------------------------
class Seconds(float):
    """Wall-clock seconds (the float's value) carrying ``cpu``, the process CPU seconds (all
    threads: deltalake's and Arrow's too). On a shared machine CPU time moves less with the
    neighbours' load than wall time does, so the table shows both ratios."""

    cpu: float

    def __new__(cls, wall: float, cpu: float = float("nan")) -> "Seconds":
        obj = super().__new__(cls, wall)
        obj.cpu = cpu
        return obj


def best_of(fn: Callable[[], object], repeat: int = 3, setup: Callable[[], object] | None = None) -> Seconds:
    """Least wall-clock seconds (and, apart, least CPU seconds) of ``repeat`` calls of ``fn``;
    ``setup`` runs before each, untimed (a fresh target directory, a copy of the base table). The
    least is the run the shared machine disturbed least."""
    wall = cpu = float("inf")
    for _ in range(max(1, repeat)):
        if setup is not None:
            setup()
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return Seconds(wall, cpu)


def versions() -> str:
    """The peers and the machine the figures were taken on (ratios only mean something with them)."""
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"python {platform.python_version()} ({sys.implementation.name}), pyarrow {v('pyarrow')}, "
            f"deltalake {v('deltalake')}, hudi (hudi-rs) {v('hudi')}, isal (our GZ HFile inflater, "
            f"optional) {v('isal')}; {cores} cores usable "
            f"(cpu_count {os.cpu_count()}), load average {load}")


def hudi_rs_read(path: str) -> pa.Table:
    """hudi-rs's snapshot read of the table at ``path`` into one Arrow table."""
    from hudi import HudiReadOptions, HudiTableBuilder
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions()))


# -- the ratio table ------------------------------------------------------------------------------
@dataclass
class Result:
    """One row of a ratio table. ``target`` bounds ``ours / peer`` (``absolute``: bounds ``ours``
    in seconds instead); ``strict`` asks for strictly below (\"faster than\"). ``record``: a
    figure kept for the record (gzip), its verdict shown in brackets."""

    case: str
    ours: float
    peer: float
    target: float | None = None
    absolute: bool = False
    strict: bool = False
    record: bool = False
    unit: str = "s"

    @property
    def ratio(self) -> float:
        return self.ours / self.peer if self.peer == self.peer and self.peer > 0 else float("nan")

    @property
    def cpu_ratio(self) -> float:
        ours, peer = getattr(self.ours, "cpu", float("nan")), getattr(self.peer, "cpu", float("nan"))
        return ours / peer if peer == peer and peer > 0 else float("nan")

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        op = "<" if self.strict else "<="
        if not self.absolute:
            return f"{op} {self.target:.2f}x"
        return f"{op} {self.target * 1000:.0f} ms" if self.unit == "s" else f"{op} {self.target:.0f} {self.unit}"

    def met(self) -> str:
        if self.target is None:
            return "-"
        value = self.ours if self.absolute else self.ratio
        if value != value:
            return "n/a"
        ok = value < self.target if self.strict else value <= self.target
        verdict = "yes" if ok else "NO"
        return f"({verdict})" if self.record else verdict


def print_table(title: str, results: list[Result], unit: str = "s") -> None:
    """``case | hudi_format <unit> | peer <unit> | ratio | target | met?`` as a Markdown table, and
    the ratio of CPU seconds after it when the figures carry them (:class:`Seconds`)."""
    width = max([4] + [len(r.case) for r in results])
    digits = 3 if unit == "s" else 0
    ours_h, peer_h = f"hudi_format {unit}", f"peer {unit}"
    print(f"\n{title}\n")
    cpu = any(r.cpu_ratio == r.cpu_ratio for r in results)
    print(f"| {'case':<{width}} | {ours_h:>14} | {peer_h:>7} | ratio | target     | met?  |"
          + (" cpu ratio |" if cpu else ""))
    print(f"|{'-' * (width + 2)}|----------------|---------|-------|------------|-------|" + ("-----------|" if cpu else ""))
    for r in results:
        ratio = f"{r.ratio:5.2f}" if r.ratio == r.ratio else "  n/a"
        peer = f"{r.peer:7.{digits}f}" if r.peer == r.peer else "    n/a"
        extra = (f" {r.cpu_ratio:9.2f} |" if r.cpu_ratio == r.cpu_ratio else "       n/a |") if cpu else ""
        print(f"| {r.case:<{width}} | {r.ours:14.{digits}f} | {peer} | {ratio} | {r.target_text():<10} | "
              f"{r.met():<5} |{extra}")
