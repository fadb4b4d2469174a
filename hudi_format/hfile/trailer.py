"""HFile v3 trailer and file-info block: a minimal protobuf codec of our own.

HBase serializes both with protobuf (``FileTrailerProto``, ``FileInfoProto``). Only varints
(wire type 0) and length-delimited fields (wire type 2) occur there, so a few dozen lines
replace a protobuf dependency. Unknown fields are skipped, as protobuf readers do.

The trailer is the last 4096 bytes of the file::

    'TRABLK"$' | varint length | TrailerProto | zero padding | int (minor << 24 | major)

Readers take the version from the last four bytes: minor in the first byte, major in the
last three. HBase 2.x writes major 3, minor 3; we write the same (minor 0, which Hudi 1.x's
own writer puts there, tells HBase the blocks carry no checksum fields, which is untrue).
"""

from __future__ import annotations

import struct
from typing import Iterator

import attrs

from ..errors import CorruptFileError, UnsupportedFeatureError
from ..varint import decode_varint, encode_varint

__all__ = [
    "TRAILER_SIZE", "TRAILER_MAGIC", "Trailer", "encode_varint", "decode_varint",
    "decode_fields", "encode_file_info", "decode_file_info", "COMPRESSION_CODECS",
]

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
PBUF_MAGIC = b"PBUF"
MAJOR_VERSION = 3
MINOR_VERSION = 3  # HBase 2.x: protobuf trailer, checksummed block headers
_U64 = (1 << 64) - 1

# Compression.Algorithm ordinals as HBase writes them in the trailer.
COMPRESSION_CODECS = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZIP2", 6: "ZSTD",
                      7: "LZMA", 8: "BROTLI"}


# -- protobuf wire format ----------------------------------------------------------------


def decode_fields(buf) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) for each varint or length-delimited field of a message."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = decode_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = decode_varint(buf, pos)
        elif wire == 2:
            n, pos = decode_varint(buf, pos)
            if pos + n > end:
                raise ValueError(f"field {field} runs past the end of the message")
            value = bytes(buf[pos:pos + n])
            pos += n
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("message is truncated")
        yield field, value


def _field_varint(field: int, value: int) -> bytes:
    return encode_varint(field << 3) + encode_varint(value)


def _field_bytes(field: int, value: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(value)) + value


# -- trailer -----------------------------------------------------------------------------
@attrs.define
class Trailer:
    """``FileTrailerProto`` plus the version; offsets are absolute file positions.

    ``first_data_block_offset``/``last_data_block_offset`` are -1 in a file without data
    blocks (HBase stores that as the unsigned 2^64-1). ``last_data_block_offset`` is where
    the last data block *starts*.
    """

    file_info_offset: int = 0
    load_on_open_offset: int = 0
    uncompressed_data_index_size: int = 0
    total_uncompressed_bytes: int = 0
    data_index_count: int = 0
    meta_index_count: int = 0
    entry_count: int = 0
    num_data_index_levels: int = 1
    first_data_block_offset: int = -1
    last_data_block_offset: int = -1
    comparator_class_name: str = ""
    compression_codec: int = 2
    encryption_key: bytes | None = None
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION

    @property
    def compression(self) -> str:
        return COMPRESSION_CODECS.get(self.compression_codec, f"codec#{self.compression_codec}")

    @classmethod
    def parse(cls, buf: bytes, where: str) -> "Trailer":
        """Decode the last :data:`TRAILER_SIZE` bytes of a file."""
        if len(buf) < TRAILER_SIZE:
            raise CorruptFileError(f"{where}: {len(buf)} bytes is too short for an HFile "
                                   f"(the trailer alone is {TRAILER_SIZE})")
        buf = buf[-TRAILER_SIZE:]
        minor, major = buf[-4], int.from_bytes(buf[-3:], "big")
        if buf[:8] != TRAILER_MAGIC:
            if major in (1, 2):
                raise UnsupportedFeatureError(f"{where}: HFile version {major} is not supported "
                                              "(Hudi writes version 3)")
            raise CorruptFileError(f"{where}: no HFile trailer (bad magic {bytes(buf[:8])!r})")
        if major != MAJOR_VERSION:
            raise UnsupportedFeatureError(f"{where}: HFile version {major}.{minor} is not "
                                          "supported (Hudi writes version 3)")
        t = cls(major_version=major, minor_version=minor)
        try:
            length, pos = decode_varint(buf, 8)
            if pos + length > TRAILER_SIZE - 4:
                raise ValueError(f"trailer message of {length} bytes does not fit the trailer")
            for field, value in decode_fields(buf[pos:pos + length]):
                name = _TRAILER_FIELDS.get(field)
                if name is None:
                    continue
                if name == "comparator_class_name":
                    value = value.decode("utf-8", "replace")
                elif name in ("first_data_block_offset", "last_data_block_offset") and value == _U64:
                    value = -1
                setattr(t, name, value)
        except (IndexError, ValueError, AttributeError) as exc:
            raise CorruptFileError(f"{where}: cannot decode the HFile trailer: {exc}") from exc
        return t

    def serialize(self) -> bytes:
        """The 4096-byte trailer, fields in ``FileTrailerProto`` order as HBase writes them."""
        msg = b"".join([
            _field_varint(1, self.file_info_offset),
            _field_varint(2, self.load_on_open_offset),
            _field_varint(3, self.uncompressed_data_index_size),
            _field_varint(4, self.total_uncompressed_bytes),
            _field_varint(5, self.data_index_count),
            _field_varint(6, self.meta_index_count),
            _field_varint(7, self.entry_count),
            _field_varint(8, self.num_data_index_levels),
            _field_varint(9, self.first_data_block_offset),
            _field_varint(10, self.last_data_block_offset),
            _field_bytes(11, self.comparator_class_name.encode("utf-8")),
            _field_varint(12, self.compression_codec),
            _field_bytes(13, self.encryption_key) if self.encryption_key is not None else b"",
        ])
        body = TRAILER_MAGIC + encode_varint(len(msg)) + msg
        if len(body) > TRAILER_SIZE - 4:
            raise ValueError("HFile trailer fields do not fit in the fixed-size trailer")
        version = struct.pack(">I", (self.minor_version & 0xFF) << 24 | (self.major_version & 0xFFFFFF))
        return body + bytes(TRAILER_SIZE - 4 - len(body)) + version


_TRAILER_FIELDS = {
    1: "file_info_offset", 2: "load_on_open_offset", 3: "uncompressed_data_index_size",
    4: "total_uncompressed_bytes", 5: "data_index_count", 6: "meta_index_count",
    7: "entry_count", 8: "num_data_index_levels", 9: "first_data_block_offset",
    10: "last_data_block_offset", 11: "comparator_class_name", 12: "compression_codec",
    13: "encryption_key",
}


# -- file info ---------------------------------------------------------------------------
def encode_file_info(entries: dict[bytes, bytes]) -> bytes:
    """Payload of a FILE_INFO block: ``PBUF``, varint length, ``InfoProto`` in mapping order."""
    msg = b"".join(_field_bytes(1, _field_bytes(1, k) + _field_bytes(2, v))
                   for k, v in entries.items())
    return PBUF_MAGIC + encode_varint(len(msg)) + msg


def decode_file_info(payload: bytes, where: str) -> dict[bytes, bytes]:
    """Entries of a FILE_INFO block payload, in file order."""
    if payload[:4] != PBUF_MAGIC:
        raise CorruptFileError(f"{where}: file info block does not start with PBUF")
    out: dict[bytes, bytes] = {}
    try:
        length, pos = decode_varint(payload, 4)
        if pos + length > len(payload):
            raise ValueError("file info message is truncated")
        for field, pair in decode_fields(payload[pos:pos + length]):
            if field != 1 or not isinstance(pair, bytes):
                continue
            kv = dict(decode_fields(pair))
            out[kv.get(1, b"")] = kv.get(2, b"")
    except (IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: cannot decode the HFile file info: {exc}") from exc
    return out
