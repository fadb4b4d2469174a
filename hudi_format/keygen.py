"""Key generators: the record key and partition path Hudi derives from each record.

Readers need them for tables without meta fields (the key is not stored, it is recomputed) and
writers for every record, so they are computed column-wise with Arrow compute. Output formats
follow Apache Hudi's key generators exactly: ``value`` (simple), ``f1:v1,f2:v2`` (complex),
``field=value`` segments for hive-style paths, ``__HIVE_DEFAULT_PARTITION__`` for null or empty
partition values, ``__null__``/``__empty__`` inside complex keys.
"""

from __future__ import annotations

import re
from typing import Mapping

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from .chunks import one_array
from .config import TableConfig
from .errors import HudiError, InvalidOptionError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"

KEYGEN_TYPES = ("SIMPLE", "COMPLEX", "NON_PARTITION", "TIMESTAMP", "CUSTOM", "GLOBAL_DELETE")
KEYGEN_CLASSES = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
    "GLOBAL_DELETE": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
}


class KeyGenerationError(HudiError):
    """A record's key or partition value is missing or cannot be formatted."""


# Java DateTimeFormatter / SimpleDateFormat letters -> strftime, for timestamp-based keys.
_JAVA_DATE = [("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
              ("mm", "%M"), ("ss", "%S")]


def java_to_strftime(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "'":
            j = pattern.index("'", i + 1) if "'" in pattern[i + 1:] else len(pattern)
            out.append(pattern[i + 1:j].replace("%", "%%"))
            i = j + 1
            continue
        for java, strf in _JAVA_DATE:
            if pattern.startswith(java, i):
                out.append(strf)
                i += len(java)
                break
        else:
            out.append(pattern[i].replace("%", "%%"))
            i += 1
    return "".join(out)


# The characters Hudi's PartitionPathEncodeUtils.escapePathName (Hive's FileUtils) escapes:
# ASCII controls, DEL and the path, glob and URL metacharacters below. Everything else,
# non-ASCII included, is kept; an escaped character becomes '%' and two upper-case hex digits.
_PATH_ESCAPES = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def escape_path_name(value: str) -> str:
    """A partition value as Hudi writes it into the path with
    ``hoodie.datasource.write.partitionpath.urlencode`` (``escapePathName``, Hudi 0.10 and later;
    earlier releases used ``java.net.URLEncoder``, whose '+' for a space no current reader decodes)."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPES else c for c in value)


def _to_string(col: pa.ChunkedArray | pa.Array, field: str, role: str) -> pa.ChunkedArray | pa.Array:
    """``col`` as strings, as Hudi formats key and partition values; a type without a string
    form (struct, list, binary that is not UTF-8) is the caller's error, named."""
    if pa.types.is_string(col.type):
        return col
    try:
        return pc.cast(col, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise KeyGenerationError(f"{role} field {field!r} of type {col.type} has no string form "
                                 f"Hudi can use as a {role}: {exc}") from None


# A partition path segment that is '.' or '..', a leading or trailing '/', an empty segment
# ('//') or a NUL byte: such a path resolves outside its partition folder (or the table).
# Backslashes count as separators, as in Hudi's PartitionPathEncodeUtils.hasPathTraversal.
_UNSAFE_SEGMENT = r"(^|/)\.{1,2}(/|$)|^/|/$|//"


def _check_partition_segment(raw, segment, field: str) -> None:
    """Reject partition values that would make the path leave the table folder, before any
    byte is written (Hudi rejects '..' segments with a HoodieKeyException)."""
    normalized = pc.replace_substring(segment, "\\", "/")
    bad = pc.or_(pc.match_substring_regex(normalized, _UNSAFE_SEGMENT),
                 pc.match_substring(segment, "\x00"))
    if not pc.any(bad).as_py():
        return
    values = pc.unique(pc.filter(raw, bad)).to_pylist()
    shown = ", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
    raise KeyGenerationError(
        f"partition field {field!r} has unsafe value(s) {shown}: "
        f"a partition path must not have '.' or '..' segments, empty segments, a leading or "
        f"trailing '/' or a NUL byte (it would write outside the table folder)")


@attrs.frozen
class KeyGenerator:
    """How one table turns records into (record key, partition path)."""

    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    keygen_type: str = "SIMPLE"
    hive_style: bool = False
    url_encode: bool = False
    timestamp_options: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: TableConfig, options: Mapping[str, str] | None = None) -> "KeyGenerator":
        merged = {**dict(config), **dict(options or {})}
        ts_opts = {k: v for k, v in merged.items() if k.startswith("hoodie.keygen.timebased.")}
        return cls(tuple(config.record_key_fields), tuple(config.partition_fields),
                   config.keygen_type, config.hive_style_partitioning,
                   config.url_encode_partitions, ts_opts)

    # -- record keys -------------------------------------------------------------------------
    def record_keys(self, table: pa.Table) -> pa.ChunkedArray:
        fields = self.record_key_fields
        if not fields:
            raise KeyGenerationError("the table has no record key fields (hoodie.table.recordkey.fields)")
        missing = [f for f in fields if f not in table.column_names]
        if missing:
            raise KeyGenerationError(f"record key field(s) {missing} are not in the data "
                                     f"(columns: {', '.join(table.column_names)})")
        if len(fields) == 1 and self.keygen_type != "COMPLEX":
            keys = _to_string(table.column(fields[0]), fields[0], "record key")
            bad = pc.or_kleene(pc.is_null(keys), pc.equal(keys, ""))
            if table.num_rows and pc.any(bad).as_py():
                raise KeyGenerationError(f"record key field {fields[0]!r} is null or empty in "
                                         f"{pc.sum(bad).as_py()} record(s); Hudi requires a key")
            return keys
        parts, all_missing = [], None
        for i, f in enumerate(fields):
            val = _to_string(table.column(f), f, "record key")
            missing_here = pc.or_kleene(pc.is_null(val), pc.equal(val, ""))
            all_missing = missing_here if all_missing is None else pc.and_kleene(all_missing, missing_here)
            val = pc.if_else(pc.is_null(val), NULL_KEY, pc.if_else(pc.equal(val, ""), EMPTY_KEY, val))
            parts.extend([pa.scalar(("," if i else "") + f + ":"), val])
        if table.num_rows and pc.any(all_missing).as_py():
            raise KeyGenerationError(f"all record key fields {list(fields)} are null or empty in "
                                     f"{pc.sum(all_missing).as_py()} record(s)")
        return pc.binary_join_element_wise(*parts, "")

    # -- partition paths ---------------------------------------------------------------------
    def partition_paths(self, table: pa.Table, dictionary: bool = False) -> pa.ChunkedArray | pa.Array:
        """Each row's partition path. ``dictionary``: as a ``DictionaryArray`` of distinct paths
        where the paths come from one field's distinct values anyway (the planner groups rows
        by these codes instead of hashing a million strings again); plain strings otherwise."""
        n = table.num_rows
        if self.keygen_type in ("NON_PARTITION", "GLOBAL_DELETE") or not self.partition_fields:
            return pa.repeat(pa.scalar(""), n)
        missing = [f for f in self.partition_fields if f not in table.column_names]
        if missing:
            raise KeyGenerationError(f"partition field(s) {missing} are not in the data "
                                     f"(columns: {', '.join(table.column_names)})")
        segments = []
        for f in self.partition_fields:
            # Partition values repeat: format and check each distinct value once, then spread
            # the segments over the rows by the dictionary indices.
            enc = pc.dictionary_encode(one_array(table.column(f)), null_encoding="encode")
            paths = self._segment(enc.dictionary, f)
            if dictionary and len(self.partition_fields) == 1 \
                    and pc.count_distinct(paths, mode="all").as_py() == len(paths):
                # distinct values, distinct paths (null and "" both give the default partition,
                # a date format merges timestamps: then the codes would split one partition)
                return pa.DictionaryArray.from_arrays(enc.indices, paths)
            segments.append(pc.take(paths, enc.indices))
        if len(segments) == 1:
            return segments[0]
        return pc.binary_join_element_wise(*segments, "/")

    def _segment(self, values: pa.Array, field: str) -> pa.Array:
        """The path segment of each of ``values`` (a partition field's values)."""
        if self.keygen_type == "TIMESTAMP":
            raw = val = self._timestamp_partition(values, field)
        else:
            raw = val = _to_string(values, field, "partition")
        val = pc.if_else(pc.or_kleene(pc.is_null(val), pc.equal(val, "")), DEFAULT_PARTITION, val)
        if self.url_encode:
            val = self._url_encode(val)
        if self.hive_style:
            val = pc.binary_join_element_wise(pa.scalar(field + "="), val, "")
        _check_partition_segment(raw, val, field)
        return val

    @staticmethod
    def _url_encode(values):
        uniq = pc.unique(values)
        encoded = pa.array([escape_path_name(v) for v in uniq.to_pylist()], pa.string())
        return pc.take(encoded, pc.index_in(values, value_set=uniq))

    def _opt(self, name: str, default: str | None = None) -> str | None:
        return self.timestamp_options.get("hoodie.keygen.timebased." + name, default)

    def _timestamp_partition(self, col, field: str):
        ts_type = (self._opt("timestamp.type") or "").upper()
        out_fmt = self._opt("output.dateformat", "yyyy-MM-dd")
        tz = self._opt("output.timezone") or self._opt("timezone") or "UTC"
        tz = "UTC" if tz.upper() in ("GMT", "UTC", "Z") else tz
        if ts_type in ("EPOCHMILLISECONDS", "UNIX_TIMESTAMP", "EPOCHMICROSECONDS", "SCALAR"):
            unit = {"EPOCHMILLISECONDS": "ms", "UNIX_TIMESTAMP": "s", "EPOCHMICROSECONDS": "us"}.get(ts_type)
            if ts_type == "SCALAR":
                scalar_unit = (self._opt("timestamp.scalar.time.unit", "SECONDS") or "SECONDS").upper()
                unit = {"SECONDS": "s", "MILLISECONDS": "ms", "MICROSECONDS": "us",
                        "NANOSECONDS": "ns"}.get(scalar_unit)
                if unit is None:
                    raise InvalidOptionError(f"hoodie.keygen.timebased.timestamp.scalar.time.unit "
                                             f"{scalar_unit!r} is not supported")
            try:
                ts = pc.cast(pc.cast(col, pa.int64()), pa.timestamp(unit, tz="UTC"))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise KeyGenerationError(f"partition field {field!r} of type {col.type} is not a "
                                         f"{ts_type} number for the timestamp key generator: {exc}") from None
        elif ts_type == "DATE_STRING":
            ts = self._parse_date_strings(_to_string(col, field, "partition"), field)
        elif pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
            ts = col if pa.types.is_timestamp(col.type) else pc.cast(col, pa.timestamp("s"))
        else:
            raise InvalidOptionError(f"hoodie.keygen.timebased.timestamp.type {ts_type!r} is not supported "
                                     f"for partition field {field!r}")
        if ts.type.tz is None:
            ts = pc.assume_timezone(ts, "UTC")
        ts = pc.cast(ts, pa.timestamp(ts.type.unit, tz=tz))
        return pc.strftime(ts, format=java_to_strftime(out_fmt))

    def _parse_date_strings(self, strings, field: str):
        try:
            return pc.cast(strings, pa.timestamp("ms", tz="UTC"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        fmt = self._opt("input.dateformat")
        if not fmt:
            raise InvalidOptionError("hoodie.keygen.timebased.input.dateformat is required "
                                     "for timestamp.type DATE_STRING")
        strf = re.sub(r"\.SSS", "", java_to_strftime(fmt))
        try:
            return pc.strptime(strings, format=strf, unit="ms")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise KeyGenerationError(f"partition field {field!r}: values do not match "
                                     f"hoodie.keygen.timebased.input.dateformat {fmt!r}: {exc}") from None
