"""Write throughput against the limit (pyarrow.parquet.write_table) and a peer (deltalake).

One run, one data set: ``rows`` generated trip-like records in 10 partitions.

- bulk_insert vs ``pyarrow.parquet.write_table`` of the same rows (what any Parquet writer costs)
- insert vs ``deltalake.write_deltalake`` (a table format without key lookup)
- upsert of 10% (half updates, half new keys) into COW and MOR vs deltalake's ``merge``
- snapshot read of the upserted COW and MOR tables (best of 3) vs hudi-rs reading them into Arrow,
  and the COW read vs ``pyarrow.parquet.read_table`` of its latest base files
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import hudi_format as hudi


def make_data(rows: int, start: int = 0, ts: int = 1) -> pa.Table:
    idx = pa.array(range(start, start + rows), pa.int64())
    return pa.table({
        "id": pc.binary_join_element_wise(pa.scalar("trip-"), pc.cast(idx, pa.string()), ""),
        "ts": pa.repeat(pa.scalar(ts, pa.int64()), rows),
        "city": pc.binary_join_element_wise(pa.scalar("city-"), pc.cast(pc.bit_wise_and(idx, 9), pa.string()), ""),
        "fare": pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(idx, 7919), 65535), pa.float64()), 100.0),
        "rider": pc.binary_join_element_wise(pa.scalar("rider-"), pc.cast(pc.bit_wise_and(idx, 4095), pa.string()), ""),
        "distance": pc.cast(pc.bit_wise_and(pc.multiply(idx, 31), 1023), pa.int32()),
    })


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _best(fn, repeat: int = 3) -> float:
    return min(_time(fn) for _ in range(repeat))


def _hudi_rs_reader():
    """hudi-rs's snapshot read into one Arrow table, or None when ``hudi`` is not installed."""
    try:
        from hudi import HudiReadOptions, HudiTableBuilder
    except ImportError:
        return None

    def read(path: str) -> pa.Table:
        return pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions()))
    return read


_hudi_rs_read = _hudi_rs_reader()


def _hudi_opts():
    # One big bin per partition as Hudi sizes them; bloom filters as Hudi writes them.
    return dict(record_key="id", ordering_field="ts", partition_by="city")


def run(rows: int) -> list[tuple[str, float, float]]:
    try:
        import deltalake
    except ImportError:
        deltalake = None
        print("deltalake is not installed (pip install '.[bench]'); peer columns are skipped")
    data = make_data(rows)
    n_up = rows // 10
    upd = pa.concat_tables([make_data(n_up // 2, start=0, ts=2), make_data(n_up - n_up // 2, start=rows, ts=2)])
    results, reads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours = _time(lambda: hudi.write(str(root / "bulk"), data, operation="bulk_insert", **_hudi_opts()))
        limit = _time(lambda: pq.write_table(data, root / "plain.parquet", compression="gzip"))
        results.append(("bulk_insert vs pyarrow.parquet.write_table", ours, limit))

        ours = _time(lambda: hudi.write(str(root / "ins"), data, operation="insert", **_hudi_opts()))
        if deltalake:
            peer = _time(lambda: deltalake.write_deltalake(str(root / "delta"), data, partition_by=["city"]))
            results.append(("insert vs deltalake.write_deltalake", ours, peer))
        else:
            results.append(("insert (no peer)", ours, float("nan")))

        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            path = root / f"up_{table_type}"
            hudi.write(str(path), data, operation="insert", table_type=table_type, **_hudi_opts())
            ours = _time(lambda: hudi.write(str(path), upd, operation="upsert"))
            peer = float("nan")
            if deltalake:
                dpath = root / f"delta_up_{table_type}"
                deltalake.write_deltalake(str(dpath), data, partition_by=["city"])

                def merge():
                    dt = deltalake.DeltaTable(str(dpath))
                    (dt.merge(upd, predicate="t.id = s.id AND t.city = s.city", source_alias="s",
                              target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute())
                peer = _time(merge)
            results.append((f"upsert 10% ({table_type}) vs deltalake merge", ours, peer))
            reads.append((table_type, path))
        for table_type, path in reads:   # the upserted tables: MOR reads merge 10% log rows
            ours = _best(lambda: hudi.open_table(str(path)).read())
            peer = _best(lambda: _hudi_rs_read(str(path))) if _hudi_rs_read else float("nan")
            results.append((f"snapshot read ({table_type}) vs hudi-rs", ours, peer))
            if table_type == "COPY_ON_WRITE":   # the limit: Arrow reading the latest base files
                files = [str(path / s.base_file) for s in hudi.open_table(str(path)).file_slices()]
                results.append(("snapshot read (COPY_ON_WRITE) vs pq.read_table", ours,
                                _best(lambda: pq.read_table(files))))
        shutil.rmtree(root, ignore_errors=True)

    print(f"\nwrite benchmark, {rows:,} rows ({n_up:,} upserted)\n")
    print(f"| {'case':52} | hudi_format s | peer s | ratio |")
    print(f"|{'-' * 54}|---------------|--------|-------|")
    for name, ours, peer in results:
        ratio = ours / peer if peer == peer and peer > 0 else float("nan")
        print(f"| {name:52} | {ours:13.2f} | {peer:6.2f} | {ratio:5.2f} |")
    return results
