"""Parquet base files as Hudi writes them, and their footers read without touching the data.

Readers of a Hudi table (Spark, Flink, Presto/Trino, hudi-rs) only need valid Parquet, but
Hudi's own write path also reads the footer: its bloom index prunes files with the bloom filter
and the min/max record keys stored there. So we write the same key-value metadata that
``HoodieAvroWriteSupport`` (parquet-avro) leaves in the footer:

    parquet.avro.schema            the file's Avro schema (JSON)
    writer.model.name              avro
    org.apache.hudi.bloomfilter    the bloom filter over the record keys (see :mod:`.bloom`)
    hoodie_bloom_filter_type_code  only for DYNAMIC_* filters (absent means SIMPLE)
    hoodie_min_record_key          smallest / largest record key in Java ``String`` order;
    hoodie_max_record_key          written only when the file holds at least one key

Column types follow what parquet-avro makes of the Avro schema where a reader can tell:
``timestamp-micros`` is INT64 TIMESTAMP(MICROS, UTC-adjusted), ``local-timestamp-*`` is not
UTC-adjusted, ``date`` is INT32 DATE, decimals are FIXED_LEN_BYTE_ARRAY DECIMAL of the minimal
width, non-union Avro fields are REQUIRED. What pyarrow cannot reproduce, and readers (Spark,
parquet-avro, arrow-rs) do not depend on: lists use the standard 3-level LIST layout (Hudi's
parquet-avro writes the legacy 2-level ``repeated group array``), and the root group is named
``schema`` rather than after the Avro record. No ``ARROW:schema`` key is stored, as in Hudi's.

Defaults are Hudi's: ``hoodie.parquet.compression.codec`` is gzip in every Hudi release that
writes table versions 6-9 (0.14 - 1.1; the fixtures are all GZIP); row groups are cut at
``hoodie.parquet.block.size`` (120 MiB) and pages at ``hoodie.parquet.page.size`` (1 MiB).
"""

from __future__ import annotations

import functools
import json
import posixpath
import struct
from collections.abc import Mapping
from typing import Any, Sequence

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import parquet_codec
from .bloom import SIMPLE, BloomFilter, holds_as_is, new_bloom_filter, resume
from .errors import CorruptFileError, HudiError, InvalidOptionError, SchemaError, StorageError
from .options import default, option
from .schema import avro_to_arrow_schema, parse_avro_schema
from .storage import Storage

__all__ = ["write_base_file", "BaseFileWriter", "BaseFileWriteResult", "read_footer", "read_parquet_bytes",
           "BaseFileFooter", "bloom_filter_from_options", "continued_bloom", "footer_bloom", "parquet_format", "parquet_options_from_hoodie",
           "BLOOM_FILTER_KEY", "BLOOM_TYPE_CODE_KEY", "MIN_RECORD_KEY", "MAX_RECORD_KEY",
           "AVRO_SCHEMA_KEY", "DEFAULT_COMPRESSION", "DEFAULT_BLOCK_SIZE", "DEFAULT_PAGE_SIZE",
           "constant_column", "with_file_name"]

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
OLD_BLOOM_FILTER_KEY = "com.uber.hoodie.bloomfilter"
BLOOM_TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"
AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"

DEFAULT_COMPRESSION: str = default("hoodie.parquet.compression.codec")
DEFAULT_BLOCK_SIZE: int = default("hoodie.parquet.block.size")
DEFAULT_PAGE_SIZE: int = default("hoodie.parquet.page.size")
_TAIL_GUESS = 1 << 20   # one ranged read usually covers a footer with a 2-row DYNAMIC filter


# -- options ----------------------------------------------------------------------------------
def bloom_filter_from_options(options: Mapping[str, Any] | None = None) -> BloomFilter:
    """An empty filter sized by Hudi's bloom options; other keys in ``options`` are ignored.

    Reads ``hoodie.index.bloom.num_entries``, ``hoodie.index.bloom.fpp``,
    ``hoodie.bloom.index.filter.type`` and ``hoodie.bloom.index.filter.dynamic.max.entries``.
    """
    return new_bloom_filter(option(options, "hoodie.index.bloom.num_entries"),
                            option(options, "hoodie.index.bloom.fpp"),
                            option(options, "hoodie.bloom.index.filter.type"),
                            option(options, "hoodie.bloom.index.filter.dynamic.max.entries"))


_BLOOM_OPTIONS = ("hoodie.index.bloom.", "hoodie.bloom.")


def footer_bloom(options: Mapping[str, Any] | None) -> dict | None:
    """Hudi's bloom options in ``options`` (for :func:`bloom_filter_from_options`), or ``None``
    when base files written with them carry no record-key bloom filter (nor min/max keys):
    ``hoodie.parquet.bloom.filter.enabled`` off and an index type that is not a bloom index
    (one reads them), as Hudi's ``HoodieFileWriterFactory.enableBloomFilter`` decides. Tables
    without meta fields never carry them (the caller's part)."""
    opts = options or {}
    if not option(opts, "hoodie.parquet.bloom.filter.enabled") \
            and "BLOOM" not in str(option(opts, "hoodie.index.type")).upper():
        return None
    return {k: v for k, v in opts.items() if str(k).startswith(_BLOOM_OPTIONS)}


_PARQUET_OPTIONS = (("hoodie.parquet.compression.codec", "compression"), ("hoodie.parquet.block.size", "block_size"),
                    ("hoodie.parquet.page.size", "page_size"), ("hoodie.parquet.dictionary.enabled", "dictionary"))


def parquet_options_from_hoodie(options: Mapping[str, Any] | None = None) -> dict:
    """Keyword arguments of :func:`write_base_file` from the ``hoodie.parquet.*`` options given."""
    opts = options or {}
    return {name: option(opts, key) for key, name in _PARQUET_OPTIONS if opts.get(key) is not None}


def parquet_format(options: Mapping[str, Any] | None = None) -> dict:
    """The Parquet settings of a table write (codec, row group and page size, dictionary), from
    Hudi's options with Hudi's defaults: keyword arguments of :func:`write_base_file`, so that
    every writer of base files (writes, compaction, clustering) honours the same options."""
    opts = options or {}
    return {name: option(opts, key) for key, name in _PARQUET_OPTIONS}


# -- record keys ------------------------------------------------------------------------------
def _java_min_max(keys: pa.Array) -> tuple[str | None, str | None]:
    """Min and max in Java ``String.compareTo`` order (UTF-16 code units), as Hudi's Avro
    write support compares keys. Arrow orders UTF-8 bytes (code points), which agrees unless a
    key holds a character outside the BMP, so only then we compare in Python."""
    if len(keys) == 0:
        return None, None
    if not pc.all(pc.string_is_ascii(keys)).as_py() and \
            pc.any(pc.match_substring_regex(keys, "[\\x{10000}-\\x{10FFFF}]")).as_py():
        values = keys.to_pylist()

        def order(s: str) -> bytes:
            return s.encode("utf-16-be", "surrogatepass")

        return min(values, key=order), max(values, key=order)
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def _dictionary_of(actual: pa.DataType, wanted: pa.DataType) -> bool:
    return pa.types.is_dictionary(actual) and actual.value_type == wanted


def _key_array(record_keys, table: pa.Table, where: str) -> pa.Array:
    if isinstance(record_keys, str):
        if record_keys not in table.column_names:
            raise SchemaError(f"{where}: record key column {record_keys!r} is not in the data")
        record_keys = table.column(record_keys)
    if isinstance(record_keys, pa.ChunkedArray):
        record_keys = record_keys.chunk(0) if record_keys.num_chunks == 1 else record_keys.combine_chunks()
    if not isinstance(record_keys, pa.Array):
        record_keys = pa.array(list(record_keys), pa.string())
    if len(record_keys) != table.num_rows:
        raise HudiError(f"{where}: {len(record_keys)} record keys for {table.num_rows} rows")
    if not (pa.types.is_string(record_keys.type) or pa.types.is_large_string(record_keys.type)):
        try:
            record_keys = record_keys.cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise HudiError(f"{where}: record keys must be strings, got {record_keys.type}") from exc
    if record_keys.null_count:
        raise HudiError(f"{where}: {record_keys.null_count} record keys are null")
    return record_keys


# -- writing ----------------------------------------------------------------------------------
# Meta columns unique in every row of a file (one record per key in a file group, a sequence
# number per record): a dictionary can only grow until the writer falls back to plain
# encoding, so they are written plain from the start (smaller files, less work).
_UNIQUE_COLUMNS = ("_hoodie_commit_seqno", "_hoodie_record_key")


@functools.lru_cache(maxsize=64)
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """Parquet leaf column paths of ``schema`` (``a.b``, ``l.list.element``), as the writer's
    per-column options name them."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    md = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    return tuple(md.schema.column(i).path for i in range(md.num_columns))


_STRING_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def constant_column(value: str, n: int) -> pa.DictionaryArray:
    """``n`` times ``value`` as a one-entry dictionary array, for a meta column holding one value
    in a whole file (its name, partition, instant): the writer stores its dictionary as it is,
    with no copy of the value per row nor a hash of each row to rebuild the dictionary."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def with_file_name(table: pa.Table, name: str) -> pa.Table:
    """``table`` with ``_hoodie_file_name`` set to ``name`` on every row (a one-entry
    dictionary): the meta field a rewritten file's rows all share."""
    idx = table.schema.get_field_index("_hoodie_file_name")
    return table.set_column(idx, table.schema.field(idx).with_type(_STRING_DICTIONARY),
                            constant_column(name, table.num_rows))


def unique_key_columns(record_key_fields: Sequence[str]) -> tuple[str, ...]:
    """The data columns a table's records hold unique values in: its record-key field when
    there is one (of a complex key, one field alone may repeat)."""
    return tuple(record_key_fields) if len(record_key_fields) == 1 else ()


def _dictionary_columns(schema: pa.Schema, dictionary: bool, plain: Sequence[str] = ()) -> bool | list[str]:
    """``use_dictionary`` of the Parquet writer: every column but the unique meta columns and
    ``plain`` (a single record-key field: unique too). A dictionary of unique values only
    overflows and falls back to plain, after the work of building it (~10% of encoding)."""
    unique = set(_UNIQUE_COLUMNS) | set(plain)
    if not dictionary or not any(n in schema.names for n in unique):
        return dictionary
    return [p for p in _leaf_paths(schema) if p.split(".", 1)[0] not in unique]


@attrs.frozen
class BaseFileWriteResult:
    """What the commit metadata needs about a written base file."""

    path: str                  # relative to the table, as given
    file_size: int
    num_rows: int
    min_key: str | None        # None when no keys were indexed (or the file is empty)
    max_key: str | None


class BaseFileWriter:
    """Streams record batches into one Parquet base file with Hudi's footer.

    ``keyed=False`` writes no bloom filter and no min/max keys, as Hudi does for tables without
    meta fields (``hoodie.populate.meta.fields=false``). With ``keyed=True`` every :meth:`write`
    must pass the batch's record keys. ``bloom`` is a dict of Hudi's bloom options (see
    :func:`bloom_filter_from_options`), a ready, usually empty, :class:`BloomFilter`, or a
    :class:`KeptIndex` written as it is (its keys are the old file's: none are hashed).

    Batches are buffered up to ``block_size`` bytes (Arrow size) so that row groups come out as
    large as Hudi's; the file is written straight to its final name, as Hudi does (markers and
    rollback, not renames, deal with failed writes). On error the partial file is removed.
    """

    def __init__(self, storage: Storage, rel_path: str, avro_schema: dict | str, *,
                 keyed: bool = True, bloom: Mapping[str, Any] | BloomFilter | KeptIndex | None = None,
                 compression: str = DEFAULT_COMPRESSION, compression_level: int | None = None,
                 block_size: int = DEFAULT_BLOCK_SIZE, page_size: int = DEFAULT_PAGE_SIZE,
                 dictionary: bool = True, extra_metadata: Mapping[str, str] | None = None,
                 plain: Sequence[str] = ()):
        self.storage, self.rel_path = storage, rel_path
        self._plain = tuple(plain)
        self._where = storage.uri(rel_path)
        parsed = parse_avro_schema(avro_schema)
        self._avro_text = avro_schema if isinstance(avro_schema, str) else json.dumps(parsed, separators=(",", ":"))
        self.schema = avro_to_arrow_schema(parsed)
        self._kept = bloom if keyed and isinstance(bloom, KeptIndex) else None
        if keyed and self._kept is None:
            self.bloom = bloom if isinstance(bloom, BloomFilter) else bloom_filter_from_options(bloom)
        else:
            self.bloom = None
        if block_size <= 0 or page_size <= 0:
            raise InvalidOptionError(f"hoodie.parquet.block.size/page.size must be > 0, got {block_size}/{page_size}")
        # without a level, the one Hudi's writer compresses with (gzip 6, zstd 3: not pyarrow's)
        self._codec = parquet_codec.arrow_codec(compression)
        self._level = compression_level if compression_level is not None else parquet_codec.level(self._codec)
        self._block_size, self._page_size, self._dictionary = block_size, page_size, dictionary
        self._extra = dict(extra_metadata or {})
        self._batch_schema: pa.Schema | None = None   # self.schema, or with dictionary-encoded columns
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._min = self._kept.min_key if self._kept is not None else None
        self._max = self._kept.max_key if self._kept is not None else None
        self.num_rows = 0
        self._file = None
        self._writer: pq.ParquetWriter | None = None
        self._closed = False

    # ---------------------------------------------------------------------------------------
    def _open(self, schema: pa.Schema) -> None:
        full = self.storage.full(self.rel_path)
        try:
            if not self.storage.is_object_store:   # no folders there (makedirs costs a HEAD)
                self.storage.fs.makedirs(posixpath.dirname(full), exist_ok=True)
            self._file = self.storage.open(self.rel_path, "wb")
        except OSError as exc:
            raise StorageError(f"cannot create {self._where}: {exc}") from exc
        self._writer = pq.ParquetWriter(
            self._file, schema, compression=self._codec,
            compression_level=self._level, use_dictionary=_dictionary_columns(schema, self._dictionary, self._plain),
            data_page_size=self._page_size, store_schema=False, version="2.6",
            write_statistics=True)

    def _conform(self, data) -> pa.Table:
        table = data if isinstance(data, pa.Table) else pa.table(data)
        names = [f.name for f in self.schema]
        missing = [n for n in names if n not in table.column_names]
        extra = [n for n in table.column_names if n not in names]
        if missing or extra:
            raise SchemaError(f"{self._where}: data does not match the Avro schema "
                              f"(missing columns {missing}, unexpected columns {extra})")
        table = table.select(names)
        for f in self.schema:
            if not f.nullable and table.column(f.name).null_count:
                raise SchemaError(f"{self._where}: column {f.name!r} is required by the Avro "
                                  f"schema but has {table.column(f.name).null_count} nulls")
        # the first data written fixes the Arrow types (a dictionary-encoded column of the
        # field's type is kept as is: Parquet writes its dictionary without hashing the values)
        target = self._batch_schema or pa.schema([
            f.with_type(table.schema.field(f.name).type)
            if _dictionary_of(table.schema.field(f.name).type, f.type) else f for f in self.schema])
        if table.schema.remove_metadata() == target:
            return table
        try:
            return table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SchemaError(f"{self._where}: data cannot be written with the Avro schema: {exc}") from exc

    def write(self, data, record_keys=None, bloom_keys=None) -> None:
        """Append rows (a Table, RecordBatch or anything ``pyarrow.table()`` takes).

        ``record_keys``: the rows' record keys (string array, or the name of a column).
        ``bloom_keys``: the keys to add to the bloom filter instead, when the filter given to
        the writer already holds the others (a merge continuing the old file's filter).
        """
        if self._closed:
            raise HudiError(f"{self._where}: writer is closed")
        table = self._conform(data)
        if self._batch_schema is None:
            self._batch_schema = table.schema.remove_metadata()
        if self.bloom is not None:
            if record_keys is None:
                raise HudiError(f"{self._where}: record keys are needed for the bloom filter "
                                "(or create the writer with keyed=False)")
            keys = _key_array(record_keys, table, self._where)
            try:
                self.bloom.add_all(keys if bloom_keys is None else bloom_keys)
            except ValueError as exc:
                raise HudiError(f"{self._where}: {exc}") from exc
            lo, hi = _java_min_max(keys)
            if lo is not None:
                self._min = lo if self._min is None or _jless(lo, self._min) else self._min
                self._max = hi if self._max is None or _jless(self._max, hi) else self._max
        self.num_rows += table.num_rows
        for batch in table.to_batches():
            self._pending.append(batch)
            self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self._block_size:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        schema = self._batch_schema or self.schema
        if self._writer is None:
            self._open(schema)
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=schema)
        if any(pa.types.is_dictionary(f.type) for f in schema):
            # one dictionary per column for the row group: batches merged from several sources
            # carry their own, and Parquet writes a dictionary column directly only while it
            # does not change (else it decodes the rows and hashes them into its own)
            table = table.unify_dictionaries()
        rows_per_group = max(1, int(table.num_rows * self._block_size / max(1, table.nbytes)))
        if not final:   # write whole row groups only; keep the remainder for the next one
            full = (table.num_rows // rows_per_group) * rows_per_group
            head, rest = table.slice(0, full), table.slice(full)
        else:
            head, rest = table, table.slice(table.num_rows)
        if head.num_rows:
            self._writer.write_table(head, row_group_size=rows_per_group)
        self._pending = rest.to_batches()
        self._pending_bytes = rest.nbytes if rest.num_rows else 0

    @property
    def buffered_bytes(self) -> int:
        """Arrow bytes of rows written but not yet flushed as a row group."""
        return self._pending_bytes

    def flush(self) -> None:
        """Write the buffered rows out now, as a smaller row group than ``block_size`` (a
        caller holding many open writers keeps their buffers within a memory budget)."""
        if self._closed:
            raise HudiError(f"{self._where}: writer is closed")
        self._flush(final=True)

    def footer_metadata(self) -> dict[str, str]:
        """The key-value pairs added to the footer on close."""
        meta = dict(self._extra)
        meta[AVRO_SCHEMA_KEY] = self._avro_text
        meta[WRITER_MODEL_KEY] = "avro"
        if self._kept is not None:
            meta.update(self._kept.footer())
        elif self.bloom is not None:
            meta[BLOOM_FILTER_KEY] = self.bloom.serialize()
            if self.bloom.type_code.startswith("DYNAMIC"):
                meta[BLOOM_TYPE_CODE_KEY] = self.bloom.type_code
            if self._min is not None:
                meta[MIN_RECORD_KEY] = self._min
                meta[MAX_RECORD_KEY] = self._max
        return meta

    def close(self) -> BaseFileWriteResult:
        """Finish the file (footer included) and return its size and key range."""
        if self._closed:
            raise HudiError(f"{self._where}: writer is already closed")
        try:
            self._flush(final=True)
            self._writer.add_key_value_metadata(self.footer_metadata())
            self._writer.close()
            size = self._file.tell()
            self._file.close()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return BaseFileWriteResult(self.rel_path, int(size), self.num_rows, self._min, self._max)

    def abort(self) -> None:
        """Give up: close what is open and remove the partial file."""
        self._closed = True
        for closer in (self._writer, self._file):
            try:
                if closer is not None:
                    closer.close()
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
        if self._file is not None:
            try:
                self.storage.delete(self.rel_path)
            except Exception:  # noqa: BLE001
                pass

    def __enter__(self) -> "BaseFileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()


def _jless(a: str, b: str) -> bool:
    """``a < b`` in Java String order (only differs from Python's outside the BMP)."""
    return a.encode("utf-16-be", "surrogatepass") < b.encode("utf-16-be", "surrogatepass")


def write_base_file(storage: Storage, rel_path: str, table, avro_schema: dict | str,
                    record_keys=None, bloom: Mapping[str, Any] | BloomFilter | KeptIndex | None = None, *,
                    compression: str = DEFAULT_COMPRESSION, compression_level: int | None = None,
                    block_size: int = DEFAULT_BLOCK_SIZE, page_size: int = DEFAULT_PAGE_SIZE,
                    dictionary: bool = True,
                    extra_metadata: Mapping[str, str] | None = None, bloom_keys=None,
                    plain: Sequence[str] = ()) -> BaseFileWriteResult:
    """Write ``table`` as one Parquet base file at ``rel_path`` with Hudi's footer.

    ``table``: anything ``pyarrow.table()`` takes, or a ``RecordBatchReader`` (streamed when
    ``record_keys`` is a column name or None). ``record_keys`` (string array, or a column name) feed the bloom filter and min/max keys;
    ``None`` writes neither, as Hudi does without meta fields. ``bloom``: Hudi's bloom options
    (dict) or a :class:`BloomFilter` to fill; ``None`` means Hudi's defaults. ``bloom_keys``:
    see :meth:`BaseFileWriter.write` (not with a streamed reader). ``plain``: columns of unique
    values (a single record-key field), written without a dictionary.
    """
    writer = BaseFileWriter(storage, rel_path, avro_schema, keyed=record_keys is not None,
                            bloom=bloom, compression=compression,
                            compression_level=compression_level, block_size=block_size,
                            page_size=page_size, dictionary=dictionary,
                            extra_metadata=extra_metadata, plain=plain)
    try:
        if isinstance(table, pa.RecordBatchReader) and not isinstance(record_keys, pa.Array | pa.ChunkedArray):
            for batch in table:       # streamed: keys, if any, come from a column of each batch
                writer.write(batch, record_keys)
        else:
            if isinstance(table, pa.RecordBatchReader):
                table = table.read_all()
            writer.write(table, record_keys, bloom_keys)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


# -- footer -----------------------------------------------------------------------------------
def read_parquet_bytes(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """Read a Parquet file held in memory, synchronously, from Arrow-owned memory.

    Not ``pq.read_table(io.BytesIO(data))``: that scans through a dataset whose asynchronous
    reader (pre-buffered ranges holding the Python bytes) can be released by an Arrow worker
    thread after the call returned; when that happens while the interpreter shuts down, the
    worker's ``PyGILState_Ensure`` ends the thread with ``pthread_exit`` and the C++ runtime
    aborts the process ("terminate called without an active exception"). Here the bytes are
    copied into an Arrow buffer (no Python object behind any Arrow reference) and read by
    ``ParquetFile.read``, which finishes and drops its work before it returns.
    """
    sink = pa.BufferOutputStream()
    sink.write(data)
    return pq.ParquetFile(pa.BufferReader(sink.getvalue())).read(columns=columns)


@attrs.frozen
class BaseFileFooter:
    """A base file's footer: Hudi's index metadata plus the Parquet schema and row count."""

    bloom_text: str | None             # the bloom filter as stored (Base64), decoded on use
    bloom_type_code: str | None        # hoodie_bloom_filter_type_code (absent: SIMPLE)
    min_key: str | None
    max_key: str | None
    avro_schema: dict | None           # parquet.avro.schema (None for Spark row-writer files)
    num_rows: int
    arrow_schema: pa.Schema
    metadata: dict[str, str]           # every footer key-value pair, decoded
    file_size: int
    parquet_metadata: pq.FileMetaData = attrs.field(eq=False, repr=False)
    where: str = attrs.field(default="", eq=False, repr=False)

    @functools.cached_property
    def bloom_filter(self) -> BloomFilter | None:
        """The decoded filter (on first use: a merge that keeps it whole copies its text)."""
        if not self.bloom_text:
            return None
        try:
            return BloomFilter.deserialize(self.bloom_text, self.bloom_type_code or SIMPLE)
        except HudiError as exc:
            raise CorruptFileError(f"{self.where}: {exc}") from exc


@attrs.frozen
class KeptIndex:
    """A base file's bloom filter (as stored) and min/max keys, for the file replacing it to
    write again as they are: a merge keeping every key and adding none (``bloom.holds_as_is``)."""

    bloom_text: str
    type_code: str | None   # the footer's hoodie_bloom_filter_type_code, when it had one
    min_key: str
    max_key: str

    def footer(self) -> dict[str, str]:
        meta = {BLOOM_FILTER_KEY: self.bloom_text, MIN_RECORD_KEY: self.min_key, MAX_RECORD_KEY: self.max_key}
        if self.type_code is not None:
            meta[BLOOM_TYPE_CODE_KEY] = self.type_code
        return meta


def continued_bloom(bloom: Mapping[str, Any] | None, stored: BaseFileFooter | None, n_old: int, n_merged: int,
                    n_inserted: int, n_deleted: int) -> BloomFilter | KeptIndex | None:
    """The old base file's bloom filter (footer ``stored``) for the file replacing it (a merge, a
    compaction; ``bloom``: its options) when its ``n_old`` rows stay and ``n_inserted`` join: only
    those are hashed (Hudi's merge handle adds the old keys first); with none, the filter and the
    min/max keys are copied as they are (:class:`KeptIndex`). ``None``: build a new filter."""
    if stored is None or n_deleted or n_merged != n_old + n_inserted or stored.bloom_text is None \
            or stored.num_rows != n_old:
        return None
    fresh = bloom_filter_from_options(bloom)   # holds_as_is, like resume, leaves it used up
    if not n_inserted and stored.min_key is not None and stored.max_key is not None \
            and (stored.bloom_type_code or SIMPLE) == fresh.type_code \
            and holds_as_is(stored.bloom_text, fresh, stored.num_rows):
        return KeptIndex(stored.bloom_text, stored.bloom_type_code, stored.min_key, stored.max_key)
    return resume(stored.bloom_filter, bloom_filter_from_options(bloom), stored.num_rows)


def read_footer(storage: Storage, rel_path: str, size: int | None = None) -> BaseFileFooter:
    """Read only the footer of a Parquet base file (one or two ranged reads). ``size``: the
    file's size as listed (spares asking for it; a small file on an object store is then read
    whole, once, for every later reader of it)."""
    where = storage.uri(rel_path)
    whole = storage.read_immutable(rel_path, size) if size else None
    if whole is not None:
        size = len(whole)
    elif not size:
        size = storage.size(rel_path)
    if size < 12:
        raise CorruptFileError(f"{where}: {size} bytes is too short for a Parquet file")
    tail_len = min(size, _TAIL_GUESS)
    tail = whole if whole is not None else storage.read_range(rel_path, size - tail_len, tail_len)
    if tail[-4:] != b"PAR1":
        raise CorruptFileError(f"{where}: no Parquet magic at the end (truncated or not Parquet)")
    meta_len = struct.unpack("<I", tail[-8:-4])[0]
    if meta_len + 12 > size:
        raise CorruptFileError(f"{where}: footer length {meta_len} exceeds the file size {size}")
    if meta_len + 8 > len(tail):
        tail = storage.read_range(rel_path, size - meta_len - 8, meta_len + 8)
    footer = tail[len(tail) - meta_len - 8:]
    try:
        md = pq.read_metadata(pa.BufferReader(b"PAR1" + footer))
    except (pa.ArrowException, OSError, ValueError) as exc:   # ValueError: a column name not UTF-8
        raise CorruptFileError(f"{where}: unreadable Parquet footer: {exc}") from exc
    return footer_of(md, size, where)


def footer_of(md: pq.FileMetaData, size: int, where: str) -> BaseFileFooter:
    """The :class:`BaseFileFooter` of parsed Parquet metadata (an open reader's: no second
    read of the footer). ``where`` names the file in errors."""
    try:
        arrow_schema = md.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # a garbled column name
        raise CorruptFileError(f"{where}: unreadable Parquet footer: {exc}") from exc
    kv = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
          for k, v in (md.metadata or {}).items()}
    arrow_schema = arrow_schema.remove_metadata()
    text = kv.get(BLOOM_FILTER_KEY) or kv.get(OLD_BLOOM_FILTER_KEY)
    avro = None
    if AVRO_SCHEMA_KEY in kv:
        try:
            avro = json.loads(kv[AVRO_SCHEMA_KEY])
        except ValueError as exc:
            raise CorruptFileError(f"{where}: invalid {AVRO_SCHEMA_KEY}: {exc}") from exc
    return BaseFileFooter(text or None, kv.get(BLOOM_TYPE_CODE_KEY), kv.get(MIN_RECORD_KEY), kv.get(MAX_RECORD_KEY),
                          avro, md.num_rows, arrow_schema, kv, size, md, where)
