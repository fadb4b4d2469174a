"""The public API for engines (Spark, Ray, Dask, Daft...): distributed reads and writes.

Scan: :func:`plan_scan` turns a query into picklable :class:`ScanTask` values (one file slice
each, with its columns, filters, merge spec and the commits it may see); :func:`read_task`
reads one task into Arrow batches in any process.

Write: :func:`begin_write` (recovery, table state, writer schema) -> :func:`plan_write`
(index tagging and file sizing into picklable :class:`WriteBucket` values, one file group
each; opens the instant) -> :func:`write_bucket` in any process (returns the bucket's
:class:`BucketResult`: Hudi's write stat) -> :func:`commit` the results as one instant, or
:func:`abort`; :func:`retrying_conflicts` runs a write that lost a conflict again, as
``hoodie.write.num.retries.on.conflict.failures`` asks. ``hudi_format.write`` runs the same steps in one process. A bulk_insert
without a shuffle (Hudi's sort mode NONE) skips planning: :func:`open_new_files` opens the
instant and each task writes its own rows into new file groups (:func:`write_new_files`).

Index tagging at scale (:mod:`.index`): :func:`plan_index_lookup` plans picklable
:class:`LookupTask` values from the table state alone, :func:`lookup` runs one where the keys
are (:func:`lookup_many` several that see the same keys), and ``plan_write(job, counts=WriteCounts(...))`` sizes the write from counts, so the
driver never holds the records' keys. A record whose :data:`IS_DELETED` (Hudi's
``_hoodie_is_deleted``) is true deletes its key where the index finds it and is never inserted:
an engine counting inserts leaves such records out.

Record index at scale: each :class:`BucketResult` carries its file's record index changes
(``keys``, a :class:`KeyChanges`) when the table keeps the index. An engine that keeps them on
its workers passes ``commit(..., record_index=...)`` a :class:`RecordIndexUpdate`: at commit it
gets a picklable :class:`RecordIndexTarget` and writes the changes (rows of
:data:`RECORD_INDEX_CHANGES`) into the index's file groups with :func:`write_record_index_changes`
on its workers, so no record key reaches the committing process.
"""

from ..read.scan import ScanPlan, ScanTask
from ..timeline.write_stat import WriteStat
from ..writer.job import BucketResult, WriteBucket, WriteJob, WriteSpec
from ..metadata.key_changes import KeyChanges
from ..metadata.record_index_update import (CHANGES_SCHEMA as RECORD_INDEX_CHANGES, RecordIndexTarget,
                                            RecordIndexUpdate, write_changes as write_record_index_changes)
from .scan import plan_scan, read_task, read_task_table
from ..read.merge import IS_DELETED
from ..writer.planning import WriteCounts
from .index import IndexLookup, LookupTask, lookup, lookup_key_range, lookup_many, plan_index_lookup
from ..writer.retries import RETRIES_ON_CONFLICT, retrying_conflicts
from ..writer.stream import NewFiles
from .write import abort, begin_write, commit, open_new_files, plan_write, write_bucket, write_new_files

__all__ = ["ScanPlan", "ScanTask", "plan_scan", "read_task", "read_task_table",
           "WriteJob", "WriteSpec", "WriteBucket", "BucketResult", "WriteStat",
           "begin_write", "plan_write", "write_bucket", "commit", "abort",
           "NewFiles", "open_new_files", "write_new_files", "RETRIES_ON_CONFLICT", "retrying_conflicts",
           "IndexLookup", "LookupTask", "WriteCounts", "IS_DELETED", "plan_index_lookup", "lookup", "lookup_many",
           "lookup_key_range", "KeyChanges", "RecordIndexTarget", "RecordIndexUpdate", "RECORD_INDEX_CHANGES",
           "write_record_index_changes"]
