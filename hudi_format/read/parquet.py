"""Base files into Arrow at Arrow's own speed.

Two costs dominated a snapshot read, and neither is Parquet's:

- a file opened through fsspec is a Python file object: every read Arrow makes of it takes the
  GIL, so files meant to be decoded on two threads were decoded one after the other. A local
  file is opened natively (``Storage.open_input``);
- Arrow decodes a dictionary-encoded string column by appending one value at a time, while a
  dictionary read followed by a decode is one vectorised ``take``: for the low-cardinality
  strings every Hudi file holds (commit time, partition path, file name, and often user
  columns) that halves their decoding. Only chunks whose data pages are all dictionary indices
  take that road: a chunk that fell back to plain pages would be hashed value by value.

What a reader returns is the plain read's result, schema included.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptFileError, StorageError
from ..storage import Storage

# A dictionary-only data page spends at most a few bytes on each value (its RLE/bit-packed
# index); a page that fell back to plain encoding spends 4 bytes on the length alone.
_MAX_DICT_BYTES_PER_VALUE = 4
_STRINGS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
_T = TypeVar("_T", pa.Table, pa.RecordBatch)
_WIDE_MIN_BYTES = 1 << 20
_BINARY_TYPE = "binary_type" in inspect.signature(pq.ParquetFile).parameters   # pyarrow >= 18


def dictionary_columns(pf: pq.ParquetFile, columns: list[str]) -> list[str]:
    """The top-level string/binary ``columns`` that every row group of ``pf`` holds as
    dictionary indices only (judged from the footer: bytes per value of each column chunk)."""
    schema = pf.schema_arrow
    wanted = [c for c in columns if schema.get_field_index(c) >= 0
              and any(test(schema.field(c).type) for test in _STRINGS)]
    md = pf.metadata
    if not wanted or not md.num_row_groups:
        return []
    leaf = {md.schema.column(i).path: i for i in range(md.num_columns)}
    groups = [md.row_group(r) for r in range(md.num_row_groups)]
    out = []
    for name in wanted:
        i = leaf.get(name)
        if i is not None and all(_dictionary_only(rg.column(i)) for rg in groups):
            out.append(name)
    return out


def wide_columns(pf: pq.ParquetFile, columns: list[str]) -> list[str]:
    """The top-level string/binary ``columns`` of ``pf``, when this pyarrow can read them with
    64-bit offsets (``binary_type``). Arrow decodes a string column into a 64-bit-offset array
    faster than into a 32-bit one (whose builder watches for the 2 GiB limit value by value);
    turning the offsets back to 32 bits afterwards is one pass over them, the bytes are kept."""
    if not _BINARY_TYPE:
        return []
    schema = pf.schema_arrow
    wide = [c for c in columns if schema.get_field_index(c) >= 0
            and (pa.types.is_string(schema.field(c).type) or pa.types.is_binary(schema.field(c).type))]
    md = pf.metadata
    leaf = {md.schema.column(i).path: i for i in range(md.num_columns)}
    size = sum(md.row_group(r).column(leaf[c]).total_uncompressed_size
               for r in range(md.num_row_groups) for c in wide if c in leaf)
    return wide if size >= _WIDE_MIN_BYTES else []   # a small file is not worth a second read


def _dictionary_only(chunk: Any) -> bool:
    return bool(chunk.has_dictionary_page) and \
        chunk.total_uncompressed_size <= _MAX_DICT_BYTES_PER_VALUE * max(chunk.num_values, 1)


def decode_dictionaries(data: _T, schema: pa.Schema, columns: list[str] | None = None) -> _T:
    """``data`` with its dictionary ``columns`` (``None``: every dictionary column that
    ``schema`` does not type as one) decoded to their type in ``schema``."""
    if columns is None:
        columns = [f.name for f in data.schema if pa.types.is_dictionary(f.type)
                   and schema.get_field_index(f.name) >= 0 and not pa.types.is_dictionary(schema.field(f.name).type)]
    for name in columns:
        i = data.schema.get_field_index(name)
        if i < 0 or not pa.types.is_dictionary(data.schema.field(i).type):
            continue
        field = schema.field(name)
        col = data.column(i)
        if isinstance(col, pa.ChunkedArray):
            decoded: Any = pa.chunked_array([c.dictionary_decode() for c in col.chunks], col.type.value_type)
        else:
            decoded = col.dictionary_decode()
        if not decoded.type.equals(field.type):
            decoded = decoded.cast(field.type)
        data = data.set_column(i, field, decoded)
    return data


class BaseFileReader:
    """One open base file: its footer (``pf``) and the reads described above. Reading errors
    are the caller's to translate (see :func:`read_base_file`)."""

    def __init__(self, source: pa.NativeFile):
        self.source = source
        self.pf = pq.ParquetFile(source)

    def __enter__(self) -> "BaseFileReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.source.close()

    def present(self, columns: list[str] | None) -> list[str] | None:
        """``columns`` the file has (``None``: all of them)."""
        if columns is None:
            return None
        available = set(self.pf.schema_arrow.names)
        return [c for c in columns if c in available]

    def _dictionary_file(self, columns: list[str] | None) -> tuple[pq.ParquetFile, list[str]]:
        cols = self.pf.schema_arrow.names if columns is None else columns
        dict_cols = dictionary_columns(self.pf, cols)
        if not dict_cols:
            return self.pf, []
        return self._reopen(read_dictionary=dict_cols), dict_cols

    def read(self, columns: list[str] | None = None, use_threads: bool = True, decode: bool = True) -> pa.Table:
        """The file's ``columns`` (all that it has when ``None``); ``use_threads``: decode its
        columns on Arrow's thread pool; ``decode=False`` leaves the dictionary-only string
        columns as dictionaries (a caller that drops rows first decodes fewer of them)."""
        cols = self.present(columns)
        names = self.pf.schema_arrow.names if cols is None else cols
        dict_cols = dictionary_columns(self.pf, names)
        wide = [c for c in wide_columns(self.pf, names) if c not in dict_cols] if len(set(names)) == len(names) else []
        if not wide:
            pf = self.pf if not dict_cols else self._reopen(read_dictionary=dict_cols)
            table = pf.read(columns=cols, use_threads=use_threads)
            return decode_dictionaries(table, self.pf.schema_arrow, dict_cols) if decode else table
        # two reads of disjoint columns: the other strings with 64-bit offsets, the rest as above
        rest = [c for c in names if c not in wide]
        pf = self.pf if not dict_cols else self._reopen(read_dictionary=dict_cols)
        parts = pf.read(columns=rest, use_threads=use_threads) if rest else None
        wides = self._reopen(binary_type=pa.large_binary()).read(columns=wide, use_threads=use_threads)
        schema = self.pf.schema_arrow
        arrays, fields = [], []
        for name in names:
            field = schema.field(name)
            if name in wide:
                col = wides.column(name)
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowCapacityError, pa.ArrowNotImplementedError):  # over 2 GiB
                    col = self.pf.read(columns=[name], use_threads=use_threads).column(0)
            else:
                col = parts.column(name)   # type: ignore[union-attr]
                if name in dict_cols and pa.types.is_dictionary(col.type):
                    if decode:
                        col = decode_dictionaries(pa.table([col], names=[name]), schema, [name]).column(0)
                    else:
                        field = field.with_type(col.type)
            arrays.append(col)
            fields.append(field)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schema.metadata))

    def read_encoded(self, columns: list[str] | None, dictionary: list[str],
                     use_threads: bool = True) -> pa.Table:
        """``columns`` with those of ``dictionary`` read as Arrow dictionaries, as stored: for a
        writer that copies them back unchanged (no value decoded per row)."""
        names = set(self.pf.schema_arrow.names)
        return self._reopen(read_dictionary=[c for c in dictionary if c in names]).read(
            columns=self.present(columns), use_threads=use_threads)

    def iter_encoded(self, columns: list[str] | None, dictionary: list[str],
                     batch_size: int) -> Iterator[pa.Table]:
        """:meth:`read_encoded` in tables of ``batch_size`` rows (one, read whole, when the
        file holds no more)."""
        if self.pf.metadata.num_rows <= batch_size:
            yield self.read_encoded(columns, dictionary)
            return
        names = set(self.pf.schema_arrow.names)
        pf = self._reopen(read_dictionary=[c for c in dictionary if c in names])
        for batch in pf.iter_batches(batch_size=batch_size, columns=self.present(columns)):
            yield pa.Table.from_batches([batch])

    def _reopen(self, **options: Any) -> pq.ParquetFile:
        # the same source and the footer already parsed: only the read options differ
        return pq.ParquetFile(self.source, metadata=self.pf.metadata, **options)

    def iter_batches(self, batch_size: int, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        cols = self.present(columns)
        pf, dict_cols = self._dictionary_file(cols)
        for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
            yield decode_dictionaries(batch, self.pf.schema_arrow, dict_cols)


def open_base_file(storage: Storage, path: str, size: int | None = None) -> BaseFileReader:
    """Open a base file (close it, or use it in ``with``): through ``Storage.open_input``, or,
    for a small one on an object store, read whole, once, and shared with its other readers
    (``size``: as listed, which spares asking for it). Raises ``StorageError`` when the file is
    missing, ``CorruptFileError`` when its footer is unreadable."""
    try:
        whole = storage.read_immutable(path, size) if size else None
        if whole is not None:
            sink = pa.BufferOutputStream()   # Arrow-owned memory (see base_file.read_parquet_bytes)
            sink.write(whole)
            source: pa.NativeFile = pa.BufferReader(sink.getvalue())
        else:
            source = storage.open_input(path, size)
    except FileNotFoundError as exc:
        raise StorageError(f"file not found: {storage.uri(path)}") from exc
    except OSError as exc:   # a folder, an unreadable file
        raise CorruptFileError(f"cannot read base file {storage.uri(path)}: {exc}") from exc
    try:
        return BaseFileReader(source)
    except (pa.ArrowException, OSError, ValueError) as exc:   # ValueError: a garbled footer string
        source.close()
        raise CorruptFileError(f"cannot read base file {storage.uri(path)}: {exc}") from exc
    except BaseException:
        source.close()
        raise


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None,
                   size: int | None = None, decode: bool = True, use_threads: bool = True,
                   dictionary: list[str] | None = None) -> pa.Table:
    """A base file's ``columns`` (those it has; all when ``None``); ``decode``, ``use_threads``:
    see :meth:`BaseFileReader.read`; ``dictionary``: see :meth:`BaseFileReader.read_encoded`."""
    with open_base_file(storage, path, size) as reader:
        try:
            if dictionary:
                return reader.read_encoded(columns, dictionary, use_threads=use_threads)
            return reader.read(columns, use_threads=use_threads, decode=decode)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptFileError(f"cannot read base file {storage.uri(path)}: {exc}") from exc


def dictionary_schema(table: pa.Table, schema: pa.Schema) -> pa.Schema:
    """``schema``, typing as a dictionary each column ``table`` holds as a dictionary of the
    very type ``schema`` gives it (what aligning ``table`` to ``schema`` may leave encoded)."""
    fields = []
    for f in schema:
        i = table.schema.get_field_index(f.name)
        typ = table.schema.field(i).type if i >= 0 else None
        if typ is not None and pa.types.is_dictionary(typ) and typ.value_type.equals(f.type):
            f = f.with_type(typ)
        fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)
