"""Index benchmark: finding where records live, by each index, side by side on one table.

One run, one data set: a COPY_ON_WRITE table of ``rows`` trip-like records in 10 partitions,
written with the metadata table's record index and bloom filters on.

- tagging ``updates`` upserts (half existing keys, spread over every file, half new keys) -- the
  step that decides update vs insert -- with the simple index (read every key), the bloom index
  (footer bloom filters rule files out, candidates' keys are read), the bloom index over the
  metadata table's ``bloom_filters``, and the record index (``record_index`` lookups only); the
  same keys, the same table state, each result checked against the simple index's;
- a point lookup of ``lookups`` keys: ``Table.lookup`` (record index) vs a filtered scan.

Ratios are against the simple index (tagging) and against the scan (lookups).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import hudi_format as hudi

from .write_bench import make_data

INDEX_OPTIONS = {
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
}


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def build(path: str, rows: int) -> None:
    """The table: one bulk insert, metadata table with record index and bloom filters."""
    hudi.write(path, make_data(rows), operation="bulk_insert", record_key="id", ordering_field="ts",
               partition_by="city", options=INDEX_OPTIONS)


def _tagger(path: str):
    """What the write client hands to its index for one batch: state, slices, schema, spec."""
    from hudi_format.base_file import read_footer
    from hudi_format.read.merge import MergeSpec
    from hudi_format.read.snapshot import ReadState
    from hudi_format.view import FileSystemView
    from hudi_format.writer.index import known_locations
    from hudi_format.options import validate

    table = hudi.open_table(path)
    state = ReadState(table.config, table.timeline)
    slices = state.file_slices(FileSystemView(table.storage, table.config))
    schema = table.schema()
    spec = MergeSpec.from_config(table.config)

    def tag(keys: pa.Array, index_type: str, use_metadata: bool = False) -> pa.Table:
        opts = validate({"hoodie.index.type": index_type,
                                 "hoodie.bloom.index.use.metadata": str(use_metadata).lower()})
        return known_locations(table.storage, table.config, opts, state, slices, keys, spec, schema,
                               read_footer)

    return tag, len(slices)


def run(rows: int = 5_000_000, updates: int = 100_000, lookups: int = 1_000) -> list[tuple]:
    rng = random.Random(42)
    updates = min(updates, rows)
    existing = [f"trip-{i}" for i in rng.sample(range(rows), updates // 2)]
    fresh = [f"trip-{rows + i}" for i in range(updates - len(existing))]
    keys = pa.array(existing + fresh, pa.string())
    lookup_keys = [f"trip-{i}" for i in rng.sample(range(rows), min(lookups, rows))]
    results = []
    tmp = tempfile.mkdtemp(prefix="hudi-index-bench-")
    try:
        path = str(Path(tmp) / "trips")
        t_build, _ = _time(lambda: build(path, rows))
        print(f"built {rows:,} rows (with record index + bloom filters) in {t_build:.1f}s")
        tag, n_slices = _tagger(path)
        timings = {}
        expected = None
        for name, index_type, use_md in (("simple", "GLOBAL_SIMPLE", False),
                                         ("bloom (footers)", "GLOBAL_BLOOM", False),
                                         ("bloom (metadata table)", "GLOBAL_BLOOM", True),
                                         ("record index", "RECORD_INDEX", False)):
            # an index answers with the records the batch may update; the join with the batch
            # (same for every index) keeps the incoming keys
            secs, found = _time(lambda: tag(keys, index_type, use_md))
            found = found.filter(pc.is_in(found.column("key"), value_set=keys))
            got = sorted(zip(*(found.column(c).to_pylist() for c in ("key", "partition", "file_id"))))
            if expected is None:
                expected = got
            elif got != expected:
                raise AssertionError(f"{name} tagged {len(got)} keys, the simple index {len(expected)}")
            timings[name] = secs
        base = timings["simple"]
        for name, secs in timings.items():
            results.append((f"tag {updates:,} upserts: {name}", secs, base / secs if secs else float("inf")))
        table = hudi.open_table(path)
        t_lookup, got = _time(lambda: table.lookup(lookup_keys, columns=["id", "fare"]))
        t_scan, scanned = _time(lambda: table.read(columns=["id", "fare"], filters=[("id", "in", lookup_keys)]))
        if sorted(got.column("id").to_pylist()) != sorted(scanned.column("id").to_pylist()):
            raise AssertionError("lookup and scan disagree")
        results.append((f"lookup {len(lookup_keys):,} keys: filtered scan", t_scan, 1.0))
        results.append((f"lookup {len(lookup_keys):,} keys: Table.lookup (record index)", t_lookup,
                        t_scan / t_lookup if t_lookup else float("inf")))
        print(f"{n_slices} file groups; {len(expected):,} of {updates:,} upserts found existing")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    width = max(len(r[0]) for r in results)
    print(f"{'case':<{width}}  {'seconds':>9}  {'speed-up':>9}")
    for name, secs, ratio in results:
        print(f"{name:<{width}}  {secs:>9.3f}  {ratio:>8.1f}x")
    return results
