"""What a data commit wrote, read back for the metadata table: keys, column stats and bloom
filters of its files, and (to bootstrap an existing table) the whole committed snapshot."""

from __future__ import annotations

import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..log import BlockType, read_log_file
from ..view import FileSystemView
from ..view.file_names import parse_base_file_name, parse_log_file_name
from . import keys as K
from . import payloads as P
from ..options import option
from .key_changes import keys_by_last_block, winning_deletes
from .record_index import last_of_each
from .record_index_update import encoded_values
from .options import _META_COLUMNS_INDEXED, MetadataTableError


# -- reading what a data commit wrote ------------------------------------------------------------
def _stat_kind(t: pa.DataType) -> str | None:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or \
            pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return None


class DataFiles:
    """Reads what the metadata records describe: footers, record keys, column values."""

    def __init__(self, writer: Any):   # a writer.MetadataWriter (which imports this module)
        self.w = writer
        self.storage = writer.storage
        self.config = writer.config
        from ..read.merge import MergeSpec
        self.spec = MergeSpec.from_config(writer.config)
        self._columns: list[str] | None = None

    # -- which columns carry statistics
    def indexed_columns(self, schema: pa.Schema) -> list[tuple[str, str]]:
        listed = option(self.w.options, "hoodie.metadata.index.column.stats.column.list")
        if listed:
            wanted = [c.strip() for c in listed.split(",") if c.strip()]
        else:
            wanted = [c for c in _META_COLUMNS_INDEXED if c in schema.names]
            wanted += [f.name for f in schema if not f.name.startswith("_hoodie_")]
        out = []
        for name in wanted:
            if name not in schema.names:
                continue
            kind = _stat_kind(schema.field(name).type)
            if kind is not None:
                out.append((name, kind))
        if not listed:
            out = out[:option(self.w.options, "hoodie.metadata.index.column.stats.max.columns.to.index")]
        return out

    def _key_columns(self) -> list[str]:
        return ["_hoodie_record_key"] if self.spec.has_meta_fields else list(self.spec.record_key_fields)

    def _keys(self, table: pa.Table) -> pa.Array:
        from ..read.merge import record_keys
        if table.num_rows == 0:
            return pa.array([], pa.string())
        keys = record_keys(table, self.spec)
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        return pc.cast(keys, pa.string())

    def base_keys(self, path: str) -> pa.Array:
        from ..read.merge import read_base_file
        return self._keys(read_base_file(self.storage, path, self._key_columns()))

    def log_keys(self, path: str) -> tuple[pa.Array, pa.Array]:
        """``(upserted keys, deleted keys)`` of one log file, each key by its last block
        (:func:`.key_changes.keys_by_last_block`, deletes by :func:`.key_changes.winning_deletes`)."""
        blocks = []
        for block in read_log_file(self.storage, path):
            if block.is_corrupted:
                continue
            if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA):
                blocks.append((self._keys(block.records()), False))
            elif block.block_type == BlockType.DELETE:
                blocks.append((winning_deletes(block.deleted_keys(), self.spec), True))
        changes = keys_by_last_block(blocks)
        return changes.upserted, changes.removed

    # -- column statistics
    def base_file_stats(self, partition: str, path: str) -> list[dict]:
        from ..base_file import read_footer
        footer = read_footer(self.storage, path)
        md = footer.parquet_metadata
        cols = self.indexed_columns(footer.arrow_schema)
        if not cols:
            return []
        index = {md.schema.column(i).path: i for i in range(md.num_columns)}
        name = posixpath.basename(path)
        out = []
        for col, kind in cols:
            j = index.get(col)
            if j is None:
                continue
            lo = hi = None
            values = nulls = size = usize = 0
            for rg in range(md.num_row_groups):
                cc = md.row_group(rg).column(j)
                size += cc.total_compressed_size
                usize += cc.total_uncompressed_size
                st = cc.statistics
                values += cc.num_values
                if st is None:
                    continue
                nulls += st.null_count or 0
                if st.has_min_max:
                    a, b = (st.min_raw, st.max_raw) if kind == "timestamp" else (st.min, st.max)
                    if kind == "bytes":
                        a, b = bytes(a), bytes(b)
                    lo = a if lo is None or a < lo else lo
                    hi = b if hi is None or b > hi else hi
            out.append(P.column_stats_record(
                partition, name, col, min_value=P.wrap_stat_value(lo, kind),
                max_value=P.wrap_stat_value(hi, kind), value_count=values, null_count=nulls,
                total_size=size, total_uncompressed_size=usize))
        return out

    def table_stats(self, partition: str, file_name: str, table: pa.Table) -> list[dict]:
        """Statistics of rows held in a log file (no sizes: they are not columnar)."""
        out = []
        for col, kind in self.indexed_columns(table.schema):
            arr = table.column(col)
            nulls = arr.null_count
            lo = hi = None
            if len(arr) - nulls > 0:
                if kind == "timestamp":
                    arr = pc.cast(arr, pa.int64())
                elif kind == "date":
                    arr = arr
                mm = pc.min_max(arr)
                lo, hi = mm["min"].as_py(), mm["max"].as_py()
            out.append(P.column_stats_record(
                partition, file_name, col, min_value=P.wrap_stat_value(lo, kind),
                max_value=P.wrap_stat_value(hi, kind), value_count=len(arr), null_count=nulls))
        return out

    def log_file_stats(self, partition: str, path: str) -> list[dict]:
        pieces = []
        for block in read_log_file(self.storage, path):
            if not block.is_corrupted and block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                pieces.append(block.records())
        if not pieces:
            return []
        try:
            table = pa.concat_tables(pieces, promote_options="permissive")
        except (pa.ArrowInvalid, TypeError):
            table = pieces[-1]
        return self.table_stats(partition, posixpath.basename(path), table)

    def bloom_record(self, partition: str, path: str, instant: str) -> dict | None:
        from ..base_file import BLOOM_TYPE_CODE_KEY, read_footer
        footer = read_footer(self.storage, path)
        if footer.bloom_filter is None:
            return None
        code = footer.metadata.get(BLOOM_TYPE_CODE_KEY) or footer.bloom_filter.type_code
        return P.bloom_filter_record(partition, posixpath.basename(path), instant, code,
                                     footer.bloom_filter.serialize())


# -- bootstrapping ---------------------------------------------------------------------------------
class DataSnapshot:
    """The committed data table now, as the records each metadata partition starts from."""

    def __init__(self, writer: Any):   # a writer.MetadataWriter (which imports this module)
        from ..read.snapshot import ReadState
        self.w = writer
        self.timeline = writer.data_timeline()
        self.state = ReadState(writer.config, self.timeline)
        self.view = FileSystemView(writer.storage, writer.config)
        self.files = DataFiles(writer)
        self._listing: dict[str, dict[str, int]] | None = None

    def listing(self) -> dict[str, dict[str, int]]:
        """Committed data files per partition (name -> size), as ``DirectoryInfo`` lists them."""
        if self._listing is None:
            out: dict[str, dict[str, int]] = {}
            ext = self.w.config.base_file_extension
            for partition, infos in self.view.listing.items():
                names = {}
                for f in infos:
                    if f.name.startswith(".hoodie_partition_metadata"):
                        continue
                    if f.name.startswith("."):
                        lf = parse_log_file_name(f.name)
                        if lf is None or not self.state.visible(lf.instant_time):
                            continue
                    else:
                        bf = parse_base_file_name(f.name)
                        if bf is None or bf.extension != ext or not self.state.visible(bf.instant_time):
                            continue
                    names[f.name] = f.size
                out[partition] = names
            self._listing = out
        return self._listing

    def records_for(self, partition: str) -> dict[str, bytes]:
        listing = self.listing()
        ext = self.w.config.base_file_extension
        if partition == K.FILES:
            recs = [P.partition_list_record(listing)]
            recs += [P.files_record(p, files) for p, files in listing.items()]
            return {r["key"]: P.encode_value(r) for r in recs}
        if partition == K.COLUMN_STATS:
            recs = []
            for p, files in listing.items():
                for name in files:
                    path = posixpath.join(p, name) if p else name
                    recs += self.files.base_file_stats(p, path) if name.endswith(ext) else \
                        self.files.log_file_stats(p, path)
            return {r["key"]: P.encode_value(r) for r in recs}
        if partition == K.BLOOM_FILTERS:
            out = {}
            for p, files in listing.items():
                for name in files:
                    if not name.endswith(ext):
                        continue
                    bf = parse_base_file_name(name)
                    rec = self.files.bloom_record(p, posixpath.join(p, name) if p else name, bf.instant_time)
                    if rec is not None:
                        out[rec["key"]] = P.encode_value(rec)
            return out
        raise MetadataTableError(f"cannot bootstrap metadata partition {partition!r}")

    def record_index_cells(self) -> tuple[pa.Array, pa.Array]:
        """Every live key of the data table (string) and its record index value (binary),
        column-wise: a value is encoded once per file group, then taken for its keys."""
        from ..read.table_schema import latest_data_schema
        from ..read.merge import existing_keys
        slices = self.state.file_slices(self.view)
        if not slices:
            return pa.array([], pa.string()), pa.array([], pa.binary())
        schema = latest_data_schema(self.w.config, self.timeline)
        full = pa.schema([pa.field("_hoodie_record_key", pa.string())] + list(schema)) \
            if schema is not None and "_hoodie_record_key" not in schema.names else schema
        known = existing_keys(self.w.storage, slices, self.files.spec, full, self.state.visible)
        keys = known.column("key").combine_chunks().cast(pa.string())
        if pc.count_distinct(keys).as_py() != len(keys):   # a key in two file groups: the last one
            known = known.take(last_of_each(keys))
            keys = known.column("key").combine_chunks().cast(pa.string())
        by_slice = {(s.partition_path, s.file_id): s.base_instant for s in slices}
        tz = self.w.config.timeline_timezone
        return keys, encoded_values(known, lambda part, fid: P.instant_millis(by_slice[(part, fid)], tz))
