"""``make demo``: write a Merge-on-Read table, read it back, and read a table Apache Hudi wrote.

1. Generates trip records, writes them as a Hudi 1.0 (table version 8) MOR table in a temporary
   folder (insert, upsert of 10%, delete of 1%, a compaction, a savepoint), then prints the
   timeline, file slices, a snapshot aggregate, a time-travel and an incremental query, and,
   when hudi-rs is installed, checks that it reads the same rows.
2. With a path argument (a table, or a zipped fixture table), prints what we see in it.
"""

from __future__ import annotations

import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import hudi_format as hudi


def _trips(start: int, n: int, ts: int) -> pa.Table:
    idx = pa.array(range(start, start + n), pa.int64())
    cities = pa.array(["san_francisco", "sao_paulo", "chennai", "amsterdam"])
    return pa.table({
        "uuid": pc.binary_join_element_wise(pa.scalar("trip-"), pc.cast(idx, pa.string()), ""),
        "ts": pa.repeat(pa.scalar(ts, pa.int64()), n),
        "rider": pc.binary_join_element_wise(pa.scalar("rider-"), pc.cast(pc.bit_wise_and(idx, 255), pa.string()), ""),
        "fare": pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(idx, 7919), 9999), pa.float64()), 100.0),
        "city": pc.take(cities, pc.bit_wise_and(idx, 3)),
    })


def _show_table(table: hudi.Table) -> None:
    print(f"table {table.name}: {table.table_type}, table version {table.version}")
    print(f"record key {table.config.record_key_fields}, partitioned by "
          f"{table.config.partition_fields}, merge mode {table.config.merge_mode}\n")
    print("timeline (requested -> completed, action, state):")
    for inst in table.timeline.instants:
        print(f"  {inst.timestamp} -> {inst.completion_time or '-':17}  {inst.action:13} {inst.state.name}")
    slices = table.file_slices()
    print(f"\nlatest file slices ({len(slices)}):")
    for s in slices:
        logs = f" + {len(s.log_files)} log file(s), {sum(s.log_file_sizes):,} bytes" if s.log_files else ""
        print(f"  {s.partition_path or '.':16} {s.file_id[:13]}  base@{s.base_instant}"
              f"  {s.base_file_size:>10,} bytes{logs}")


def write_demo(root: Path, rows: int = 300_000) -> None:
    path = str(root / "trips")
    print(f"== writing {rows:,} trips to a new MERGE_ON_READ table at {path}")
    kw = dict(record_key="uuid", ordering_field="ts", partition_by="city", table_type="MERGE_ON_READ")
    t0 = time.perf_counter()
    hudi.write(path, _trips(0, rows, ts=1), operation="insert", **kw)
    t1 = time.perf_counter()
    n_up = rows // 10
    hudi.write(path, pa.concat_tables([_trips(0, n_up // 2, ts=2), _trips(rows, n_up // 2, ts=2)]), **kw)
    t2 = time.perf_counter()
    hudi.write(path, _trips(n_up, rows // 100, ts=3).select(["uuid", "city"]), operation="delete")
    t3 = time.perf_counter()
    print(f"insert {t1 - t0:.1f}s, upsert of {n_up:,} {t2 - t1:.1f}s, delete of {rows // 100:,} {t3 - t2:.1f}s")
    table = hudi.open_table(path)
    before = sum(len(s.log_files) for s in table.file_slices())
    done = table.compact()
    t4 = time.perf_counter()
    print(f"compaction {done.timestamp if done else '-'}: {before} log files merged into new base files "
          f"in {t4 - t3:.1f}s")
    table.savepoint(table.timeline.write_instants()[-1].timestamp)
    hudi.write(path, _trips(rows * 2, rows // 100, ts=4), operation="insert", **kw)
    print(f"savepoint taken; then {rows // 100:,} more trips inserted\n")

    table = hudi.open_table(path)
    _show_table(table)
    t0 = time.perf_counter()
    snap = table.read()
    t1 = time.perf_counter()
    expected = rows + n_up // 2 - rows // 100 + rows // 100
    print(f"\nsnapshot: {snap.num_rows:,} rows in {t1 - t0:.2f}s (expected {expected:,})")
    by_city = snap.group_by("city").aggregate([("fare", "sum"), ("uuid", "count")]).sort_by("city")
    for r in by_city.to_pylist():
        print(f"  {r['city']:14} {r['uuid_count']:>8,} trips  fare {r['fare_sum']:>12,.2f}")
    writes = table.timeline.write_instants()
    first = writes[0].completion_time
    print(f"time travel to the first commit ({first}): {table.read(as_of=first, columns=['uuid']).num_rows:,} rows")
    inc = table.read_incremental(start=first, end=writes[1].completion_time, columns=["uuid"])
    print(f"incremental (first, second commit]: {inc.num_rows:,} rows changed")
    chennai = table.read(columns=["uuid", "fare"], filters=[("city", "=", "chennai"), ("fare", ">", 99.0)])
    print(f"filter city = 'chennai' and fare > 99: {chennai.num_rows:,} rows")
    try:
        from hudi import HudiTableBuilder
    except ImportError:
        return
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    same = theirs.num_rows == snap.num_rows and sorted(theirs.column("uuid").to_pylist()) == \
        sorted(snap.column("uuid").to_pylist())
    print(f"hudi-rs reads the same table: {theirs.num_rows:,} rows, {'identical keys' if same else 'DIFFERENT'}")


def read_demo(arg: str, tmp: str) -> None:
    if arg.endswith(".zip"):
        with zipfile.ZipFile(arg) as zf:
            members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
            zf.extractall(tmp, members)
        arg = str(Path(tmp) / members[0].split("/")[0])
    print(f"\n== reading {arg}")
    table = hudi.open_table(arg)
    _show_table(table)
    snap = table.read()
    print(f"\nsnapshot: {snap.num_rows} rows; first rows:")
    for r in snap.slice(0, 5).to_pylist():
        print("  ", {k: v for k, v in r.items() if not k.startswith("_hoodie")})


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        write_demo(Path(tmp))
        for arg in argv:
            read_demo(arg, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
