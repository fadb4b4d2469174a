"""Merge a file slice: base file records overlaid with the log records on top of it.

All of a slice's rows (base rows, then log rows in log order, then delete markers) are stacked
with a sequence number, sorted by (record key, ordering value, sequence), and the last row per
key wins; winners that are delete markers are dropped. That one vectorised pass gives Hudi's
semantics for both merge modes: with commit-time ordering the latest write wins, with
event-time ordering the highest ordering value wins and a tie goes to the later write.
"""

from __future__ import annotations

import logging
from typing import Callable

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import TableConfig
from ..errors import CorruptFileError, StorageError
from ..log import BlockType, CommandType, read_log_file
from ..storage import Storage
from ..view import FileSlice
from .align import align_table

log = logging.getLogger(__name__)

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

    @classmethod
    def from_config(cls, config: TableConfig) -> "MergeSpec":
        return cls(tuple(config.record_key_fields), tuple(config.ordering_fields),
                   config.merge_mode == "EVENT_TIME_ORDERING", config.populate_meta_fields)

    def needed_columns(self) -> list[str]:
        cols = list(self.ordering_fields) if self.event_time else []
        if self.has_meta_fields:
            cols.append("_hoodie_record_key")
        else:
            cols.extend(self.record_key_fields)
        return cols


def record_keys(table: pa.Table, spec: MergeSpec) -> pa.ChunkedArray:
    """The record key of each row, as Hudi's key generators format it."""
    if spec.has_meta_fields and "_hoodie_record_key" in table.column_names:
        return table.column("_hoodie_record_key")
    fields = spec.record_key_fields
    if len(fields) == 1:
        return pc.cast(table.column(fields[0]), pa.string())
    parts = []
    for i, f in enumerate(fields):
        val = pc.fill_null(pc.cast(table.column(f), pa.string()), "__null__")
        parts.extend([pa.scalar(("," if i else "") + f + ":"), val])
    return pc.binary_join_element_wise(*parts, "")


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    try:
        with storage.open(path) as f:
            pf = pq.ParquetFile(f)
            available = set(pf.schema_arrow.names)
            cols = None if columns is None else [c for c in columns if c in available]
            return pf.read(columns=cols)
    except StorageError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptFileError(f"cannot read base file {storage.uri(path)}: {exc}") from exc


def collect_log_blocks(storage: Storage, log_files: tuple[str, ...],
                       visible: Callable[[str], bool]) -> list:
    """Data and delete blocks of committed instants, in log order, minus rolled-back ones."""
    blocks = []
    for path in log_files:
        for block in read_log_file(storage, path):
            bt = block.block_type
            if bt == BlockType.CORRUPTED:
                log.warning("skipping corrupt log block in %s at offset %s", path, block.offset)
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
                     visible: Callable[[str], bool]) -> pa.Table:
    """Read ``file_slice`` as of the instants ``visible`` accepts, in ``schema``."""
    read_cols = schema.names
    pieces: list[pa.Table] = []
    if file_slice.base_file:
        base = read_base_file(storage, file_slice.base_file, read_cols)
        pieces.append(align_table(base, schema, storage.uri(file_slice.base_file)))
    blocks = collect_log_blocks(storage, file_slice.log_files, visible) if file_slice.log_files else []
    if not blocks:
        return pieces[0] if pieces else schema.empty_table()

    deletes: list[tuple[int, pa.Table]] = []
    for block in blocks:
        if block.block_type == BlockType.DELETE:
            deletes.append((len(pieces), block.deleted_keys()))
            pieces.append(None)  # placeholder keeps the sequence position of the delete
        else:
            recs = block.records(arrow_schema=schema)
            pieces.append(align_table(recs, schema, f"{storage.uri(block.path)}@{block.offset}"))
    return _merge_pieces(pieces, deletes, schema, spec)


def _delete_rows(deleted: pa.Table, schema: pa.Schema, spec: MergeSpec) -> tuple[pa.Table, pa.Array]:
    """Delete markers shaped like data rows: key (+ ordering value), everything else null."""
    n = deleted.num_rows
    cols = {}
    keys = deleted.column("record_key")
    for field in schema:
        if field.name == "_hoodie_record_key":
            cols[field.name] = pc.cast(keys, field.type)
        elif spec.event_time and field.name == (spec.ordering_fields[0] if spec.ordering_fields else None):
            ov = deleted.column("ordering_value")
            try:
                cols[field.name] = pc.cast(ov, field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                cols[field.name] = pa.nulls(n, field.type)
        else:
            cols[field.name] = pa.nulls(n, field.type)
    table = pa.table(cols, schema=schema)
    return table, pc.cast(keys, pa.string())


def _merge_pieces(pieces: list, deletes: list[tuple[int, pa.Table]], schema: pa.Schema,
                  spec: MergeSpec) -> pa.Table:
    delete_at = dict(deletes)
    tables, keys, seqs, dels = [], [], [], []
    for seq, piece in enumerate(pieces):
        if piece is None:
            piece, key = _delete_rows(delete_at[seq], schema, spec)
            is_del = True
        else:
            key = pc.cast(record_keys(piece, spec), pa.string())
            is_del = False
        n = piece.num_rows
        if n == 0:
            continue
        tables.append(piece)
        keys.append(key)
        seqs.append(pa.repeat(pa.scalar(seq, pa.int32()), n))
        dels.append(pa.repeat(pa.scalar(is_del), n))
    if not tables:
        return schema.empty_table()
    data = pa.concat_tables(tables)
    key_col = pa.chunked_array([c for k in keys for c in _chunks(k)], pa.string())
    aux = pa.table({_KEY: key_col, _SEQ: pa.chunked_array(seqs), _DEL: pa.chunked_array(dels),
                    "__row": pa.array(range(data.num_rows), pa.int64())})
    sort_keys = [(_KEY, "ascending")]
    if spec.event_time:
        for i, f in enumerate(spec.ordering_fields):
            if f in data.column_names:
                aux = aux.append_column(f"__ord{i}", data.column(f))
                sort_keys.append((f"__ord{i}", "ascending"))
    sort_keys += [(_SEQ, "ascending"), ("__row", "ascending")]
    order = pc.sort_indices(aux, sort_keys=sort_keys, null_placement="at_start")
    sorted_keys = pc.take(aux.column(_KEY), order).combine_chunks()
    n = len(sorted_keys)
    if n > 1:
        last = pc.not_equal(sorted_keys.slice(0, n - 1), sorted_keys.slice(1))
        last = pa.concat_arrays([last, pa.array([True])])
    else:
        last = pa.array([True] * n)
    winners = pc.filter(order, last)
    winners = pc.filter(winners, pc.invert(pc.take(aux.column(_DEL), winners)))
    # Back to storage order: base rows first, as a plain scan of the slice would list them.
    winners = pc.take(winners, pc.sort_indices(winners))
    return data.take(winners)


def _chunks(arr) -> list:
    return arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
