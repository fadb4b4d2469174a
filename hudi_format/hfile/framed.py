"""Looking keys up in data blocks of Hudi's cell layout by their framed rows, without locating
every cell.

Hudi writes every cell's key as ``row length | row | empty family | latest timestamp | Put``,
so a key looked for appears in a block as one exact byte run -- its *frame* -- ending in the
9-byte marker :data:`.cells.KEY_SUFFIX`, right after the cell's key and value lengths. Where a
file's values cannot hold such a run (the record index's Avro values cannot: see
:meth:`.reader.HFileReader.lookup_arrays`), finding the frame finds the cell:

- a few keys per block: each key's frame is searched in the blocks that may hold it
  (:func:`search_each`, one ``bytes.find`` each);
- many keys per block (an upsert tagged through the record index asks for ~10 keys in each
  block of a 5M-entry index): the blocks are split at the marker with Arrow, each piece ending
  with ``row length | row | family length``; for each key length ``L`` the last ``L + 3``
  bytes of every piece are matched against the keys' frames in one hash lookup
  (:func:`match_framed`), and only the matched cells' headers are read. Locating every cell
  column-wise (:func:`.cells.find_cells`) cost twice as much (36 against 18 ms on a
  14 MB file of a 5M-entry index).

Every match is checked as :func:`.cells.find_cell` checks it (the key length agrees with the
row, the value lies inside the block); anything else returns ``None`` and the caller decodes
the blocks cell by cell, which names any damage.
"""

from __future__ import annotations

import bisect
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..byte_ranges import gather
from ..membership import is_in
from .cells import KEY_SUFFIX, NOT_HUDI_LAYOUT, binary_of, find_cell, hudi_layout, runs

__all__ = ["lookup", "search_each", "match_framed", "candidates"]

# up to this many keys per data block on average, each key's frame is searched (bytes.find,
# which holds the GIL): on 16 KiB record index blocks (~420 cells) searching and locating every
# cell cost the same at 2 keys a block, and searching took 0.066 s where locating took 0.048 s
# at 6.6 keys a block
SEARCH_KEYS_PER_BLOCK = 2
_PIECES_PER_KEY = 160       # a key length with fewer keys than pieces / this is searched key by key
_MARK = len(KEY_SUFFIX)
_KV_AT = np.arange(8)


def candidates(starts: list[bytes], key: bytes) -> range:
    """The blocks that may hold ``key``, ``starts`` being their first rows in file order: from
    the one before the first starting at ``key`` (a run of equal rows may begin there) to the
    last starting at it."""
    return range(max(bisect.bisect_left(starts, key) - 1, 0), bisect.bisect_right(starts, key))


def lookup(keys: pa.Array, key_list: list[bytes], payloads: list,
           starts: list[bytes]) -> tuple[pa.Array, pa.Array] | None:
    """``(rows found, values)`` of the sorted distinct binary ``keys`` (``key_list``: the same
    as bytes) in the data blocks ``payloads`` (``starts``: their first rows), in file order (a
    repeated row may come more than once: the caller keeps its first); ``None`` when a block
    is not in Hudi's cell layout."""
    blocks = [p if isinstance(p, bytes) else bytes(p) for p in payloads]
    if not all(hudi_layout(b) for b in blocks):
        return None
    if len(key_list) <= SEARCH_KEYS_PER_BLOCK * len(blocks):
        return search_each(key_list, blocks, starts)
    lengths = pc.binary_length(keys)
    counts = pc.value_counts(lengths)
    cells_guess = sum(map(len, blocks)) // 64   # Hudi's cells are >= 64 bytes
    dense = [n for n, c in zip(counts.field(0).to_pylist(), counts.field(1).to_pylist())
             if c * _PIECES_PER_KEY >= cells_guess]
    if not dense:
        return search_each(key_list, blocks, starts)
    found = []
    if len(dense) < len(counts):
        rest = pc.filter(keys, pc.invert(pc.is_in(lengths, value_set=pa.array(dense, lengths.type))))
        found.append(search_each(rest.to_pylist(), blocks, starts))
    framed = {n: pc.binary_join_element_wise(pa.scalar(struct.pack(">H", n)), pc.filter(keys, pc.equal(lengths, n)),
                                             pa.scalar(b"\x00"), b"") for n in dense}
    found.extend(match_framed(blocks[i:j], framed) for i, j in runs(blocks))
    done = [f for f in found if f is not None]
    if len(done) < len(found):
        return None
    rows = pa.concat_arrays([f[0] for f in done])
    values = pa.concat_arrays([f[1] for f in done])
    if len(done) > 1:  # runs, and searched keys: into file order (stable: repeats keep theirs)
        order = pc.sort_indices(rows)
        rows, values = pc.take(rows, order), pc.take(values, order)
    return rows, values


def search_each(keys: list[bytes], blocks: list[bytes], starts: list[bytes]) -> tuple[pa.Array, pa.Array] | None:
    """Each of the sorted ``keys``' cell searched (:func:`.cells.find_cell`) in the blocks that
    may hold it, in file order, the first found winning; ``None`` when what a frame found is
    not a cell of Hudi's layout."""
    rows, values = [], []
    for key in keys:
        for i in candidates(starts, key):
            value = find_cell(blocks[i], key)
            if value is NOT_HUDI_LAYOUT:
                return None
            if value is not None:
                rows.append(key)
                values.append(value)
                break
    return pa.array(rows, pa.binary()), pa.array(values, pa.binary())


def match_framed(blocks: list[bytes], framed: dict[int, pa.Array]) -> tuple[pa.Array, pa.Array] | None:
    """``(rows, values)`` of the cells of consecutive ``blocks`` whose row is one of the keys,
    given framed (``row length | key | 0``) by key length, in file order (a repeated row's
    every cell); ``None`` when a match does not check out as a cell."""
    joined = blocks[0] if len(blocks) == 1 else b"".join(blocks)
    whole = binary_of(joined)
    pieces = pc.split_pattern(whole, KEY_SUFFIX).flatten()
    n = len(pieces) - 1   # pieces ending at a marker: the last is the last cell's value
    if n < 1 or pieces.offset:
        return None
    heads = pieces.slice(0, n)
    hits, lengths = [], []
    for length, frames in framed.items():
        if length > 0x7FFF:
            return None
        tails = pc.binary_slice(heads, -(length + 3))
        hit = pc.indices_nonzero(is_in(tails, frames)).to_numpy().astype(np.int64)
        hits.append(hit)
        lengths.append(np.full(len(hit), length, np.int64))
    piece = np.concatenate(hits)
    if not len(piece):
        empty = pa.array([], pa.binary())
        return empty, empty
    length = np.concatenate(lengths)
    order = np.argsort(piece, kind="stable")
    piece, length = piece[order], length[order]
    if len(piece) > 1 and not (piece[1:] > piece[:-1]).all():
        return None   # one piece framing two keys: not a cell of Hudi's layout
    offsets = np.frombuffer(pieces.buffers()[1], np.int32, n + 2)
    marker = offsets[piece + 1].astype(np.int64) + _MARK * piece   # where each key's marker is in ``joined``
    header = marker - length - 3 - 8                                 # its cell's key and value lengths
    data = np.frombuffer(joined, np.uint8)
    if int(header.min()) < 0:
        return None
    kv = data[header[:, None] + _KV_AT].copy().view(">i4")
    value_start = marker + _MARK
    value_end = value_start + kv[:, 1]
    if not np.array_equal(kv[:, 0], length + 2 + 1 + _MARK) or int(kv[:, 1].min()) < 0 \
            or int(value_end.max()) > len(joined):
        return None
    rows = gather(whole.buffers()[2], pa.array(header + 10), pa.array(header + 10 + length))
    return rows, gather(whole.buffers()[2], pa.array(value_start), pa.array(value_end))
