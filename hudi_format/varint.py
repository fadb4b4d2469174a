"""Base-128 varints, the integers of Avro's binary encoding and of protobuf's wire format.

One place for the scalar encoders and decoder: the HFile trailer (protobuf), the metadata
table's hand-encoded record index values and the delete block walk (Avro ``long``: zig-zag,
then a varint) all use them. The column-wise Avro codec has its own array kernels
(:mod:`hudi_format.log.avro_columns`).
"""

from __future__ import annotations

__all__ = ["encode_varint", "decode_varint", "avro_long"]

_U64 = (1 << 64) - 1


def encode_varint(value: int) -> bytes:
    """Unsigned base-128 varint; negative numbers as their 64-bit two's complement (10 bytes)."""
    value &= _U64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """(value, next position); ``IndexError``/``ValueError`` on truncated or overlong input."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def avro_long(value: int) -> bytes:
    """An Avro ``long`` (or ``int``): zig-zag, then a varint."""
    return encode_varint((value << 1) ^ (value >> 63))
