"""Writing HFiles (v3) laid out as HBase 2.x writes them, so HBase, Hudi and hudi-rs read them.

The layout follows ``HFileWriterImpl``/``HFileBlock.Writer``/``BlockIndexWriter``: data blocks
cut once their uncompressed size reaches ``block_size`` (a block ends with the cell that
crosses it, never inside a run of equal keys), inline leaf index blocks, meta blocks (sorted by name), then the load-on-open
section: intermediate index levels, root data index (with mid-key metadata when multi-level),
meta index, file info (sorted by key), and the trailer. Index keys are shortened as HBase's
``getMidpoint`` does. With ``checksum="CRC32C"`` and the same inputs the output is
byte-identical to an HBase 2.4 file (the tests check this against the fixtures).

Defaults are Hudi's for metadata-table files: GZ compression, 1 MiB blocks
(``hoodie.hfile.block.size``), ``HoodieHBaseKVComparator`` in the trailer, and the NULL
checksum type (zeroed checksum bytes), as Hudi 1.x's own writer does, which all readers
accept and which costs nothing in pure Python.

Blocks are written as they fill, so memory holds one data block plus the index and meta
blocks. On any error the partial file is deleted.
"""

from __future__ import annotations

import io
import posixpath
import struct
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import HudiError, InvalidOptionError
from .blocks import (CHECKSUM_NAMES, HEADER_SIZE, MAX_ROW_LENGTH, BlockType, encode_block,
                     make_key)
from .index import IndexBuilder, encode_root, midpoint_key
from .trailer import TRAILER_SIZE, Trailer, encode_file_info

__all__ = ["HFileWriter", "write_hfile", "DEFAULT_BLOCK_SIZE", "HUDI_COMPARATOR",
           "HBASE_COMPARATOR"]

DEFAULT_BLOCK_SIZE = 1024 * 1024  # hoodie.hfile.block.size
HUDI_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
HBASE_COMPARATOR = "org.apache.hadoop.hbase.KeyValue$KVComparator"
_CODECS = {"NONE": 2, "GZ": 1}
_RESERVED_PREFIX = b"hfile."
_WRITER_KEYS = {b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY"}
_KV = struct.Struct(">ii")
# a cell: key length, value length (ints), row length (short), row, the rest of the key, value, MVCC
_CELL_HEAD = np.dtype([("key", ">i4"), ("value", ">i4"), ("row", ">u2")])
_KEY_TAIL = make_key(b"")[2:]   # what follows the row in a key: empty family, latest timestamp, Put
_KEY_EXTRA = 2 + len(_KEY_TAIL)


def _binary(values: pa.Array | pa.ChunkedArray, what: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (pa.types.is_binary(values.type) or pa.types.is_string(values.type)):
        raise InvalidOptionError(f"HFile {what} must be a binary or string array, got {values.type}")
    if values.null_count:
        raise InvalidOptionError(f"HFile {what} must not be null")
    return values.cast(pa.binary())


def _as_bytes(value, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidOptionError(f"HFile {what} must be bytes or str, got {type(value).__name__}")


class HFileWriter:
    """Append sorted (key, value) pairs, add file info and meta blocks, then :meth:`close`.

    A failed append (unsorted or oversized key, wrong type) or close abandons the file: the
    writer is closed and whatever it had written is deleted.

    ``HFileWriter(storage, rel_path)`` streams to a file; ``HFileWriter(None)`` writes to
    memory and :meth:`close` returns the bytes. Keys are the rows (record keys) and must
    arrive in unsigned byte order; equal keys are allowed, as HBase allows them.
    """

    def __init__(self, storage=None, rel_path: str | None = None, *,
                 block_size: int = DEFAULT_BLOCK_SIZE, compression: str = "GZ",
                 checksum: str = "NULL", comparator: str = HUDI_COMPARATOR,
                 index_block_max_size: int = 128 * 1024, index_min_entries: int = 16,
                 shorten_index_keys: bool = True, create_time: int = 0):
        compression = str(compression).upper()
        if compression in ("GZIP",):
            compression = "GZ"
        if compression not in _CODECS:
            raise InvalidOptionError(f"HFile compression must be NONE or GZ, got {compression!r}")
        if str(checksum).upper() not in CHECKSUM_NAMES:
            raise InvalidOptionError(f"HFile checksum must be one of {sorted(CHECKSUM_NAMES)}, "
                                     f"got {checksum!r}")
        if block_size <= 0 or index_block_max_size <= 0 or index_min_entries < 1:
            raise InvalidOptionError("HFile block_size and index_block_max_size must be positive "
                                     "and index_min_entries at least 1")
        self.block_size = block_size
        self.compression = compression
        self.checksum_type = CHECKSUM_NAMES[str(checksum).upper()]
        self.comparator = comparator
        self.shorten_index_keys = shorten_index_keys
        self.create_time = create_time
        self._storage, self.path = storage, rel_path
        self._where = storage.uri(rel_path) if storage is not None else (rel_path or "<memory>")
        self._buffer = io.BytesIO() if storage is None else None
        self._out = None
        self._pos = 0
        self._closed = False
        self._index = IndexBuilder(index_block_max_size, index_min_entries)
        self._prev_offsets: dict[bytes, int] = {}
        self._cells: list[bytes] = []
        self._block_size_written = 0
        self._block_first: tuple[bytes, bytes] | None = None  # (row, key) of the block's first cell
        self._last_row: bytes | None = None
        self._last_key: bytes | None = None
        self._prev_block_last_row: bytes | None = None
        self._entries = 0
        self._key_bytes = 0
        self._value_bytes = 0
        self._uncompressed = 0  # trailer total_uncompressed_bytes (HBase's accounting)
        self._first_data = -1
        self._last_data = -1
        self._file_info: dict[bytes, bytes] = {}
        self._meta: dict[bytes, bytes] = {}

    # -- output --------------------------------------------------------------------------
    def _emit(self, data: bytes) -> None:
        if self._buffer is not None:
            self._buffer.write(data)
        else:
            if self._out is None:
                parent = posixpath.dirname(self._storage.full(self.path))
                if parent:
                    self._storage.fs.makedirs(parent, exist_ok=True)
                self._out = self._storage.open(self.path, "wb")
            self._out.write(data)
        self._pos += len(data)

    def _write_block(self, magic: bytes, payload: bytes) -> tuple[int, int, int]:
        """Write a block; (offset, on-disk size with header, uncompressed size)."""
        offset = self._pos
        block = encode_block(magic, payload, self.compression, self.checksum_type,
                             self._prev_offsets.get(magic, -1))
        self._prev_offsets[magic] = offset
        self._emit(block)
        return offset, len(block), len(payload)

    def _fail(self) -> None:
        self._closed = True
        if self._out is not None:
            try:
                self._out.close()
            finally:
                self._out = None
                self._storage.delete(self.path)

    # -- appending -----------------------------------------------------------------------
    def append(self, key: bytes | str, value: bytes | str) -> None:
        if self._closed:
            raise HudiError(f"HFile writer for {self._where} is closed")
        try:
            row = _as_bytes(key, "key")
            value = _as_bytes(value, "value")
            if len(row) > MAX_ROW_LENGTH:
                raise InvalidOptionError(f"HFile key of {len(row)} bytes exceeds {MAX_ROW_LENGTH}")
            if self._last_row is not None and row < self._last_row:
                raise InvalidOptionError(f"HFile keys must be appended in sorted order: {row!r} "
                                         f"after {self._last_row!r} in {self._where}")
            # like HBase, never cut a block inside a run of equal keys
            if (self._cells and self._block_size_written >= self.block_size
                    and row != self._last_row):
                self._finish_block()
                self._write_leaves(False)
            full = make_key(row)
            cell = b"".join((_KV.pack(len(full), len(value)), full, value, b"\x00"))
            if not self._cells:
                self._block_first = (row, full)
            self._cells.append(cell)
            self._block_size_written += len(cell)
            self._last_row, self._last_key = row, full
            self._entries += 1
            self._key_bytes += len(full)
            self._value_bytes += len(value)
        except Exception:
            self._fail()
            raise

    def extend(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        for key, value in items:
            self.append(key, value)

    def append_sorted(self, rows: pa.Array, values: pa.Array) -> None:
        """Append many cells at once: ``rows`` (keys, in byte order, after any appended before)
        and ``values``, Arrow binary or string arrays. The bytes are those :meth:`append` writes
        cell by cell; the cells are laid out column-wise (a record index commit appends ~10^5 of
        them, at ~6 us each one by one) and cut into blocks at the same places."""
        if self._closed:
            raise HudiError(f"HFile writer for {self._where} is closed")
        try:
            self._append_sorted(_binary(rows, "keys"), _binary(values, "values"))
        except Exception:
            self._fail()
            raise

    def _append_sorted(self, rows: pa.Array, values: pa.Array) -> None:
        n = len(rows)
        if len(values) != n:
            raise InvalidOptionError(f"HFile append_sorted got {n} keys and {len(values)} values")
        if not n:
            return
        row_len = pc.binary_length(rows).to_numpy().astype(np.int64)
        if int(row_len.max()) > MAX_ROW_LENGTH:
            raise InvalidOptionError(f"HFile key of {int(row_len.max())} bytes exceeds {MAX_ROW_LENGTH}")
        first = rows[0].as_py()
        if (n > 1 and not pc.all(pc.less_equal(rows.slice(0, n - 1), rows.slice(1))).as_py()) or \
                (self._last_row is not None and first < self._last_row):
            raise InvalidOptionError(f"HFile keys must be appended in sorted order in {self._where}")
        value_len = pc.binary_length(values).to_numpy().astype(np.int64)
        head = np.empty(n, dtype=_CELL_HEAD)
        head["key"], head["value"], head["row"] = row_len + _KEY_EXTRA, value_len, row_len
        heads = pa.FixedSizeBinaryArray.from_buffers(pa.binary(_CELL_HEAD.itemsize), n,
                                                     [None, pa.py_buffer(head.tobytes())])
        cells = pc.binary_join_element_wise(heads.cast(pa.binary()), rows, pa.scalar(_KEY_TAIL, pa.binary()),
                                            values, pa.scalar(b"\x00", pa.binary()), pa.scalar(b"", pa.binary()))
        ends = np.frombuffer(cells.buffers()[1], np.int32, n + 1, cells.offset * 4).astype(np.int64)
        data = memoryview(cells.buffers()[2])
        i = 0
        while i < n:
            need = self.block_size - self._block_size_written
            j = i if need <= 0 else min(n, int(np.searchsorted(ends, ends[i] + need, side="left")))
            # never cut a block inside a run of equal keys
            while j < n and rows[j].as_py() == (rows[j - 1].as_py() if j > i else self._last_row):
                j += 1
            if j > i:
                if not self._cells:
                    row = rows[i].as_py()
                    self._block_first = (row, make_key(row))
                self._cells.append(bytes(data[ends[i]:ends[j]]))
                self._block_size_written += int(ends[j] - ends[i])
                self._last_row = rows[j - 1].as_py()
                self._last_key = make_key(self._last_row)
            if j < n:
                self._finish_block()
                self._write_leaves(False)
            i = j
        self._entries += n
        self._key_bytes += int(row_len.sum()) + n * _KEY_EXTRA
        self._value_bytes += int(value_len.sum())

    def add_file_info(self, key: bytes | str, value: bytes | str) -> None:
        """A file info entry (Hudi: ``schema``, ``minRecordKey``, ``bloomFilterTypeCode``...)."""
        k = _as_bytes(key, "file info key")
        if k.startswith(_RESERVED_PREFIX) or k in _WRITER_KEYS:
            raise InvalidOptionError(f"file info key {k!r} is reserved for the HFile writer")
        self._file_info[k] = _as_bytes(value, "file info value")

    def add_meta_block(self, name: bytes | str, data: bytes | str) -> None:
        """A meta block, written in the non-scanned section (Hudi: ``bloomFilter``)."""
        n = _as_bytes(name, "meta block name")
        if n in self._meta:
            raise InvalidOptionError(f"meta block {n!r} added twice")
        self._meta[n] = _as_bytes(data, "meta block")

    def _finish_block(self) -> None:
        offset, size, unc = self._write_block(BlockType.DATA, b"".join(self._cells))
        if self._first_data < 0:
            self._first_data = offset
        self._last_data = offset
        row, full = self._block_first
        key = midpoint_key(self._prev_block_last_row, row, full) if self.shorten_index_keys else full
        self._index.add(key, offset, size)
        self._uncompressed += HEADER_SIZE + unc
        self._prev_block_last_row = self._last_row
        self._cells = []
        self._block_size_written = 0

    def _write_leaves(self, closing: bool) -> None:
        while self._index.leaf_due(closing):
            offset, size, unc = self._write_block(BlockType.LEAF_INDEX, self._index.take_leaf())
            self._index.leaf_written(offset, size, unc)
            self._uncompressed += HEADER_SIZE + unc

    # -- closing -------------------------------------------------------------------------
    def close(self) -> bytes | None:
        """Finish the file; the HFile's bytes when writing to memory."""
        if self._closed:
            raise HudiError(f"HFile writer for {self._where} is already closed")
        try:
            if self._cells:
                self._finish_block()
            self._write_leaves(True)
            meta_offsets = []
            for name in sorted(self._meta):
                offset, size, unc = self._write_block(BlockType.META, self._meta[name])
                meta_offsets.append((name, offset, size))
                self._uncompressed += HEADER_SIZE + unc
            root_offset, root_count = self._index.finish(self._write_block)
            names = [n for n, _, _ in meta_offsets]
            _, _, unc = self._write_block(BlockType.ROOT_INDEX, encode_root(
                names, [o for _, o, _ in meta_offsets], [s for _, _, s in meta_offsets]))
            self._uncompressed += HEADER_SIZE + unc
            info = dict(self._file_info)
            info[b"MAX_MEMSTORE_TS_KEY"] = bytes(8)
            info[b"KEY_VALUE_VERSION"] = struct.pack(">i", 1)
            if self._last_key is not None:
                info[b"hfile.LASTKEY"] = self._last_key
            n = self._entries
            info[b"hfile.AVG_KEY_LEN"] = struct.pack(">i", self._key_bytes // n if n else 0)
            info[b"hfile.CREATE_TIME_TS"] = struct.pack(">q", self.create_time)
            info[b"hfile.AVG_VALUE_LEN"] = struct.pack(">i", self._value_bytes // n if n else 0)
            file_info_offset, _, unc = self._write_block(
                BlockType.FILE_INFO, encode_file_info(dict(sorted(info.items()))))
            self._uncompressed += HEADER_SIZE + unc
            trailer = Trailer(
                file_info_offset=file_info_offset, load_on_open_offset=root_offset,
                uncompressed_data_index_size=self._index.uncompressed_size,
                total_uncompressed_bytes=self._uncompressed + TRAILER_SIZE,
                data_index_count=root_count, meta_index_count=len(meta_offsets),
                entry_count=n, num_data_index_levels=self._index.levels,
                first_data_block_offset=self._first_data, last_data_block_offset=self._last_data,
                comparator_class_name=self.comparator, compression_codec=_CODECS[self.compression])
            self._emit(trailer.serialize())
            self._closed = True
            if self._out is not None:
                self._out.close()
                self._out = None
        except Exception:
            self._fail()
            raise
        return self._buffer.getvalue() if self._buffer is not None else None

    def __enter__(self) -> "HFileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            if not self._closed:
                self._fail()
        elif not self._closed:
            self.close()


def write_hfile(storage, rel_path: str | None, items: Iterable[tuple[bytes, bytes]], *,
                file_info: Mapping[bytes | str, bytes | str] | None = None,
                meta_blocks: Mapping[bytes | str, bytes | str] | None = None,
                **options) -> bytes | None:
    """Write ``items`` (sorted) as one HFile; the bytes when ``storage`` is None."""
    writer = HFileWriter(storage, rel_path, **options)
    try:
        writer.extend(items)
        for k, v in (file_info or {}).items():
            writer.add_file_info(k, v)
        for k, v in (meta_blocks or {}).items():
            writer.add_meta_block(k, v)
    except Exception:
        if not writer._closed:
            writer._fail()
        raise
    return writer.close()
