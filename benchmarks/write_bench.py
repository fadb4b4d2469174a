"""Issue 13's measurement: hudi_format's writes and reads against their limits and peers, in one
ratio table, one run, one data set (``common.make_data``: 6 columns, 4 partitions).

Every case is the best of ``repeat`` runs. Writes go to a fresh directory each time; upserts go
into a fresh copy of a base table made once (the copy is outside the timing). Both sides write
with the same Parquet codec at the same level (ours through ``hoodie.parquet.compression.codec``
at the level Hudi's writer uses, ``parquet_codec.LEVELS``; the peers at that level too); snappy
unless ``codecs`` says otherwise (gzip, Hudi's own default, is kept for the record).

- bulk_insert vs ``pq.write_table`` of the very same output: the base files Hudi wrote are read
  back (all 11 columns, ``_hoodie_*`` meta columns included) and each is written again by
  pyarrow, one file per Hudi base file (one per partition at these sizes), pyarrow's defaults
  but the codec's level;
- insert vs ``deltalake.write_deltalake`` (partitioned by the same column), and for the record
  with ``hoodie.parquet.bloom.filter.enabled=false`` (no footer bloom filter, as Hudi allows
  where no bloom index reads it);
- a 10% upsert (half updates spread over every file group, half new keys) into COW and MOR vs
  deltalake's ``merge`` (matched on key and partition: update all, insert the rest);
- snapshot reads of the upserted tables: COW vs ``pq.read_table`` of its latest base files and
  vs hudi-rs, MOR (the updates in Avro log blocks) vs hudi-rs; each pair is checked to return
  the same rows (count and a checksum) before it is timed;
- for the record: the MOR table after 20 upserts of 1% each (20 log blocks per file slice), its
  snapshot read vs hudi-rs;
- for the record: compacting the upserted MOR table vs ``pq.write_table`` of the base files the
  compaction wrote (what a compaction costs beyond writing its output);
- for the record: deleting a tenth of the keys, COW and MOR, vs deltalake's merge deleting the
  matched rows, and the MOR snapshot read after it (those keys in delete blocks) vs hudi-rs;
- the streaming case: a 1,000-row upsert into a 200k-row table, COW and MOR, vs deltalake merge;
- record-index tagging vs simple-index tagging of the same 10% upsert (``index_bench.tagging``),
  and ``Table.lookup`` of 1,000 keys, on a table of the run's size written with the record index.

Peak memory (streaming writes of 5M rows, 5M-row upserts) is ``python -m benchmarks memory``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import hudi_format as hudi
from hudi_format import parquet_codec

from . import index_bench
from .common import Result, Seconds, best_of, hudi_rs_read, make_data, print_table, upsert_batch, versions

TARGETS = {"bulk_insert": 2.0, "insert": 2.5, "upsert": 1.5, "cow_read_limit": 1.1, "cow_read_rs": 0.8,
           "mor_read_rs": 1.0, "small_upsert": 2.0}
SMALL_TABLE, SMALL_UPSERT = 200_000, 1_000   # the streaming case: 1,000 rows into 200k
KEY: dict[str, Any] = dict(record_key="id", ordering_field="ts", partition_by="city")


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError:
        print("deltalake is not installed (pip install deltalake): its columns are n/a")
        return None
    return deltalake


def _fresh(path: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(path, ignore_errors=True)


def _copy_of(src: Path, dst: Path) -> Callable[[], None]:
    def setup() -> None:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
    return setup


def _same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Same row count, keys and ordering values (sums of ``ts`` and of the keys' lengths)."""
    def digest(t: pa.Table) -> tuple[Any, ...]:
        return (t.num_rows, pc.sum(t.column("ts")).as_py(), pc.sum(pc.utf8_length(t.column("id"))).as_py())
    return digest(a) == digest(b)


def _log_rows(path: Path) -> int:
    """Records held in the Avro log blocks of the latest file slices."""
    from hudi_format.log.block import BlockType
    from hudi_format.log.reader import read_log_file
    table = hudi.open_table(str(path))
    return sum(b.records().num_rows for s in table.file_slices() for f in s.log_files
               for b in read_log_file(table.storage, f) if b.block_type == BlockType.AVRO_DATA)


class _Run:
    """The cases of one codec on one data set; tables it makes stay under ``root``."""

    def __init__(self, root: Path, rows: int, codec: str, repeat: int, record: bool) -> None:
        self.root, self.rows, self.codec, self.repeat, self.record = root / codec, rows, codec, repeat, record
        self.root.mkdir(parents=True)
        self.opts = {"hoodie.parquet.compression.codec": codec}
        self.dl = _deltalake()
        self.results: list[Result] = []
        self.upserted: dict[tuple[str, str], float] = {}   # (case name, table type) -> our upsert's seconds

    def add(self, case: str, ours: float, peer: float, target: float | None) -> None:
        label = f"{case} [{self.codec}]" if self.record else case
        self.results.append(Result(label, ours, peer, target, record=self.record))

    def _writer_properties(self) -> Any:
        return self.dl.WriterProperties(compression=self.codec.upper(),
                                        compression_level=parquet_codec.level(self.codec))

    def _delta_write(self, path: Path, data: pa.Table) -> None:
        self.dl.write_deltalake(str(path), data, partition_by=["city"], writer_properties=self._writer_properties())

    def _delta_merge(self, path: Path, source: pa.Table) -> None:
        dt = self.dl.DeltaTable(str(path))
        (dt.merge(source, predicate="t.id = s.id AND t.city = s.city", source_alias="s", target_alias="t",
                  writer_properties=self._writer_properties())
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def _delta_best(self, fn: Callable[[], None], setup: Callable[[], None]) -> Seconds:
        return best_of(fn, self.repeat, setup) if self.dl else Seconds(float("nan"))

    def _on_copies(self, name: str, data: pa.Table, batch: pa.Table, operation: str) -> dict[str, Seconds]:
        """``operation`` of ``batch`` timed on fresh copies of a COW and a MOR table of ``data``
        (``<name>_<table type>``, the last copy left for reads)."""
        out: dict[str, Seconds] = {}
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            base, work = self.root / f"{name}_{table_type}_base", self.root / f"{name}_{table_type}"
            hudi.write(str(base), data, operation="insert", table_type=table_type, options=self.opts, **KEY)
            out[table_type] = best_of(lambda: hudi.write(str(work), batch, operation=operation, options=self.opts),
                                      self.repeat, _copy_of(base, work))
            shutil.rmtree(base, ignore_errors=True)
        return out

    def _rewrite_limit(self, written: list[pa.Table], plain: Path) -> Seconds:
        """Best-of seconds of ``pq.write_table`` writing ``written`` again, a file each, at this
        run's codec and Hudi's level for it (gzip 6, where pyarrow's default is 9)."""
        def limit() -> None:
            plain.mkdir()
            for i, t in enumerate(written):
                pq.write_table(t, plain / f"{i}.parquet", **parquet_codec.write_options(self.codec))
        return best_of(limit, self.repeat, _fresh(plain))

    def _hudi_rs(self, path: str) -> tuple[str, Seconds]:
        """``(" ROWS DIFFER" or "", hudi-rs's best-of seconds)`` reading the table at ``path``
        (NaN without hudi-rs); our snapshot and hudi-rs's are compared before the timing."""
        try:
            same = _same_rows(hudi.open_table(path).read(), hudi_rs_read(path))
            return ("" if same else " ROWS DIFFER"), best_of(lambda: hudi_rs_read(path), self.repeat)
        except ImportError:
            return "", Seconds(float("nan"))

    # -- cases ------------------------------------------------------------------------------------
    def bulk_insert(self, data: pa.Table) -> None:
        out = self.root / "bulk"
        ours = best_of(lambda: hudi.write(str(out), data, operation="bulk_insert", options=self.opts, **KEY),
                       self.repeat, _fresh(out))
        files = [out / s.base_file for s in hudi.open_table(str(out)).file_slices() if s.base_file]
        written = [pq.read_table(f) for f in files]   # what Hudi wrote: 11 columns
        plain = self.root / "plain"
        peer = self._rewrite_limit(written, plain)
        cols = written[0].num_columns if written else 0
        self.add(f"bulk_insert vs pq.write_table of its output ({cols} cols, {len(files)} files)", ours, peer,
                 TARGETS["bulk_insert"])
        shutil.rmtree(plain, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)

    def insert(self, data: pa.Table) -> None:
        out, dout = self.root / "insert", self.root / "delta_insert"
        ours = best_of(lambda: hudi.write(str(out), data, operation="insert", options=self.opts, **KEY),
                       self.repeat, _fresh(out))
        peer = self._delta_best(lambda: self._delta_write(dout, data), _fresh(dout))
        self.add("insert vs deltalake.write_deltalake", ours, peer, TARGETS["insert"])
        # for the record: Hudi's switch for the footer bloom filter, off (no bloom index reads it)
        off = {**self.opts, "hoodie.parquet.bloom.filter.enabled": "false"}
        bare = best_of(lambda: hudi.write(str(out), data, operation="insert", options=off, **KEY),
                       self.repeat, _fresh(out))
        self.add("insert, hoodie.parquet.bloom.filter.enabled=false, vs deltalake", bare, peer, None)
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(dout, ignore_errors=True)

    def upserts(self, name: str, data: pa.Table, batch: pa.Table, target: float) -> dict[str, Path]:
        """Upsert ``batch`` into COW and MOR copies of ``data`` and deltalake's merge into a copy
        of the same rows; returns the upserted tables (for the reads)."""
        ours = self._on_copies(name, data, batch, "upsert")
        out = {table_type: self.root / f"{name}_{table_type}" for table_type in ours}
        self.upserted.update({(name, table_type): secs for table_type, secs in ours.items()})
        dbase, dwork = self.root / f"{name}_delta_base", self.root / f"{name}_delta"
        peer = Seconds(float("nan"))
        if self.dl:
            self._delta_write(dbase, data)
            peer = best_of(lambda: self._delta_merge(dwork, batch), self.repeat, _copy_of(dbase, dwork))
            shutil.rmtree(dbase, ignore_errors=True)
            shutil.rmtree(dwork, ignore_errors=True)
        for table_type, secs in ours.items():
            kind = "COW" if table_type == "COPY_ON_WRITE" else "MOR"
            self.add(f"{batch.num_rows:,}-row upsert into {data.num_rows:,} rows {kind} vs deltalake merge",
                     secs, peer, target)
        return out

    def record_index_upserts(self, name: str, data: pa.Table, batch: pa.Table) -> None:
        """For the record (no target): the upsert of :meth:`upserts` case ``name`` on tables that
        keep the metadata table's record index (and tag with it) vs the same upsert without it:
        what keeping the index costs a write."""
        opts = {**self.opts, "hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"}
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            base, work = self.root / f"{name}_ri_{table_type}_base", self.root / f"{name}_ri_{table_type}"
            hudi.write(str(base), data, operation="insert", table_type=table_type, options=opts, **KEY)
            secs = best_of(lambda: hudi.write(str(work), batch, operation="upsert", options=opts),
                           self.repeat, _copy_of(base, work))
            shutil.rmtree(base, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
            kind = "COW" if table_type == "COPY_ON_WRITE" else "MOR"
            self.add(f"{batch.num_rows:,}-row upsert {kind} keeping the record index vs without",
                     secs, self.upserted[(name, table_type)], None)

    def deletes(self, data: pa.Table) -> None:
        """For the record (issue 13 sets no target): deleting a tenth of the keys, spread over
        every file group, COW and MOR vs deltalake's merge deleting the matched rows, and the
        MOR snapshot read of those keys in delete blocks vs hudi-rs (the same rows checked)."""
        gone = data.take(pa.array(range(0, data.num_rows, 10))).select(["id", "ts", "city"])
        ours = self._on_copies("deletes", data, gone, "delete")
        mor = self.root / "deletes_MERGE_ON_READ"
        peer = Seconds(float("nan"))
        if self.dl:
            dbase, dwork = self.root / "deletes_delta_base", self.root / "deletes_delta"
            self._delta_write(dbase, data)

            def delete() -> None:
                (self.dl.DeltaTable(str(dwork))
                 .merge(gone, predicate="t.id = s.id AND t.city = s.city", source_alias="s", target_alias="t",
                        writer_properties=self._writer_properties())
                 .when_matched_delete().execute())
            peer = best_of(delete, self.repeat, _copy_of(dbase, dwork))
            shutil.rmtree(dbase, ignore_errors=True)
            shutil.rmtree(dwork, ignore_errors=True)
        for table_type, secs in ours.items():
            kind = "COW" if table_type == "COPY_ON_WRITE" else "MOR"
            self.add(f"{gone.num_rows:,}-key delete from {data.num_rows:,} rows {kind} vs deltalake merge", secs,
                     peer, None)
        t_mor = best_of(lambda: hudi.open_table(str(mor)).read(), self.repeat)
        differ, rs = self._hudi_rs(str(mor))
        self.add(f"MOR snapshot read after it ({gone.num_rows:,} keys in delete blocks) vs hudi-rs{differ}",
                 t_mor, rs, None)
        for table_type in ours:
            shutil.rmtree(self.root / f"deletes_{table_type}", ignore_errors=True)

    def compaction(self, mor: Path) -> None:
        """For the record (no target): compacting the MOR table the 10% upsert left (every file
        group with log blocks) vs ``pq.write_table`` of the base files it wrote, at the same
        codec: the least a compaction must do (a compaction also reads the slices and merges)."""
        work, plain = self.root / "compacted", self.root / "compacted_plain"
        done: list = []
        ours = best_of(lambda: done.append(hudi.open_table(str(work)).compact(self.opts)), self.repeat,
                       _copy_of(mor, work))
        table = hudi.open_table(str(work))
        written = [pq.read_table(work / s.base_file) for s in table.file_slices()
                   if s.base_file and s.base_instant == done[-1].timestamp]
        peer = self._rewrite_limit(written, plain)
        rows = sum(t.num_rows for t in written)
        self.add(f"compaction of the MOR table after it ({len(written)} file groups, {rows:,} rows) "
                 f"vs pq.write_table of its output", ours, peer, None)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(plain, ignore_errors=True)

    def many_blocks(self, data: pa.Table, commits: int = 20) -> None:
        """For the record: the MOR table after ``commits`` upserts of 1% each (a streaming
        writer's: a log block per commit in every file slice, no compaction), its snapshot read
        vs hudi-rs (the same rows checked)."""
        path = self.root / "many_blocks"
        opts = {**self.opts, "hoodie.compact.inline": "false"}
        hudi.write(str(path), data, operation="insert", table_type="MERGE_ON_READ", options=opts, **KEY)
        n = max(2, data.num_rows // 100)
        for c in range(commits):
            hudi.write(str(path), upsert_batch(data.num_rows, n, ts=2 + c), operation="upsert", options=opts)
        ours = best_of(lambda: hudi.open_table(str(path)).read(), self.repeat)
        differ, rs = self._hudi_rs(str(path))
        self.add(f"MOR snapshot read after {commits} upserts of {n:,} rows ({commits} log blocks a slice) "
                 f"vs hudi-rs{differ}", ours, rs, None)
        shutil.rmtree(path, ignore_errors=True)

    def reads(self, tables: dict[str, Path]) -> None:
        cow, mor = str(tables["COPY_ON_WRITE"]), str(tables["MERGE_ON_READ"])
        files = [str(Path(cow) / s.base_file) for s in hudi.open_table(cow).file_slices() if s.base_file]
        ours_cow = hudi.open_table(cow).read()
        check = "" if _same_rows(ours_cow, pq.read_table(files)) else " ROWS DIFFER"
        t_cow = best_of(lambda: hudi.open_table(cow).read(), self.repeat)
        self.add(f"COW snapshot read vs pq.read_table of its latest base files{check}", t_cow,
                 best_of(lambda: pq.read_table(files), self.repeat), TARGETS["cow_read_limit"])
        for kind, path, target in (("COW", cow, TARGETS["cow_read_rs"]), ("MOR", mor, TARGETS["mor_read_rs"])):
            ours = t_cow if kind == "COW" else best_of(lambda: hudi.open_table(path).read(), self.repeat)
            differ, peer = self._hudi_rs(path)
            what = "" if kind == "COW" else \
                f" ({_log_rows(Path(path)):,} of {ours_cow.num_rows:,} rows in Avro log blocks)"
            self.add(f"{kind} snapshot read{what} vs hudi-rs{differ}", ours, peer, target)


def index_cases(root: Path, rows: int, batch: pa.Table, repeat: int) -> list[Result]:
    """Record-index vs simple-index tagging of ``batch`` and ``Table.lookup`` of 1,000 keys, on a
    ``rows``-row table written with the record index."""
    path = root / "indexed"
    index_bench.build(str(path), rows, "snappy")
    t = index_bench.tagging(str(path), batch, (index_bench.INDEXES[0], index_bench.INDEXES[-1]), repeat)
    out = [Result(f"record-index vs simple (global) tagging, {batch.num_rows:,} upserts into {rows:,} rows",
                  t["record index"], t["simple (global)"], target=1.0, strict=True),
           index_bench.lookup_case(str(path), index_bench.lookup_keys(rows, 1_000), repeat)]
    shutil.rmtree(path, ignore_errors=True)
    return out


def run(rows: int, codecs: tuple[str, ...] = ("snappy",), repeat: int = 3) -> list[Result]:
    """All of issue 13's write/read cases at ``rows`` rows, one ratio table."""
    print(versions())
    t_start = time.perf_counter()
    data = make_data(rows)
    batch = upsert_batch(rows, max(2, rows // 10))
    small_rows = min(SMALL_TABLE, rows)
    small = make_data(small_rows)
    small_batch = upsert_batch(small_rows, min(SMALL_UPSERT, max(2, small_rows // 10)))
    results: list[Result] = []
    root = Path(tempfile.mkdtemp(prefix="hudi-write-bench-"))
    try:
        for codec in codecs:
            r = _Run(root, rows, codec, repeat, record=codec != "snappy" and len(codecs) > 1)
            r.bulk_insert(data)
            r.insert(data)
            upserted = r.upserts("upsert10", data, batch, TARGETS["upsert"])
            r.reads(upserted)
            r.compaction(upserted["MERGE_ON_READ"])
            if not r.record:
                r.many_blocks(data)
            r.deletes(data)
            if not r.record:
                r.record_index_upserts("upsert10", data, batch)
            r.upserts("small", small, small_batch, TARGETS["small_upsert"])
            results += r.results
            shutil.rmtree(r.root, ignore_errors=True)
        results += index_cases(root, rows, batch, repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(f"write benchmark: {rows:,} rows, 6 columns, 4 partitions, codec {'/'.join(codecs)}, best of "
                f"{repeat}; ratio = ours / peer ({time.perf_counter() - t_start:.0f}s)", results)
    return results
