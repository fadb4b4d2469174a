"""Parquet pages compressed at the level Hudi's writer uses: zlib 6 for GZIP (Hudi's default codec),
zstd 3 (``hudi_format/parquet_codec.py``), in base files and in Parquet log blocks.

A page is checked by compressing its own decompressed bytes again at a given level: the stream
must come out the same. The fixtures (written by Apache Hudi) show which level Hudi uses; our
files must show the same one. Each check also requires a page whose level-9 (zstd: level-1)
stream differs, so that the test tells the levels apart.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format import parquet_codec
from hudi_format.errors import InvalidOptionError
from hudi_format.log.encode import encode_parquet_content
from hudi_format.varint import decode_varint

from conftest import table_names

def _skip(buf: bytes, pos: int, ftype: int) -> int:
    """The position after a Thrift compact value of type ``ftype`` at ``pos``."""
    if ftype in (1, 2):                 # booleans live in the field header
        return pos
    if ftype == 3:
        return pos + 1
    if ftype in (4, 5, 6):              # zigzag varints
        return decode_varint(buf, pos)[1]
    if ftype == 7:
        return pos + 8
    if ftype == 8:
        n, pos = decode_varint(buf, pos)
        return pos + n
    if ftype in (9, 10):
        head = buf[pos]
        pos += 1
        n = head >> 4
        if n == 15:
            n, pos = decode_varint(buf, pos)
        for _ in range(n):
            pos = _skip(buf, pos, head & 0x0F)
        return pos
    if ftype == 12:
        return _struct_end(buf, pos)
    raise AssertionError(f"Thrift compact type {ftype} in a page header")


def _struct_end(buf: bytes, pos: int) -> int:
    while buf[pos]:
        head = buf[pos]
        pos += 1
        if not head >> 4:                # long form: the field id follows as a zigzag varint
            pos = decode_varint(buf, pos)[1]
        pos = _skip(buf, pos, head & 0x0F)
    return pos + 1


def first_pages(raw: bytes) -> list[tuple[str, bytes, bytes]]:
    """``(codec, page bytes, compressed page)`` of each column chunk's first page of the Parquet
    file ``raw``. A page header (a Thrift compact struct) starts with its type, uncompressed size
    and compressed size, three i32 fields; the compressed page follows the header."""
    meta = pq.ParquetFile(pa.BufferReader(raw)).metadata
    out = []
    for rg in range(meta.num_row_groups):
        for ci in range(meta.num_columns):
            col = meta.row_group(rg).column(ci)
            if col.compression not in ("GZIP", "ZSTD"):
                continue
            pos = col.dictionary_page_offset or col.data_page_offset
            sizes = []
            at = pos
            for _ in range(3):
                assert raw[at] == 0x15, "page header: an i32 field expected"
                z, at = decode_varint(raw, at + 1)
                sizes.append((z >> 1) ^ -(z & 1))
            _, plain_size, packed_size = sizes
            start = _struct_end(raw, pos)
            packed = raw[start:start + packed_size]
            if col.compression == "GZIP":
                plain = zlib.decompress(packed, 31)
            else:
                plain = pa.decompress(packed, plain_size, codec="zstd").to_pybytes()
            assert len(plain) == plain_size
            out.append((col.compression, plain, packed))
    return out


def _recompressed(codec: str, plain: bytes, level: int) -> bytes:
    if codec == "GZIP":    # the deflate stream: gzip headers differ in their OS byte
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        return c.compress(plain) + c.flush()
    return pa.Codec("zstd", compression_level=level).compress(plain, asbytes=True)


def _body(codec: str, packed: bytes) -> bytes:
    return packed[10:-8] if codec == "GZIP" else packed


def _levels_seen(pages: list[tuple[str, bytes, bytes]], level: int, other: int) -> tuple[int, int]:
    """(pages whose stream is ``level``'s, pages among them that ``other`` compresses otherwise)."""
    same = telling = 0
    for codec, plain, packed in pages:
        if _body(codec, packed) == _recompressed(codec, plain, level):
            same += 1
            telling += _recompressed(codec, plain, other) != _body(codec, packed)
    return same, telling


def _rows(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": [f"key-{i:07d}" for i in range(n)],
                     "ts": pa.array(np.arange(n), pa.int64()),
                     "p": [f"p{i % 2}" for i in range(n)],
                     "note": [f"note {v} of {v % 977}" for v in rng.integers(0, 1 << 30, n)],
                     "fare": rng.random(n)})


def test_hudi_writes_gzip_pages_at_zlib_level_6(fixture_tables):
    pages = []
    for name in table_names():
        for f in Path(fixture_tables(name)).rglob("*.parquet"):
            if ".hoodie" not in f.parts and not f.name.startswith("._"):
                pages += first_pages(f.read_bytes())
    assert len(pages) > 1000
    same, telling = _levels_seen(pages, 6, 9)
    assert same == len(pages)
    assert telling > 0      # pages that level 9 compresses otherwise: the levels told apart


@pytest.mark.parametrize("codec,level,other", [("gzip", 6, 9), ("zstd", 3, 1)])
def test_base_files_are_compressed_at_hudis_level(tmp_path, codec, level, other):
    hudi.write(str(tmp_path / "t"), _rows(60_000), operation="insert", record_key="id", ordering_field="ts",
               partition_by="p", options={"hoodie.parquet.compression.codec": codec})
    pages = [p for f in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in f.parts
             for p in first_pages(f.read_bytes())]
    assert pages and {c for c, _, _ in pages} == {codec.upper()}
    same, telling = _levels_seen(pages, level, other)
    assert same == len(pages)
    assert telling > 0


def test_parquet_log_blocks_are_compressed_at_hudis_level():
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "string"}, {"name": "ts", "type": "long"}, {"name": "p", "type": "string"},
        {"name": "note", "type": "string"}, {"name": "fare", "type": "double"}]}
    pages = first_pages(encode_parquet_content(_rows(60_000), avro, "gzip"))
    same, telling = _levels_seen(pages, 6, 9)
    assert pages and same == len(pages) and telling > 0


def test_codec_names_and_levels():
    assert parquet_codec.write_options("GZIP") == {"compression": "gzip", "compression_level": 6}
    assert parquet_codec.write_options("zstd") == {"compression": "zstd", "compression_level": 3}
    assert parquet_codec.write_options("uncompressed") == {"compression": "none", "compression_level": None}
    assert parquet_codec.write_options("SNAPPY") == {"compression": "snappy", "compression_level": None}
    with pytest.raises(InvalidOptionError, match="hoodie.parquet.compression.codec"):
        parquet_codec.arrow_codec("lzo")
