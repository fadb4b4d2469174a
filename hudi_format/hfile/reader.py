"""Reading HFiles (v3) the way Hudi does: keys are rows, values are the cells' values.

Opening costs two ranged reads: the 4 KiB trailer, then the load-on-open section it points
at (root data index, meta index, file info). Data blocks and deeper index levels are read on
demand, one ranged read per block, through small LRU caches, so memory stays bounded by the
block size whatever the file size.

A committed HFile is never rewritten under its name, so what opening it parses (the trailer,
the root and meta indexes, the file info) is kept process-wide for files opened with
``immutable=True`` and their listed size: a lookup or an upsert through the record index opens
every index file group's base HFile, whose root index (thousands of entries at millions of
keys) took a quarter of a small lookup. Bounded by :data:`OPENED_MAX_ENTRIES` root entries;
files this process changes are dropped (``storage.on_file_changed``).

Keys compare as unsigned bytes of the row only, as Hudi's reader compares them (HBase's
comparator would also look at family, qualifier, timestamp and type, which Hudi leaves fixed).
Repeated rows are allowed; lookups return the first one. Index entries may be shortened
("fake") keys; see :mod:`.index`.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Callable, Iterable, Iterator, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptFileError, StorageError, UnsupportedFeatureError
from ..file_cache import FileCache
from ..storage import on_file_changed
from .blocks import BlockType, decode_block, key_row
from . import framed
from .cells import SMALL_BLOCK, decode_cells, decode_cells_sequential, decode_many, find_cells
from .index import IndexBlock, parse_non_root_index, parse_root_index
from .trailer import TRAILER_SIZE, Trailer, decode_file_info

__all__ = ["HFileReader", "SEEK_FOUND", "SEEK_IN_RANGE", "SEEK_BEFORE_FIRST"]

SEEK_BEFORE_FIRST = -1  # the key sorts before the first key (or the file is empty)
SEEK_FOUND = 0  # the key is in the file
SEEK_IN_RANGE = 1  # absent; positioned at the greatest key below it (HBase semantics)

_INDEX_MAGICS = (BlockType.LEAF_INDEX, BlockType.INTERMEDIATE_INDEX)


class _Opened(NamedTuple):
    """What opening an HFile parses; shared, read only, by every reader of that file."""

    trailer: Trailer
    root: IndexBlock
    meta_index: IndexBlock
    file_info: dict[bytes, bytes]
    mvcc: bool
    tags: bool
    first_key: bytes | None
    last_key: bytes | None


#: Root index entries kept, over every opened file (~250 bytes each: ~50 MB).
OPENED_MAX_ENTRIES = 200_000
_OPENED: "FileCache[_Opened]" = FileCache(lambda opened: len(opened.root))
on_file_changed(_OPENED.drop_file)


def _key(key) -> bytes:
    """Keys are bytes; a str is taken as its UTF-8 encoding (Hudi's record keys)."""
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


class _DataBlock:
    """Rows and values of one decoded data block, in file order: Python lists (what the
    point-lookup and scan paths bisect and yield), built from Arrow arrays on first use when
    the block was decoded column-wise."""

    __slots__ = ("_row_array", "_value_array", "_rows", "_values")

    def __init__(self, rows: pa.Array | list[bytes], values: pa.Array | list[bytes]):
        lists = isinstance(rows, list)
        self._row_array = None if lists else rows
        self._value_array = None if lists else values
        self._rows: list[bytes] | None = rows if lists else None  # type: ignore[assignment]
        self._values: list[bytes] | None = values if lists else None  # type: ignore[assignment]

    @property
    def rows(self) -> list[bytes]:
        if self._rows is None:
            self._rows = self._row_array.to_pylist()
        return self._rows

    @property
    def values(self) -> list[bytes]:
        if self._values is None:
            self._values = self._value_array.to_pylist()
        return self._values


class HFileReader:
    """An HFile opened for lookups and scans (see the module docstring for the cost model).

    ``HFileReader(storage, rel_path)`` reads through :meth:`Storage.read_range`;
    :meth:`from_bytes` reads an HFile already in memory (a log block's content).
    ``verify_checksums`` checks CRC32/CRC32C block checksums (HBase writes CRC32C; Hudi 1.x
    writes none); pure-Python CRC32C runs at ~10 MB/s, so turn it off for big scans of
    trusted files. Keys may be given as bytes or str (UTF-8). A reader caches blocks and
    is not meant to be shared between threads.
    """

    def __init__(self, storage, rel_path: str, *, verify_checksums: bool = True,
                 block_cache_size: int = 8, index_cache_size: int = 64, size: int | None = None,
                 immutable: bool = False, cache_key: tuple | None = None,
                 _read: Callable[[int, int], bytes] | None = None, _size: int | None = None):
        """``size``: the file's size when a listing gave it (else asked of storage);
        ``immutable``: the file is committed and ``size`` is as listed, so what opening it
        parses may come from (and go to) the process-wide cache (see the module docstring);
        ``cache_key``: the key there of an HFile read through ``_read`` (a log block's, whose
        key starts as :meth:`Storage.immutable_key` of its log file)."""
        self.path = rel_path
        self._where = storage.uri(rel_path) if storage is not None else rel_path
        self._verify = verify_checksums
        if _read is None:
            def _read(start: int, length: int, _s=storage, _p=rel_path) -> bytes:
                return _s.read_range(_p, start, length)
            _size = size if size else storage.size(rel_path)
        self._read_raw = _read
        self.size = _size
        self._cache_key = cache_key if cache_key is not None else (
            storage.immutable_key(rel_path, size) if immutable and size and storage is not None else None)
        self._blocks: OrderedDict[int, _DataBlock] = OrderedDict()
        self._block_cache_size = max(1, block_cache_size)
        self._index_blocks: OrderedDict[int, IndexBlock] = OrderedDict()
        self._index_cache_size = max(1, index_cache_size)
        self._first_offset: int | None = None
        self._open()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>", **kwargs) -> "HFileReader":
        view = memoryview(data)
        return cls(None, name, _read=lambda s, n: bytes(view[s:s + n]), _size=len(data), **kwargs)

    # -- opening -----------------------------------------------------------------------
    def _read(self, start: int, length: int) -> bytes:
        if start < 0 or length < 0 or start + length > self.size:
            raise CorruptFileError(f"{self._where}: range {start}..{start + length} lies outside "
                                   f"the {self.size}-byte file")
        try:
            data = self._read_raw(start, length)
        except StorageError:
            raise
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {self._where}: {exc}") from exc
        if len(data) != length:
            raise CorruptFileError(f"{self._where}: file ends inside bytes {start}..{start + length}")
        return data

    def _open(self) -> None:
        opened = None
        if self._cache_key is not None:
            opened = _OPENED.get(self._cache_key)
        if opened is None:
            opened = self._parse_opening()
            if self._cache_key is not None:
                _OPENED.put(self._cache_key, opened, OPENED_MAX_ENTRIES)
        self.trailer, self._root, self._meta_index, self.file_info, self._mvcc, self._tags, \
            self._first_key, self._last_key = opened
        self.compression = self.trailer.compression

    def _parse_opening(self) -> _Opened:
        w = self._where
        if self.size < TRAILER_SIZE:
            raise CorruptFileError(f"{w}: {self.size} bytes is too short for an HFile "
                                   f"(the trailer alone is {TRAILER_SIZE})")
        t = Trailer.parse(self._read(self.size - TRAILER_SIZE, TRAILER_SIZE), w)
        if t.compression not in ("NONE", "GZ"):
            raise UnsupportedFeatureError(f"{w}: HFile compression {t.compression} is not "
                                          "supported (NONE, GZ)")
        self.compression = t.compression
        lo, end = t.load_on_open_offset, self.size - TRAILER_SIZE
        if not 0 <= lo <= end or not lo <= t.file_info_offset < end:
            raise CorruptFileError(f"{w}: trailer offsets (load-on-open {lo}, file info "
                                   f"{t.file_info_offset}) lie outside the {self.size}-byte file")
        if t.num_data_index_levels < 1:
            raise CorruptFileError(f"{w}: trailer says {t.num_data_index_levels} index levels")
        section = self._read(lo, end - lo)
        h, root = decode_block(section, 0, self.compression, w, expect=(BlockType.ROOT_INDEX,),
                               file_offset=lo, verify=self._verify)
        root_index = parse_root_index(root, t.data_index_count, w)
        _, meta = decode_block(section, h.on_disk_size, self.compression, w,
                                expect=(BlockType.ROOT_INDEX,), file_offset=lo + h.on_disk_size,
                                verify=self._verify)
        meta_index = parse_root_index(meta, t.meta_index_count, w, key_only=True)
        fi_at = t.file_info_offset - lo
        _, info = decode_block(section, fi_at, self.compression, w, expect=(BlockType.FILE_INFO,),
                               file_offset=t.file_info_offset, verify=self._verify)
        file_info = decode_file_info(info, w)
        version = file_info.get(b"KEY_VALUE_VERSION")
        if t.entry_count and not len(root_index):
            raise CorruptFileError(f"{w}: {t.entry_count} entries but an empty data index")
        last = file_info.get(b"hfile.LASTKEY")
        return _Opened(
            t, root_index, meta_index, file_info,
            version is not None and int.from_bytes(version, "big", signed=True) == 1,
            b"MAX_TAGS_LEN" in file_info,
            # the first data block's index key is never shortened, so it is the first key
            root_index.rows[0] if t.entry_count else None,
            key_row(last) if last and len(last) >= 2 and t.entry_count else None)

    # -- metadata ----------------------------------------------------------------------
    @property
    def num_entries(self) -> int:
        return self.trailer.entry_count

    def __len__(self) -> int:
        return self.trailer.entry_count

    @property
    def avro_schema(self) -> str | None:
        """The Avro schema Hudi stores in the file info (``schema``), if any."""
        raw = self.file_info.get(b"schema")
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptFileError(f"{self._where}: the Avro schema in the file info is not UTF-8 "
                                   f"({exc})") from None

    @property
    def first_key(self) -> bytes | None:
        return self._first_key

    @property
    def last_key(self) -> bytes | None:
        return self._last_key

    @property
    def meta_block_names(self) -> list[bytes]:
        return list(self._meta_index.rows)

    def meta_block(self, name: str | bytes) -> bytes | None:
        """Content of the meta block ``name`` (Hudi's bloom filter is ``bloomFilter``)."""
        key = name.encode("utf-8") if isinstance(name, str) else bytes(name)
        idx = self._meta_index
        i = bisect.bisect_left(idx.rows, key)
        if i == len(idx) or idx.rows[i] != key:
            for j, row in enumerate(idx.rows):  # tolerate an unsorted meta index
                if row == key:
                    i = j
                    break
            else:
                return None
        buf = self._read(idx.offsets[i], idx.sizes[i])
        _, payload = decode_block(buf, 0, self.compression, self._where,
                                  expect=(BlockType.META,), file_offset=idx.offsets[i],
                                  verify=self._verify)
        return payload

    def __repr__(self) -> str:
        return f"HFileReader({self._where!r}, entries={self.num_entries})"

    def close(self) -> None:
        self._blocks.clear()
        self._index_blocks.clear()

    def __enter__(self) -> "HFileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- blocks ------------------------------------------------------------------------
    def _index_block(self, offset: int, size: int) -> IndexBlock:
        cached = self._index_blocks.get(offset)
        if cached is not None:
            self._index_blocks.move_to_end(offset)
            return cached
        _, payload = decode_block(self._read(offset, size), 0, self.compression, self._where,
                                  expect=_INDEX_MAGICS, file_offset=offset, verify=self._verify)
        block = parse_non_root_index(payload, f"{self._where}: index block at offset {offset}")
        self._index_blocks[offset] = block
        if len(self._index_blocks) > self._index_cache_size:
            self._index_blocks.popitem(last=False)
        return block

    def _block_payload(self, offset: int, size: int, buf: bytes | None = None, start: int = 0,
                       buffer_ok: bool = False) -> bytes:
        """A data block's payload, read alone or cut from ``buf`` (bytes from file offset
        ``start``); ``buffer_ok``: it may come as a ``pyarrow.Buffer`` (see ``decode_block``)."""
        if buf is None:
            buf, start = self._read(offset, size), offset
        h, payload = decode_block(buf, offset - start, self.compression, self._where,
                                  expect=(BlockType.DATA, BlockType.ENCODED_DATA),
                                  file_offset=offset, verify=self._verify, buffer_ok=buffer_ok)
        if h.magic == BlockType.ENCODED_DATA:
            raise UnsupportedFeatureError(f"{self._where}: data blocks use an HBase data block "
                                          "encoding (DATABLKE), which Hudi never writes")
        return payload

    def _data_block(self, offset: int, size: int) -> _DataBlock:
        cached = self._blocks.get(offset)
        if cached is not None:
            self._blocks.move_to_end(offset)
            return cached
        payload = self._block_payload(offset, size)
        where = f"{self._where}: data block at offset {offset}"
        if len(payload) < SMALL_BLOCK:  # a few cells: parse them straight into lists
            block = _DataBlock(*decode_cells_sequential(payload, self._mvcc, self._tags, where))
        else:
            block = _DataBlock(*decode_cells(payload, self._mvcc, self._tags, where))
        self._blocks[offset] = block
        if len(self._blocks) > self._block_cache_size:
            self._blocks.popitem(last=False)
        return block

    def _walk(self, block: IndexBlock, depth: int, start: bytes | None) -> Iterator[tuple[bytes, int, int]]:
        """(index row, offset, size) of data blocks in order, from the one that may hold ``start``."""
        i = 0 if start is None else block.child_for(start)
        for j in range(i, len(block)):
            if depth == 1:
                yield block.rows[j], block.offsets[j], block.sizes[j]
            else:
                child = self._index_block(block.offsets[j], block.sizes[j])
                yield from self._walk(child, depth - 1, start if j == i else None)

    def data_blocks(self, start: bytes | None = None) -> Iterator[tuple[bytes, int, int]]:
        """Index entries (first row as indexed, offset, on-disk size) of the data blocks."""
        if not self.num_entries:
            return iter(())
        return self._walk(self._root, self.trailer.num_data_index_levels, start)

    # -- reads -------------------------------------------------------------------------
    def scan(self, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs in key order, from the first key >= ``start``."""
        if start is not None:
            start = _key(start)
        for _, offset, size in self.data_blocks(start):
            block = self._data_block(offset, size)
            rows, values = block.rows, block.values
            i = 0 if start is None else bisect.bisect_left(rows, start)
            for j in range(i, len(rows)):
                yield rows[j], values[j]
            start = None if i < len(rows) else start

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return self.scan()

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return self.scan()

    def keys(self) -> Iterator[bytes]:
        return (k for k, _ in self.scan())

    def prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """All entries whose key starts with ``prefix``, in order."""
        prefix = _key(prefix)
        for key, value in self.scan(prefix):
            if not key.startswith(prefix):
                return
            yield key, value

    def _first_block_offset(self) -> int:
        if self._first_offset is None:
            first = self.trailer.first_data_block_offset
            if len(self._root) and self.trailer.num_data_index_levels == 1:
                first = self._root.offsets[0]
            elif first < 0:  # not recorded: walk down the index
                first = next(self.data_blocks())[1]
            self._first_offset = first
        return self._first_offset

    def _lookup(self, key: bytes) -> tuple[int, bytes | None]:
        """(seek code, value of the first entry with ``key`` or None)."""
        if key < self._first_key:
            return SEEK_BEFORE_FIRST, None
        if self._last_key is not None and key > self._last_key:
            return SEEK_IN_RANGE, None
        refs = self.data_blocks(key)
        ref = next(refs, None)
        below = ref is not None and ref[1] != self._first_block_offset()
        while ref is not None:
            _, offset, size = ref
            block = self._data_block(offset, size)
            i = bisect.bisect_left(block.rows, key)
            below = below or i > 0
            if i < len(block.rows):
                if block.rows[i] == key:
                    return SEEK_FOUND, block.values[i]
                break
            ref = next(refs, None)
            if ref is not None and ref[0] > key:  # next block starts after key: not here
                break
        return (SEEK_IN_RANGE if below else SEEK_BEFORE_FIRST), None

    def get(self, key: bytes) -> bytes | None:
        """Value of the (first) entry with ``key``, or None."""
        if not self.num_entries:
            return None
        return self._lookup(_key(key))[1]

    def __contains__(self, key: bytes) -> bool:
        return self.seek(key) == SEEK_FOUND

    def seek(self, key: bytes) -> int:
        """HBase ``seekTo``: 0 found, 1 absent but keys below it exist, -1 before the first key.

        Past the last key is 1 as in HBase (Hudi's reader says 2, EOF; compare with
        :attr:`last_key` to tell).
        """
        if not self.num_entries:
            return SEEK_BEFORE_FIRST
        return self._lookup(_key(key))[0]

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        """Values of the keys present; sorted keys read each data block at most once."""
        out: dict[bytes, bytes] = {}
        if not self.num_entries:
            return out
        for key in keys:
            key = _key(key)
            if key in out:
                continue
            value = self._lookup(key)[1]
            if value is not None:
                out[key] = value
        return out

    def lookup_arrays(self, keys: pa.Array, search: bool = False) -> tuple[pa.Array, pa.Array]:
        """``(keys found, their values)`` for a sorted binary array of distinct ``keys``.

        Reads each data block whose index range holds one of the keys once, decodes them in
        bulk (:func:`.cells.decode_cells`) and matches the keys column-wise; the first entry
        of a repeated row wins, as in :meth:`get`. ``search``: find the keys' cells by their
        framed rows instead (:mod:`.framed`), for files whose values cannot hold a whole cell of
        a key looked for (header, framed row, timestamp, type), as the record index's Avro
        values cannot: a value that did could pass for that cell."""
        empty = pa.array([], pa.binary())
        keys = keys.cast(pa.binary())
        if not self.num_entries or not len(keys):
            return empty, empty
        key_list = keys.to_pylist()
        wanted = self._data_blocks_holding(key_list)
        if not wanted:
            return empty, empty
        payloads = self._payloads([(offset, size) for offset, size, _ in wanted])
        found = framed.lookup(keys, key_list, payloads, [row for _, _, row in wanted]) if search else None
        if found is None:
            found = find_cells(
                payloads, self._mvcc, self._tags,
                [f"{self._where}: data block at offset {offset}" for offset, _, _ in wanted], keys)
        rows, values = found
        if len(rows) > 1:  # rows are sorted: a repeated row keeps its first entry
            first = pc.not_equal(rows.slice(1), rows.slice(0, len(rows) - 1))
            if not pc.all(first).as_py():
                keep = pa.concat_arrays([pa.array([True]), first])
                rows, values = pc.filter(rows, keep), pc.filter(values, keep)
        return rows, values

    def _payloads(self, wanted: list[tuple[int, int]]) -> list[bytes]:
        """Payloads of the data blocks ``(offset, size)`` (in file order): one ranged read
        spanning them when they fill at least half of that span (most blocks of a file are
        wanted: one request instead of one per block), else a read per block."""
        if len(wanted) > 1:
            start, end = wanted[0][0], wanted[-1][0] + wanted[-1][1]
            if 2 * sum(size for _, size in wanted) >= end - start:
                buf = self._read(start, end - start)
                return [self._block_payload(offset, size, buf, start, True) for offset, size in wanted]
        return [self._block_payload(offset, size, buffer_ok=True) for offset, size in wanted]

    def _data_blocks_holding(self, keys: list[bytes]) -> list[tuple[int, int, bytes]]:
        """``(offset, size, first row)`` of the data blocks that may hold one of the sorted
        distinct ``keys``, in file order. A multi-level index is descended level by level through the
        index blocks that may hold a key only (a point lookup reads a few leaves, not all)."""
        rows, offsets, sizes = self._root.rows, self._root.offsets, self._root.sizes
        for _ in range(self.trailer.num_data_index_levels - 1):
            children = [self._index_block(offsets[i], sizes[i]) for i in self._blocks_holding(keys, rows)]
            rows = [r for c in children for r in c.rows]
            offsets = [o for c in children for o in c.offsets]
            sizes = [z for c in children for z in c.sizes]
        return [(offsets[i], sizes[i], rows[i]) for i in self._blocks_holding(keys, rows)]

    def _blocks_holding(self, keys: list[bytes], starts: list[bytes]) -> list[int]:
        """Indexes (in file order) of the blocks (data blocks, or index blocks one level up)
        that may hold one of the sorted distinct ``keys``, ``starts`` being their first rows
        (of a contiguous run of blocks, or of several runs no key falls between): block ``i``
        holds the rows from its index row up to the next block's, and a
        run of equal rows may start at the end of a block and go on in the next, so a key equal
        to a block's index row also wants the block before. C-level bisects over whichever of
        keys and blocks is fewer (a point lookup touches few of many blocks)."""
        lo = bisect.bisect_left(keys, self._first_key)  # keys below the first key are absent
        if lo == len(keys):
            return []
        if len(keys) - lo < len(starts):
            hit: set[int] = set()
            for key in keys[lo:]:
                hit.update(framed.candidates(starts, key))
            return sorted(hit)
        out = []
        n = len(keys)
        last = len(starts) - 1
        for i in range(len(starts)):
            hi = bisect.bisect_left(keys, starts[i + 1], lo) if i < last else n
            if hi > lo or (hi < n and i < last and keys[hi] == starts[i + 1]):
                out.append(i)
            lo = hi
        return out

    def arrays(self) -> tuple[pa.Array, pa.Array]:
        """Every cell's row and value as binary arrays, in key order: the data blocks read in
        one range and decoded column-wise, runs of blocks at a time (what a compaction reads;
        the block cache is left alone)."""
        entries = [(offset, size) for _, offset, size in self.data_blocks()]
        if not entries:
            empty = pa.array([], pa.binary())
            return empty, empty
        payloads = self._payloads(entries)
        wheres = [f"{self._where}: data block at offset {offset}" for offset, _ in entries]
        return decode_many(payloads, self._mvcc, self._tags, wheres)

    def read_all(self) -> list[tuple[bytes, bytes]]:
        return list(self.scan())
