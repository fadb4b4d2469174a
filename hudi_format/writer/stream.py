"""Streamed insert and bulk_insert: the input is written batch by batch, never held whole.

A write whose input comes batch by batch (:class:`~.input.BatchStream`: a RecordBatchReader, a
Dataset, an iterator of batches) and whose operation needs no view of the whole input (insert
and bulk_insert without precombining or dropping duplicates) goes this way:

1. The first batches, up to :data:`~.planning.SAMPLE_ROWS` rows, are pulled, conformed to the
   writer schema and keyed before anything is written (a bad schema, a null key fails there);
   bulk_insert sizes its files from their compressed size, as the table path does.
2. The instant opens (the one commit path: :func:`~.job.open_streamed`).
3. Each batch is keyed and split by partition path (vectorised); each partition's rows fill, in
   order, what the table path would plan for them: insert first tops up the partition's small
   files (each to its remaining capacity), then both operations roll over new file groups of
   ``max file size / record size`` records, written through a
   :class:`~hudi_format.base_file.BaseFileWriter` whose bloom filter and min/max keys grow
   batch by batch. Rows keep their input order (Hudi's bulk_insert sort mode NONE, its
   default, which is also what the table path writes): a global sort would need the whole
   input.
4. Every file's write stat goes to :func:`~.commit.commit_write` once the input is exhausted.
   A failure anywhere (a later batch with other columns or a null key, an I/O error) aborts
   the instant: the files written so far are removed, the table is as it was.

Memory stays bounded by :data:`DEFAULT_BUFFER_BYTES` plus a few batches: rows wait in the open
files' row-group buffers, and when those together pass the budget the largest are written out
early as smaller row groups (as parquet-mr's memory manager shrinks row groups when many
writers are open). Rows bound for a small file wait until it is full, since its new version
merges them with its base file (COW) or appends them as one log block (MOR); when the budget
is reached first, that small file is written with what it has and takes no more (the rest go
to the next small file or to new file groups). Parquet encoding and compression run on a
thread pool, one task at a time per file.
"""

from __future__ import annotations

import os
import posixpath
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

import pyarrow as pa
import pyarrow.compute as pc

from ..base_file import BaseFileWriter, unique_key_columns
from ..config import TableConfig
from ..read.merge import live_rows, row_numbers
from ..storage import Storage
from ..table_init import write_partition_metadata
from ..timeline import Timeline
from ..timeline.metadata import WriteStat
from ..transaction.markers import create_marker
from ..transaction.snapshot import TableSnapshot
from ..view import FileSlice
from ..view.file_names import BaseFileName
from ..metadata.key_changes import KeyChanges
from . import handles
from .file_sizing import new_file_records, small_file_capacity
from .input import BatchStream, check_names
from .commit import commit_write
from .job import (BucketResult, WriteBucket, WriteJob, abort_write, open_streamed, prepare_write,
                  should_dedupe, sorts_by_key, write_bucket, write_context)
from ..options import option
from .options import sizing_config
from .grouping import groups_of
from .planning import SAMPLE_ROWS

STREAMED_OPERATIONS = ("insert", "bulk_insert")
DEFAULT_BUFFER_BYTES = 256 * 1024 * 1024   # Arrow bytes of rows held by open files, all together
_KEY_SLICE = 65_536   # rows handed to a base file writer at once


def streams(operation: str, options: Mapping[str, Any]) -> bool:
    """Whether ``operation`` writes a streamed input as it comes: insert and bulk_insert, unless
    precombining or dropping duplicates asks for a view of every key of the input first."""
    return (operation in STREAMED_OPERATIONS and not should_dedupe(operation, options)
            and not option(options, "hoodie.datasource.write.insert.drop.duplicates")
            and not (operation == "bulk_insert" and sorts_by_key(options)))


def write_stream(storage: Storage, config: TableConfig, operation: str, options: Mapping[str, Any],
                 stream: BatchStream, *, create: bool = False, timeline: Timeline | None = None,
                 snapshot: TableSnapshot | None = None, buffer_bytes: int | None = None) -> WriteJob:
    """Write ``stream`` as one commit of ``operation`` (one of :data:`STREAMED_OPERATIONS`;
    see the module doc); returns the committed job. ``buffer_bytes``: the memory budget of rows
    held by open files (default :data:`DEFAULT_BUFFER_BYTES`)."""
    check_names(stream.schema)
    job = prepare_write(storage, config, operation, options, stream.schema, create=create,
                        timeline=timeline, snapshot=snapshot)
    batches = stream.checked()
    writer = _StreamWriter(job, DEFAULT_BUFFER_BYTES if buffer_bytes is None else buffer_bytes)
    head = writer.read_head(batches)        # checked and keyed: nothing is written yet
    writer.size(head)
    open_streamed(job)
    try:
        for chunk in head:
            writer.route(*chunk)
        del head
        for batch in batches:
            writer.route(*writer.prepare(batch))
        results = writer.finish()
    except BaseException:
        writer.abort()
        abort_write(job)
        raise
    commit_write(job, results, discard_unreported=False)
    return job


_Chunk = tuple[pa.Table, pa.Array, pa.Array]   # conformed rows, record keys, partition paths


@attrs.frozen
class NewFiles:
    """An open bulk_insert whose new file groups an engine's tasks write as their rows come
    (:func:`write_new_files`), each task its own files: Hudi's bulk_insert without a shuffle."""

    spec: Any                 # the write's WriteSpec
    instant_time: str
    records_per_file: int     # rows of a new file group before the next one starts


@attrs.frozen
class _FilesJob:
    """What a :class:`_StreamWriter` needs of a write to fill new file groups only."""

    storage: Storage
    spec: Any
    instant_time: str
    options: Mapping[str, Any]
    operation: str = "bulk_insert"
    state: Any = None


def write_new_files(storage: Storage, target: NewFiles, tables: Iterable[pa.Table], write_token: str,
                    buffer_bytes: int | None = None, threads: int | None = None) -> list[BucketResult]:
    """Write ``tables`` (rows of ``target``'s write, in the order given) as new file groups of
    ``target.records_per_file`` records per partition path, streamed as :func:`write_stream`
    writes them; every file carries ``write_token``. ``buffer_bytes`` and ``threads``: the
    memory budget and Parquet encoding threads of this call (an engine running many tasks
    per machine gives each a share). Returns their results (indexes from 0: the caller
    numbers the results of all its tasks). A failure removes the files still open; the
    finished ones are left to the write's abort or commit, which find them by their markers."""
    job = _FilesJob(storage, target.spec, target.instant_time, target.spec.options)
    writer = _StreamWriter(job, DEFAULT_BUFFER_BYTES if buffer_bytes is None else buffer_bytes,  # type: ignore[arg-type]
                           write_token, threads)
    writer.per_file = max(1, int(target.records_per_file))
    try:
        for table in tables:
            if table.num_rows:
                conformed = target.spec.conform(table)
                writer.route(conformed, *target.spec.keys(conformed))
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


class _NewFile:
    """One new file group being written: a Parquet base file that takes rows until it holds
    its planned number of records. Rows wait as they came (without meta fields, which would
    more than double them) until a row group's worth is there; then, on the pool and one
    operation at a time per file, they get their meta fields and are written as a row group
    (bloom filter and min/max keys growing with each)."""

    def __init__(self, owner: "_StreamWriter", partition: str, index: int):
        job = owner.job
        self.owner = owner
        self.partition = partition
        self.index = index
        bucket = WriteBucket(job.spec, job.instant_time, index, "create", partition, handles.new_file_id())
        self.ctx = write_context(job.storage, bucket, owner.write_token)
        self.task, token = self.ctx.next_token()
        self.file_id = bucket.file_id
        self.name = BaseFileName(self.file_id, token, job.instant_time, ".parquet").name
        self.path = posixpath.join(partition, self.name) if partition else self.name
        create_marker(job.storage, job.instant_time, self.path, "CREATE")
        self.ctx.written.append(self.path)
        self.writer = BaseFileWriter(job.storage, self.path, self.ctx.avro_schema, keyed=self.ctx.keyed,
                                     bloom=self.ctx.bloom, plain=unique_key_columns(job.spec.config.record_key_fields),
                                     **self.ctx.parquet)
        self.rows = 0                       # records given to the file so far
        self.written = 0                    # of which handed to the Parquet writer
        self.keys: list[pa.Array] = []      # its keys, when the table keeps the record index
        self.pending: list[tuple[pa.Table, pa.Array]] = []
        self.pending_bytes = 0
        self.inflight_bytes = 0             # rows being written by the pool
        self.future: Future | None = None   # the file's latest operation on the pool
        self.closed = False                 # takes no more rows (its close may still run)

    @property
    def buffered_bytes(self) -> int:
        return self.pending_bytes + self.inflight_bytes

    def _then(self, fn: Callable, *args: Any) -> Future:
        """Run ``fn`` on the pool after the file's previous operation (whose error, if it
        failed, is raised here)."""
        if self.future is not None:
            self.future.result()
        self.future = self.owner.pool.submit(fn, *args)
        return self.future

    def add(self, rows: pa.Table, keys: pa.Array) -> None:
        self.rows += rows.num_rows
        self.pending.append((rows, keys))
        self.pending_bytes += rows.nbytes + keys.nbytes
        if self.pending_bytes * self.owner.meta_ratio >= self.owner.block_size:
            self.flush()

    def flush(self) -> Future | None:
        """Write the waiting rows as a row group, on the pool."""
        if not self.pending:
            return None
        if self.future is not None:
            self.future.result()
        chunks, self.pending = self.pending, []
        start, self.written = self.written, self.written + sum(t.num_rows for t, _ in chunks)
        self.inflight_bytes, self.pending_bytes = self.pending_bytes, 0
        return self._then(self._write, chunks, start)

    def _write(self, chunks: list[tuple[pa.Table, pa.Array]], start: int) -> None:
        # while written, the rows are held twice: as they came and with their meta fields
        self.inflight_bytes = int(self.inflight_bytes * (1 + self.owner.meta_ratio))
        try:
            rows = pa.concat_tables([t for t, _ in chunks])
            keys = pa.concat_arrays([k for _, k in chunks])
            raw = rows.nbytes + keys.nbytes
            table = handles.with_meta(self.ctx, rows, keys, self.partition, self.name, self.task, start)
            if self.ctx.track_keys:
                self.keys.append(keys)
            del rows, chunks
            self.owner.meta_ratio = max(1.0, table.nbytes / max(1, raw))
            keyed = self.ctx.keyed
            # in slices: hashing keys into the bloom filter takes memory in proportion to them
            for pos in range(0, table.num_rows, _KEY_SLICE):
                self.writer.write(table.slice(pos, _KEY_SLICE), keys.slice(pos, _KEY_SLICE) if keyed else None)
            del table, keys
            self.writer.flush()
        finally:
            self.inflight_bytes = 0

    def close(self) -> Future:
        self.closed = True
        self.flush()
        return self._then(self._close)

    def _close(self) -> BucketResult:
        res = self.writer.close()
        stat = WriteStat(file_id=self.file_id, path=res.path, partition_path=self.partition,
                         num_writes=self.rows, num_inserts=self.rows, total_write_bytes=res.file_size)
        keys = KeyChanges.of(pa.chunked_array(self.keys, pa.string())) if self.ctx.track_keys else None
        return BucketResult(self.index, self.partition, stat, (self.path,), keys)

    def abort(self) -> None:
        if self.future is not None:
            self.future.cancel()
            try:
                self.future.result()
            except BaseException:   # noqa: BLE001 - the write is failing already
                pass
        self.pending = []
        self.writer.abort()


class _SmallFill:
    """Inserts that top up one small file: held until it is full (or the budget says so),
    then written as one merge (COW) or append (MOR) bucket, as the table path writes it."""

    def __init__(self, file_slice: FileSlice, capacity: int):
        self.part = file_slice.partition_path
        self.slice = file_slice
        self.capacity = capacity
        self.rows: list[pa.Table] = []
        self.keys: list[pa.Array] = []
        self.count = 0
        self.nbytes = 0
        self.done = False

    def add(self, rows: pa.Table, keys: pa.Array) -> None:
        self.rows.append(rows)
        self.keys.append(keys)
        self.count += rows.num_rows
        self.nbytes += rows.nbytes


class _Partition:
    def __init__(self, fills: list[_SmallFill]):
        self.fills = fills                  # small files still taking inserts, in fill order
        self.file: _NewFile | None = None   # the new file group being filled


class _StreamWriter:
    """Routes keyed batches to the files of one streamed write (see the module doc)."""

    def __init__(self, job: WriteJob | "_FilesJob", buffer_bytes: int, write_token: str | None = None,
                 threads: int | None = None):
        self.job = job
        self.write_token = write_token      # every file's (an engine's task), else one per file
        self.budget = max(1, int(buffer_bytes))
        self.cfg = sizing_config(job.options)
        self.per_file = 1
        self.avg = 1
        self.partitions: dict[str, _Partition] = {}
        self.files: list[_NewFile] = []     # new files open or closing (their rows count in the budget)
        self.closing: list[Future] = []     # closes and small-file buckets: their BucketResults
        self.next_index = 0
        # a row group's Arrow bytes (meta fields included): Hudi's block size, but within a
        # quarter of the budget, since the pool writes a few row groups at once, each held
        # whole with its meta fields while it is encoded
        self.block_size = max(1, min(option(job.options, "hoodie.parquet.block.size"), self.budget // 4))
        self.meta_ratio = 2.5   # Arrow bytes of rows with meta fields / without; measured as files flush
        self.described: set[str] = set()   # partitions whose partition metadata file is written
        self.pool = ThreadPoolExecutor(threads or os.cpu_count() or 1, thread_name_prefix="hudi-stream-write")
        self._compacting: dict = {}
        self._clustering: set = set()

    # -- before the instant opens ------------------------------------------------------------
    def prepare(self, batch: pa.RecordBatch) -> _Chunk:
        """A batch conformed to the writer schema and keyed (a null key fails here)."""
        table = self.job.spec.conform(pa.Table.from_batches([batch]))
        live = live_rows(table)
        if live is not None:   # an insert writes no record flagged _hoodie_is_deleted
            table = table.filter(live)
        keys, parts = self.job.spec.keys(table)
        return table, keys, parts

    def read_head(self, batches: Iterator[pa.RecordBatch]) -> list[_Chunk]:
        """The first batches, up to :data:`SAMPLE_ROWS` rows (or the whole input), prepared."""
        head: list[_Chunk] = []
        rows = 0
        while rows < SAMPLE_ROWS:
            batch = next(batches, None)
            if batch is None:
                break
            head.append(self.prepare(batch))
            rows += batch.num_rows
        return head

    def size(self, head: list[_Chunk]) -> None:
        """Records per new file group: bulk_insert from the compressed size of the first rows,
        insert from the record size of earlier commits, as the table path sizes them."""
        planner = self.job.planner
        if self.job.operation == "bulk_insert":
            sample = pa.concat_tables([t for t, _, _ in head]) if head else self.job.spec.schema.empty_table()
            self.avg = planner.measured_record_size(sample.slice(0, SAMPLE_ROWS))
        else:
            self.avg = planner.insert_record_size(self.job.state)
            self._compacting, self._clustering = planner.pending_service_groups(self.job.state)
        self.per_file = new_file_records(self.avg, self.cfg)

    # -- routing -----------------------------------------------------------------------------
    def _partition(self, part: str) -> _Partition:
        p = self.partitions.get(part)
        if p is None:
            fills: list[_SmallFill] = []
            job = self.job
            if job.operation == "insert" and job.state is not None and self.cfg.small_file_limit > 0:
                slices = job.planner.latest_slices(job.state, job.view, {part})
                by_id = {s.file_id: s for s in slices}
                for sf in job.planner.small_files_of(part, slices, self._clustering):
                    cap = small_file_capacity(sf, self.avg, self.cfg)
                    if cap > 0:
                        fills.append(_SmallFill(by_id[sf.file_id], cap))
            p = self.partitions[part] = _Partition(fills)
        return p

    def route(self, table: pa.Table, keys: pa.Array, parts: pa.Array) -> None:
        """Send each partition's rows of one prepared batch to its files, in input order."""
        if not table.num_rows:
            return
        grouped = groups_of(pa.table({"p": parts, "row": row_numbers(table.num_rows)}), ["p"])
        for (part,), idx in grouped:
            if len(grouped) == 1:
                rows, rkeys = table, keys
            else:
                rows, rkeys = table.take(idx), pc.take(keys, idx)
            self._fill(part, rows, rkeys)
            self._bound()

    def _fill(self, part: str, rows: pa.Table, keys: pa.Array) -> None:
        p = self._partition(part)
        n, pos = rows.num_rows, 0
        while pos < n:
            while p.fills and p.fills[0].done:
                p.fills.pop(0)
            if p.fills:
                fill = p.fills[0]
                take = min(fill.capacity - fill.count, n - pos)
                fill.add(rows.slice(pos, take), keys.slice(pos, take))
                pos += take
                if fill.count >= fill.capacity:
                    self._write_fill(fill)
                continue
            if p.file is None:
                p.file = self._new_file(part)
            f = p.file
            take = min(self.per_file - f.rows, n - pos)
            f.add(rows.slice(pos, take), keys.slice(pos, take))
            pos += take
            if f.rows >= self.per_file:
                self._close(p)

    def _new_file(self, part: str) -> _NewFile:
        if part not in self.described:
            self.described.add(part)
            write_partition_metadata(self.job.storage, part, self.job.instant_time,
                                     part.count("/") + 1 if part else 0)
        f = _NewFile(self, part, self._index())
        self.files.append(f)
        return f

    def _index(self) -> int:
        i, self.next_index = self.next_index, self.next_index + 1
        return i

    def _close(self, p: _Partition) -> None:
        f = p.file
        assert f is not None
        p.file = None
        self.closing.append(f.close())

    def _write_fill(self, fill: _SmallFill) -> None:
        """Write the inserts gathered for a small file as its merge (COW) or append (MOR)."""
        fill.done = True
        if not fill.count:
            return
        job = self.job
        fs = fill.slice
        mor = job.config.is_mor
        key = (fill.part, fs.file_id)
        bucket = WriteBucket(job.spec, job.instant_time, self._index(), "append" if mor else "merge", fill.part,
                             fs.file_id, fs,
                             compaction_instant=self._compacting.get(key) if mor and job.config.version < 8 else None,
                             num_records=fill.count)
        rows, keys = pa.concat_tables(fill.rows), pa.concat_arrays(fill.keys)
        fill.rows, fill.keys, fill.nbytes = [], [], 0
        self.closing.append(self.pool.submit(write_bucket, job.storage, bucket, rows, keys=keys))

    def _bound(self) -> None:
        """Keep the rows held by open files (waiting, or being written) within the budget:
        write the largest waiting buffers out early (smaller row groups, or a small file that
        takes fewer inserts) until half the budget waits, then wait for the pool."""
        waiting: list[tuple[int, Any]] = [(f.pending_bytes, f) for f in self.files]
        waiting += [(fill.nbytes, fill) for p in self.partitions.values() for fill in p.fills
                    if not fill.done and fill.count]
        total = sum(n for n, _ in waiting) + sum(f.inflight_bytes for f in self.files)
        if total <= self.budget:
            return
        pending = sum(n for n, _ in waiting)
        for n, item in sorted(waiting, key=lambda w: -w[0]):
            if pending <= self.budget // 2:
                break
            pending -= n
            if isinstance(item, _NewFile):
                item.flush()
            else:
                self._write_fill(item)
        for f in self.files:
            if f.future is not None:
                f.future.result()
        for fut in self.closing:
            fut.result()
        self.files = [f for f in self.files if not f.closed]

    # -- the end -----------------------------------------------------------------------------
    def finish(self) -> list[BucketResult]:
        """Close every file and write every small file that took inserts; their results."""
        for p in self.partitions.values():
            for fill in p.fills:
                if not fill.done:
                    self._write_fill(fill)
            if p.file is not None:
                self._close(p)
            self._bound()
        try:
            results = [fut.result() for fut in self.closing]
        finally:
            self.pool.shutdown(wait=True)
        return sorted(results, key=lambda r: r.index)

    def abort(self) -> None:
        """Stop: cancel what has not started, wait for the rest, remove open files' parts."""
        for fut in self.closing:
            fut.cancel()
        for f in self.files:
            f.abort()
        self.pool.shutdown(wait=True, cancel_futures=True)
