"""HFile block indexes: root, intermediate and leaf levels, read and write.

The data index is a B+tree whose root sits in the load-on-open section. With one level the
root entries point at data blocks; with more, at intermediate (``IDXINTE2``) or leaf
(``IDXLEAF2``) index blocks. HBase writes leaf blocks *inline* among the data blocks, as soon
as the pending leaf exceeds ``hfile.index.block.max.size`` (128 KiB), and the intermediate
levels just before the root, while the root exceeds that size and has more than
``hfile.index.block.min.entries`` (16) entries. :class:`IndexBuilder` replays exactly that.

Root entries: ``long offset | int onDiskSize | vint keyLength | key`` (Hadoop vint). A
multi-level root also carries "mid-key metadata" (``long offset | int size | int index`` of
the leaf holding the middle data block) after its entries; readers that know the entry count
from the trailer ignore it. Non-root blocks: ``int n | int[n + 1] relative offsets | n x
(long offset | int onDiskSize | key)``; the offsets give each key's length.

Index keys are KeyValue keys and may be "fake": for every data block but the first, HBase
stores the shortest row sorting after the previous block's last row and at or before the
block's first row (``CellUtil.getMidpoint``), so a lookup key between the two lands on the
block whose first real key is already larger.
"""

from __future__ import annotations

import bisect
import struct

import attrs

from ..errors import CorruptFileError
from .blocks import decode_vint, encode_vint, first_on_row_key, key_row

__all__ = ["IndexBlock", "parse_root_index", "parse_non_root_index", "midpoint_key",
           "IndexBuilder", "encode_root", "encode_non_root"]

_ENTRY = struct.Struct(">qi")
_MID_KEY = struct.Struct(">qii")
_ROOT_ENTRY = struct.Struct(">qib")  # offset, size, first byte of the key length vint


@attrs.frozen(eq=False)
class IndexBlock:
    """Parsed entries of one index block: children's first keys (rows), offsets, sizes."""

    rows: list[bytes]
    offsets: list[int]
    sizes: list[int]
    keys: list[bytes]  # full serialized keys, as stored

    def __len__(self) -> int:
        return len(self.rows)

    def child_for(self, row: bytes) -> int:
        """The child that may hold the first entry with ``row``: last with first row < row.

        Rows equal to ``row`` may end the previous child (non-unique keys, blocks cut inside
        a run), so the search starts one child before the first with first row >= row.
        """
        return max(bisect.bisect_left(self.rows, row) - 1, 0)


def parse_root_index(payload: bytes, count: int, where: str, *, key_only: bool = False) -> IndexBlock:
    """``count`` root-format entries; ``key_only`` for the meta index (names, not KeyValues).

    One tight pass (a root of small blocks has thousands of entries, parsed on every open):
    the usual one-byte key length is read with the offset and size."""
    rows, offsets, sizes, keys = [], [], [], []
    payload = payload if isinstance(payload, bytes) else bytes(payload)
    pos, end = 0, len(payload)
    unpack = _ROOT_ENTRY.unpack_from
    try:
        for _ in range(count):
            offset, size, n = unpack(payload, pos)
            if n >= 0:  # a one-byte vint
                pos += 13
            else:
                n, pos = decode_vint(payload, pos + 12)
                if n < 0:
                    raise ValueError(f"negative key length {n}")
            if pos + n > end:
                raise ValueError(f"key of {n} bytes does not fit the block")
            key = payload[pos:pos + n]
            pos += n
            offsets.append(offset)
            sizes.append(size)
            keys.append(key)
            rows.append(key if key_only else key[2:2 + ((key[0] << 8) | key[1])])
    except (struct.error, IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: root index block is truncated or corrupt "
                               f"({len(offsets)} of {count} entries read: {exc})") from exc
    return IndexBlock(rows, offsets, sizes, keys)


def parse_non_root_index(payload: bytes, where: str) -> IndexBlock:
    """Entries of a leaf or intermediate index block."""
    rows, offsets, sizes, keys = [], [], [], []
    try:
        (n,) = struct.unpack_from(">i", payload, 0)
        if n < 0 or 4 * (n + 2) > len(payload):
            raise ValueError(f"{n} entries do not fit the block")
        marks = struct.unpack_from(f">{n + 1}i", payload, 4)
        base = 4 * (n + 2)
        if base + marks[n] > len(payload):
            raise ValueError("entries run past the end of the block")
        for i in range(n):
            pos, nxt = base + marks[i], base + marks[i + 1]
            if nxt < pos + 12:
                raise ValueError(f"entry {i} is shorter than its offset and size")
            offset, size = _ENTRY.unpack_from(payload, pos)
            key = bytes(payload[pos + 12:nxt])
            offsets.append(offset)
            sizes.append(size)
            keys.append(key)
            rows.append(key_row(key))
    except (struct.error, IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: index block is corrupt: {exc}") from exc
    return IndexBlock(rows, offsets, sizes, keys)


# -- writing -----------------------------------------------------------------------------
def midpoint_key(left_row: bytes | None, right_row: bytes, right_key: bytes) -> bytes:
    """``CellUtil.getMidpoint`` for Hudi's cells (same family, qualifier and timestamp).

    Differing rows give the shortest row ``m`` with ``left < m <= right`` as a
    first-on-row key; equal rows (or no left) give the right key itself.
    """
    if left_row is None or left_row == right_row:
        return right_key
    n = min(len(left_row), len(right_row))
    i = 0
    while i < n and left_row[i] == right_row[i]:
        i += 1
    if i >= n:  # left is a prefix of right
        mid = right_row[:i + 1]
    else:
        b = left_row[i]
        if b < 0xFF and b + 1 < right_row[i]:
            mid = left_row[:i] + bytes([b + 1])
        else:
            mid = right_row[:i + 1]
    return first_on_row_key(mid)


def encode_root(keys, offsets, sizes) -> bytes:
    return b"".join(_ENTRY.pack(o, s) + encode_vint(len(k)) + k
                    for k, o, s in zip(keys, offsets, sizes))


def encode_non_root(keys, offsets, sizes) -> bytes:
    marks, pos = [], 0
    for k in keys:
        marks.append(pos)
        pos += 12 + len(k)
    marks.append(pos)
    return b"".join([struct.pack(f">{len(marks) + 1}i", len(keys), *marks)]
                    + [_ENTRY.pack(o, s) + k for k, o, s in zip(keys, offsets, sizes)])


@attrs.define
class _Chunk:
    """``BlockIndexChunk``: entries of one index block being assembled."""

    keys: list = attrs.Factory(list)
    offsets: list = attrs.Factory(list)
    sizes: list = attrs.Factory(list)
    sub_entries: list = attrs.Factory(list)  # cumulative data blocks, for the mid-key
    non_root_entries_size: int = 0
    root_size: int = 0

    def add(self, key: bytes, offset: int, size: int, sub_entries: int = -1) -> None:
        self.keys.append(key)
        self.offsets.append(offset)
        self.sizes.append(size)
        if sub_entries != -1:
            self.sub_entries.append(sub_entries)
        self.non_root_entries_size += 12 + len(key)
        self.root_size += 12 + len(encode_vint(len(key))) + len(key)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def non_root_size(self) -> int:
        return 4 + 4 * (len(self.keys) + 1) + self.non_root_entries_size

    def mid_key_metadata(self) -> bytes:
        total = self.sub_entries[-1]
        mid = (total - 1) // 2
        i = bisect.bisect_left(self.sub_entries, mid)
        entry = i + 1 if i < len(self.sub_entries) and self.sub_entries[i] == mid else i
        before = self.sub_entries[entry - 1] if entry > 0 else 0
        return _MID_KEY.pack(self.offsets[entry], self.sizes[entry], mid - before)


class IndexBuilder:
    """HBase's ``BlockIndexWriter`` for the data index.

    The writer calls :meth:`add` after each data block, asks :meth:`leaf_due` whether an
    inline leaf block should follow, and writes the payloads :meth:`take_leaf` and
    :meth:`finish` hand it through ``write_block(magic, payload) -> (offset, on-disk size,
    uncompressed size)``.
    """

    def __init__(self, max_chunk_size: int = 128 * 1024, min_entries: int = 16):
        self.max_chunk_size = max_chunk_size
        self.min_entries = min_entries
        self.leaf = _Chunk()
        self.root = _Chunk()
        self.levels = 1
        self.total_entries = 0  # data blocks indexed
        self.uncompressed_size = 0  # trailer's uncompressed_data_index_size
        self._leaf_first_key: bytes | None = None
        self._single_level = False

    def add(self, key: bytes, offset: int, on_disk_size: int) -> None:
        self.leaf.add(key, offset, on_disk_size)
        self.total_entries += 1

    def leaf_due(self, closing: bool) -> bool:
        """``shouldWriteBlock``: write the pending leaf now?"""
        if self._single_level or not len(self.leaf):
            return False
        if closing:
            if not len(self.root):  # never wrote a leaf: the entries become the root
                self.root, self.leaf = self.leaf, _Chunk()
                self._single_level = True
                return False
            return True
        return self.leaf.non_root_size >= self.max_chunk_size

    def take_leaf(self) -> bytes:
        payload = encode_non_root(self.leaf.keys, self.leaf.offsets, self.leaf.sizes)
        self._leaf_first_key = self.leaf.keys[0]
        self.leaf = _Chunk()
        return payload

    def leaf_written(self, offset: int, on_disk_size: int, uncompressed_size: int) -> None:
        self.uncompressed_size += uncompressed_size
        if not len(self.root):
            self.levels = 2
        self.root.add(self._leaf_first_key, offset, on_disk_size, self.total_entries)
        self._leaf_first_key = None

    def finish(self, write_block) -> tuple[int, int]:
        """Write intermediate levels and the root; (root offset, root entry count)."""
        mid = self.root.mid_key_metadata() if self.levels > 1 else b""
        while (self.root.root_size > self.max_chunk_size and len(self.root) > self.min_entries
               and self.levels < 16):
            self.root = self._intermediate_level(self.root, write_block)
            self.levels += 1
        payload = encode_root(self.root.keys, self.root.offsets, self.root.sizes) + mid
        offset, _, unc = write_block(b"IDXROOT2", payload)
        self.uncompressed_size += unc
        return offset, len(self.root)

    def _intermediate_level(self, level: _Chunk, write_block) -> _Chunk:
        parent, cur = _Chunk(), _Chunk()

        def flush():
            payload = encode_non_root(cur.keys, cur.offsets, cur.sizes)
            offset, size, unc = write_block(b"IDXINTE2", payload)
            self.uncompressed_size += unc
            parent.add(cur.keys[0], offset, size)

        for i in range(len(level)):
            cur.add(level.keys[i], level.offsets[i], level.sizes[i])
            if i >= self.min_entries and cur.root_size >= self.max_chunk_size:
                flush()
                cur = _Chunk()
        if len(cur):
            flush()
        return parent
