"""Hudi's Parquet codecs (``hoodie.parquet.compression.codec``) as pyarrow takes them, at the
levels Hudi's own writer compresses with.

Hudi writes Parquet through parquet-java: its GZIP is Hadoop's ``GzipCodec`` at zlib's default
level (6, ``zlib.compress.level`` being unset) and its ZSTD is level 3
(``parquet.compression.codec.zstd.level``). pyarrow's own defaults are 9 and 1: our GZIP files
(Hudi's default codec) took about 1.8x the compression time for files 0.04-0.06% smaller, and
our ZSTD files were 1.6% larger, at the same speed (the benchmarks' data). Every GZIP page of the
fixtures' base files is zlib's level-6 stream of its bytes (``tests/test_parquet_codec.py``).
Snappy and LZ4 have no level; Brotli keeps pyarrow's.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidOptionError
from .options.write import PARQUET_CODECS

__all__ = ["CODECS", "LEVELS", "arrow_codec", "level", "write_options", "compressed_size"]

# Hudi's codec names (any case; the option's choices) -> pyarrow's
CODECS = {name: {"lz4_raw": "lz4", "uncompressed": "none"}.get(name, name) for name in PARQUET_CODECS}
# pyarrow codec -> the level parquet-java compresses at by default
LEVELS = {"gzip": 6, "zstd": 3}


def arrow_codec(name: Any) -> str:
    """pyarrow's name of Hudi codec ``name``; an unknown one is an :class:`InvalidOptionError`."""
    codec = CODECS.get(str(name).lower())
    if codec is None:
        raise InvalidOptionError(f"hoodie.parquet.compression.codec: unsupported codec {name!r} "
                                 f"(supported: {', '.join(sorted(CODECS))})")
    return codec


def level(codec: str) -> int | None:
    """The level Hudi's writer uses for pyarrow codec ``codec`` (``None``: the codec has none,
    or pyarrow's default stands)."""
    return LEVELS.get(codec)


def write_options(name: Any) -> dict[str, Any]:
    """``compression`` and ``compression_level`` for ``pq.write_table`` / ``pq.ParquetWriter``
    writing with Hudi codec ``name`` as Hudi does."""
    codec = arrow_codec(name)
    return {"compression": codec, "compression_level": level(codec)}


def compressed_size(table: Any, name: Any) -> int:
    """Bytes of ``table`` (a ``pyarrow.Table``) written as one Parquet file with Hudi codec
    ``name`` as Hudi does: what file sizing measures of a sample of the rows it writes."""
    import io

    import pyarrow.parquet as pq
    buf = io.BytesIO()
    pq.write_table(table, buf, **write_options(name))
    return buf.tell()
