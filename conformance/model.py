"""A fixture-independent model of a Hudi table: what its rows must be after a sequence of writes.

The conformance suite computes the expected results of the tables it generates and of the write
cases from this model alone, never from a reader, so a reader cannot agree with itself. Rows are
described in JSON (write cases) by a small generator spec, turned into Arrow with
``rows_to_arrow`` and remembered per record key with the step that last wrote them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa

from .canonical import canonical_rows

# the schema of generated rows: every type family a reader has to get right
STANDARD_SCHEMA: list[tuple[str, str]] = [
    ("id", "string"), ("ts", "int64"), ("p", "string"), ("amount", "decimal(12,2)"),
    ("score", "double"), ("n", "int32"), ("when", "timestamp[us,UTC]"), ("day", "date32"),
    ("flag", "bool"), ("tags", "list<string>"), ("info", "struct<a:int64,b:string>"),
]
PARTITIONS = ("a", "b", "c")
#: Hudi's soft-delete flag: a record carrying it true deletes its key
IS_DELETED = "_hoodie_is_deleted"

_SIMPLE = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "double": pa.float64(),
           "float": pa.float32(), "bool": pa.bool_(), "date32": pa.date32(), "binary": pa.binary()}


def arrow_type(spec: str) -> pa.DataType:
    """``string``, ``int64``, ``decimal(p,s)``, ``timestamp[us,UTC]``, ``list<T>``,
    ``struct<a:T,b:T>``: the type names of write-case schemas."""
    spec = spec.strip()
    if spec in _SIMPLE:
        return _SIMPLE[spec]
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", spec)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"timestamp\[(\w+)(?:,\s*(\w+))?\]", spec)
    if m:
        return pa.timestamp(m.group(1), tz=m.group(2))
    m = re.fullmatch(r"list<(.+)>", spec)
    if m:
        return pa.list_(arrow_type(m.group(1)))
    m = re.fullmatch(r"struct<(.+)>", spec)
    if m:
        fields = []
        for part in _split_top(m.group(1)):
            name, typ = part.split(":", 1)
            fields.append((name.strip(), arrow_type(typ)))
        return pa.struct(fields)
    raise ValueError(f"unknown type {spec!r} in a conformance schema")


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def arrow_schema(spec: Sequence[Sequence[str]] | str | None) -> pa.Schema:
    if spec is None or spec == "standard":
        spec = STANDARD_SCHEMA
    return pa.schema([pa.field(name, arrow_type(typ)) for name, typ in spec])


def generated_row(k: int, ts: int, seed: int = 0, pshift: int = 0) -> dict:
    """Row ``k`` of the standard schema: deterministic values that depend on ``seed``."""
    return {
        "id": f"k{k:05d}", "ts": ts, "p": PARTITIONS[(k + pshift) % len(PARTITIONS)],
        "amount": decimal.Decimal(k * 7 + seed) / 100, "score": k * 0.5 + seed, "n": k + seed,
        "when": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=k + seed),
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=(k + seed) % 300), "flag": (k + seed) % 2 == 0,
        "tags": [f"t{k % 3}", f"s{seed}"], "info": {"a": k * seed, "b": f"v{seed}"},
    }


def _from_json(value: Any, typ: pa.DataType) -> Any:
    """A JSON value (as in canonical rows) as the Python value Arrow wants for ``typ``."""
    if value is None:
        return None
    if pa.types.is_decimal(typ):
        return decimal.Decimal(str(value))
    if pa.types.is_timestamp(typ):
        return dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    if pa.types.is_date(typ):
        return dt.date.fromisoformat(value) if isinstance(value, str) else value
    if pa.types.is_binary(typ):
        return bytes.fromhex(value) if isinstance(value, str) else value
    if pa.types.is_list(typ):
        return [_from_json(v, typ.value_type) for v in value]
    if pa.types.is_struct(typ):
        return {f.name: _from_json(value.get(f.name), f.type) for f in typ}
    return value


def rows_to_arrow(spec: Mapping[str, Any] | Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows of a write step: a generator spec ``{"ids": [start, stop], "ts": 1, "seed": 0,
    "pshift": 0}`` (standard schema), a list of such specs, or explicit JSON rows."""
    if isinstance(spec, Mapping) and "ids" in spec:
        spec = [spec]
    rows: list[dict] = []
    for item in spec:
        if "ids" in item:
            lo, hi = item["ids"]
            rows.extend(generated_row(k, int(item.get("ts", 1)), int(item.get("seed", 0)),
                                      int(item.get("pshift", 0))) for k in range(lo, hi))
            if item.get("drop"):
                for r in rows:
                    for col in item["drop"]:
                        r.pop(col, None)
        else:
            rows.append({f.name: _from_json(item.get(f.name), f.type) for f in schema})
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


class Model:
    """Rows by record key after each commit, and the commit that last wrote each row."""

    def __init__(self, key: str = "id", partition: str | None = "p", event_time: bool = True,
                 ordering: str = "ts", global_index: bool = False,
                 ordered_ops: Iterable[str] = ("upsert",)):
        """``ordered_ops``: the operations whose records lose to a stored record with a higher
        ordering value under event-time merging (upserts always; inserts too where the writer
        routes them through the index, as a model of a table whose inserts update keys)."""
        self.key, self.partition, self.event_time, self.ordering = key, partition, event_time, ordering
        self.global_index = global_index
        self.ordered_ops = frozenset(ordered_ops)
        self.rows: dict[Any, dict] = {}
        self.writer: dict[Any, int] = {}
        self.history: list[tuple[dict, dict]] = []  # (rows, writer) after each commit

    def _id(self, row: Mapping) -> Any:
        # a non-global index keys records by (partition, key); a global one by key alone
        if self.partition and not self.global_index:
            return (row.get(self.partition), row[self.key])
        return row[self.key]

    def apply(self, op: str, table: pa.Table | None, commit: int, partitions: Iterable[str] = ()) -> None:
        """One write. Its records are first precombined (one per key, the highest ordering value
        winning, flagged ``_hoodie_is_deleted`` or not); an upsert's flagged winner deletes its
        key unless the stored record is newer (event time); other writes skip flagged records."""
        batch: dict[Any, dict] = {}
        for r in (table.to_pylist() if table is not None else []):
            k = self._id(r)
            old = batch.get(k)
            if old is None or not self.event_time or r[self.ordering] >= old[self.ordering]:
                batch[k] = r
        if op in ("insert_overwrite", "insert_overwrite_table"):
            batch = {k: r for k, r in batch.items() if not r.get(IS_DELETED)}   # never written
        if op in ("insert", "upsert", "bulk_insert"):
            for k, r in batch.items():
                old = self.rows.get(k)
                if r.get(IS_DELETED) and op != "upsert":
                    continue   # an insert writes no flagged record (it looks no key up to delete)
                if old is not None and self.event_time and op in self.ordered_ops \
                        and r[self.ordering] < old[self.ordering]:
                    continue
                if r.get(IS_DELETED):   # the winning record is a delete
                    self.rows.pop(k, None)
                    self.writer.pop(k, None)
                    continue
                self.rows[k], self.writer[k] = r, commit
        elif op == "delete":
            for k in batch:
                self.rows.pop(k, None)
                self.writer.pop(k, None)
        elif op == "insert_overwrite":
            touched = {r[self.partition] for r in batch.values()}
            for k in [k for k, r in self.rows.items() if r[self.partition] in touched]:
                del self.rows[k], self.writer[k]
            for k, r in batch.items():
                self.rows[k], self.writer[k] = r, commit
        elif op == "insert_overwrite_table":
            self.rows = dict(batch)
            self.writer = {k: commit for k in batch}
        elif op == "delete_partition":
            parts = set(partitions)
            for k in [k for k, r in self.rows.items() if r[self.partition] in parts]:
                del self.rows[k], self.writer[k]
        else:
            raise ValueError(f"the model does not know operation {op!r}")
        self.history.append((dict(self.rows), dict(self.writer)))

    def revert_to(self, commit: int | None) -> None:
        """Roll back/restore: the state after ``commit`` (``None``: before the first)."""
        rows, writer = self.history[commit] if commit is not None else ({}, {})
        self.rows, self.writer = dict(rows), dict(writer)


def expected_rows(rows: Mapping[Any, dict], schema: pa.Schema, columns: Sequence[str] | None = None,
                  meta: Mapping[Any, Mapping[str, Any]] | None = None) -> list[dict]:
    """Canonical rows of the model restricted to ``columns`` (default: the data columns);
    ``meta`` adds per-key string columns such as ``_hoodie_record_key``."""
    columns = list(columns or schema.names)
    meta_cols = [c for c in columns if c not in schema.names]
    fields = [pa.field(c, pa.string()) for c in meta_cols] + [schema.field(c) for c in columns if c in schema.names]
    out = []
    for k, r in rows.items():
        row = {c: r.get(c) for c in schema.names}
        if meta is not None:
            row.update(meta.get(k, {}))
        out.append({f.name: row.get(f.name) for f in fields})
    return canonical_rows(pa.Table.from_pylist(out, schema=pa.schema(fields)).select(columns))
