"""Merge a file slice: base file records overlaid with the log records on top of it.

All of a slice's rows (base rows, then log rows in log order, then delete markers) are stacked
with a sequence number, sorted by (record key, ordering value, sequence), and the last row per
key wins; winners that are delete markers are dropped. That one vectorised pass gives Hudi's
semantics for both merge modes: with commit-time ordering the latest write wins, with
event-time ordering the highest ordering value wins and a tie goes to the later write.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array
from ..config import TableConfig
from ..keygen import KeyGenerator
from ..log import BlockType, CommandType, data_records, read_log_file
from ..membership import rows_in
from ..storage import Storage
from ..view import FileSlice
from .align import align_table
from .parquet import decode_dictionaries, dictionary_schema, read_base_file

log = logging.getLogger(__name__)

#: Hudi's soft-delete field: a record carrying it true deletes its key
IS_DELETED = "_hoodie_is_deleted"

_SEQ = "__hudi_seq"
_DEL = "__hudi_is_delete"
_KEY = "__hudi_key"


@attrs.frozen
class MergeSpec:
    """How records of one table are keyed and ordered when merged."""

    record_key_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    event_time: bool
    has_meta_fields: bool
    keygen: KeyGenerator | None = attrs.field(default=None, eq=False)

    @classmethod
    def from_config(cls, config: TableConfig) -> "MergeSpec":
        return cls(tuple(config.record_key_fields), tuple(config.ordering_fields),
                   config.merge_mode == "EVENT_TIME_ORDERING", config.populate_meta_fields,
                   KeyGenerator.from_config(config))

    def needed_columns(self) -> list[str]:
        cols = list(self.ordering_fields) if self.event_time else []
        if self.has_meta_fields:
            cols.append("_hoodie_record_key")
        else:
            cols.extend(self.record_key_fields)
        return cols


def _merge_columns(spec: MergeSpec) -> list[str]:
    """The columns a merge reads values of (the rest it only carries)."""
    return spec.needed_columns() + list(spec.record_key_fields) + list(spec.ordering_fields) + [IS_DELETED]


def record_keys(table: pa.Table, spec: MergeSpec) -> pa.ChunkedArray:
    """The record key of each row: stored in the meta field, or recomputed by the key generator."""
    if spec.has_meta_fields and "_hoodie_record_key" in table.column_names:
        return table.column("_hoodie_record_key")
    keygen = spec.keygen or KeyGenerator(spec.record_key_fields, ())
    return keygen.record_keys(table)


def _skip_corrupt(path: str, block: Any) -> None:
    log.warning("skipping corrupt log block in %s at offset %s", path, block.offset)


def collect_log_blocks(storage: Storage, log_files: Iterable[str], visible: Callable[[str], bool],
                       on_corrupt: Callable[[str, Any], None] = _skip_corrupt) -> list:
    """Data and delete blocks of committed instants, in log order, minus rolled-back ones.

    ``on_corrupt(path, block)`` decides about a corrupt block: a data slice skips it (Hudi's
    reader does), a metadata-table slice raises (a skipped block would leave stale entries)."""
    blocks = []
    for path in log_files:
        for block in read_log_file(storage, path):
            bt = block.block_type
            if bt == BlockType.CORRUPTED:
                on_corrupt(path, block)
                continue
            if bt == BlockType.COMMAND:
                if block.command_type == CommandType.ROLLBACK_BLOCK:
                    target = block.target_instant_time
                    blocks = [b for b in blocks if b.instant_time != target]
                continue
            if bt == BlockType.CDC:
                continue
            if block.instant_time is None or not visible(block.instant_time):
                continue
            blocks.append(block)
    return blocks


def merge_file_slice(storage: Storage, file_slice: FileSlice, schema: pa.Schema, spec: MergeSpec,
                     visible: Callable[[str], bool], *, use_threads: bool = True) -> pa.Table:
    """Read ``file_slice`` as of the instants ``visible`` accepts, in ``schema``
    (``use_threads``: decode the base file's columns on Arrow's thread pool)."""
    read_cols = schema.names
    pieces: list[pa.Table] = []
    if file_slice.base_file:
        # The columns the merge does not look at stay dictionaries until the merge has dropped
        # the base rows it drops (see read.parquet): fewer rows to decode, cheaper filters.
        base = read_base_file(storage, file_slice.base_file, read_cols, file_slice.base_file_size,
                              decode=False, use_threads=use_threads)
        base = decode_dictionaries(base, schema, [c for c in _merge_columns(spec) if c in read_cols])
        base = decode_dictionaries(base, dictionary_schema(base, schema))   # any a cast would change
        pieces.append(align_table(base, dictionary_schema(base, schema), storage.uri(file_slice.base_file)))
    blocks = collect_log_blocks(storage, file_slice.log_files, visible) if file_slice.log_files else []
    if not blocks:
        return decode_dictionaries(pieces[0], schema) if pieces else schema.empty_table()

    deletes: list[tuple[int, pa.Table]] = []
    if not pieces:
        pieces.append(schema.empty_table())  # sequence 0 is the base file's, present or not
    for block, recs in zip(blocks, data_records(blocks, arrow_schema=schema)):
        if block.block_type == BlockType.DELETE:
            deletes.append((len(pieces), block.deleted_keys()))
            pieces.append(None)  # placeholder keeps the sequence position of the delete
        else:
            pieces.append(align_table(recs, schema, f"{storage.uri(block.path)}@{block.offset}"))
    return merge_pieces(pieces, deletes, schema, spec)


_HARD = "__hudi_hard_delete"
_ROW = "__hudi_row"


def is_default_ordering(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Deletes without a real ordering value win by commit time: null, or Hudi's default, the
    ``IntWrapper`` 0 (an int32 here). A ``LongWrapper`` 0 is a real ordering value, as Hudi's
    ``Integer.equals`` and hudi-rs take it (a soft delete of a record ordered by a long)."""
    mask = pc.is_null(values)
    if values.type == pa.int32():
        mask = pc.or_(mask, pc.fill_null(pc.equal(values, 0), False))
    return mask


def _delete_aux(deleted: pa.Table, seq: int, schema: pa.Schema, spec: MergeSpec) -> dict:
    n = deleted.num_rows
    ov = deleted.column("ordering_value")
    cols = {_KEY: pc.cast(deleted.column("record_key"), pa.string()),
            _SEQ: pa.repeat(pa.scalar(seq, pa.int32()), n),
            _DEL: pa.repeat(pa.scalar(True), n),
            _HARD: is_default_ordering(ov),
            _ROW: pa.repeat(pa.scalar(-1, pa.int64()), n)}
    for i, f in enumerate(spec.ordering_fields if spec.event_time else ()):
        typ = schema.field(f).type if schema.get_field_index(f) >= 0 else ov.type
        if i == 0:
            try:
                cols[f"__ord{i}"] = pc.cast(ov, typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                cols[f"__ord{i}"] = pa.nulls(n, typ)
        else:
            cols[f"__ord{i}"] = pa.nulls(n, typ)
    return cols


def _data_aux(piece: pa.Table, seq: int, first_row: int, spec: MergeSpec) -> dict:
    n = piece.num_rows
    if IS_DELETED in piece.column_names:
        is_del = pc.fill_null(piece.column(IS_DELETED), False)
    else:
        is_del = pa.repeat(pa.scalar(False), n)
    cols = {_KEY: pc.cast(record_keys(piece, spec), pa.string()),
            _SEQ: pa.repeat(pa.scalar(seq, pa.int32()), n),
            _DEL: is_del,
            _HARD: pa.repeat(pa.scalar(False), n),
            _ROW: row_numbers(n, first_row)}
    for i, f in enumerate(spec.ordering_fields if spec.event_time else ()):
        cols[f"__ord{i}"] = piece.column(f)
    return cols


_PA_MAJOR = int(pa.__version__.split(".")[0])


def row_numbers(n: int, start: int = 0) -> pa.Array:
    """``start, start+1, ...`` (``n`` of them) as int64, from a NumPy range (zero-copy):
    ``pa.array(range(n))`` converts one Python int at a time (~0.25 µs a row)."""
    return pa.array(np.arange(start, start + n, dtype=np.int64))


def _ordering_columns(aux: pa.Table) -> list[str]:
    return [c for c in aux.column_names if c.startswith("__ord")]


def apply_hard_deletes(aux: pa.Table) -> pa.Table:
    """A delete without an ordering value removes every earlier write of its key and then loses
    to any later one: drop the rows that precede the key's last such delete, and sort that
    delete below what follows it."""
    if not pc.any(aux.column(_HARD)).as_py():
        return aux
    last_hard = aux.filter(aux.column(_HARD)).group_by(_KEY).aggregate([(_SEQ, "max")])
    aux = aux.join(last_hard, _KEY, join_type="left outer")
    cutoff = aux.column(f"{_SEQ}_max")
    aux = aux.filter(pc.or_kleene(pc.is_null(cutoff), pc.greater_equal(aux.column(_SEQ), cutoff)))
    for c in _ordering_columns(aux):
        col = aux.column(c)
        aux = aux.set_column(aux.schema.get_field_index(c), c,
                             pc.if_else(aux.column(_HARD), pa.scalar(None, col.type), col))
    return aux.drop_columns([f"{_SEQ}_max"])


def last_per_key(aux: pa.Table) -> pa.Table:
    """The winning row of each key: highest ordering value, then latest sequence and row."""
    sort_keys = [(_KEY, "ascending")] + [(c, "ascending") for c in _ordering_columns(aux)]
    sort_keys += [(_SEQ, "ascending"), (_ROW, "ascending")]
    aux = aux.take(_sort_indices_nulls_first(aux, sort_keys))
    keys = aux.column(_KEY).combine_chunks()
    n = len(keys)
    last = pc.not_equal(keys.slice(0, n - 1), keys.slice(1)) if n > 1 else pa.array([], pa.bool_())
    return aux.filter(pa.concat_arrays([last, pa.array([True])]))


def _sort_indices_nulls_first(table: pa.Table, sort_keys: list[tuple[str, str]]) -> pa.Array:
    # pyarrow 25 moved null placement into each sort key; older releases take it once.
    if _PA_MAJOR >= 25:
        return pc.sort_indices(table, sort_keys=[(k, o, "at_start") for k, o in sort_keys])
    return pc.sort_indices(table, sort_keys=sort_keys, null_placement="at_start")


def merge_pieces(pieces: list, deletes: list[tuple[int, pa.Table]], schema: pa.Schema,
                 spec: MergeSpec) -> pa.Table:
    """Merge ``pieces`` (tables in write order; ``None`` where ``deletes`` puts a delete block;
    the first, the base file's, may hold dictionaries of ``schema``'s types for the columns the
    merge only carries: they are decoded after the merge dropped what it drops).

    Only keys written again after the first piece (the base file) can change: base rows of the
    other keys are kept as they are (a hash lookup, no sort) when those keys are unique, and the
    sort-based merge runs on the touched keys alone. The result is the full merge's, row order
    included: base rows first, in file order, then the winning log rows in log order."""
    delete_at = dict(deletes)
    spec = attrs.evolve(spec, ordering_fields=tuple(
        f for f in spec.ordering_fields if schema.get_field_index(f) >= 0))
    base = pieces[0] if pieces else None
    if base is not None and base.num_rows:
        split = _merge_touched(base, pieces, delete_at, schema, spec)
        if split is not None:
            return split
    if base is not None:   # the data pieces are stacked: one type per column
        pieces = [decode_dictionaries(base, schema)] + pieces[1:]
    return _merge_all(pieces, delete_at, schema, spec)


def live_rows(rows: pa.Table) -> pa.Array | None:
    """Which of ``rows`` are not flagged ``_hoodie_is_deleted`` (None: none is flagged). A
    flagged record deletes its key where the key is stored and is never a row of the merge
    (writers skip it, or write it to a delete block)."""
    if IS_DELETED not in rows.column_names:
        return None
    flags = pc.fill_null(rows.column(IS_DELETED), False)
    if not pc.any(flags).as_py():
        return None
    return pc.invert(one_array(flags))


def _merge_touched(base: pa.Table, pieces: list, delete_at: dict, schema: pa.Schema,
                   spec: MergeSpec) -> pa.Table | None:
    """The merge, with the base rows of keys no later piece mentions passed through; None when
    those rows repeat a key (the full merge then keeps one of them)."""
    plan = _touched_plan(base, pieces, delete_at, schema, spec)
    if plan is None:
        return None
    keep, log_rows = plan
    out = [decode_dictionaries(base if keep is None else base.filter(keep), schema)]
    logs = [p for p in pieces[1:] if p is not None and p.num_rows]
    if logs and len(log_rows):
        out.append(pa.concat_tables(logs).take(log_rows))
    return pa.concat_tables(out) if len(out) > 1 else out[0]


def touched_plan(pieces: list, deletes: list[tuple[int, pa.Table]], schema: pa.Schema,
                 spec: MergeSpec) -> tuple[pa.Array | None, pa.Array] | None:
    """What :func:`merge_pieces` of a base file's rows (``pieces[0]``, not empty) and later
    pieces keeps, without building it: see :func:`_touched_plan`."""
    spec = attrs.evolve(spec, ordering_fields=tuple(
        f for f in spec.ordering_fields if schema.get_field_index(f) >= 0))
    return _touched_plan(pieces[0], pieces, dict(deletes), schema, spec)


def _touched_plan(base: pa.Table, pieces: list, delete_at: dict, schema: pa.Schema,
                  spec: MergeSpec) -> tuple[pa.Array | None, pa.Array] | None:
    """What :func:`merge_pieces` keeps, without building it: ``(which base rows stay, in file
    order -- None: all; the later pieces' winning rows, numbered over those data pieces stacked,
    in log order)``; the merge is the kept base rows, then those. ``base`` needs only the
    columns the merge compares (keys, ordering, ``_hoodie_is_deleted``): a streamed merge plans
    on them and reads the other columns batch by batch. None when the base rows no later piece
    mentions repeat a key (only the full merge decides which of them stays)."""
    later_keys = []
    for seq in range(1, len(pieces)):
        piece = pieces[seq]
        if piece is None:
            later_keys.append(pc.cast(delete_at[seq].column("record_key"), pa.string()))
        elif piece.num_rows:
            later_keys.append(pc.cast(record_keys(piece, spec), pa.string()))
    base_keys = pc.cast(record_keys(base, spec), pa.string())
    if later_keys:
        touched, unique = _touched(later_keys, base_keys)
        untouched = pc.invert(touched)
    else:
        touched, untouched = None, None
        unique = len(pc.unique(base_keys)) == len(base_keys)
    if not unique:
        return None
    live = live_rows(base)
    keep = untouched if live is None else (live if untouched is None else pc.and_(untouched, live))
    no_logs = pa.array([], pa.int64())
    if touched is None:
        return (None if keep is None or pc.all(keep).as_py() else one_array(keep)), no_logs

    # The touched base rows become the first piece of an ordinary merge.
    touched_rows = base.filter(touched)
    n_t = touched_rows.num_rows
    merged_rows = _winner_rows([touched_rows] + pieces[1:], delete_at, schema, spec)
    is_base = pc.less(merged_rows, pa.scalar(n_t, pa.int64()))
    base_won = rows_in(n_t, merged_rows.filter(is_base))
    keep = pc.replace_with_mask(one_array(keep), one_array(touched), base_won)   # scatter into touched rows
    log_rows = pc.subtract(merged_rows.filter(pc.invert(is_base)), pa.scalar(n_t, pa.int64()))
    return keep, log_rows


def _touched(later_keys: list, base_keys: pa.ChunkedArray | pa.Array) -> tuple[pa.ChunkedArray, bool]:
    """(which base rows have a key that a later piece writes, are the other base keys unique).

    One hash pass over the later keys and then the base keys: codes are handed out in order of
    first sight, so a base key is touched iff its code is below the later keys' count of
    distinct codes, and the untouched base keys are unique iff each brought a code of its own.
    (Probing with the later keys and sorting the untouched ones instead was faster only on base
    keys stored in order: 250k keys in random order, 115-130 against 38-73 ms.) Empty pieces (a
    delete block without keys) are left out: the encoded chunks would not line up with them.
    """
    # chunks, not ChunkedArrays: pa.chunked_array converts those through Python objects
    later = [c for k in later_keys for c in _chunks(k) if len(c)]
    base = [c for c in _chunks(base_keys) if len(c)]
    if not base:
        return pa.chunked_array([], pa.bool_()), True
    encoded = pc.dictionary_encode(pa.chunked_array(later + base, pa.string()), null_encoding="encode")
    codes = [c.indices for c in encoded.chunks]
    tops = [pc.max(c).as_py() for c in codes]
    n_later = max((m + 1 for m in tops[:len(later)] if m is not None), default=0)
    n_distinct = max((m + 1 for m in tops if m is not None), default=0)
    touched = pc.less(pa.chunked_array(codes[len(later):], pa.int32()), pa.scalar(n_later, pa.int32()))
    n_untouched = len(base_keys) - (pc.sum(touched).as_py() or 0)
    return touched, n_distinct - n_later == n_untouched


def _chunks(a: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return a.chunks if isinstance(a, pa.ChunkedArray) else [a]


def _winner_rows(pieces: list, delete_at: dict, schema: pa.Schema, spec: MergeSpec) -> pa.Array:
    """Row numbers (over the data pieces stacked in order) of each key's live winner, ascending."""
    auxes, rows = [], 0
    for seq, piece in enumerate(pieces):
        if piece is None:
            if delete_at[seq].num_rows:
                auxes.append(pa.table(_delete_aux(delete_at[seq], seq, schema, spec)))
        elif piece.num_rows:
            auxes.append(pa.table(_data_aux(piece, seq, rows, spec)))
            rows += piece.num_rows
    if not rows:
        return pa.array([], pa.int64())
    aux = pa.concat_tables(auxes, promote_options="permissive")
    aux = apply_hard_deletes(aux)
    winners = last_per_key(aux)
    rows_col = winners.filter(pc.invert(winners.column(_DEL))).column(_ROW).combine_chunks()
    return pc.take(rows_col, pc.sort_indices(rows_col))


def _merge_all(pieces: list, delete_at: dict, schema: pa.Schema, spec: MergeSpec) -> pa.Table:
    datas = [p for p in pieces if p is not None and p.num_rows]
    if not datas:
        return schema.empty_table()
    # Back to storage order: base rows first, as a plain scan of the slice would list them.
    return pa.concat_tables(datas).take(_winner_rows(pieces, delete_at, schema, spec))


def live_keys(storage: Storage, slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema,
              visible: Callable[[str], bool]) -> list[pa.Array]:
    """The record keys (strings) of the live records of each of ``slices``, in order; reads
    only the key (and merge) columns."""
    key_schema = pa.schema([f for f in schema if f.name in set(spec.needed_columns())])
    out = []
    for s in slices:
        rows = merge_file_slice(storage, s, key_schema, spec, visible)
        keys = pc.cast(record_keys(rows, spec), pa.string()) if rows.num_rows else pa.array([], pa.string())
        out.append(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)
    return out


def existing_keys(storage: Storage, slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema,
                  visible: Callable[[str], bool]) -> pa.Table:
    """``(key, partition, file_id)`` of every live record in ``slices``: what an index without
    stored locations (simple, bloom) joins incoming keys with, and what the metadata table's
    record index is bootstrapped from. Reads only the key (and merge) columns; partition and
    file id are filled in by one take at the end (a write's tagging narrows to its own keys
    first: ``writer.index.matching_keys``)."""
    keys_of = live_keys(storage, slices, spec, schema, visible)
    if not any(len(k) for k in keys_of):
        return pa.table({"key": pa.array([], pa.string()), "partition": pa.array([], pa.string()),
                         "file_id": pa.array([], pa.string())})
    which = pa.chunked_array([pa.repeat(pa.scalar(i, pa.int32()), len(k)) for i, k in enumerate(keys_of)],
                             pa.int32())
    partitions = pa.array([s.partition_path for s in slices], pa.string())
    file_ids = pa.array([s.file_id for s in slices], pa.string())
    return pa.table({"key": pa.chunked_array(keys_of, pa.string()), "partition": pc.take(partitions, which),
                     "file_id": pc.take(file_ids, which)})
