"""The write client: one call of ``write`` is one Hudi commit, in this process.

It is the engine steps of :mod:`hudi_format.writer.job` run here, so a single-process write
and an engine's distributed one take the same path. Order of work, so that a bad batch
writes nothing and a failed write never shows: validate the options, the schema and every
record key first; plan (tag, size) without writing; then create the table if needed, open the
instant (requested, inflight), write the file groups (in threads: Arrow, Parquet and
compression release the GIL), and only then complete the instant, which is what makes the
files visible to readers.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from ..config import TableConfig
from ..errors import InvalidOptionError
from ..storage import Storage
from ..timeline import Instant, Timeline
from ..transaction.snapshot import TableSnapshot
from .input import as_stream, read_input
from .commit import commit_write
from .job import (BucketResult, WriteBucket, WriteJob, abort_write, check_operation, retryable,
                  plan_write, prepare_write, write_bucket)
from ..options import WRITE_SCOPES, validate
from .stream import streams, write_stream


class WriteClient:
    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                 create: bool = False, timeline: Timeline | None = None,
                 snapshot: TableSnapshot | None = None):
        self.storage = storage
        # the operation's table snapshot (load once): the caller's, else one on ``timeline``
        # (loaded here when that is None too); after a write, the table as its commit left it
        self.snapshot = snapshot
        self.timeline = snapshot.timeline if snapshot is not None else timeline
        self.config = snapshot.config if snapshot is not None else config
        self.options = validate(options, WRITE_SCOPES)
        self.create = create

    def write(self, data: Any, operation: str = "upsert") -> Instant:
        """Write ``data`` as one commit (``create``: the table's first write creates it).

        Input that comes batch by batch (a RecordBatchReader, a Dataset, an iterator of
        batches) is streamed by insert and bulk_insert (:mod:`.stream`: memory bounded by a few
        batches and the open files' buffers); the other operations, and inserts that
        precombine or drop duplicates, read it whole first."""
        op = check_operation(operation)
        stream = as_stream(data) if data is not None else None
        if stream is not None and streams(op, self.options):
            job = write_stream(self.storage, self.config, op, self.options, stream, create=self.create,
                               timeline=self.timeline, snapshot=self.snapshot)
            return self._committed(job)
        table = read_input(stream if stream is not None else data, op, self.config) if data is not None else None
        if table is None and op != "delete_partition":
            raise InvalidOptionError(f"operation {op!r} needs data")
        job = prepare_write(self.storage, self.config, op, self.options,
                            table.schema if table is not None else None, create=self.create,
                            timeline=self.timeline, snapshot=self.snapshot)
        buckets = retryable(lambda: plan_write(job, table))   # the index reads the table's files
        try:
            self._commit(job, self._write_buckets(job, buckets))
        except BaseException:
            abort_write(job)
            raise
        return self._committed(job)

    def _committed(self, job: WriteJob) -> Instant:
        """The committed instant of ``job``; the client moves on to the table it left."""
        assert job.done is not None
        self.config = job.config
        self.snapshot = job.committed   # the table after the commit: what runs next starts from it
        self.timeline = self.snapshot.timeline if self.snapshot is not None else None
        return job.done

    def _write_buckets(self, job: WriteJob, buckets: list[WriteBucket]) -> list[BucketResult]:
        """Every bucket, from the rows planned; file groups are independent, so in threads."""
        def one(bucket: WriteBucket) -> BucketResult:
            return write_bucket(self.storage, bucket, **job.inputs_of(bucket))
        workers = min(len(buckets), os.cpu_count() or 1)
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(one, buckets))
        return [one(b) for b in buckets]

    def _commit(self, job: WriteJob, results: list[BucketResult]) -> Instant:
        """Commit through the one commit path (every file was reported: nothing to reconcile)."""
        return commit_write(job, results, discard_unreported=False)
