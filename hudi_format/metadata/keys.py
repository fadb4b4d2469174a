"""Record keys, record types and file groups of the metadata table's partitions.

Every metadata-table record is keyed by a string, and which key a fact lives under is part of
the format (readers look keys up by point or prefix in sorted HFiles):

=================  ==========================================================  ====
partition          key                                                         type
=================  ==========================================================  ====
files              ``__all_partitions__`` (the partition list) or the          1, 2
                   partition identifier (``"."`` for the non-partitioned)
column_stats       b64(xxh64(column)) + b64(xxh64(partition id)) +             3
                   b64(md5(file name))
bloom_filters      b64(xxh64(partition id)) + b64(md5(file name))              4
record_index       the record key itself                                       5
partition_stats    b64(xxh64(column)) + b64(xxh64(partition id))               6
secondary_index_*  escape(secondary key) + ``$`` + escape(record key)          7
=================  ==========================================================  ====

``xxh64`` is XXHash64 with Hudi's seed ``0xdabadaba`` taken as a Java ``int`` and widened to a
``long`` (so ``0xffffffffdabadaba``), big-endian; ``md5`` is the 16-byte digest; ``b64`` is
standard Base64 with padding. Strings are hashed as UTF-8.

File groups of a metadata partition are named ``<prefix><index:04d>-0`` (``files-0000-0``,
``record-index-0007-0``); a record key goes to file group
``abs(abs(java_string_hash(key)) % n)`` of the ``n`` groups (record index and secondary
indexes; the other partitions are spread the same way over their file groups).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array

__all__ = [
    "FILES", "COLUMN_STATS", "BLOOM_FILTERS", "RECORD_INDEX", "PARTITION_STATS",
    "SECONDARY_INDEX_PREFIX", "EXPRESSION_INDEX_PREFIX", "METADATA_TABLE_DIR",
    "RECORDKEY_PARTITION_LIST", "NON_PARTITIONED_NAME",
    "TYPE_PARTITION_LIST", "TYPE_FILE_LIST", "TYPE_COLUMN_STATS", "TYPE_BLOOM_FILTER",
    "TYPE_RECORD_INDEX", "TYPE_PARTITION_STATS", "TYPE_SECONDARY_INDEX",
    "FILEID_ENCODING_UUID", "FILEID_ENCODING_RAW_STRING", "MISSING_FILE_INDEX",
    "xxhash64", "partition_identifier", "partition_index_id", "column_index_id", "file_index_id",
    "files_key", "column_stats_key", "column_stats_prefix", "bloom_filter_key",
    "partition_stats_key", "record_index_key", "secondary_index_key",
    "secondary_index_prefix", "split_secondary_index_key",
    "java_string_hash", "file_group_index", "file_group_indexes", "secondary_key_file_group_index",
    "file_id_prefix", "file_group_id", "file_group_ids", "record_type",
    "RecordIndexLocation", "encode_record_index_file_id", "decode_record_index_file_id",
]

# -- partitions of the metadata table (hoodie.table.metadata.partitions) -----------------------
FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"
RECORD_INDEX = "record_index"
PARTITION_STATS = "partition_stats"
SECONDARY_INDEX_PREFIX = "secondary_index_"
EXPRESSION_INDEX_PREFIX = "expr_index_"

METADATA_TABLE_DIR = ".hoodie/metadata"

RECORDKEY_PARTITION_LIST = "__all_partitions__"
NON_PARTITIONED_NAME = "."

# -- the ``type`` field of HoodieMetadataRecord (MetadataPartitionType.recordType) -------------
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5
TYPE_PARTITION_STATS = 6
TYPE_SECONDARY_INDEX = 7

# -- HoodieRecordIndexInfo.fileIdEncoding ------------------------------------------------------
FILEID_ENCODING_UUID = 0
FILEID_ENCODING_RAW_STRING = 1
MISSING_FILE_INDEX = -1  # a UUID file id without the "-<n>" suffix (old base file names)

_FILE_ID_PREFIXES = {
    FILES: "files-",
    COLUMN_STATS: "col-stats-",
    BLOOM_FILTERS: "bloom-filters-",
    RECORD_INDEX: "record-index-",
    PARTITION_STATS: "partition-stats-",
}

# ---------------------------------------------------------------------------------------------
# XXHash64 (pure Python; keys are short, so this is never on a hot path of size)
# ---------------------------------------------------------------------------------------------
_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                           0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
# HashID.HASH_SEED is the Java int 0xdabadaba; hash64(..., long seed) widens it with its sign.
HASH_SEED = 0xFFFFFFFFDABADABA


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def xxhash64(data: bytes, seed: int = HASH_SEED) -> int:
    """XXHash64 of ``data`` as an unsigned 64-bit int."""
    seed &= _M64
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = (_rotl(h ^ _round(0, k), 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl(h ^ ((k * _P1) & _M64), 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M64), 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# ---------------------------------------------------------------------------------------------
# index ids and keys
# ---------------------------------------------------------------------------------------------
def partition_identifier(partition_path: str) -> str:
    """The name a data partition has in the metadata table: ``"."`` for the non-partitioned."""
    return NON_PARTITIONED_NAME if partition_path in ("", None) else partition_path


def partition_index_id(partition_path: str) -> str:
    """``PartitionIndexID(partition).asBase64EncodedString()`` (12 characters)."""
    ident = partition_identifier(partition_path)
    return _b64(xxhash64(ident.encode("utf-8")).to_bytes(8, "big"))


def column_index_id(column: str) -> str:
    """``ColumnIndexID(column).asBase64EncodedString()`` (12 characters)."""
    return _b64(xxhash64(column.encode("utf-8")).to_bytes(8, "big"))


def file_index_id(file_name: str) -> str:
    """``FileIndexID(fileName).asBase64EncodedString()``: MD5 of the file's name (24 chars)."""
    return _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def files_key(partition_path: str) -> str:
    """Key of a partition's file list in ``files``."""
    return partition_identifier(partition_path)


def column_stats_key(partition_path: str, file_name: str, column: str) -> str:
    """Key of one column's stats of one file (base or log file name, no directory)."""
    return column_index_id(column) + partition_index_id(partition_path) + file_index_id(file_name)


def column_stats_prefix(column: str, partition_path: str | None = None) -> str:
    """Prefix of every stats key of ``column`` (in ``partition_path`` when given)."""
    prefix = column_index_id(column)
    if partition_path is not None:
        prefix += partition_index_id(partition_path)
    return prefix


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    """Key of a base file's bloom filter in ``bloom_filters``."""
    return partition_index_id(partition_path) + file_index_id(file_name)


def partition_stats_key(partition_path: str, column: str) -> str:
    """Key of one column's stats over a whole partition in ``partition_stats``."""
    return column_index_id(column) + partition_index_id(partition_path)


def record_index_key(record_key: str) -> str:
    """Key of a record's location in ``record_index``: the record key itself."""
    return record_key


_SI_ESCAPE = "\\"
_SI_SEPARATOR = "$"
_SI_NULL = "\0"


def _si_escape(value: str | None) -> str:
    if value is None:
        return _SI_NULL
    out = []
    for c in value:
        if c in (_SI_ESCAPE, _SI_SEPARATOR, _SI_NULL):
            out.append(_SI_ESCAPE)
        out.append(c)
    return "".join(out)


def _si_unescape(value: str) -> str | None:
    if value == _SI_NULL:
        return None
    out, escaped = [], False
    for c in value:
        if c == _SI_ESCAPE and not escaped:
            escaped = True
            continue
        out.append(c)
        escaped = False
    return "".join(out)


def secondary_index_key(secondary_key: str | None, record_key: str) -> str:
    """``escape(secondary key) $ escape(record key)``; ``\\``, ``$`` and NUL are escaped and a
    null secondary key is a lone NUL."""
    return _si_escape(secondary_key) + _SI_SEPARATOR + _si_escape(record_key)


def secondary_index_prefix(secondary_key: str | None) -> str:
    """Prefix of every entry of one secondary key (for a prefix lookup)."""
    return _si_escape(secondary_key) + _SI_SEPARATOR


def _si_separator_position(key: str) -> int:
    escaped = False
    for i, c in enumerate(key):
        if c == _SI_ESCAPE and not escaped:
            escaped = True
        elif c == _SI_SEPARATOR and not escaped:
            return i
        else:
            escaped = False
    raise ValueError(f"secondary index key {key!r} has no unescaped '$'")


def split_secondary_index_key(key: str) -> tuple[str | None, str]:
    """``(secondary key, record key)`` of a secondary index key."""
    pos = _si_separator_position(key)
    return _si_unescape(key[:pos]), _si_unescape(key[pos + 1:])


# ---------------------------------------------------------------------------------------------
# file groups
# ---------------------------------------------------------------------------------------------
def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def file_group_index(record_key: str, num_file_groups: int) -> int:
    """``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``."""
    if num_file_groups <= 0:
        raise ValueError("num_file_groups must be positive")
    h = java_string_hash(record_key)
    # Math.abs(Integer.MIN_VALUE) stays negative in Java; the remainder keeps the sign of h.
    a = h if h == -(1 << 31) else abs(h)
    r = abs(a) % num_file_groups if a >= 0 else -((-a) % num_file_groups)
    return abs(r)


_U32_31 = pa.scalar(31, pa.uint32())


def _java_string_hashes_ascii(keys: pa.Array) -> pa.Array:
    """``String.hashCode()`` of ASCII strings as uint32, one pass per character position: the
    UTF-16 code units of an ASCII string are its bytes, and uint32 arithmetic wraps as Java's
    int does (``h = 31 * h + c``)."""
    binary = keys.cast(pa.binary())
    lengths = pc.binary_length(binary).cast(pa.int64())
    n = len(binary)
    h = pa.repeat(pa.scalar(0, pa.uint32()), n)
    longest = pc.max(lengths).as_py() or 0
    if not longest:
        return h
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, binary.buffers()[1]], offset=binary.offset)
    starts = offsets.slice(0, n).cast(pa.int64())
    data = binary.buffers()[2]
    units = pa.Array.from_buffers(pa.uint8(), data.size, [None, data])
    last = pc.max(pc.add(starts, lengths)).as_py()
    for j in range(longest):
        has = pc.greater(lengths, j)
        pos = pc.min_element_wise(pc.add(starts, j), last - 1)  # clamped: masked out below
        unit = pc.take(units, pos).cast(pa.uint32())
        h = pc.if_else(has, pc.add(pc.multiply(h, _U32_31), unit), h)
    return h


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, num_file_groups: int) -> pa.Array:
    """:func:`file_group_index` of every key of a string array (int32; null keys give null),
    computed column-wise. Non-ASCII keys (rare) go through :func:`java_string_hash`, since
    Java hashes their UTF-16 code units."""
    if num_file_groups <= 0:
        raise ValueError("num_file_groups must be positive")
    keys = one_array(keys)
    keys = keys.cast(pa.string())
    ascii_ = pc.fill_null(pc.string_is_ascii(keys), True)
    plain = pc.if_else(ascii_, keys, pa.scalar("", pa.string()))
    hashes = _java_string_hashes_ascii(plain).cast(pa.int64())
    if not pc.all(ascii_).as_py():
        others = pc.indices_nonzero(pc.invert(ascii_))
        exact = [java_string_hash(k) & 0xFFFFFFFF for k in pc.take(keys, others).to_pylist()]
        mask = pc.invert(ascii_)
        hashes = pc.replace_with_mask(hashes, mask, pa.array(exact, pa.int64()))
    signed = pc.if_else(pc.greater_equal(hashes, 1 << 31), pc.subtract(hashes, 1 << 32), hashes)
    # int64 abs(h) % n equals Java's Math.abs(Math.abs(h) % n), Integer.MIN_VALUE included
    out = pc.divide(pc.abs(signed), num_file_groups)
    out = pc.subtract(pc.abs(signed), pc.multiply(out, num_file_groups)).cast(pa.int32())
    return pc.if_else(pc.is_null(keys), pa.scalar(None, pa.int32()), out)


def secondary_key_file_group_index(secondary_index_record_key: str, num_file_groups: int) -> int:
    """File group of a secondary index entry: hashed on its escaped ``<secondary key>$`` prefix
    (Hudi 1.1's ``getSecondaryKeyToFileGroupMappingFunction(true)``)."""
    pos = _si_separator_position(secondary_index_record_key)
    return file_group_index(secondary_index_record_key[:pos + 1], num_file_groups)


def file_id_prefix(partition: str) -> str:
    """File id prefix of a metadata partition (``record_index`` -> ``record-index-``); index
    partitions named after their index use the name with ``_`` turned into ``-``."""
    prefix = _FILE_ID_PREFIXES.get(partition)
    if prefix is not None:
        return prefix
    return partition.replace("_", "-") + "-"


def file_group_id(partition: str, index: int) -> str:
    """``getFileIDForFileGroup``: ``<prefix><index:04d>-0``."""
    return f"{file_id_prefix(partition)}{index:04d}-0"


def file_group_ids(partition: str, count: int) -> list[str]:
    return [file_group_id(partition, i) for i in range(count)]


def record_type(partition: str) -> int:
    """The ``type`` of the records a metadata partition holds (files: its file lists)."""
    if partition == FILES:
        return TYPE_FILE_LIST
    if partition == COLUMN_STATS:
        return TYPE_COLUMN_STATS
    if partition == BLOOM_FILTERS:
        return TYPE_BLOOM_FILTER
    if partition == RECORD_INDEX:
        return TYPE_RECORD_INDEX
    if partition == PARTITION_STATS:
        return TYPE_PARTITION_STATS
    if partition.startswith(SECONDARY_INDEX_PREFIX):
        return TYPE_SECONDARY_INDEX
    if partition.startswith(EXPRESSION_INDEX_PREFIX):
        return TYPE_COLUMN_STATS
    raise ValueError(f"unknown metadata partition {partition!r}")


# ---------------------------------------------------------------------------------------------
# record index locations
# ---------------------------------------------------------------------------------------------
class RecordIndexLocation(NamedTuple):
    """Where the record index says a record lives."""

    partition: str
    file_id: str
    instant_time_millis: int | None = None


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def encode_record_index_file_id(file_id: str) -> dict:
    """The file id fields of a ``HoodieRecordIndexInfo`` for ``file_id``, as Hudi writes them:
    ``<uuid>-<n>`` (or a bare uuid) as UUID bits + file index, anything else as a raw string."""
    try:
        if len(file_id) == 36:
            u, index = uuid.UUID(file_id), MISSING_FILE_INDEX
        else:
            head, _, tail = file_id.rpartition("-")
            u, index = uuid.UUID(head), int(tail)
            if len(head) != 36:
                raise ValueError(file_id)
    except ValueError:
        return {"fileIdHighBits": -1, "fileIdLowBits": -1, "fileIndex": -1, "fileId": file_id,
                "fileIdEncoding": FILEID_ENCODING_RAW_STRING}
    value = u.int
    return {"fileIdHighBits": _signed64(value >> 64), "fileIdLowBits": _signed64(value & _M64),
            "fileIndex": index, "fileId": "", "fileIdEncoding": FILEID_ENCODING_UUID}


def decode_record_index_file_id(info: dict) -> str:
    """The file id a ``HoodieRecordIndexInfo`` (decoded Avro dict) points at."""
    encoding = info.get("fileIdEncoding") or FILEID_ENCODING_UUID
    if encoding == FILEID_ENCODING_RAW_STRING:
        return info.get("fileId") or ""
    high = info.get("fileIdHighBits") or 0
    low = info.get("fileIdLowBits") or 0
    u = uuid.UUID(int=((high & _M64) << 64) | (low & _M64))
    index = info.get("fileIndex")
    if index is None or index == MISSING_FILE_INDEX:
        return str(u)
    return f"{u}-{index}"
