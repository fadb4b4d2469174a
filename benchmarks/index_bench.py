"""Index benchmark: finding where records live, by each index, side by side on one table.

One run, one data set: a COPY_ON_WRITE table of ``rows`` trip-like records (``common.make_data``:
6 columns, 4 partitions), written with the metadata table's record index and bloom filters on.

- tagging an upsert of ``updates`` rows (half existing keys spread over every file group, half
  new keys) -- the step that decides update vs insert -- with the global simple index (read every
  stored key), the global bloom index (footer bloom filters rule files out, candidates' keys are
  read), the bloom index over the metadata table's ``bloom_filters``, and the record index
  (``record_index`` lookups only). Each is timed the same way, as the write does it: the index's
  answer (:func:`known_locations`) joined with the incoming keys (:func:`tag`); the listing of the
  table's file slices, which every index needs alike, is outside the timing. Each answer is
  checked against the simple index's.
- the same with a 1,000-row upsert (simple vs record index), for the record: the case the
  record index is for, few keys into a big table.
- a point lookup of ``lookups`` keys: ``Table.lookup`` (record index) vs a filtered scan.
- for the record, the operations that touch every entry of the record index: compacting the
  metadata table (on a copy of the table) and ``hudi-format validate``, each against reading
  every record key of the table (the least any of them could do).

Issue 13's targets (at 5M rows, 100k upserts): the record index tags faster than the simple
index, and ``Table.lookup`` of 1,000 keys takes under 100 ms.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import hudi_format as hudi

from .common import Result, best_of, make_data, print_table, upsert_batch

INDEX_OPTIONS = {
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
}

# (label, hoodie.index.type, hoodie.bloom.index.use.metadata); the record index is global, so its
# like-for-like simple index is the global one (the default SIMPLE reads the same keys here: an
# upsert spread over the key space touches every partition)
INDEXES = (("simple (global)", "GLOBAL_SIMPLE", False),
           ("bloom (footers)", "GLOBAL_BLOOM", False),
           ("bloom (metadata table)", "GLOBAL_BLOOM", True),
           ("record index", "RECORD_INDEX", False))


SMALL_UPSERT = 1_000   # rows of the small upsert tagged for the record (no target)


def build(path: str, rows: int, codec: str | None = None) -> None:
    """The table: one bulk insert, metadata table with record index and bloom filters."""
    opts = dict(INDEX_OPTIONS)
    if codec:
        opts["hoodie.parquet.compression.codec"] = codec
    hudi.write(path, make_data(rows), operation="bulk_insert", record_key="id", ordering_field="ts",
               partition_by="city", options=opts)


def tagger(path: str, batch: pa.Table) -> Callable[[str, bool], pa.Table]:
    """``tag(index_type, use_metadata)``: what the write's planner does to find where the rows of
    ``batch`` live -- the index's known locations, joined with the incoming keys and partitions."""
    from hudi_format.base_file import read_footer
    from hudi_format.options import validate
    from hudi_format.read.merge import MergeSpec
    from hudi_format.read.snapshot import ReadState
    from hudi_format.view import FileSystemView
    from hudi_format.writer.index import is_global, known_locations, tag as join_tags

    table = hudi.open_table(path)
    state = ReadState(table.config, table.timeline)
    slices = state.file_slices(FileSystemView(table.storage, table.config))
    schema = table.schema()
    spec = MergeSpec.from_config(table.config)
    keys = pc.cast(batch.column("id"), pa.string()).combine_chunks()
    incoming = pa.table({"key": keys, "partition": batch.column("city").combine_chunks(),
                         "row": pa.array(np.arange(batch.num_rows, dtype=np.int64))})

    def tag(index_type: str, use_metadata: bool = False) -> pa.Table:
        opts = validate({"hoodie.index.type": index_type,
                         "hoodie.bloom.index.use.metadata": str(use_metadata).lower()})
        known = known_locations(table.storage, table.config, opts, state, slices, keys, spec, schema,
                                read_footer)
        return join_tags(incoming, known, is_global(index_type))

    return tag


def _located(tagged: pa.Table) -> list[tuple[str, str, str]]:
    found = tagged.filter(pc.is_valid(tagged.column("file_id")))
    return sorted(zip(*(found.column(c).to_pylist() for c in ("key", "existing_partition", "file_id"))))


def tagging(path: str, batch: pa.Table, indexes: tuple[tuple[str, str, bool], ...] = INDEXES,
            repeat: int = 3) -> dict[str, float]:
    """Best-of-``repeat`` seconds each index takes to tag ``batch`` against the table at ``path``;
    raises when an index locates other records than the first (the simple index)."""
    tag = tagger(path, batch)
    timings: dict[str, float] = {}
    expected = None
    for name, index_type, use_md in indexes:
        got = _located(tag(index_type, use_md))
        if expected is None:
            expected = got
        elif got != expected:
            raise AssertionError(f"{name} located {len(got)} keys, {indexes[0][0]} {len(expected)}")
        timings[name] = best_of(lambda: tag(index_type, use_md), repeat)
    return timings


def lookup_case(path: str, keys: list[str], repeat: int = 3) -> Result:
    """``Table.lookup`` of ``keys`` (record index) vs the filtered scan that finds the same rows."""
    table = hudi.open_table(path)
    got = table.lookup(keys, columns=["id", "fare"])
    scanned = table.read(columns=["id", "fare"], filters=[("id", "in", keys)])
    if sorted(got.column("id").to_pylist()) != sorted(scanned.column("id").to_pylist()):
        raise AssertionError("lookup and scan disagree")
    ours = best_of(lambda: hudi.open_table(path).lookup(keys, columns=["id", "fare"]), repeat)
    peer = best_of(lambda: hudi.open_table(path).read(columns=["id", "fare"], filters=[("id", "in", keys)]),
                   repeat)
    return Result(f"Table.lookup {len(keys):,} keys (record index) vs filtered scan", ours, peer,
                  target=0.1, absolute=True)


def lookup_keys(rows: int, n: int) -> list[str]:
    """``n`` existing keys spread over the table."""
    rng = np.random.default_rng(42)
    return [f"trip-{i}" for i in rng.choice(rows, size=min(n, rows), replace=False).tolist()]


def whole_index_cases(path: str) -> list[Result]:
    """For the record: compacting the metadata table (the record index's every entry rewritten)
    and ``validate`` (every entry checked), against reading every record key of the table."""
    from hudi_format.cli.validate import validate_table
    from hudi_format.config import TableConfig
    from hudi_format.metadata.writer import MetadataWriter
    from hudi_format.storage import Storage

    keys = best_of(lambda: hudi.open_table(path).read(columns=["id"]), 1)
    work = path + "-compacted"

    def copy() -> None:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(path, work)

    def compact() -> None:
        st = Storage(work)
        if MetadataWriter(st, TableConfig.load(st), INDEX_OPTIONS).compact() is None:
            raise AssertionError("nothing to compact")
    compaction = best_of(compact, 1, copy)
    shutil.rmtree(work, ignore_errors=True)

    def validate() -> None:
        if validate_table(path):
            raise AssertionError("validate found problems")
    return [Result("compact the metadata table (the whole record index) vs read every key", compaction, keys),
            Result("hudi-format validate (record index checked) vs read every key", best_of(validate, 1), keys)]


def run(rows: int = 5_000_000, updates: int = 100_000, lookups: int = 1_000, repeat: int = 3) -> list[Result]:
    updates = min(updates, rows)
    batch = upsert_batch(rows, updates)
    tmp = tempfile.mkdtemp(prefix="hudi-index-bench-")
    try:
        path = str(Path(tmp) / "trips")
        t0 = time.perf_counter()
        build(path, rows, "snappy")
        print(f"built {rows:,} rows (snappy, record index + bloom filters) in "
              f"{time.perf_counter() - t0:.1f}s; {len(hudi.open_table(path).file_slices())} file groups")
        timings = tagging(path, batch, repeat=repeat)
        base = timings["simple (global)"]
        results = [Result(f"tag {updates:,}-row upsert: {name} vs simple (global)", secs, base,
                          target=1.0 if name == "record index" else None, strict=True)
                   for name, secs in timings.items() if name != "simple (global)"]
        results.append(Result(f"tag {updates:,}-row upsert: simple (global), the reference", base, base))
        # the streaming case the record index is for: few keys into a big table (the simple
        # index still reads every stored key; the record index reads the blocks of these keys)
        few = min(SMALL_UPSERT, rows)
        small = tagging(path, upsert_batch(rows, few), (INDEXES[0], INDEXES[-1]), repeat)
        results.append(Result(f"tag {few:,}-row upsert: record index vs simple (global)",
                              small["record index"], small["simple (global)"]))
        results.append(lookup_case(path, lookup_keys(rows, lookups), repeat))
        results += whole_index_cases(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(f"index benchmark, {rows:,}-row table, best of {repeat} (ratio = ours / reference)", results)
    return results
