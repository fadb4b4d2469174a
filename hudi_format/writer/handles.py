"""Write handles: turn the records planned for one file group into files.

- create: a new file group, one new base file.
- merge (COW): the latest base file rewritten, in :mod:`.merge_handle`.
- append (MOR): updates, deletes and bin-packed inserts as log blocks on the latest slice.

Constant meta fields (commit time, partition path, file name) travel as one-entry dictionary
arrays: no copy of the value per row.
"""

from __future__ import annotations

import posixpath
import threading
import uuid

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.write_stat import WriteStat
from ..base_file import (BaseFileWriteResult, KeptIndex, constant_column, parquet_format,
                         unique_key_columns, write_base_file)
from ..bloom import BloomFilter
from ..errors import ConcurrentWriteError
from ..metadata.key_changes import KeyChanges, keys_by_last_block, winning_deletes
from ..log import (encode_avro_data_block, encode_delete_block, encode_parquet_data_block,
                   LogVersionTakenError, next_log_version, write_log_file)
from ..read.align import align_table
from ..read.merge import MergeSpec, live_rows, record_keys
from ..seqno import commit_seqnos
from ..view import FileSlice
from ..view.file_names import BaseFileName, LogFileName
from ..transaction.markers import create_marker


_TOKEN_LOCK = threading.Lock()


def new_file_id() -> str:
    """A new file group id: a random UUID plus Hudi's ``-0`` suffix."""
    return f"{uuid.uuid4()}-0"


@attrs.define
class WriteContext:
    """What every handle of one commit shares."""

    storage: object
    instant: str
    schema: pa.Schema            # full Arrow schema written (meta fields first, when populated)
    avro_schema: dict            # the same, as Avro (for blocks and parquet footers)
    spec: MergeSpec
    meta_fields: bool
    table_version: int
    log_block_format: str = "avro"
    # Parquet settings of base files (base_file.parquet_format: codec, row group, page, dictionary)
    parquet: dict = attrs.field(factory=parquet_format)
    max_log_file_size: int = 1024 * 1024 * 1024
    # Hudi's bloom options (base_file.footer_bloom); None: base files carry no bloom filter
    bloom: dict | None = attrs.field(factory=dict)
    written: list = attrs.field(factory=list)  # paths of files this commit created
    file_id: str | None = None   # create: the new group's id, fixed at planning (a retried task reuses it)
    token: tuple[int, str] | None = None   # (task number, Hudi write token) of the task writing
    # the record index is kept: the handle reports its file's key changes in `keys`, so the
    # commit does not read the written files back for them (metadata.key_changes)
    track_keys: bool = False
    keys: KeyChanges | None = None
    _task: int = 0

    @property
    def keyed(self) -> bool:
        """Whether base files carry the record-key bloom filter and min/max keys: Hudi writes
        neither without meta fields, nor with ``hoodie.parquet.bloom.filter.enabled`` off."""
        return self.meta_fields and self.bloom is not None

    def next_token(self) -> tuple[int, str]:
        if self.token is not None:
            return self.token
        with _TOKEN_LOCK:
            self._task += 1
            task = self._task
        return task, f"{task}-1-{task}"


def with_meta(ctx: WriteContext, rows: pa.Table, keys: pa.Array, partition: str, file_name: str,
              task: int, start: int = 0, encoded: bool = False) -> pa.Table:
    """Fill the five meta fields for freshly written records. ``start``: how many records the
    file already holds (sequence numbers count on across the batches of a streamed file).
    ``encoded``: the meta fields that hold one value for the whole batch as dictionary arrays
    (for a base file of these rows alone: no copy of the value per row, nor a dictionary built
    by hashing them)."""
    n = rows.num_rows
    if not ctx.meta_fields:
        return align_table(rows, ctx.schema)
    same = constant_column if encoded else (lambda v, k: pa.repeat(pa.scalar(v), k))
    seq = commit_seqnos(ctx.instant, task, start, n)
    meta = {"_hoodie_commit_time": same(ctx.instant, n),
            "_hoodie_commit_seqno": seq,
            "_hoodie_record_key": pc.cast(keys, pa.string()),
            "_hoodie_partition_path": same(partition, n),
            "_hoodie_file_name": same(file_name, n)}
    cols = [meta[f.name] if f.name in meta else (rows.column(f.name) if f.name in rows.column_names
                                                  else pa.nulls(n, f.type)) for f in ctx.schema]
    schema = pa.schema([f.with_type(c.type) for f, c in zip(ctx.schema, cols)]) if encoded else ctx.schema
    return pa.Table.from_arrays(cols, schema=schema)


_CONSTANT_META = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name")


def _base_name(ctx: WriteContext, file_id: str, token: str) -> str:
    return BaseFileName(file_id, token, ctx.instant, ".parquet").name


def _write_base(ctx: WriteContext, partition: str, name: str, table: pa.Table,
                io_type: str = "CREATE", bloom: dict | BloomFilter | KeptIndex | None = None,
                bloom_keys: pa.Array | None = None) -> BaseFileWriteResult:
    path = posixpath.join(partition, name) if partition else name
    create_marker(ctx.storage, ctx.instant, path, io_type)
    keys = record_keys(table, ctx.spec) if ctx.keyed else None
    ctx.written.append(path)
    return write_base_file(ctx.storage, path, table, ctx.avro_schema, keys,
                           bloom=ctx.bloom if bloom is None else bloom, **ctx.parquet,
                           bloom_keys=bloom_keys, plain=unique_key_columns(ctx.spec.record_key_fields))


def create(ctx: WriteContext, partition: str, rows: pa.Table, keys: pa.Array) -> WriteStat:
    """A new file group holding ``rows``."""
    file_id = ctx.file_id or new_file_id()
    task, token = ctx.next_token()
    name = _base_name(ctx, file_id, token)
    live = live_rows(rows)
    if live is not None:   # flagged records of new keys delete nothing and are not written
        rows, keys = rows.filter(live), pc.filter(keys, live)
    table = with_meta(ctx, rows, keys, partition, name, task, encoded=True)
    res = _write_base(ctx, partition, name, table)
    if ctx.track_keys:
        ctx.keys = KeyChanges.of(keys)
    return WriteStat(file_id=file_id, path=res.path, partition_path=partition, num_writes=table.num_rows,
                     num_inserts=table.num_rows, total_write_bytes=res.file_size)


def append(ctx: WriteContext, fs: FileSlice, upserts: pa.Table, upsert_keys: pa.Array,
           deletes: pa.Table | None, num_updates: int, base_instant: str | None = None,
           updated: pa.Array | None = None) -> WriteStat:
    """Append upserts and deletes to the latest slice of ``fs`` as log blocks (MOR).

    ``base_instant`` (v6): the instant the new log file is named with; a pending compaction's
    instant, so that the compaction's new slice takes these records. ``updated`` (bool per
    upsert): the record updates one the index found in this file group; its record index
    entry stays as it is, as Hudi leaves it (``None``: every upsert is reported)."""
    task, token = ctx.next_token()
    blocks = []
    flagged = None
    live = live_rows(upserts)
    if live is not None:   # as Hudi's append handle: flagged records become delete records
        flagged = _soft_deletes(ctx, upserts.filter(pc.invert(live)), pc.filter(upsert_keys, pc.invert(live)),
                                fs.partition_path)
        upserts, upsert_keys = upserts.filter(live), pc.filter(upsert_keys, live)
        updated = pc.filter(updated, live) if updated is not None else None
        num_updates = max(0, num_updates - flagged.num_rows)   # only stored keys reach a log
    if upserts.num_rows:
        table = with_meta(ctx, upserts, upsert_keys, fs.partition_path, fs.file_id, task)
        if ctx.log_block_format == "parquet":
            blocks.append(encode_parquet_data_block(table, ctx.avro_schema, ctx.instant))
        else:
            blocks.append(encode_avro_data_block(table, ctx.avro_schema, ctx.instant))
    n_deletes = 0
    for dels in (deletes, flagged):   # one block each: a block's ordering values share a type
        if dels is not None and dels.num_rows:
            blocks.append(encode_delete_block(dels, ctx.instant))
            n_deletes += dels.num_rows
    # v8+: a log file per delta commit, named by it; v6: log files carry the slice's base instant.
    log_instant = ctx.instant if ctx.table_version >= 8 else (base_instant or fs.base_instant)
    # v8+: the log files are named by this new instant, so the first is version 1 unless an
    # earlier attempt of this bucket wrote one with this token (then list, as v6 always must)
    guess = ctx.table_version >= 8
    version = 1 if guess else next_log_version(ctx.storage, fs.partition_path, fs.file_id, log_instant)
    while True:
        first = LogFileName(fs.file_id, log_instant, version, token).name
        create_marker(ctx.storage, ctx.instant, posixpath.join(fs.partition_path, first)
                      if fs.partition_path else first, "APPEND")
        try:
            results = write_log_file(ctx.storage, fs.partition_path, fs.file_id, log_instant, blocks,
                                     token, version=version, max_file_size=ctx.max_log_file_size)
            break
        except LogVersionTakenError as exc:
            if not guess:   # v6: another writer appends to this file group (their commits conflict)
                raise ConcurrentWriteError(f"another write appended to file group {fs.partition_path}/"
                                           f"{fs.file_id} meanwhile ({exc}); retry the write") from None
            guess = False
            version = next_log_version(ctx.storage, fs.partition_path, fs.file_id, log_instant)
    ctx.written.extend(r.path for r in results)
    if ctx.track_keys:   # in block order: the upserts (but updates in place), then the deletes
        placed = upsert_keys if updated is None else pc.filter(upsert_keys, pc.invert(updated))
        ctx.keys = keys_by_last_block([(placed, False)] + [
            (winning_deletes(d, ctx.spec), True) for d in (deletes, flagged) if d is not None and d.num_rows])
    size = sum(r.size for r in results)
    last = results[-1]
    return WriteStat(file_id=fs.file_id, path=last.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=upserts.num_rows, num_update_writes=num_updates,
                     num_inserts=max(0, upserts.num_rows - num_updates),
                     num_deletes=n_deletes, total_write_bytes=size,
                     base_file=fs.base_file_name or "", log_files=[posixpath.basename(r.path) for r in results],
                     log_version=last.version)


def delete_records(keys: pa.Array, partition: str, ordering: pa.Array | None = None) -> pa.Table:
    """Delete records (Hudi's ``DeleteRecord``) of ``keys`` in ``partition``. Without
    ``ordering``, as Hudi's delete operation writes them: the default ordering value (an int 0),
    so that the delete wins over every earlier write of the key. With it (a soft delete's own
    ordering values), the delete competes as the record it stands for did."""
    n = len(keys)
    return pa.table({"record_key": pc.cast(keys, pa.string()),
                     "partition_path": pa.repeat(pa.scalar(partition), n),
                     "ordering_value": pa.repeat(pa.scalar(0, pa.int32()), n) if ordering is None else ordering})


def _soft_deletes(ctx: WriteContext, rows: pa.Table, keys: pa.Array, partition: str) -> pa.Table:
    """Delete records for ``rows`` flagged ``_hoodie_is_deleted``, with their ordering values
    (nulls when the table orders by none)."""
    ordering = [f for f in ctx.spec.ordering_fields if f in rows.column_names]
    return delete_records(keys, partition, rows.column(ordering[0]) if ordering else pa.nulls(rows.num_rows))
