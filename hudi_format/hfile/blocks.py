"""HFile v3 blocks: the 33-byte header, compression, checksums, and KeyValue cells.

Every block but the trailer is laid out as HBase's ``HFileBlock`` writes it::

    magic(8) | int onDiskSizeWithoutHeader | int uncompressedSizeWithoutHeader
             | long prevBlockOffset | byte checksumType | int bytesPerChecksum
             | int onDiskDataSizeWithHeader | payload (compressed) | checksums

``onDiskSizeWithoutHeader`` counts the checksums, ``onDiskDataSizeWithHeader`` does not.
Checksums are one 4-byte big-endian value per ``bytesPerChecksum`` (16 KiB) chunk of header +
compressed payload. HBase writes CRC32C (type 2); Hudi 1.x's own writer writes type 0 (NULL)
with zeroed checksum bytes of the same length. Python has no CRC32C, so this module carries a
table-driven one (slicing by 8, ~10 MB/s): fine for metadata-table files, and the reason
writing with ``checksum="NULL"`` (Hudi's choice) is the fast default.

GZ payloads are gzip members with a zeroed header (mtime 0, OS 0) around level-6 deflate,
which is what HBase's ``ReusableStreamGzipCodec`` emits: our GZ blocks are byte-identical.
One exception: hudi-rs derives the checksum length from the on-disk size and, for the few
block sizes where that overcounts by one chunk, cuts the gzip trailer off; such blocks get
a padding FEXTRA field in the gzip header that moves them past the chunk boundary.

A cell (``KeyValue``) in a data block: int key length, int value length, key, value, then
the MVCC timestamp as a Hadoop vlong when the file info says ``KEY_VALUE_VERSION`` = 1 (and
a short tags length + tags before it when ``MAX_TAGS_LEN`` is present). The key is
``short rowLength | row | byte familyLength | family | qualifier | long timestamp | byte type``;
Hudi puts the record key in the row and leaves family and qualifier empty.
"""

from __future__ import annotations

import struct
import zlib

import attrs
import pyarrow as pa

from ..errors import CorruptFileError, UnsupportedFeatureError

try:   # optional (the ``fast`` extra): ISA-L's inflater, about 1.8x Arrow's (zlib's) on HFile blocks
    from isal import isal_zlib as _isal
except ImportError:   # pragma: no cover - the plain path below serves alone
    _isal = None

__all__ = [
    "HEADER_SIZE", "BlockType", "BlockHeader", "encode_block", "decode_block", "crc32c",
    "encode_vint", "decode_vint", "make_key", "key_row", "first_on_row_key",
    "CHECKSUM_NULL", "CHECKSUM_CRC32", "CHECKSUM_CRC32C", "BYTES_PER_CHECKSUM",
    "LATEST_TIMESTAMP", "TYPE_PUT", "TYPE_MAXIMUM", "MAX_ROW_LENGTH",
]

HEADER = struct.Struct(">8siiqBii")
HEADER_SIZE = HEADER.size  # 33
BYTES_PER_CHECKSUM = 16 * 1024
CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C = 0, 1, 2
CHECKSUM_NAMES = {"NULL": CHECKSUM_NULL, "CRC32": CHECKSUM_CRC32, "CRC32C": CHECKSUM_CRC32C}
LATEST_TIMESTAMP = (1 << 63) - 1  # HConstants.LATEST_TIMESTAMP
TYPE_PUT, TYPE_MAXIMUM = 4, 255  # KeyValue.Type codes
MAX_ROW_LENGTH = 32767  # the row length is a Java short
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
_TS_PUT = struct.pack(">BqB", 0, LATEST_TIMESTAMP, TYPE_PUT)
_TS_MAX = struct.pack(">BqB", 0, LATEST_TIMESTAMP, TYPE_MAXIMUM)


class BlockType:
    """Block magics (``BlockType`` in HBase)."""

    DATA = b"DATABLK*"
    ENCODED_DATA = b"DATABLKE"
    LEAF_INDEX = b"IDXLEAF2"
    INTERMEDIATE_INDEX = b"IDXINTE2"
    ROOT_INDEX = b"IDXROOT2"
    META = b"METABLKc"
    FILE_INFO = b"FILEINF2"
    BLOOM_CHUNK = b"BLMFBLK2"
    GENERAL_BLOOM_META = b"BLMFMET2"
    DELETE_FAMILY_BLOOM_META = b"DFBLMET2"


@attrs.frozen
class BlockHeader:
    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size: int
    prev_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        """The whole block on disk: header, payload and checksums."""
        return HEADER_SIZE + self.on_disk_size_without_header


# -- CRC32C (Castagnoli), slicing by 8 ---------------------------------------------------
def _crc_tables() -> list[list[int]]:
    base = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        base.append(c)
    tables = [base]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(v >> 8) ^ base[v & 0xFF] for v in prev])
    return tables


_CRC_TABLES: list[list[int]] | None = None


def crc32c(data, crc: int = 0) -> int:
    """CRC32C of ``data`` (Java's ``java.util.zip.CRC32C``), continuing from ``crc``."""
    global _CRC_TABLES
    if _CRC_TABLES is None:
        _CRC_TABLES = _crc_tables()
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC_TABLES
    mv = memoryview(data).cast("B")
    crc ^= 0xFFFFFFFF
    whole = len(mv) & ~7
    for (w,) in struct.iter_unpack("<Q", mv[:whole]):
        w ^= crc
        crc = (t7[w & 0xFF] ^ t6[(w >> 8) & 0xFF] ^ t5[(w >> 16) & 0xFF] ^ t4[(w >> 24) & 0xFF]
               ^ t3[(w >> 32) & 0xFF] ^ t2[(w >> 40) & 0xFF] ^ t1[(w >> 48) & 0xFF] ^ t0[w >> 56])
    for b in mv[whole:]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _checksums(data, checksum_type: int, per_chunk: int) -> bytes:
    n = len(data)
    chunks = -(-n // per_chunk)
    if checksum_type == CHECKSUM_NULL:
        return bytes(4 * chunks)
    fn = crc32c if checksum_type == CHECKSUM_CRC32C else zlib.crc32
    return b"".join(struct.pack(">I", fn(data[i:i + per_chunk]) & 0xFFFFFFFF)
                    for i in range(0, n, per_chunk))


# -- compression -------------------------------------------------------------------------
def _gzip(payload: bytes, extra: int = 0) -> bytes:
    """A gzip member as HBase writes it; ``extra`` > 0 adds an FEXTRA field of that many bytes."""
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = comp.compress(payload) + comp.flush()
    tail = struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)
    if not extra:
        return _GZIP_HEADER + body + tail
    sub = b"HP" + struct.pack("<H", extra - 6) + bytes(extra - 6)  # one padding subfield
    return b"\x1f\x8b\x08\x04" + _GZIP_HEADER[4:] + struct.pack("<H", len(sub)) + sub + body + tail


def _misjudged(data_len: int) -> bool:
    """Would a reader that counts checksum chunks from the on-disk size cut the payload?

    hudi-rs takes ``ceil((header + payload + checksums) / 16 KiB)`` chunks where HBase writes
    ``ceil((header + payload) / 16 KiB)``; when the two differ it drops 4 bytes of a
    compressed payload and the gzip trailer with them.
    """
    n = HEADER_SIZE + data_len
    chunks = -(-n // BYTES_PER_CHECKSUM)
    return -(-(n + 4 * chunks) // BYTES_PER_CHECKSUM) != chunks


def _gunzip(data, size: int, buffer_ok: bool = False):
    """The first ``size`` (and at most one more) bytes of a gzip stream.

    Arrow's inflater runs about twice as fast as the ``zlib`` module's; it fills exactly
    ``size`` bytes, so it serves only when the gzip trailer's length (ISIZE) says the stream
    holds exactly that many -- zlib checks ISIZE and the CRC at the end of the stream, so
    its output then has that length. Anything else (and any error) goes through ``zlib``,
    which reports damage and short payloads as before. ``buffer_ok``: an Arrow buffer may be
    returned (no copy into ``bytes``: that copy, into fresh pages, costs half the inflating).

    With ``isal`` installed its inflater goes first (same bytes: inflating is deterministic;
    it checks the CRC and ISIZE as zlib does), on the same condition; any error or another
    length falls through to the paths below, which report the damage as without it."""
    if size > 0 and len(data) >= 18 and int.from_bytes(data[-4:], "little") == size & 0xFFFFFFFF:
        if _isal is not None:
            try:
                out = _isal.decompress(data, 31)
            except _isal.error:
                out = b""
            if len(out) == size:
                return out
        try:
            out = pa.Codec("gzip").decompress(data, decompressed_size=size)
            return out if buffer_ok else out.to_pybytes()
        except (OSError, pa.ArrowException):
            pass
    d = zlib.decompressobj(31)
    out = d.decompress(data, size + 1)
    if len(out) < size and not d.eof:
        out += d.flush()
    return out


def compress(payload: bytes, codec: str) -> bytes:
    if codec == "NONE":
        return payload
    if codec == "GZ":
        return _gzip(payload)
    raise UnsupportedFeatureError(f"HFile compression {codec!r} is not supported (NONE, GZ)")


# -- blocks ------------------------------------------------------------------------------
def encode_block(magic: bytes, payload: bytes, codec: str, checksum_type: int,
                 prev_offset: int = -1) -> bytes:
    """One complete block: header, (compressed) payload, checksums."""
    data = compress(payload, codec)
    if codec == "GZ" and _misjudged(len(data)):
        # pad the gzip header past the next chunk boundary (rare; HBase itself does not)
        n = HEADER_SIZE + len(data)
        extra = max(6, -(-n // BYTES_PER_CHECKSUM) * BYTES_PER_CHECKSUM + 1 - n)
        data = _gzip(payload, extra)
    chunks = -(-(HEADER_SIZE + len(data)) // BYTES_PER_CHECKSUM)
    head = HEADER.pack(magic, len(data) + 4 * chunks, len(payload), prev_offset, checksum_type,
                       BYTES_PER_CHECKSUM, HEADER_SIZE + len(data))
    block = head + data
    return block + _checksums(block, checksum_type, BYTES_PER_CHECKSUM)


def parse_header(buf, pos: int, where: str) -> BlockHeader:
    if pos < 0 or pos + HEADER_SIZE > len(buf):
        raise CorruptFileError(f"{where}: block header at offset {pos} is cut off")
    h = BlockHeader(*HEADER.unpack_from(buf, pos))
    if (h.on_disk_size_without_header < 0 or h.uncompressed_size < 0
            or not HEADER_SIZE <= h.on_disk_data_size_with_header
            <= HEADER_SIZE + h.on_disk_size_without_header):
        raise CorruptFileError(f"{where}: block header at offset {pos} has impossible sizes")
    return h


def decode_block(buf, pos: int, codec: str, where: str, *, expect: tuple[bytes, ...] = (),
                 file_offset: int | None = None, verify: bool = True,
                 buffer_ok: bool = False) -> tuple[BlockHeader, bytes]:
    """Header and uncompressed payload of the block at ``buf[pos:]``.

    ``file_offset`` (default ``pos``) only serves error messages. Checks the magic against
    ``expect``, the sizes against the buffer, the checksums (CRC32/CRC32C, when ``verify``)
    and the decompressed length. ``buffer_ok``: the payload may come as a ``pyarrow.Buffer``
    (same bytes, not copied; for callers that only slice it and pass it to Arrow).
    """
    at = pos if file_offset is None else file_offset
    h = parse_header(buf, pos, where)
    if expect and h.magic not in expect:
        names = " or ".join(m.decode("latin-1") for m in expect)
        raise CorruptFileError(f"{where}: expected a {names} block at offset {at}, "
                               f"found magic {h.magic!r}")
    end = pos + h.on_disk_size
    if end > len(buf):
        raise CorruptFileError(f"{where}: {h.magic.decode('latin-1')} block at offset {at} "
                               f"needs {h.on_disk_size} bytes, the file has {len(buf) - pos}")
    data_end = pos + h.on_disk_data_size_with_header
    if verify and h.checksum_type in (CHECKSUM_CRC32, CHECKSUM_CRC32C):
        per = h.bytes_per_checksum
        if per <= 0:
            raise CorruptFileError(f"{where}: block at offset {at} has bytesPerChecksum {per}")
        stored = bytes(buf[data_end:end])
        computed = _checksums(memoryview(buf)[pos:data_end], h.checksum_type, per)
        if stored != computed:
            raise CorruptFileError(f"{where}: checksum mismatch in the "
                                   f"{h.magic.decode('latin-1')} block at offset {at}")
    elif h.checksum_type not in (CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C):
        raise UnsupportedFeatureError(f"{where}: unknown checksum type {h.checksum_type} "
                                      f"in the block at offset {at}")
    raw = memoryview(buf)[pos + HEADER_SIZE:data_end]
    if codec == "NONE":
        payload = bytes(raw)
    elif codec == "GZ":
        try:
            payload = _gunzip(raw, h.uncompressed_size, buffer_ok)
        except zlib.error as exc:
            raise CorruptFileError(f"{where}: cannot decompress the {h.magic.decode('latin-1')} "
                                   f"block at offset {at}: {exc}") from exc
    else:
        raise UnsupportedFeatureError(f"{where}: HFile compression {codec} is not supported "
                                      "(NONE, GZ)")
    if len(payload) < h.uncompressed_size:
        raise CorruptFileError(f"{where}: {h.magic.decode('latin-1')} block at offset {at} "
                               f"holds {len(payload)} bytes, its header says {h.uncompressed_size}")
    return h, payload if len(payload) == h.uncompressed_size else payload[:h.uncompressed_size]


# -- Hadoop WritableUtils vint/vlong (root index key lengths, MVCC timestamps) -----------
def encode_vint(value: int) -> bytes:
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    length = -112
    if value < 0:
        value = ~value
        length = -120
    tmp = value
    while tmp:
        tmp >>= 8
        length -= 1
    n = -(length + 120) if length < -120 else -(length + 112)
    return struct.pack(">b", length) + value.to_bytes(n, "big")


def decode_vint(buf, pos: int) -> tuple[int, int]:
    """(value, next position) of a Hadoop vlong."""
    first = buf[pos]
    if first >= 0x80:
        first -= 0x100
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    n = (-119 - first if negative else -111 - first) - 1
    if pos + 1 + n > len(buf):
        raise IndexError("vint is truncated")
    value = int.from_bytes(buf[pos + 1:pos + 1 + n], "big")
    return (~value if negative else value), pos + 1 + n


# -- KeyValue keys -----------------------------------------------------------------------
def make_key(row: bytes) -> bytes:
    """The KeyValue key Hudi writes for a record key: empty family/qualifier, latest ts, Put."""
    return struct.pack(">H", len(row)) + row + _TS_PUT


def first_on_row_key(row: bytes) -> bytes:
    """``createFirstOnRow``: the key HBase puts in block indexes for a shortened row."""
    return struct.pack(">H", len(row)) + row + _TS_MAX


def key_row(key) -> bytes:
    """The row (record key) of a serialized key; keys as short as Hudi's index keys work too."""
    n = (key[0] << 8) | key[1]
    return bytes(key[2:2 + n])
