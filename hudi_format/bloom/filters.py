"""Hudi's record-key bloom filters, bit for bit as Apache Hudi builds and serializes them.

Every base file Hudi writes carries a bloom filter over its record keys in the Parquet footer
(``org.apache.hudi.bloomfilter``), and the metadata table's ``bloom_filters`` partition holds
the same string. The bloom index asks these filters which files might hold an incoming key, so
our filters must hash exactly as Hudi does (its copy of Hadoop's MurmurHash 2, chained seeds,
``abs(h % m)`` positions) and serialize to the very same Base64 text: a Java reader loads ours,
and ours loads Java's.

Two layouts exist (``hoodie.bloom.index.filter.type``):

- ``SIMPLE``: one bit vector (Hadoop ``BloomFilter``).
- ``DYNAMIC_V0`` (default): ``HoodieDynamicBoundedBloomFilter``, rows of equal bit vectors; a
  new row is opened each ``num_entries`` keys until ``max_entries`` is covered, then keys go to
  the rows round robin.

Serialized form (Java ``DataOutput``, big-endian, then standard Base64 with padding)::

    filter header: int32 -1 (version), int32 nb_hash, int8 hash_type (1 = murmur), int32 vector_size
    SIMPLE:        header, ceil(vector_size / 8) bytes of bits (bit i -> byte i//8, mask 1 << i%8)
    DYNAMIC_V0:    header, int32 nr, int32 current_nb_record, int32 rows, rows x (header, bits)

Hashing lives in :mod:`.murmur` (column-wise, NumPy). Adding keys sets the bits of all
rounds of a block of keys in one scatter into a byte-per-bit scratch array: with several rows,
each key's positions are shifted into its row's stretch of one long bit space, which is then
packed (LSB first, as Hudi's bit vectors) and OR-ed into the rows.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

import numpy as np
import pyarrow as pa

from ..errors import CorruptFileError, InvalidOptionError, UnsupportedFeatureError
from ..options import default
from .murmur import as_binary as _as_binary
from .murmur import hash_positions, hash_positions_all, iter_positions, murmur_hash

__all__ = ["BloomFilter", "SimpleBloomFilter", "DynamicBloomFilter", "new_bloom_filter",
           "murmur_hash", "hash_positions", "hash_positions_all", "bit_size", "num_hashes",
           "SIMPLE", "DYNAMIC_V0", "DEFAULT_NUM_ENTRIES", "DEFAULT_FPP", "DEFAULT_MAX_ENTRIES",
           "DEFAULT_TYPE_CODE", "resume", "holds_as_is"]

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
# Hudi's defaults, declared once in the option registry
DEFAULT_NUM_ENTRIES: int = default("hoodie.index.bloom.num_entries")
DEFAULT_FPP: float = default("hoodie.index.bloom.fpp")
DEFAULT_MAX_ENTRIES: int = default("hoodie.bloom.index.filter.dynamic.max.entries")
DEFAULT_TYPE_CODE: str = default("hoodie.bloom.index.filter.type")

JENKINS_HASH = 0
MURMUR_HASH = 1
_VERSION = -1
_HEADER = struct.Struct(">iibi")
_DYN_HEADER = struct.Struct(">iii")
_MASK = 0xFFFFFFFF
_CHUNK = 1 << 16          # keys hashed per block (see murmur._BLOCK)
_SCALAR_LIMIT = 64        # below this many keys, the plain-Python path is cheaper
_MAX_SPAN = 1 << 26       # rows x bits of one scatter's scratch array (a byte per bit)


# -- sizing (BloomFilterUtils) ------------------------------------------------------------------
def bit_size(num_entries: int, fpp: float) -> int:
    """Bits for ``num_entries`` keys at false-positive rate ``fpp``, as Hudi rounds it."""
    return int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2)))))


def num_hashes(bits: int, num_entries: int) -> int:
    """Hash rounds per key, as Hudi rounds it (``ceil(ln 2 * bits / entries)``)."""
    return int(math.ceil(math.log(2) * bits / num_entries))


def _scatter(blocks, size: int) -> np.ndarray:
    """A byte per bit of a ``size``-bit space, set at every position of ``blocks`` (from
    :func:`iter_positions`)."""
    hit = np.zeros(size, np.bool_)
    for _, pos in blocks:
        hit[pos] = True
    return hit


def _pack(hit: np.ndarray) -> np.ndarray:
    """Bits (a byte each) as Hudi's bit-vector bytes: bit ``i`` -> byte ``i // 8``, LSB first."""
    return np.packbits(hit, bitorder="little")


# -- one bit vector (InternalBloomFilter) -------------------------------------------------------
class _BitVector:
    """A row of bits with its hashing parameters."""

    __slots__ = ("vector_size", "nb_hash", "hash_type", "bits")

    def __init__(self, vector_size: int, nb_hash: int, hash_type: int = MURMUR_HASH,
                 bits: bytearray | None = None):
        if vector_size <= 0 or nb_hash <= 0:
            raise InvalidOptionError(f"bloom filter needs vector_size > 0 and nb_hash > 0, "
                                     f"got {vector_size} and {nb_hash}")
        self.vector_size, self.nb_hash, self.hash_type = vector_size, nb_hash, hash_type
        self.bits = bits if bits is not None else bytearray((vector_size + 7) // 8)

    def check_hash(self) -> None:
        if self.hash_type != MURMUR_HASH:
            raise UnsupportedFeatureError(f"bloom filter hash type {self.hash_type} (Jenkins) is not "
                                          "supported; Hudi writes murmur (1)")

    def set_all(self, pos: list[int]) -> None:
        b = self.bits
        for p in pos:
            b[p >> 3] |= 1 << (p & 7)

    def test(self, pos: list[int]) -> bool:
        b = self.bits
        return all(b[p >> 3] >> (p & 7) & 1 for p in pos)

    def or_bitmap(self, other: np.ndarray) -> None:
        mine = np.frombuffer(self.bits, np.uint8)    # a writable view of the bytearray
        mine |= other

    def unpacked(self) -> np.ndarray:
        """The bits, a byte (bool) each."""
        raw = np.frombuffer(bytes(self.bits), np.uint8)
        return np.unpackbits(raw, count=self.vector_size, bitorder="little").view(np.bool_)

    def header(self) -> bytes:
        return _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size)

    def write(self) -> bytes:
        return self.header() + bytes(self.bits)

    @classmethod
    def read(cls, buf: memoryview, pos: int, what: str) -> tuple["_BitVector", int]:
        try:
            ver, = struct.unpack_from(">i", buf, pos)
            if ver > 0:        # pre-versioned Hadoop layout: nb_hash first, Jenkins hashing
                nb_hash, hash_type = ver, JENKINS_HASH
                pos += 4
            elif ver == _VERSION:
                _, nb_hash, hash_type = struct.unpack_from(">iib", buf, pos)
                pos += 9
            else:
                raise CorruptFileError(f"{what}: unsupported bloom filter version {ver}")
            vector_size, = struct.unpack_from(">i", buf, pos)
            pos += 4
        except struct.error as exc:
            raise CorruptFileError(f"{what}: bloom filter header is truncated") from exc
        nbytes = (vector_size + 7) // 8
        if vector_size <= 0 or nb_hash <= 0 or pos + nbytes > len(buf):
            raise CorruptFileError(f"{what}: bloom filter bit vector is truncated or invalid "
                                   f"(vector_size={vector_size}, nb_hash={nb_hash})")
        bits = bytearray(buf[pos:pos + nbytes])
        return cls(vector_size, nb_hash, hash_type, bits), pos + nbytes


# -- public filters -----------------------------------------------------------------------------
class BloomFilter:
    """A Hudi bloom filter over record keys (UTF-8 strings)."""

    type_code: str = ""

    # subclasses set _rows and define _assign(n): the row of each of the next n keys
    # (None: all in row 0) and _to_bytes()
    _rows: list[_BitVector]

    @property
    def vector_size(self) -> int:
        return self._rows[0].vector_size

    @property
    def nb_hash(self) -> int:
        return self._rows[0].nb_hash

    def add(self, key: str) -> None:
        """Add one record key."""
        data = _key_bytes(key)
        row = self._assign(1)[0]
        row.check_hash()
        row.set_all(hash_positions(data, row.nb_hash, row.vector_size))

    def add_all(self, keys) -> None:
        """Add many keys (Arrow string array/chunked array or iterable), in order."""
        arr = _as_binary(keys)
        if len(arr) <= _SCALAR_LIMIT:
            for k in arr.to_pylist():
                self.add(k)
            return
        self._rows[0].check_hash()
        self._set_bits(arr, self._assign(len(arr)))

    def _set_bits(self, arr: pa.Array, rows: np.ndarray | None) -> None:
        """Set the bits of every key of ``arr`` in its row (``rows`` None: all in row 0)."""
        size, nb = self.vector_size, self.nb_hash
        used = [0] if rows is None else np.flatnonzero(np.bincount(rows)).tolist()
        if len(used) == 1:
            hit = _scatter(iter_positions(arr, nb, size, _CHUNK), size)
            self._rows[used[0]].or_bitmap(_pack(hit))
            return
        assert rows is not None
        span = (max(used) + 1) * size
        if span > _MAX_SPAN:                         # too wide for one scratch array: row by row
            for idx in used:
                sub = arr.take(pa.array(np.flatnonzero(rows == idx)))
                self._rows[idx].or_bitmap(_pack(_scatter(iter_positions(sub, nb, size, _CHUNK), size)))
            return
        hit = _scatter(iter_positions(arr, nb, size, _CHUNK, rows * size), span)
        for idx in used:                             # row r: bits [r * size, (r + 1) * size)
            self._rows[idx].or_bitmap(_pack(hit[idx * size:(idx + 1) * size]))

    def might_contain(self, key: str) -> bool:
        """False only if ``key`` was certainly never added."""
        data = _key_bytes(key)
        self._rows[0].check_hash()
        pos = hash_positions(data, self.nb_hash, self.vector_size)
        return any(r.test(pos) for r in self._rows)

    def might_contain_all(self, keys) -> pa.Array:
        """Vectorised :meth:`might_contain`: one boolean per key."""
        arr = _as_binary(keys)
        self._rows[0].check_hash()
        if len(arr) <= _SCALAR_LIMIT:
            return pa.array([self.might_contain(k) for k in arr.to_pylist()], pa.bool_())
        bits = [r.unpacked() for r in self._rows]
        out = np.zeros(len(arr), np.bool_)
        for which, pos in iter_positions(arr, self.nb_hash, self.vector_size, _CHUNK):
            found = bits[0][pos].all(axis=0)
            for more in bits[1:]:
                found |= more[pos].all(axis=0)
            out[which] = found
        return pa.array(out)

    def serialize(self) -> str:
        """Hudi's footer / metadata-table string: Base64 of the Java ``DataOutput`` bytes."""
        return base64.b64encode(self._to_bytes()).decode("ascii")

    def _to_bytes(self) -> bytes:
        raise NotImplementedError

    @staticmethod
    def deserialize(text: str | bytes, type_code: str | bytes | None = DYNAMIC_V0) -> "BloomFilter":
        """Load a filter from Hudi's string; ``type_code`` is the footer's
        ``hoodie_bloom_filter_type_code`` (absent means ``SIMPLE``, as in old Hudi files)."""
        code = _type_code(type_code if type_code is not None else SIMPLE)
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CorruptFileError(f"bloom filter is not valid Base64: {exc}") from exc
        buf = memoryview(raw)
        if code == SIMPLE:
            row, end = _BitVector.read(buf, 0, "SIMPLE bloom filter")
            f = SimpleBloomFilter.__new__(SimpleBloomFilter)
            f._rows = [row]
        else:
            f = DynamicBloomFilter.__new__(DynamicBloomFilter)
            end = f._read(buf)
        if end != len(raw):
            raise CorruptFileError(f"{code} bloom filter has {len(raw) - end} trailing bytes")
        return f

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._to_bytes() == other._to_bytes()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(vector_size={self.vector_size}, nb_hash={self.nb_hash}, "
                f"rows={len(self._rows)})")


def resume(stored: BloomFilter, fresh: BloomFilter, added: int) -> BloomFilter | None:
    """``fresh`` (an empty filter, as configured) in the state it would reach after ``added``
    keys, with the bits of ``stored`` (a file's filter, said to hold its ``added`` keys): what
    a merge that keeps a file's keys in place continues from, instead of hashing them again.
    ``None`` when ``stored`` cannot be that state: other parameters or type, or (dynamic) a
    row count and record count that ``added`` keys do not lead to."""
    if type(stored) is not type(fresh) or stored.vector_size != fresh.vector_size \
            or stored.nb_hash != fresh.nb_hash or stored._rows[0].hash_type != fresh._rows[0].hash_type:
        return None
    if isinstance(fresh, DynamicBloomFilter):
        assert isinstance(stored, DynamicBloomFilter)
        if stored.nr != fresh.nr:
            return None
        if added:
            fresh._assign(added)      # the row bookkeeping of ``added`` keys, no hashing
        if len(fresh._rows) != len(stored._rows) or fresh.current_nb_record != stored.current_nb_record:
            return None
    for mine, theirs in zip(fresh._rows, stored._rows):
        mine.bits[:] = theirs.bits
    return fresh


def holds_as_is(text: str, fresh: BloomFilter, added: int) -> bool:
    """Whether ``text``, a file's Base64 filter said to hold its ``added`` keys, is byte for
    byte what ``fresh`` (an empty filter, as configured) serializes after those keys: what
    :func:`resume` would make of it, decided from its headers alone. A merge that keeps every
    key of a file and adds none then writes the text again as it is: decoding and encoding
    ~0.9 MB of Base64 per 120k-key file cost more than the rest of its footer."""
    try:
        head = base64.b64decode(text[:64], validate=True)   # 48 bytes: every header there is
    except (binascii.Error, ValueError):
        return False
    if len(head) < _HEADER.size + _DYN_HEADER.size + _HEADER.size:
        return False
    row = fresh._rows[0]
    want = _HEADER.pack(_VERSION, row.nb_hash, row.hash_type, row.vector_size)
    row_bytes = _HEADER.size + (row.vector_size + 7) // 8
    if head[:_HEADER.size] != want:
        return False
    if isinstance(fresh, DynamicBloomFilter):
        nr, current, nrows = _DYN_HEADER.unpack_from(head, _HEADER.size)
        if added:
            fresh._assign(added)      # the bookkeeping of ``added`` keys, no hashing
        first = _HEADER.size + _DYN_HEADER.size
        if (nr, current, nrows) != (fresh.nr, _i32(fresh.current_nb_record), len(fresh._rows)) \
                or head[first:first + _HEADER.size] != want:
            return False
        size = first + nrows * row_bytes
    elif isinstance(fresh, SimpleBloomFilter):
        size = row_bytes
    else:
        return False
    return len(text) == 4 * ((size + 2) // 3)   # no more and no fewer bytes than those rows


def _key_bytes(key) -> bytes:
    if key is None:
        raise ValueError("bloom filter key cannot be null")
    data = key if isinstance(key, bytes) else key.encode("utf-8")
    if not data:
        raise ValueError("bloom filter key length must be > 0")
    return data


def _type_code(code) -> str:
    c = code.decode() if isinstance(code, bytes) else str(code)
    c = c.upper()
    if c not in (SIMPLE, DYNAMIC_V0):
        raise InvalidOptionError(f"hoodie.bloom.index.filter.type: unknown bloom filter type "
                                 f"code {code!r} (expected SIMPLE or DYNAMIC_V0)")
    return c


class SimpleBloomFilter(BloomFilter):
    """``SIMPLE``: a single Hadoop-style bit vector."""

    type_code = SIMPLE

    def __init__(self, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP):
        _check_sizing(num_entries, fpp)
        bits = bit_size(num_entries, fpp)
        self._rows = [_BitVector(bits, num_hashes(bits, num_entries))]

    def _assign(self, n: int):
        return [self._rows[0]] if n == 1 else None

    def _to_bytes(self) -> bytes:
        return self._rows[0].write()


class DynamicBloomFilter(BloomFilter):
    """``DYNAMIC_V0``: Hudi's bounded dynamic filter (``InternalDynamicBloomFilter``).

    ``nr`` keys go into each row; rows are added until ``rows * nr >= max_nr``, after which keys
    cycle over the rows. ``reached_max``/``cur_matrix_index`` are not serialized, as in Java, so
    a loaded filter restarts that cycle exactly as Hudi's would.
    """

    type_code = DYNAMIC_V0

    def __init__(self, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
                 max_entries: int = DEFAULT_MAX_ENTRIES):
        _check_sizing(num_entries, fpp)
        bits = bit_size(num_entries, fpp)
        self._proto = _BitVector(bits, num_hashes(bits, num_entries))
        self._rows = [_BitVector(bits, self._proto.nb_hash)]
        self.nr = num_entries
        self.max_nr = max_entries
        self.current_nb_record = 0
        self._reached_max = False
        self._cur = 0

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def _next_row(self) -> int:
        """Java ``getActiveStandardBF`` + ``add`` bookkeeping for one key: its row index."""
        if self._reached_max:
            idx = self._cur % len(self._rows)
            self._cur += 1
        elif self.current_nb_record >= self.nr and len(self._rows) * self.nr < self.max_nr:
            r = self._proto
            self._rows.append(_BitVector(r.vector_size, r.nb_hash, r.hash_type))
            self.current_nb_record = 0
            idx = len(self._rows) - 1
        elif self.current_nb_record >= self.nr:
            self._reached_max = True
            idx = 0
        else:
            idx = len(self._rows) - 1
        self.current_nb_record = (self.current_nb_record + 1) & _MASK
        if self.current_nb_record >= 1 << 31:       # Java int overflow, kept for fidelity
            self.current_nb_record -= 1 << 32
        return idx

    def _assign(self, n: int):
        if n == 1:
            return [self._rows[self._next_row()]]
        # Segments: fill the active row, open rows while allowed, then round robin.
        parts: list[np.ndarray] = []
        done = 0
        while done < n and not self._reached_max:
            room = self.nr - self.current_nb_record
            if room > 0:
                take = min(room, n - done)
                parts.append(np.full(take, len(self._rows) - 1, np.int64))
                self.current_nb_record += take
                done += take
            else:
                parts.append(np.array([self._next_row()], np.int64))
                done += 1
        if done < n:
            rest = n - done
            parts.append((np.arange(rest, dtype=np.int64) + self._cur) % len(self._rows))
            self._cur += rest
            self.current_nb_record += rest
        if len(self._rows) == 1:
            return None
        return np.concatenate(parts)

    def _to_bytes(self) -> bytes:
        r0 = self._rows[0]
        out = [r0.header(), _DYN_HEADER.pack(self.nr, _i32(self.current_nb_record), len(self._rows))]
        out.extend(r.write() for r in self._rows)
        return b"".join(out)

    def _read(self, buf: memoryview) -> int:
        what = "DYNAMIC_V0 bloom filter"
        proto, pos = _read_header(buf, what)
        try:
            self.nr, self.current_nb_record, nrows = _DYN_HEADER.unpack_from(buf, pos)
        except struct.error as exc:
            raise CorruptFileError(f"{what}: header is truncated") from exc
        pos += _DYN_HEADER.size
        if nrows <= 0 or self.nr <= 0:
            raise CorruptFileError(f"{what}: invalid row count {nrows} or nr {self.nr}")
        self._rows = []
        for _ in range(nrows):
            row, pos = _BitVector.read(buf, pos, what)
            self._rows.append(row)
        self._proto = proto
        self.max_nr = 0      # not serialized: Java's readFields leaves maxNr at 0 too
        self._reached_max = False
        self._cur = 0
        return pos


def _read_header(buf: memoryview, what: str) -> tuple[_BitVector, int]:
    """The outer filter header of a dynamic filter (no bit vector follows it directly)."""
    try:
        ver, nb_hash, hash_type, vector_size = _HEADER.unpack_from(buf, 0)
    except struct.error as exc:
        raise CorruptFileError(f"{what}: header is truncated") from exc
    if ver != _VERSION or vector_size <= 0 or nb_hash <= 0:
        raise CorruptFileError(f"{what}: bad header (version={ver}, nb_hash={nb_hash}, "
                               f"vector_size={vector_size})")
    return _BitVector(vector_size, nb_hash, hash_type, bytearray()), _HEADER.size


def _i32(v: int) -> int:
    v &= _MASK
    return v - (1 << 32) if v >= 1 << 31 else v


def _check_sizing(num_entries: int, fpp: float) -> None:
    if not isinstance(num_entries, int) or num_entries <= 0:
        raise InvalidOptionError(f"hoodie.index.bloom.num_entries must be a positive int, got {num_entries!r}")
    if not 0 < fpp < 1:
        raise InvalidOptionError(f"hoodie.index.bloom.fpp must be in (0, 1), got {fpp!r}")


def new_bloom_filter(num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
                     type_code: str = DEFAULT_TYPE_CODE,
                     max_entries: int = DEFAULT_MAX_ENTRIES) -> BloomFilter:
    """An empty filter as Hudi's ``BloomFilterFactory.createBloomFilter`` makes it."""
    code = _type_code(type_code)
    if code == SIMPLE:
        return SimpleBloomFilter(num_entries, fpp)
    return DynamicBloomFilter(num_entries, fpp, max_entries)
