"""The merge handle (COW): rewrite a file group's base file with a write's upserts and deletes.

Rows left untouched keep their commit time and sequence number, as Hudi's merge handle does. An
upsert without deletes is written in that handle's order (old rows in file order, updates in
place, then inserts), which lets the old file's bloom filter be continued rather than rebuilt;
any other merge (deletes, ``_hoodie_is_deleted``, stale updates under event-time ordering) is
the reader's merge: the old rows that stay, in file order, then the winning new records.

A big old file is merged batch by batch (the plan is made on its key and ordering columns
alone), so the old file and the merged one are never both in memory, as Hudi's handle streams
the old file through; only an old file repeating a key the write does not touch is read whole.

Constant meta fields (commit time, partition path, file name) are read back dictionary-encoded:
no copy of the value per row.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base_file import (BaseFileFooter, BaseFileWriter, KeptIndex, continued_bloom, footer_of,
                         unique_key_columns, with_file_name)
from ..bloom import BloomFilter
from ..chunks import one_array
from ..errors import CorruptFileError
from ..membership import is_in
from ..metadata.key_changes import KeyChanges
from ..read.align import align_table
from ..read.merge import IS_DELETED, live_rows, merge_pieces, record_keys, touched_plan
from ..read.parquet import BaseFileReader, dictionary_columns, open_base_file
from ..timeline.write_stat import WriteStat
from ..transaction.markers import create_marker
from ..view import FileSlice
from .handles import _CONSTANT_META, WriteContext, _base_name, _write_base, with_meta

__all__ = ["merge"]


def merge(ctx: WriteContext, fs: FileSlice, upserts: pa.Table, upsert_keys: pa.Array,
          deletes: pa.Table | None) -> WriteStat:
    """Rewrite the base file of ``fs`` (COW) with upserts and deletes applied."""
    task, token = ctx.next_token()
    name = _base_name(ctx, fs.file_id, token)
    new_keys = one_array(pc.cast(upsert_keys, pa.string()))
    no_deletes = deletes is None or not deletes.num_rows
    # the constant meta fields, and the string columns the old file stores as dictionary
    # indices only, stay dictionary-encoded: no string decoded per row, none hashed again
    encoded = _encoded_schema(ctx, _constant_meta(ctx), None)
    old = encoded.empty_table()
    footer = None
    if fs.base_file:
        where = ctx.storage.uri(fs.base_file)
        with open_base_file(ctx.storage, fs.base_file, fs.base_file_size) as reader:
            as_dict = _dictionary_columns(ctx, reader)
            encoded = _encoded_schema(ctx, as_dict, reader.pf.schema_arrow)
            footer = footer_of(reader.pf.metadata, fs.base_file_size or 0, where)
            if reader.pf.metadata.num_rows > _STREAM_ABOVE_ROWS:
                streamed = _merge_streamed(ctx, fs, reader, footer, as_dict, encoded, upserts, upsert_keys,
                                           new_keys, deletes, name, task)
                if streamed is not None:
                    return streamed
            with _reading(where):
                stored = reader.read_encoded(None, as_dict)
            old = align_table(stored, encoded, where)
    fresh = _fresh(ctx, upserts, upsert_keys, fs.partition_path, name, task, encoded)
    in_place = _merge_in_place(ctx, old, fresh, new_keys) if no_deletes else None
    removed = None
    if in_place is not None:
        merged, updates, inserted = in_place
        deleted = 0
    else:
        old, fresh = old.cast(ctx.schema), fresh.cast(ctx.schema)
        pieces, dels, delete_keys = _pieces(old, fresh, deletes)
        merged = merge_pieces(pieces, dels, ctx.schema, ctx.spec)
        from_fresh = None
        if ctx.meta_fields:
            from_fresh = pc.equal(merged.column("_hoodie_commit_time"), ctx.instant)
        updates, inserted, deleted, removed = _merge_counts(ctx, old, record_keys(merged, ctx.spec), from_fresh,
                                                            new_keys, delete_keys)
    if ctx.meta_fields:
        merged = with_file_name(merged, name)
    inserts = len(inserted)
    bloom, bloom_keys = ctx.bloom, None
    seeded = _continued_bloom(ctx, footer, old.num_rows, merged.num_rows, inserts, deleted)
    if seeded is not None:
        bloom, bloom_keys = seeded, inserted
    res = _write_base(ctx, fs.partition_path, name, merged, "MERGE", bloom, bloom_keys)
    if ctx.track_keys:
        ctx.keys = KeyChanges.of(inserted, removed)
    return WriteStat(file_id=fs.file_id, path=res.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=merged.num_rows, num_update_writes=updates,
                     num_inserts=inserts, num_deletes=deleted, total_write_bytes=res.file_size)


def _continued_bloom(ctx: WriteContext, stored: BaseFileFooter | None, n_old: int, n_merged: int,
                     n_inserted: int, n_deleted: int) -> BloomFilter | KeptIndex | None:
    """:func:`~hudi_format.base_file.continued_bloom` for this merge (none without meta fields)."""
    return continued_bloom(ctx.bloom, stored, n_old, n_merged, n_inserted, n_deleted) if ctx.keyed else None


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


def _probe_columns(ctx: WriteContext, names: Sequence[str]) -> list[str]:
    """The columns a streamed merge plans on: :func:`_compared_columns`, less the record key
    fields when the file stores every row's key in ``_hoodie_record_key`` (the merge takes the
    key from there: the key field would be a second copy of the same strings, held while the
    old file's rows are planned; ~20 MB per 1M rows)."""
    compared = _compared_columns(ctx)
    if not (ctx.spec.has_meta_fields and "_hoodie_record_key" in names):
        return compared
    ordering = set(ctx.spec.ordering_fields)
    return [c for c in compared if c not in ctx.spec.record_key_fields or c in ordering]


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


def _pieces(old: pa.Table, fresh: pa.Table, deletes: pa.Table | None) -> tuple[list, list, pa.Array | None]:
    """The reader's merge inputs for a base file's rows, this write's records and its deletes:
    ``(pieces, deletes by position, the deleted keys)``."""
    if deletes is None or not deletes.num_rows:
        return [old, fresh], [], None
    return [old, fresh, None], [(2, deletes)], pc.cast(deletes.column("record_key"), pa.string())


def _merge_streamed(ctx: WriteContext, fs: FileSlice, reader: BaseFileReader, footer: BaseFileFooter,
                    as_dict: list[str],
                    encoded: pa.Schema, upserts: pa.Table, upsert_keys: pa.Array, new_keys: pa.Array,
                    deletes: pa.Table | None, name: str, task: int) -> WriteStat | None:
    """The merge of the base file of ``fs`` (open in ``reader``; over :data:`_STREAM_ABOVE_ROWS`
    rows: a smaller one is merged whole, one read and one write, faster), streamed: the old
    file's key and ordering columns decide the plan, then its rows are read, merged and written
    a batch at a time, so that the old file and the merged one are never both in memory.
    In place (:func:`_in_place_plan`) when it can be; else the reader's merge
    (:func:`~hudi_format.read.merge.touched_plan`). ``None`` (nothing written) when only the
    whole old file can decide (it repeats a key this write does not touch)."""
    where = ctx.storage.uri(fs.base_file or "")
    names = reader.pf.schema_arrow.names
    probe_cols = [c for c in [*_probe_columns(ctx, names), IS_DELETED] if c in ctx.schema.names and c in names]
    with _reading(where):
        probe = reader.read(probe_cols)
    probe = align_table(probe, pa.schema([ctx.schema.field(c) for c in probe_cols]), where)
    fresh = _fresh(ctx, upserts, upsert_keys, fs.partition_path, name, task, encoded)
    n_old = reader.pf.metadata.num_rows
    in_place = _in_place_plan(ctx, probe, fresh, new_keys) if deletes is None or not deletes.num_rows else None
    if in_place is not None:
        upd_old, upd_new, ins_new = in_place
        bloom = _continued_bloom(ctx, footer, n_old, n_old + len(ins_new), len(ins_new), 0)
        inserted = new_keys.take(pa.array(ins_new))
        batches = _in_place_batches(reader, names, as_dict, encoded, where, fresh, upd_old, upd_new)
        tail = fresh.take(pa.array(ins_new))
        counts = (len(upd_new), inserted, 0, None)
    else:
        pieces, dels, delete_keys = _pieces(probe, fresh.cast(ctx.schema), deletes)
        plan = touched_plan(pieces, dels, ctx.schema, ctx.spec)
        if plan is None:
            return None
        keep, log_rows = plan
        kept_keys = record_keys(probe if keep is None else probe.filter(keep), ctx.spec)
        won_keys = new_keys.take(log_rows)
        merged_keys = pa.chunked_array([*_chunks(pc.cast(kept_keys, pa.string())), won_keys], pa.string())
        from_fresh = None
        if ctx.meta_fields:   # the kept rows are old, the winners this write's
            from_fresh = pa.array(np.arange(len(merged_keys)) >= len(merged_keys) - len(won_keys))
        counts = _merge_counts(ctx, probe, merged_keys, from_fresh, new_keys, delete_keys)
        inserted = counts[1]
        bloom = _continued_bloom(ctx, footer, n_old, len(merged_keys), len(inserted), counts[2])
        keep_np = None if keep is None else np.asarray(keep.to_numpy(zero_copy_only=False), bool)
        batches = _kept_batches(reader, names, as_dict, encoded, where, keep_np)
        tail = fresh.take(log_rows)
    del probe   # read again with the other columns, batch by batch: not held for the whole merge
    _release_freed_pages()   # the probe's hash tables and key columns, before the writing starts
    rel = posixpath.join(fs.partition_path, name) if fs.partition_path else name
    create_marker(ctx.storage, ctx.instant, rel, "MERGE")
    ctx.written.append(rel)
    writer = BaseFileWriter(ctx.storage, rel, ctx.avro_schema, keyed=ctx.keyed,
                            bloom=ctx.bloom if bloom is None else bloom,
                            plain=unique_key_columns(ctx.spec.record_key_fields),
                            **{**ctx.parquet, "block_size": min(ctx.parquet["block_size"], _MERGE_BUFFER_BYTES)})
    no_keys = pa.array([], pa.string())
    try:
        for rows in batches:
            _write_merged(ctx, writer, rows, name, None if bloom is None else no_keys)
            _release_freed_pages()
        _write_merged(ctx, writer, tail, name, None if bloom is None else inserted)
        res = writer.close()
        _release_freed_pages()   # before this thread's next merge probes its file
    except BaseException:
        writer.abort()
        raise
    updates, inserted, deleted, removed = counts
    if ctx.track_keys:
        ctx.keys = KeyChanges.of(inserted, removed)
    return WriteStat(file_id=fs.file_id, path=res.path, partition_path=fs.partition_path,
                     prev_commit=fs.base_instant, num_writes=res.num_rows, num_update_writes=updates,
                     num_inserts=len(inserted), num_deletes=deleted, total_write_bytes=res.file_size)


def _release_freed_pages() -> None:
    """Hand the pages Arrow's allocator holds free back to the system. mimalloc (pyarrow's
    default pool) keeps what each thread freed for that thread to reuse: over a streamed merge
    its RSS climbed 500 MB above the start while Arrow's live bytes stayed under 190 MB; once a
    batch is written this costs ~1.5 ms and bounds the merge nearer what it holds (5M-row 10%
    upsert: peak RSS 664-715 -> 549-643 MB in 9 runs, deltalake's merge 578-601 MB; time
    within run-to-run noise). Released too once the probe is done and once the file is closed:
    the peak is the probe of a thread's second file, on top of what its first one left (4
    interleaved runs: 572-611 -> 532-603 MB, deltalake 536-566 MB)."""
    pa.default_memory_pool().release_unused()


def _in_place_batches(reader: BaseFileReader, names: list[str], as_dict: list[str], encoded: pa.Schema,
                      where: str, fresh: pa.Table, upd_old: np.ndarray, upd_new: np.ndarray) -> Iterator[pa.Table]:
    """The old rows a batch at a time, each row this write replaces swapped for its record."""
    lo = 0
    for rows in _old_batches(reader, names, as_dict, where):
        hi = lo + rows.num_rows
        rows = align_table(rows, encoded, where)
        a, b = np.searchsorted(upd_old, [lo, hi])
        if b > a:   # the old rows this write replaces take the new records' places
            order = np.arange(rows.num_rows, dtype=np.int64)
            order[upd_old[a:b] - lo] = rows.num_rows + np.arange(b - a, dtype=np.int64)
            rows = pa.concat_tables([rows, fresh.take(pa.array(upd_new[a:b]))]).take(pa.array(order))
        yield rows
        lo = hi
    _check_rows_read(reader, lo, where)


def _kept_batches(reader: BaseFileReader, names: list[str], as_dict: list[str], encoded: pa.Schema,
                  where: str, keep: np.ndarray | None) -> Iterator[pa.Table]:
    """The old rows that stay (``keep``; None: all), a batch at a time, in file order."""
    lo = 0
    for rows in _old_batches(reader, names, as_dict, where):
        hi = lo + rows.num_rows
        rows = align_table(rows, encoded, where)
        yield rows if keep is None else rows.filter(pa.array(keep[lo:hi]))
        lo = hi
    _check_rows_read(reader, lo, where)


def _check_rows_read(reader: BaseFileReader, n: int, where: str) -> None:
    if n != reader.pf.metadata.num_rows:
        raise CorruptFileError(f"{where}: read {n} rows, its footer says {reader.pf.metadata.num_rows}")


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
    if IS_DELETED in ctx.schema.names or len(ordering) > 1 or new_keys.null_count:
        return None
    old_keys = one_array(pc.cast(record_keys(old, ctx.spec), pa.string()))
    if len(pc.unique(new_keys)) != len(new_keys):
        return None
    hit = is_in(old_keys, new_keys)                              # the few old rows in play
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


def _merge_counts(ctx: WriteContext, old: pa.Table, merged_keys: pa.Array | pa.ChunkedArray,
                  from_fresh: pa.Array | pa.ChunkedArray | None, new_keys: pa.Array,
                  delete_keys: pa.Array | None) -> tuple[int, pa.Array, int, pa.Array]:
    """(updates, inserted keys, deletes, removed keys) of a merge: merged rows this write's
    records won (of keys the old file held / did not hold), old rows whose key is gone, and
    those keys. ``old``: the old
    rows (their key columns and ``_hoodie_is_deleted`` suffice); ``merged_keys``: the merged
    rows' keys; ``from_fresh``: which merged rows carry this write's commit time (None: no meta
    fields, a row whose key the write names counts). Only this write's keys are hashed (the
    file's rows are probed against them), as only they can change a key."""
    old_keys = pc.cast(record_keys(old, ctx.spec), pa.string())
    merged_keys = pc.cast(merged_keys, pa.string())
    mentioned = new_keys if delete_keys is None else pa.chunked_array([new_keys, delete_keys], pa.string())
    mentioned = mentioned.combine_chunks() if isinstance(mentioned, pa.ChunkedArray) else mentioned
    in_merged = is_in(merged_keys, mentioned)
    old_mentioned = old_keys.filter(is_in(old_keys, mentioned))   # the few old rows in play
    wanted = is_in(merged_keys, new_keys)
    if from_fresh is not None:
        wanted = pc.and_(wanted, from_fresh)
    won = one_array(merged_keys.filter(wanted))
    is_update = pc.is_in(won, value_set=one_array(old_mentioned))
    updates = pc.sum(is_update).as_py() or 0
    inserted = won.filter(pc.invert(is_update))
    if live_rows(old) is not None:
        # rows flagged deleted in the old file drop out whether or not this write names them
        present = is_in(old_keys, one_array(merged_keys))
        return updates, inserted, old.num_rows - (pc.sum(present).as_py() or 0), old_keys.filter(pc.invert(present))
    still = one_array(merged_keys.filter(in_merged))
    stays = pc.is_in(old_mentioned, value_set=still)
    deleted = len(old_mentioned) - (pc.sum(stays).as_py() or 0)
    return updates, inserted, deleted, old_mentioned.filter(pc.invert(stays))


def _chunks(a: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return a.chunks if isinstance(a, pa.ChunkedArray) else [a]
