"""Query filters: ``(column, op, value)`` tuples, ANDed, used to prune partitions and rows.

Pruning is best effort and must never drop a row the filter would keep, so anything we cannot
evaluate exactly on a partition path (a timestamp key generator's formatted path, a value that
does not parse) keeps the partition; the row mask applied afterwards is authoritative.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Iterable, Sequence
from urllib.parse import unquote

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableConfig
from ..errors import InvalidOptionError, SchemaError

_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
        "in": "in", "not in": "not in"}
_NO_PRUNE_KEYGENS = ("TIMESTAMP", "CUSTOM")


@attrs.frozen
class Filter:
    column: str
    op: str
    value: Any  # a Python scalar, or a tuple of them for in / not in

    def expression(self, type_: pa.DataType) -> pc.Expression:
        field = pc.field(self.column)
        if self.op in ("in", "not in"):
            values = _cast_values(self.value, type_, self.column)
            expr = field.isin(values)
            return ~expr if self.op == "not in" else expr
        value = _cast_values((self.value,), type_, self.column)[0]
        return {"=": field == value, "!=": field != value, "<": field < value,
                "<=": field <= value, ">": field > value, ">=": field >= value}[self.op]


def _split_in_values(text: str) -> list[str]:
    """Split on unescaped commas (``\\,`` is a literal comma), as hudi-rs does."""
    out, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c == ",":
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur).strip())
    return out


def parse_filters(filters: Iterable[Sequence] | None) -> list[Filter]:
    """Validate filter tuples; an unknown operator or an empty IN list is an error up front."""
    if isinstance(filters, (str, bytes, tuple)) and filters and not isinstance(filters[0], (tuple, list, Filter)):
        raise InvalidOptionError(f"filters must be a list of (column, op, value) tuples, got {filters!r}")
    out = []
    for item in filters or ():
        if isinstance(item, Filter):
            out.append(item)
            continue
        try:
            column, op, value = item
        except (TypeError, ValueError):
            raise InvalidOptionError(f"filter {item!r} must be a (column, op, value) tuple") from None
        norm = _OPS.get(" ".join(str(op).lower().split()))
        if norm is None:
            raise InvalidOptionError(f"filter {item!r}: unknown operator {op!r}; "
                                     f"use one of = != < <= > >= in, not in")
        if norm in ("in", "not in"):
            if isinstance(value, str):
                value = _split_in_values(value)
            try:
                value = tuple(value)
            except TypeError:
                raise InvalidOptionError(f"filter {item!r}: {op} needs a list of values") from None
            if not value:
                raise InvalidOptionError(f"filter {item!r}: {op} needs at least one value")
        out.append(Filter(str(column), norm, value))
    return out


def _cast_values(values: Sequence, type_: pa.DataType, column: str) -> list:
    """Cast filter values (Python objects or strings, as hudi-rs takes them) to ``type_``."""
    out = []
    for v in values:
        if v is None:
            out.append(pa.scalar(None, type_))
            continue
        try:
            if isinstance(v, str) and not (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
                if pa.types.is_boolean(type_):
                    low = v.strip().lower()
                    if low not in ("true", "false"):
                        raise ValueError(v)
                    out.append(pa.scalar(low == "true"))
                    continue
                if pa.types.is_timestamp(type_):
                    parsed = dt.datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
                    if type_.tz and parsed.tzinfo is None:
                        parsed = parsed.replace(tzinfo=dt.timezone.utc)
                    out.append(pa.scalar(parsed).cast(type_))
                    continue
                out.append(pc.cast(pa.scalar(v.strip()), type_))
            elif isinstance(v, (int, float, decimal.Decimal)) and (
                    pa.types.is_string(type_) or pa.types.is_large_string(type_)):
                out.append(pa.scalar(str(v), type_))
            else:
                out.append(pa.scalar(v).cast(type_))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError) as exc:
            raise SchemaError(f"filter value {v!r} cannot be compared with column {column!r} "
                              f"of type {type_}: {exc}") from None
    return out


def check_columns(filters: list[Filter], schema: pa.Schema) -> None:
    for f in filters:
        if schema.get_field_index(f.column) < 0:
            raise SchemaError(f"filter on unknown column {f.column!r}; the table has "
                              f"{', '.join(schema.names)}")


def row_filter(filters: list[Filter], schema: pa.Schema) -> pc.Expression | None:
    """One Arrow expression ANDing every filter (``None`` when there are none)."""
    expr = None
    for f in filters:
        e = f.expression(schema.field(f.column).type)
        expr = e if expr is None else expr & e
    return expr


def apply_filters(table: pa.Table, filters: list[Filter], schema: pa.Schema) -> pa.Table:
    expr = row_filter(filters, schema)
    return table if expr is None or table.num_rows == 0 else table.filter(expr)


class PartitionPruner:
    """Decide from a partition path alone whether it can hold rows passing the filters."""

    def __init__(self, config: TableConfig, schema: pa.Schema, filters: list[Filter]):
        self.fields = config.partition_fields
        self.hive = config.hive_style_partitioning
        self.urlencoded = config.url_encode_partitions
        prunable = config.keygen_type not in _NO_PRUNE_KEYGENS
        self.filters = [f for f in filters if prunable and f.column in self.fields]
        self.types = {name: (schema.field(name).type if schema.get_field_index(name) >= 0
                             else pa.string()) for name in self.fields}

    @property
    def active(self) -> bool:
        return bool(self.filters)

    def values(self, partition_path: str) -> dict[str, str] | None:
        """Partition field -> raw string value, or ``None`` when the path cannot be parsed."""
        if not partition_path:
            return None
        segments = partition_path.split("/")
        out = {}
        if self.hive:
            for seg in segments:
                if "=" not in seg:
                    return None
                k, v = seg.split("=", 1)
                out[k] = v
        else:
            if len(segments) != len(self.fields):
                return None
            out = dict(zip(self.fields, segments))
        if self.urlencoded:
            out = {k: unquote(v) for k, v in out.items()}
        return out

    def matches(self, partition_path: str) -> bool:
        if not self.filters:
            return True
        values = self.values(partition_path)
        if values is None:
            return True
        arrays, names = [], []
        for name in self.fields:
            raw = values.get(name)
            if raw is None:
                return True
            typ = self.types[name]
            if raw == "__HIVE_DEFAULT_PARTITION__" or raw == "default" and not pa.types.is_string(typ):
                arr = pa.array([None], typ)
            else:
                try:
                    arr = pc.cast(pa.array([raw]), typ)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return True
            arrays.append(arr)
            names.append(name)
        row = pa.Table.from_arrays(arrays, names=names)
        try:
            expr = row_filter(self.filters, row.schema)
            return row.filter(expr).num_rows > 0
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, SchemaError):
            return True


# -- file skipping by column stats --------------------------------------------------------------
def _lt(a: pa.Scalar, b: pa.Scalar) -> bool:
    return bool(pc.less(a, b).as_py())


def _le(a: pa.Scalar, b: pa.Scalar) -> bool:
    return bool(pc.less_equal(a, b).as_py())


def _is_nan(s: pa.Scalar) -> bool:
    v = s.as_py()
    return isinstance(v, float) and v != v


def stats_may_match(flt: Filter, type_: pa.DataType, ranges: Sequence[tuple]) -> bool:
    """Can any row of a group of files pass ``flt``, given each file's stats of the column?

    ``ranges`` holds one ``(min, max, null_count, value_count)`` per file, with ``min``/``max``
    Arrow scalars of ``type_`` (or ``None`` when unknown). Answers ``True`` whenever the stats
    cannot prove that no row passes: unknown bounds, NaN bounds, uncastable filter values.
    A file with no values (``value_count == 0``) holds no row. Nulls follow the row filter:
    they pass no comparison, ``in`` only when the list holds a null and ``not in`` only when
    it does not (Arrow's ``is_in`` matches null with null).
    """
    try:
        raw = list(flt.value) if flt.op in ("in", "not in") else [flt.value]
        values = _cast_values(raw, type_, flt.column)
    except (SchemaError, InvalidOptionError):
        return True
    non_null = [v for v in values if v.is_valid]
    null_listed = len(non_null) != len(values)
    nulls_pass = (flt.op == "in" and null_listed) or (flt.op == "not in" and not null_listed)
    for lo, hi, nulls, count in ranges:
        if count == 0 and lo is None and hi is None:
            continue  # an empty file (or a log of deletes only) adds no row
        if nulls_pass and (nulls is None or nulls > 0):
            return True
        if count is not None and nulls is not None and count > 0 and nulls >= count:
            continue  # only nulls, and nulls do not pass
        if not non_null:
            if flt.op == "not in":
                return True  # every non-null value passes "not in (null)"
            continue  # a comparison with null passes nothing
        if lo is None or hi is None or not lo.is_valid or not hi.is_valid or _is_nan(lo) or _is_nan(hi):
            return True
        try:
            if _file_may_match(flt.op, non_null, lo, hi):
                return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            return True
    return False


def _file_may_match(op: str, values: list, lo: pa.Scalar, hi: pa.Scalar) -> bool:
    v = values[0]
    if op == "=":
        return _le(lo, v) and _le(v, hi)
    if op == "!=":
        return not (_le(v, lo) and _le(hi, v))  # all values equal v only when lo == hi == v
    if op == "<":
        return _lt(lo, v)
    if op == "<=":
        return _le(lo, v)
    if op == ">":
        return _lt(v, hi)
    if op == ">=":
        return _le(v, hi)
    if op == "in":
        return any(_le(lo, x) and _le(x, hi) for x in values)
    if op == "not in":
        return not (_le(hi, lo) and any(_le(x, lo) and _le(lo, x) for x in values))
    return True
