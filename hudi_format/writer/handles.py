"""Write handles: turn the records planned for one file group into files.

- create: a new file group, one new base file.
- merge (COW): the latest base file rewritten with updates, deletes and bin-packed inserts; rows
  left untouched keep their commit time and sequence number, as Hudi's merge handle does. An
  upsert without deletes is written in that handle's order (old rows in file order, updates in
  place, then inserts), which lets the old file's bloom filter be continued rather than rebuilt.

Constant meta fields (commit time, partition path, file name) travel as one-entry dictionary
arrays, and are read back dictionary-encoded by a merge: no copy of the value per row.
- append (MOR): updates, deletes and bin-packed inserts as log blocks on the latest slice.
"""

from __future__ import annotations

import contextlib
import posixpath
import threading
import uuid
from collections.abc import Iterator

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.write_stat import WriteStat
from ..base_file import (BaseFileWriter, BaseFileWriteResult, bloom_filter_from_options, constant_column, parquet_format,
                         read_footer, unique_key_columns, with_file_name, write_base_file)
from ..bloom import BloomFilter, resume
from ..errors import ConcurrentWriteError, CorruptFileError
from ..log import (encode_avro_data_block, encode_delete_block, encode_parquet_data_block,
                   LogVersionTakenError, next_log_version, write_log_file)
from ..read.align import align_table
from ..read.parquet import BaseFileReader, dictionary_columns, open_base_file
from ..read.merge import MergeSpec, merge_pieces, record_keys, row_numbers
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
    seq = pc.binary_join_element_wise(pa.scalar(f"{ctx.instant}_{task}_"),
                                      pc.cast(row_numbers(n, start), pa.string()), "")
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
                io_type: str = "CREATE", bloom: dict | BloomFilter | None = None,
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
    table = with_meta(ctx, rows, keys, partition, name, task, encoded=True)
    res = _write_base(ctx, partition, name, table)
    return WriteStat(file_id=file_id, path=res.path, partition_path=partition, num_writes=table.num_rows,
                     num_inserts=table.num_rows, total_write_bytes=res.file_size)


def merge(ctx: WriteContext, fs: FileSlice, upserts: pa.Table, upsert_keys: pa.Array,
          deletes: pa.Table | None) -> WriteStat:
    """Rewrite the base file of ``fs`` (COW) with upserts and deletes applied."""
    task, token = ctx.next_token()
    name = _base_name(ctx, fs.file_id, token)
    new_keys = _flat(pc.cast(upsert_keys, pa.string()))
    no_deletes = deletes is None or not deletes.num_rows
    # the constant meta fields, and the string columns the old file stores as dictionary
    # indices only, stay dictionary-encoded: no string decoded per row, none hashed again
    encoded = _encoded_schema(ctx, _constant_meta(ctx), None)
    old = encoded.empty_table()
    if fs.base_file:
        where = ctx.storage.uri(fs.base_file)
        with open_base_file(ctx.storage, fs.base_file, fs.base_file_size) as reader:
            as_dict = _dictionary_columns(ctx, reader)
            encoded = _encoded_schema(ctx, as_dict, reader.pf.schema_arrow)
            if no_deletes and reader.pf.metadata.num_rows > _STREAM_ABOVE_ROWS:
                streamed = _merge_streamed(ctx, fs, reader, as_dict, encoded, upserts, upsert_keys, new_keys,
                                           name, task)
                if streamed is not None:
                    return streamed
            with _reading(where):
                stored = reader.read_encoded(None, as_dict)
            old = align_table(stored, encoded, where)
    fresh = _fresh(ctx, upserts, upsert_keys, fs.partition_path, name, task, encoded)
    in_place = _merge_in_place(ctx, old, fresh, new_keys) if no_deletes else None
    if in_place is not None:
        merged, updates, inserted = in_place
        deleted = 0
    else:
        old, fresh = old.cast(ctx.schema), fresh.cast(ctx.schema)
        pieces, dels = [old, fresh], []
        delete_keys = None
        if deletes is not None and deletes.num_rows:
            pieces.append(None)
            dels.append((2, deletes))
            delete_keys = pc.cast(deletes.column("record_key"), pa.string())
        merged = merge_pieces(pieces, dels, ctx.schema, ctx.spec)
        updates, inserted, deleted = _merge_counts(ctx, old, merged, new_keys, delete_keys)
    if ctx.meta_fields:
        merged = with_file_name(merged, name)
    inserts = len(inserted)
    bloom, bloom_keys = ctx.bloom, None
    if fs.base_file and deleted == 0 and merged.num_rows == old.num_rows + inserts:
        seeded = _continued_bloom(ctx, fs, old.num_rows)
        if seeded is not None:
            bloom, bloom_keys = seeded, inserted
    res = _write_base(ctx, fs.partition_path, name, merged, "MERGE", bloom, bloom_keys)
    return WriteStat(file_id=fs.file_id, path=res.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=merged.num_rows, num_update_writes=updates,
                     num_inserts=inserts, num_deletes=deleted, total_write_bytes=res.file_size)


def _continued_bloom(ctx: WriteContext, fs: FileSlice, n_old: int) -> BloomFilter | None:
    """The old base file's bloom filter, to go on with when every one of its ``n_old`` rows
    stays: it holds their keys, as Hudi's merge handle would add them again (in file order,
    updates in place); only the inserted keys are hashed. ``None``: build a new filter."""
    if not ctx.keyed or not fs.base_file:
        return None
    stored = read_footer(ctx.storage, fs.base_file, fs.base_file_size)
    if stored.bloom_filter is None or stored.num_rows != n_old:
        return None
    return resume(stored.bloom_filter, bloom_filter_from_options(ctx.bloom), stored.num_rows)


_PLAIN_META = ("_hoodie_record_key",)
# An old base file over this many rows is merged batch by batch; a smaller one whole (one read
# and one write: ~10% faster on 83k-row files, and its memory is small anyway).
_STREAM_ABOVE_ROWS = 1 << 17
_MERGE_BATCH_ROWS = 1 << 16   # old rows read, merged and handed to the writer at a time
# Arrow bytes a streamed merge buffers before writing them as a row group. pyarrow writes only
# whole row groups, so a Hudi-sized one (hoodie.parquet.block.size, 120 MB) would be held as
# Arrow data, once per merge running in parallel. 5M-row COW upsert, peak RSS: 903-940 MB with
# 120 MB row groups and the key columns held; 703-742 MB with 32 MB row groups, the key columns
# read again batch by batch and 131,072-row batches; 646-659 MB as set here (time unchanged).
_MERGE_BUFFER_BYTES = 16 << 20


def _compared_columns(ctx: WriteContext) -> list[str]:
    """Columns a merge compares (keys, ordering): read decoded, never as dictionaries."""
    return list(dict.fromkeys([*_PLAIN_META, *ctx.spec.record_key_fields, *ctx.spec.ordering_fields]))


def _constant_meta(ctx: WriteContext) -> list[str]:
    return list(_CONSTANT_META) if ctx.meta_fields else []


def _dictionary_columns(ctx: WriteContext, reader: BaseFileReader) -> list[str]:
    """The old file's columns a merge reads as dictionaries: the constant meta fields and the
    string columns it stores as dictionary indices only, but not those the merge compares."""
    plain = _compared_columns(ctx)
    stored = dictionary_columns(reader.pf, reader.pf.schema_arrow.names)
    return list(dict.fromkeys(_constant_meta(ctx) + [c for c in stored if c not in plain]))


def _encoded_schema(ctx: WriteContext, as_dict: list[str], stored: pa.Schema | None) -> pa.Schema:
    """The writer schema with the ``as_dict`` columns typed as the dictionaries they are read
    as: of the type the old file stores (``stored``; ``None``: no old file), when it is the
    schema's own (a column stored as another type is decoded, aligning casts it)."""
    def read_as_dictionary(f: pa.Field) -> bool:
        if f.name not in as_dict or not (pa.types.is_string(f.type) or pa.types.is_binary(f.type)):
            return False
        i = -1 if stored is None else stored.get_field_index(f.name)
        return stored is None or (i >= 0 and stored.field(i).type == f.type)
    return pa.schema([f.with_type(pa.dictionary(pa.int32(), f.type)) if read_as_dictionary(f) else f
                      for f in ctx.schema])


def _fresh(ctx: WriteContext, upserts: pa.Table, upsert_keys: pa.Array, partition: str, name: str, task: int,
           encoded: pa.Schema) -> pa.Table:
    """The new records with their meta fields, their strings encoded as the old file's are."""
    fresh = with_meta(ctx, upserts, upsert_keys, partition, name, task, encoded=True)
    return fresh if fresh.schema == encoded else fresh.cast(encoded)


@contextlib.contextmanager
def _reading(where: str) -> Iterator[None]:
    """A failure to read the old base file names it."""
    try:
        yield
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptFileError(f"cannot read base file {where}: {exc}") from exc


def _merge_streamed(ctx: WriteContext, fs: FileSlice, reader: BaseFileReader, as_dict: list[str],
                    encoded: pa.Schema, upserts: pa.Table, upsert_keys: pa.Array, new_keys: pa.Array,
                    name: str, task: int) -> WriteStat | None:
    """The in-place merge (see :func:`_in_place_plan`) of the base file of ``fs`` (open in
    ``reader``; over :data:`_STREAM_ABOVE_ROWS` rows: a smaller one is merged whole, one read
    and one write, faster), streamed: the old file's key columns decide the plan, then its
    rows are read, merged and written a batch at a time, so that the old file and the merged
    one are never both in memory. ``None`` (nothing written) when the general merge must decide."""
    where = ctx.storage.uri(fs.base_file or "")
    names = reader.pf.schema_arrow.names
    probe_cols = [c for c in _compared_columns(ctx) if c in ctx.schema.names and c in names]
    with _reading(where):
        probe = reader.read(probe_cols)
    probe = align_table(probe, pa.schema([ctx.schema.field(c) for c in probe_cols]), where)
    fresh = _fresh(ctx, upserts, upsert_keys, fs.partition_path, name, task, encoded)
    plan = _in_place_plan(ctx, probe, fresh, new_keys)
    if plan is None:
        return None
    upd_old, upd_new, ins_new = plan
    n_old = reader.pf.metadata.num_rows
    bloom = _continued_bloom(ctx, fs, n_old)
    rel = posixpath.join(fs.partition_path, name) if fs.partition_path else name
    create_marker(ctx.storage, ctx.instant, rel, "MERGE")
    ctx.written.append(rel)
    writer = BaseFileWriter(ctx.storage, rel, ctx.avro_schema, keyed=ctx.keyed,
                            bloom=ctx.bloom if bloom is None else bloom,
                            plain=unique_key_columns(ctx.spec.record_key_fields),
                            **{**ctx.parquet, "block_size": min(ctx.parquet["block_size"], _MERGE_BUFFER_BYTES)})
    no_keys = pa.array([], pa.string())
    del probe   # read again with the other columns, batch by batch: not held for the whole merge
    try:
        lo = 0
        for rows in _old_batches(reader, names, as_dict, where):
            hi = lo + rows.num_rows
            rows = align_table(rows, encoded, where)
            a, b = np.searchsorted(upd_old, [lo, hi])
            if b > a:   # the old rows this write replaces take the new records' places
                order = np.arange(rows.num_rows, dtype=np.int64)
                order[upd_old[a:b] - lo] = rows.num_rows + np.arange(b - a, dtype=np.int64)
                rows = pa.concat_tables([rows, fresh.take(pa.array(upd_new[a:b]))]).take(pa.array(order))
            _write_merged(ctx, writer, rows, name, None if bloom is None else no_keys)
            lo = hi
        if lo != n_old:
            raise CorruptFileError(f"{where}: read {lo} rows, its footer says {n_old}")
        inserted = new_keys.take(pa.array(ins_new))
        _write_merged(ctx, writer, fresh.take(pa.array(ins_new)), name, None if bloom is None else inserted)
        res = writer.close()
    except BaseException:
        writer.abort()
        raise
    return WriteStat(file_id=fs.file_id, path=res.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=n_old + len(ins_new), num_update_writes=len(upd_new),
                     num_inserts=len(ins_new), num_deletes=0, total_write_bytes=res.file_size)


def _old_batches(reader: BaseFileReader, columns: list[str], as_dict: list[str], where: str) -> Iterator[pa.Table]:
    """The old file's ``columns`` a batch of rows at a time; a read failure names the file."""
    with _reading(where):
        yield from reader.iter_encoded(columns, as_dict, _MERGE_BATCH_ROWS)


def _write_merged(ctx: WriteContext, writer: BaseFileWriter, rows: pa.Table, name: str,
                  bloom_keys: pa.Array | None) -> None:
    """``rows`` of a streamed merge into ``writer``, stamped with the new file's name."""
    if not rows.num_rows:
        return
    if ctx.meta_fields:
        rows = with_file_name(rows, name)
    writer.write(rows, record_keys(rows, ctx.spec) if ctx.keyed else None, bloom_keys)


def _in_place_plan(ctx: WriteContext, old: pa.Table, fresh: pa.Table,
                   new_keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """An upsert without deletes merged as Hudi's merge handle writes it: the old rows in file
    order, each one a new record replaces in its place, then the new keys' records. Returns
    ``(old rows replaced, ascending; the new records replacing them; new records inserted)``
    as row numbers, from ``old``'s key (and ordering) columns, or ``None`` when the general
    merge must decide (a key repeated in the batch, an updated key repeated in the old file,
    ``_hoodie_is_deleted``, several or null ordering values). A new record replaces an old one
    unless the old one has the higher ordering value (event-time ordering), as the general
    merge decides."""
    ordering = [f for f in ctx.spec.ordering_fields if f in ctx.schema.names] if ctx.spec.event_time else []
    if "_hoodie_is_deleted" in ctx.schema.names or len(ordering) > 1 or new_keys.null_count:
        return None
    old_keys = _flat(pc.cast(record_keys(old, ctx.spec), pa.string()))
    if len(pc.unique(new_keys)) != len(new_keys):
        return None
    hit = pc.is_in(old_keys, value_set=new_keys)                 # the few old rows in play
    old_pos = pc.indices_nonzero(hit).to_numpy().astype(np.int64)
    if len(pc.unique(old_keys.take(pa.array(old_pos)))) != len(old_pos):
        return None   # an updated key the old file holds twice: the general merge decides
    # (old rows of keys this write does not name pass through as stored, repeated or not, as
    # Hudi's merge handle copies them: only the few old rows in play are hashed)
    at = pc.fill_null(pc.index_in(new_keys, value_set=old_keys.filter(hit)), -1).to_numpy()
    upd_new = np.flatnonzero(at >= 0)
    upd_old = old_pos[at[upd_new]]
    if ordering and len(upd_new):
        theirs = pc.take(old.column(ordering[0]), pa.array(upd_old))
        mine = pc.take(fresh.column(ordering[0]), pa.array(upd_new))
        if theirs.null_count or mine.null_count:
            return None
        keep = np.asarray(pc.invert(pc.greater(theirs, mine)).to_numpy(zero_copy_only=False), bool)
        upd_new, upd_old = upd_new[keep], upd_old[keep]
    by_old = np.argsort(upd_old, kind="stable")
    return upd_old[by_old], upd_new[by_old], np.flatnonzero(at < 0)


def _merge_in_place(ctx: WriteContext, old: pa.Table, fresh: pa.Table,
                    new_keys: pa.Array) -> tuple[pa.Table, int, pa.Array] | None:
    """:func:`_in_place_plan` applied to the whole of ``old``: (rows, updates, inserted keys)."""
    plan = _in_place_plan(ctx, old, fresh, new_keys)
    if plan is None:
        return None
    upd_old, upd_new, ins_new = plan
    n_old = old.num_rows
    order = np.arange(n_old, dtype=np.int64)
    order[upd_old] = n_old + upd_new
    order = np.concatenate([order, n_old + ins_new])
    merged = pa.concat_tables([old, fresh]).take(pa.array(order))
    return merged, len(upd_new), new_keys.take(pa.array(ins_new))


def _merge_counts(ctx: WriteContext, old: pa.Table, merged: pa.Table, new_keys: pa.Array,
                  delete_keys: pa.Array | None) -> tuple[int, pa.Array, int]:
    """(updates, inserted keys, deletes) of a merge: merged rows this write's records won (of
    keys the old file held / did not hold) and old rows whose key is gone. Only this write's
    keys are hashed (the file's rows are probed against them), as only they can change a key."""
    old_keys = pc.cast(record_keys(old, ctx.spec), pa.string())
    merged_keys = pc.cast(record_keys(merged, ctx.spec), pa.string())
    mentioned = new_keys if delete_keys is None else pa.chunked_array([new_keys, delete_keys], pa.string())
    mentioned = mentioned.combine_chunks() if isinstance(mentioned, pa.ChunkedArray) else mentioned
    in_merged = pc.is_in(merged_keys, value_set=mentioned)
    old_mentioned = old_keys.filter(pc.is_in(old_keys, value_set=mentioned))   # the few old rows in play
    from_fresh = pc.is_in(merged_keys, value_set=new_keys)
    if ctx.meta_fields:
        from_fresh = pc.and_(from_fresh, pc.equal(merged.column("_hoodie_commit_time"), ctx.instant))
    won = _flat(merged_keys.filter(from_fresh))
    is_update = pc.is_in(won, value_set=_flat(old_mentioned))
    updates = pc.sum(is_update).as_py() or 0
    inserted = won.filter(pc.invert(is_update))
    if "_hoodie_is_deleted" in old.column_names and pc.any(old.column("_hoodie_is_deleted")).as_py():
        # rows flagged deleted in the old file drop out whether or not this write names them
        present = pc.sum(pc.is_in(old_keys, value_set=_flat(merged_keys))).as_py() or 0
        return updates, inserted, old.num_rows - present
    still = _flat(merged_keys.filter(in_merged))
    deleted = len(old_mentioned) - (pc.sum(pc.is_in(old_mentioned, value_set=still)).as_py() or 0)
    return updates, inserted, deleted


def _flat(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.chunk(0) if a.num_chunks == 1 else a.combine_chunks()
    return a


def append(ctx: WriteContext, fs: FileSlice, upserts: pa.Table, upsert_keys: pa.Array,
           deletes: pa.Table | None, num_updates: int, base_instant: str | None = None) -> WriteStat:
    """Append upserts and deletes to the latest slice of ``fs`` as log blocks (MOR).

    ``base_instant`` (v6): the instant the new log file is named with; a pending compaction's
    instant, so that the compaction's new slice takes these records."""
    task, token = ctx.next_token()
    blocks = []
    if upserts.num_rows:
        table = with_meta(ctx, upserts, upsert_keys, fs.partition_path, fs.file_id, task)
        if ctx.log_block_format == "parquet":
            blocks.append(encode_parquet_data_block(table, ctx.avro_schema, ctx.instant))
        else:
            blocks.append(encode_avro_data_block(table, ctx.avro_schema, ctx.instant))
    if deletes is not None and deletes.num_rows:
        blocks.append(encode_delete_block(deletes, ctx.instant))
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
    size = sum(r.size for r in results)
    last = results[-1]
    return WriteStat(file_id=fs.file_id, path=last.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=upserts.num_rows, num_update_writes=num_updates,
                     num_inserts=upserts.num_rows - num_updates,
                     num_deletes=deletes.num_rows if deletes is not None else 0, total_write_bytes=size,
                     base_file=fs.base_file_name or "", log_files=[posixpath.basename(r.path) for r in results],
                     log_version=last.version)
