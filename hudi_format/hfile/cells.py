"""KeyValue cells of an HFile data block, decoded into Arrow arrays in bulk.

A data block is a run of cells, each ``int klen | int vlen | key | value`` (+ tags, + MVCC
vlong); the key is ``short rlen | row | byte flen | family | qualifier | long ts | byte type``.
A cell's start depends on every length before it, so a plain parser walks the block cell by
cell -- in Python, ~1 µs a cell, which made the record index slower than reading every key.

Hudi writes every cell with an empty family and qualifier, the latest timestamp and the Put
type, so each key ends with the same 9 bytes (``7fff..ff 04``). :func:`cell_spans` splits
the block at that marker with Arrow (C++), which gives every key's end, then finds each cell's
header inside its piece column-wise: a header lies ``vlen + mvcc`` bytes after the previous
key's end, and its ``rlen`` field must reach exactly to the marker (and its ``klen`` agree);
the few distinct value lengths are tried in rounds. The result is then *verified* against the
cell format column-wise (every ``klen``, ``vlen``, ``rlen``, family length and MVCC byte, and
each cell starting exactly where the previous one ends), which is precisely what the
sequential parser would have read. Anything else -- other cell layouts, tags, a marker inside
a value, damage -- falls back to the sequential parser, which names the damage; so do blocks
under :data:`SMALL_BLOCK`, where the column-wise pass's ~50 kernel calls cost more than the
few cells.

The located cells are kept as spans (:class:`CellSpans`): a lookup (:func:`find_cells`)
copies out every row to match the wanted keys, but only the matching cells' values.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc

from ..byte_ranges import gather
from ..errors import CorruptFileError
from ..membership import is_in
from .blocks import LATEST_TIMESTAMP, TYPE_PUT, decode_vint

__all__ = ["decode_cells", "decode_many", "find_cells", "find_cell", "NOT_HUDI_LAYOUT", "decode_cells_sequential",
           "cell_spans", "CellSpans", "binary_of", "runs",
           "KEY_SUFFIX", "SMALL_BLOCK"]

KEY_SUFFIX = struct.pack(">qB", LATEST_TIMESTAMP, TYPE_PUT)  # ts + type closing Hudi's keys
_KV = struct.Struct(">ii")
JOIN_BYTES = 8 << 20  # blocks decoded together in one pass (HFile blocks are ~1 MiB)
SMALL_BLOCK = 8 << 10  # below this, parsing cell by cell is cheaper than the column-wise pass
_MAX_ROUNDS = 64  # distinct value lengths tried before giving up on the column-wise path

def binary_of(payload) -> pa.Array:
    """``payload`` (bytes-like) as a one-value binary array, without a copy."""
    buf = pa.py_buffer(payload)
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, buf.size)), buf])


_U64 = pa.uint64()
_I32 = pa.int32()


_SMALL_I32 = {v: pa.scalar(v, _I32) for v in (0, 1, 2, 8, 10, 11, 12)}
_SMALL_U64 = {v: pa.scalar(v, pa.uint64()) for v in (8, 16, 24, 32, 0xFF)}


def _i32(v: int) -> pa.Scalar:
    got = _SMALL_I32.get(v)
    return got if got is not None else pa.scalar(v, _I32)


def _packed(data: pa.Buffer, starts: pa.Array, lo: int, hi: int, type_: pa.DataType) -> pa.Array | None:
    """Bytes ``[start + lo, start + hi)`` of every span starting at the non-decreasing
    ``starts`` (each running to the next start, the last to the end of ``data``), viewed as
    one fixed-width little-endian integer each; ``None`` when a span is too short."""
    n = len(starts)
    offsets = pa.concat_arrays([starts.cast(_I32), pa.array([data.size], _I32)])
    spans = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], data])
    cut = pc.binary_slice(spans, lo, hi)
    if cut.offset or cut.buffers()[2] is None or cut.buffers()[2].size < n * (hi - lo) \
            or pc.min(pc.binary_length(cut)).as_py() != hi - lo:
        return None
    return pa.Array.from_buffers(type_, n, [None, cut.buffers()[2]])


def _u64(v: int) -> pa.Scalar:
    got = _SMALL_U64.get(v)
    return got if got is not None else pa.scalar(v, _U64)


def _be16(u8: pa.Array, pos: pa.Array) -> pa.Array:
    """Big-endian 2-byte values at ``pos`` (int32; callers keep ``pos + 1`` inside ``u8``)."""
    return pc.add(pc.shift_left(pc.take(u8, pos).cast(_I32), _i32(8)),
                  pc.take(u8, pc.add(pos, _i32(1))).cast(_I32))


def _be32_as_le(x: pa.Array) -> pa.Array:
    """The little-endian reading (uint64) of ``x`` (0 <= x < 65536) stored as 4 big-endian bytes."""
    x = x.cast(_U64)
    return pc.bit_wise_or(pc.shift_left(pc.bit_wise_and(x, _u64(0xFF)), _u64(24)),
                          pc.shift_left(pc.shift_right(x, _u64(8)), _u64(16)))


class CellSpans:
    """Where the rows and values of a run of cells lie in ``data`` (int32 bounds): the cells
    are located and checked, but only the rows or values asked for are copied out."""

    __slots__ = ("data", "row_start", "row_end", "value_start", "value_end")

    def __init__(self, data: pa.Buffer, row_start: pa.Array, row_end: pa.Array,
                 value_start: pa.Array, value_end: pa.Array):
        self.data, self.row_start, self.row_end = data, row_start, row_end
        self.value_start, self.value_end = value_start, value_end

    def __len__(self) -> int:
        return len(self.row_start)

    def rows(self, idx: pa.Array | None = None) -> pa.Array:
        """The rows (of the cells at the increasing positions ``idx``)."""
        if idx is None:
            return gather(self.data, self.row_start, self.row_end)
        return gather(self.data, pc.take(self.row_start, idx), pc.take(self.row_end, idx))

    def values(self, idx: pa.Array | None = None) -> pa.Array:
        """The values (of the cells at the increasing positions ``idx``)."""
        if idx is None:
            return gather(self.data, self.value_start, self.value_end)
        return gather(self.data, pc.take(self.value_start, idx), pc.take(self.value_end, idx))


def cell_spans(payload, mvcc: bool) -> CellSpans | None:
    """The cells of a data block in Hudi's layout, located column-wise (see the module
    docstring); ``None`` when the block is not in that layout."""
    m = 1 if mvcc else 0
    pieces = pc.split_pattern(binary_of(payload), KEY_SUFFIX).flatten()
    n = len(pieces) - 1  # cells: each key ends at one marker
    if n < 1 or pieces.offset:
        return None
    data = pieces.buffers()[2]  # the block without its markers: positions below are in it
    size = data.size
    offs = pa.Array.from_buffers(_I32, n + 2, [None, pieces.buffers()[1]])
    if offs[0].as_py() != 0 or offs[n + 1].as_py() != size:
        return None
    lo, hi = offs.slice(0, n), offs.slice(1, n)  # piece j: [lo_j, hi_j); key j ends at hi_j
    # piece j: (MVCC byte and value of cell j-1,) header (8), rlen (2), row, family length (1)
    room = pc.subtract(hi, lo)
    if pc.min(room).as_py() < 11 or (n > 1 and pc.min(room.slice(1)).as_py() < 11 + m):
        return None
    u8 = pa.Array.from_buffers(pa.uint8(), size, [None, data])
    empty_row = pc.subtract(hi, _i32(11))  # where a header with an empty row would sit
    if int.from_bytes(bytes(payload[8:10]), "big") != empty_row[0].as_py():
        return None  # the first header opens the block; its row must end at the first marker
    # The header of cell j >= 1 sits ``w + m`` into piece j, w being the previous value's
    # length: try the value lengths met so far in rounds; a header is found where the row
    # length it holds reaches exactly to the marker.
    base = pc.add(lo, _i32(m))
    header = pa.concat_arrays([pa.array([0], _I32), pa.nulls(n - 1, _I32)])
    first_vlen = struct.unpack_from(">i", payload, 4)[0]
    todo, tried = {first_vlen}, set()
    while todo and header.null_count:
        if len(tried) >= _MAX_ROUNDS:
            return None
        guess = todo.pop()
        tried.add(guess)
        if guess < 0:
            continue
        cand = pc.add(base, _i32(guess))
        safe = pc.min_element_wise(cand, empty_row)
        rlen = _be16(u8, pc.add(safe, _i32(8)))
        # the row length must reach the marker and the key length (its low half) agree with it:
        # a wrong guess passes both by chance about once in 2**32 cells
        fits = pc.and_(pc.equal(rlen, pc.subtract(empty_row, cand)),
                       pc.equal(_be16(u8, pc.add(safe, _i32(2))), pc.add(rlen, _i32(12))))
        new = pc.and_kleene(pc.is_null(header), fits)
        if not pc.any(new).as_py():
            continue
        header = pc.if_else(new, cand, header)
        if not header.null_count:
            break
        # the value lengths of the cells found just before a cell still unresolved guess its header
        before = pc.and_(new.slice(0, n - 1), pc.is_null(header.slice(1)))
        found = pc.filter(cand.slice(0, n - 1), before)
        for raw in pc.unique(_packed(data, found, 4, 8, pa.uint32()) or pa.array([], pa.uint32())).to_pylist():
            value_len = int.from_bytes(raw.to_bytes(4, "little"), "big", signed=True)
            if value_len not in tried:
                todo.add(value_len)
    if header.null_count:
        return None
    # verify every header against what a sequential parser reads there: the key and value
    # lengths (each value reaching to the next header, the last to the block's end), the
    # family length and the MVCC byte (the row length was matched when the header was found)
    vlen = pa.concat_arrays([pc.subtract(header.slice(1), base.slice(1)),
                             pa.array([size - hi[n - 1].as_py() - m], _I32)])
    klen = pc.add(pc.subtract(hi, header), _i32(1))  # the key ends at the marker
    if pc.min(vlen).as_py() < 0 or pc.max(vlen).as_py() >= 1 << 16 or pc.max(klen).as_py() >= 1 << 16:
        return None
    lens = _packed(data, header, 0, 8, _U64)
    if lens is None:
        return None
    expect = pc.bit_wise_or(_be32_as_le(klen), pc.shift_left(_be32_as_le(vlen), _u64(32)))
    value_end = pc.add(hi, vlen)
    checks = [lambda: pc.equal(lens, expect),  # klen, vlen
              lambda: pc.equal(pc.take(u8, pc.subtract(hi, _i32(1))), 0)]  # family length
    if m:
        checks.append(lambda: pc.equal(pc.take(u8, value_end), 0))  # MVCC version 0, one byte
    for check in checks:
        if not pc.all(check()).as_py():
            return None
    return CellSpans(data, pc.add(header, _i32(10)), pc.subtract(hi, _i32(1)), hi, value_end)


def _decode_columnwise(payload, mvcc: bool) -> tuple[pa.Array, pa.Array] | None:
    """Rows and values, or ``None`` when the block is not in Hudi's cell layout."""
    spans = cell_spans(payload, mvcc)
    return None if spans is None else (spans.rows(), spans.values())


def decode_cells_sequential(payload, mvcc: bool, tags: bool, where: str) -> tuple[list[bytes], list[bytes]]:
    """Rows and values cell by cell (any cell layout); damage raises naming ``where``."""
    rows, values = [], []
    pos, end = 0, len(payload)
    unpack = _KV.unpack_from
    try:
        while pos < end:
            klen, vlen = unpack(payload, pos)
            kstart = pos + 8
            vstart = kstart + klen
            pos = vstart + vlen
            if klen < 2 or vlen < 0 or pos > end:
                raise ValueError(f"cell at byte {kstart - 8} overruns the block")
            rlen = (payload[kstart] << 8) | payload[kstart + 1]
            if rlen + 2 > klen:
                raise ValueError(f"cell at byte {kstart - 8} has a row longer than its key")
            rows.append(bytes(payload[kstart + 2:kstart + 2 + rlen]))
            values.append(bytes(payload[vstart:pos]))
            if tags:
                (tlen,) = struct.unpack_from(">H", payload, pos)
                pos += 2 + tlen
            if mvcc:
                if payload[pos] < 0x80:  # the usual single-byte vlong (0 for Hudi)
                    pos += 1
                else:
                    _, pos = decode_vint(payload, pos)
        if pos != end:
            raise ValueError("last cell overruns the block")
    except (struct.error, IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: {exc}") from exc
    return rows, values


def _columnwise_pays(payload, tags: bool) -> bool:
    """Is the column-wise path worth trying? Not for tags (not Hudi's layout), nor for small
    blocks, where its ~40 kernel calls cost more than parsing the few cells one by one."""
    return not tags and SMALL_BLOCK <= len(payload) < (1 << 31) - 1


def decode_cells(payload, mvcc: bool, tags: bool, where: str) -> tuple[pa.Array, pa.Array]:
    """``(rows, values)`` of a data block as binary arrays, in file order."""
    if not payload:
        empty = pa.array([], pa.binary())
        return empty, empty
    if _columnwise_pays(payload, tags):
        got = _decode_columnwise(payload, mvcc)
        if got is not None:
            return got
    rows, values = decode_cells_sequential(bytes(payload), mvcc, tags, where)
    return pa.array(rows, pa.binary()), pa.array(values, pa.binary())


def runs(payloads: list) -> list[tuple[int, int]]:
    """Runs of consecutive blocks of up to :data:`JOIN_BYTES` together (cells never straddle
    blocks, so a run decodes as one; bigger arrays fall out of the CPU caches between kernels)."""
    out, i = [], 0
    while i < len(payloads):
        j, size = i, 0
        while j < len(payloads) and (j == i or size + len(payloads[j]) <= JOIN_BYTES):
            size += len(payloads[j])
            j += 1
        out.append((i, j))
        i = j
    return out


def _run_spans(payloads: list, mvcc: bool, tags: bool) -> CellSpans | None:
    joined = payloads[0] if len(payloads) == 1 else b"".join(payloads)
    return cell_spans(joined, mvcc) if _columnwise_pays(joined, tags) else None


def decode_many(payloads: list, mvcc: bool, tags: bool, wheres: list[str]) -> tuple[pa.Array, pa.Array]:
    """``(rows, values)`` of several data blocks, in order: runs of blocks in one column-wise
    pass each; block by block when a run does not take the fast path (so that damage is
    reported in the right block)."""
    return find_cells(payloads, mvcc, tags, wheres, None)


def find_cells(payloads: list, mvcc: bool, tags: bool, wheres: list[str],
               keys: pa.Array | None) -> tuple[pa.Array, pa.Array]:
    """``(rows, values)`` of the cells of several data blocks whose row is one of ``keys``
    (binary; ``None``: every cell), in order. Rows are matched column-wise and only the
    matching cells' values are copied out."""
    rows: list[pa.Array] = []
    values: list[pa.Array] = []
    for i, j in runs(payloads):
        spans = _run_spans(payloads[i:j], mvcc, tags)
        if spans is not None:
            got = spans.rows()
            if keys is None:
                rows.append(got)
                values.append(spans.values())
            else:
                idx = pc.indices_nonzero(is_in(got, keys))
                rows.append(pc.take(got, idx))
                values.append(spans.values(idx))
            continue
        for p, w in zip(payloads[i:j], wheres[i:j]):
            r, v = decode_cells(p, mvcc, tags, w)
            if keys is not None:
                hit = is_in(r, keys)
                r, v = pc.filter(r, hit), pc.filter(v, hit)
            rows.append(r)
            values.append(v)
    if not rows:
        empty = pa.array([], pa.binary())
        return empty, empty
    return pa.concat_arrays(rows), pa.concat_arrays(values)


# -- one key in one block ---------------------------------------------------------------------------
NOT_HUDI_LAYOUT = object()   # find_cell: the block's cells are not in Hudi's layout
_FAMILY_TS_PUT = b"\x00" + KEY_SUFFIX   # empty family, latest timestamp, Put: the end of Hudi's keys


def hudi_layout(payload) -> bool:
    """Whether the block's first cell is in Hudi's layout (its key: row, empty family and
    qualifier, latest timestamp, Put), which every cell of an HFile Hudi writes follows."""
    if len(payload) < 8 + 2 + len(_FAMILY_TS_PUT):
        return False
    klen = struct.unpack_from(">i", payload, 0)[0]
    rlen = struct.unpack_from(">H", payload, 8)[0]
    return klen == rlen + 2 + len(_FAMILY_TS_PUT) and \
        payload[10 + rlen:10 + rlen + len(_FAMILY_TS_PUT)] == _FAMILY_TS_PUT


def find_cell(payload: bytes, key: bytes) -> bytes | None | object:
    """The value of the first cell of row ``key`` in a data block in Hudi's layout (see
    :func:`hudi_layout`; the caller checks it), ``None`` when no cell has that row, or
    :data:`NOT_HUDI_LAYOUT` when what was found is not such a cell. One search for the key
    framed as Hudi frames it (row length, row, empty family, latest timestamp, Put), then
    its cell header checked: for a lookup of a few keys in a block this costs a few
    microseconds, where locating every cell of the block costs a hundred."""
    if len(key) > 0x7FFF:
        return NOT_HUDI_LAYOUT
    at = payload.find(struct.pack(">H", len(key)) + key + _FAMILY_TS_PUT)
    if at < 0:
        return None
    if at < 8:
        return NOT_HUDI_LAYOUT
    klen, vlen = _KV.unpack_from(payload, at - 8)
    start = at + klen
    if klen != len(key) + 2 + len(_FAMILY_TS_PUT) or vlen < 0 or start + vlen > len(payload):
        return NOT_HUDI_LAYOUT
    return bytes(payload[start:start + vlen])
