"""Content of Avro, Parquet and HFile data blocks -> Arrow, and alignment to a base-file schema.

Avro data block content (``HoodieAvroDataBlock``): int block version, int record count
(versions >= 2), then per record an int length and the record in Avro binary encoding under
the writer schema from the block's SCHEMA header; flat records (primitive, fixed and enum
fields, optionally nullable) are decoded column by column (:mod:`.avro_columns`), others record
by record with fastavro. Parquet data block content is a complete Parquet file. CDC blocks use
the Avro layout.

HFile data block content (``HoodieHFileDataBlock``, the metadata table's log blocks): a whole
HFile whose keys are the record keys and whose values are the records in Avro binary encoding
under the SCHEMA header, with the ``key`` field blanked to "" (Hudi restores it from the HFile
key on read, as :func:`decode_hfile_rows` does). The metadata schema has general unions (the
column-stats min/max wrappers); they become the ``member0..memberN`` structs of
:func:`hudi_format.schema.avro_to_arrow_schema`, with :class:`UnionShaper` moving values
between the two shapes.
"""

from __future__ import annotations

import io
import struct
from functools import lru_cache
from typing import Sequence

import fastavro
import numpy as np
import pyarrow as pa

from ..chunks import one_array
from ..errors import CorruptFileError, HudiError, LogFormatError, SchemaError
from ..avro_values import AvroArrowConverter, restore_logical
from ..schema import fullname, null_split, parse_avro_schema
from .avro_columns import decode_columns, frame_records, plan_for



#: Blocks of fewer records are decoded record by record even when flat: the column-wise
#: decoder costs ~2.5 ms a block whatever its size (Arrow compute calls per field), fastavro
#: ~12 µs a record; they cross near 250 records of a nine-field schema (measured on 1-1,000
#: records). Small blocks are the common case of small streaming upserts and deletes.
COLUMNAR_DECODE_ROWS = 200
#: Blocks of up to this many records are decoded together with their neighbours of the same
#: schema (:func:`decode_avro_blocks`); a bigger block already spreads the per-block cost thin,
#: and joining would copy its content once more.
JOIN_BELOW_ROWS = 16_384


def _record_count(content: bytes) -> int:
    """The record count a version >= 2 block's content states, to choose the decoder (both
    frame the records themselves and check the count); unknown (version 1) counts as many."""
    if len(content) < 8:
        return 0
    if int.from_bytes(content[:4], "big", signed=True) < 2:
        return COLUMNAR_DECODE_ROWS
    return int.from_bytes(content[4:8], "big", signed=True)


@lru_cache(maxsize=64)
def _compiled(schema_json: str):
    """Converter + fastavro-parsed raw schema, shared by all blocks with the same schema."""
    conv = AvroArrowConverter(schema_json)
    parsed = fastavro.parse_schema(conv.raw_schema, _ignore_default_error=True)
    return conv, parsed


def _decode_avro_rows(content: bytes, parsed, where: str) -> list[dict]:
    """Records with general unions or nesting, which the columnar decoder does not plan: framed
    by :func:`.avro_columns.frame_records` (the one reader of the block layout), then decoded
    one by one with fastavro."""
    starts, ends = frame_records(content, where)
    fo = io.BytesIO(content)
    rows: list[dict] = []
    read = fastavro.schemaless_reader
    for i, (pos, end) in enumerate(zip(starts.to_pylist(), ends.to_pylist())):
        fo.seek(pos)
        try:
            rows.append(read(fo, parsed, None))
        except Exception as exc:  # fastavro raises many kinds on damaged bytes
            raise LogFormatError(f"{where}: record {i} cannot be decoded: {exc}") from exc
        if fo.tell() != end:
            raise LogFormatError(f"{where}: record {i} does not match its length")
    return rows


def decode_avro_block(content: bytes, schema_json: str | None, where: str) -> pa.Table:
    """Records of an Avro (or CDC) data block's ``content`` under its SCHEMA header. Takes the
    parts, not the block, so this decoder stays below :mod:`.block` (which calls it)."""
    if not schema_json:
        raise LogFormatError(f"{where} has no SCHEMA header")
    try:
        conv, parsed = _compiled(schema_json)
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    except Exception as exc:
        raise SchemaError(f"{where}: writer schema is not valid Avro: {exc}") from exc
    plans = plan_for(schema_json)
    try:
        if plans is not None and _record_count(content) >= COLUMNAR_DECODE_ROWS:  # flat records: by column
            return conv.storage_to_arrow(decode_columns(content, plans, conv.storage_schema, where))
        return conv.raw_to_arrow(_decode_avro_rows(content, parsed, where))
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def _stated_count(content: bytes) -> int | None:
    """The record count a version >= 2 Avro block states (``None``: version 1, or too short)."""
    if len(content) < 8 or int.from_bytes(content[:4], "big", signed=True) < 2:
        return None
    count = int.from_bytes(content[4:8], "big", signed=True)
    return count if count >= 0 else None


def _decode_run(items: Sequence[tuple[bytes, str | None, str]], counts: list[int]) -> list[pa.Table] | None:
    """Blocks of one flat writer schema decoded as one content: their records framed once, the
    frames checked to end exactly at each block's end, decoded column-wise and cut back. ``None``
    when that fails (a block with bytes after its stated records, damage, a schema that does not
    compile): the caller decodes each block alone, as before, and its error names the block."""
    schema, where = items[0][1], f"{items[0][2]} and the {len(items) - 1} blocks after it"
    joined = b"".join([struct.pack(">ii", 2, sum(counts))] + [content[8:] for content, _, _ in items])
    try:
        frames = frame_records(joined, where)
    except HudiError:
        return None
    ends = frames[1].to_numpy()
    bounds = np.cumsum([len(content) - 8 for content, _, _ in items]) + 8
    last = np.cumsum(counts) - 1
    has = np.asarray(counts) > 0
    if not np.array_equal(ends[last[has]], bounds[has]) or (~has & (np.asarray([len(c) for c, _, _ in items]) != 8)).any():
        return None
    try:
        conv, _ = _compiled(schema)
        table = conv.storage_to_arrow(decode_columns(joined, plan_for(schema), conv.storage_schema, where, frames))
    except Exception:   # noqa: BLE001 - the blocks are decoded alone, which names the error
        return None
    out, at = [], 0
    for n in counts:
        out.append(table.slice(at, n))
        at += n
    return out


def decode_avro_blocks(items: Sequence[tuple[bytes, str | None, str]]) -> list[pa.Table]:
    """:func:`decode_avro_block` of each ``(content, schema_json, where)``, in order.

    Consecutive blocks of one flat writer schema are framed as one content (one record count,
    their records one after another) and decoded in one column-wise pass, then cut back into
    their blocks: a file slice of many small blocks (a streaming writer's, one per commit) pays
    the decoder's per-block cost (~2.5 ms of Arrow calls) once, and blocks too small for the
    column-wise decoder alone are decoded with the others instead of record by record. A 1M-row
    MOR table after 20 upserts of 10k rows (20 blocks of ~800 records per file slice): keys and
    ordering values of a slice 0.23-0.49 s before. If a run does not decode, each of its blocks
    is decoded alone, so an error names the block at fault."""
    out: list[pa.Table | None] = [None] * len(items)
    i = 0
    while i < len(items):
        schema, counts, j = items[i][1], [], i
        if schema and plan_for(schema) is not None:
            while j < len(items) and items[j][1] == schema:
                n = _stated_count(items[j][0])
                if n is None or n > JOIN_BELOW_ROWS:
                    break
                counts.append(n)
                j += 1
        if len(counts) > 1 and sum(counts) >= COLUMNAR_DECODE_ROWS:
            run = _decode_run(items[i:j], counts)
            if run is not None:
                out[i:j] = run
                i = j
                continue
        end = max(j, i + 1)
        for k in range(i, end):
            out[k] = decode_avro_block(*items[k])
        i = end
    return out  # type: ignore[return-value]


# -- general unions <-> member structs --------------------------------------------------------
_PY_TYPES = {"boolean": (bool,), "int": (int,), "long": (int,), "float": (float, int),
             "double": (float, int), "string": (str,), "bytes": (bytes,), "null": (type(None),)}


class UnionShaper:
    """Moves values of general Avro unions (two or more non-null branches) between shapes.

    Decoded with ``return_named_type=True``, fastavro gives such a value as ``(type name,
    value)``; Arrow (and Spark) hold it as a struct with one ``memberI`` field per non-null
    branch, only the taken one set. :meth:`to_arrow` maps decoded records to the struct shape,
    :meth:`to_avro` maps Arrow rows (``to_pylist``) back to fastavro's tuple notation.
    Subtrees without general unions pass through untouched.
    """

    def __init__(self, avro_schema):
        self._named: dict[str, tuple] = {}
        self.node = self._build(parse_avro_schema(avro_schema), None)

    @property
    def needed(self) -> bool:
        return self.node is not None

    def _build(self, s, ns):
        """A node (kind, ...) for schema ``s``, or None when no general union lies below."""
        if isinstance(s, str):
            for k in (fullname(s, ns), s):
                if k in self._named:
                    return self._named[k][1]
            return None
        if isinstance(s, list):
            non_null, _ = null_split(s)
            if len(non_null) == 1:
                return self._build(non_null[0], ns)
            branches = []
            for b in non_null:
                node = self._build(b, ns)
                name = self._type_name(b, ns)
                branches.append((name, name.rpartition(".")[2], node))
            return ("union", branches)
        if not isinstance(s, dict):
            return None
        t = s.get("type")
        if t == "record" or t == "error":
            name = s.get("name", "")
            rns = s.get("namespace", ns) if "." not in name else name.rpartition(".")[0]
            full = fullname(name, rns)
            self._named[full] = (s, None)
            fields = []
            for f in s.get("fields", []):
                node = self._build(f.get("type"), rns)
                if node is not None:
                    fields.append((f["name"], node))
            node = ("record", fields) if fields else None
            self._named[full] = (s, node)
            return node
        if t in ("enum", "fixed"):
            name = s.get("name", "")
            self._named[fullname(name, s.get("namespace", ns))] = (s, None)
            return None
        if t == "array":
            node = self._build(s.get("items"), ns)
            return ("array", node) if node is not None else None
        if t == "map":
            node = self._build(s.get("values"), ns)
            return ("map", node) if node is not None else None
        return self._build(t, ns) if isinstance(t, (list, dict)) else None

    @staticmethod
    def _type_name(b, ns) -> str:
        if isinstance(b, str):
            return fullname(b, ns) if b not in _PY_TYPES else b
        if isinstance(b, dict):
            if b.get("type") in ("record", "error", "enum", "fixed"):
                name = b.get("name", "")
                return fullname(name, b.get("namespace", ns))
            t = b.get("type")
            return t if isinstance(t, str) else "complex"
        return "complex"

    def to_arrow(self, value, node=None):
        node = self.node if node is None else node
        if value is None:
            return None
        kind = node[0]
        if kind == "record":
            out = dict(value)
            for name, sub in node[1]:
                if name in out:
                    out[name] = self.to_arrow(out[name], sub)
            return out
        if kind == "array":
            return [self.to_arrow(v, node[1]) for v in value]
        if kind == "map":
            return {k: self.to_arrow(v, node[1]) for k, v in value.items()}
        branches = node[1]
        index = None
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            name, value = value
            index = next((i for i, (full, short, _) in enumerate(branches)
                          if name in (full, short)), None)
        if index is None:  # primitives come without a name: match the Python type
            index = next((i for i, (full, _, _) in enumerate(branches)
                          if isinstance(value, _PY_TYPES.get(full, ()))
                          and not (isinstance(value, bool) and full != "boolean")), None)
        if index is None:
            raise SchemaError(f"a union value {value!r} matches none of its branches")
        sub = branches[index][2]
        shaped = self.to_arrow(value, sub) if sub is not None else value
        return {f"member{i}": (shaped if i == index else None) for i in range(len(branches))}

    def to_avro(self, value, node=None):
        node = self.node if node is None else node
        if value is None:
            return None
        kind = node[0]
        if kind == "record":
            out = dict(value)
            for name, sub in node[1]:
                if name in out:
                    out[name] = self.to_avro(out[name], sub)
            return out
        if kind == "array":
            return [self.to_avro(v, node[1]) for v in value]
        if kind == "map":
            items = value.items() if isinstance(value, dict) else value
            return {k: self.to_avro(v, node[1]) for k, v in items}
        for i, (full, _, sub) in enumerate(node[1]):
            member = value.get(f"member{i}")
            if member is not None:
                member = self.to_avro(member, sub) if sub is not None else member
                return (full, member) if full not in _PY_TYPES else member
        return None


@lru_cache(maxsize=64)
def _shaper(schema_json: str) -> UnionShaper:
    return UnionShaper(schema_json)


def _rows_to_arrow(conv: AvroArrowConverter, shaper: UnionShaper, rows: list[dict]) -> pa.Table:
    """Rows decoded against the raw schema -> Arrow, general unions as member structs."""
    if not shaper.needed:
        return conv.raw_to_arrow(rows)
    try:
        table = pa.Table.from_pylist([shaper.to_arrow(r) for r in rows], schema=conv.storage_schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SchemaError(f"Avro records do not match their schema: {exc}") from exc
    if conv.storage_schema.equals(conv.arrow_schema):
        return table
    cols = []
    for field, col in zip(conv.arrow_schema, table.columns):
        chunk = one_array(col)
        cols.append(restore_logical(chunk, field.type))
    return pa.Table.from_arrays(cols, schema=conv.arrow_schema)


# -- HFile data blocks -----------------------------------------------------------------------
HFILE_KEY_FIELD = "key"  # HoodieAvroHFileReaderImplBase.KEY_FIELD_NAME


def decode_hfile_rows(content: bytes, schema_json: str, where: str, *,
                      named_unions: bool = False) -> list[tuple[bytes, dict]]:
    """(HFile key, record) pairs of an HFile data block's content, in key order.

    Records are decoded against the raw (logical-types-free) schema, like Avro blocks; a
    ``key`` field holding "" gets the HFile key back, as Hudi's reader does. With
    ``named_unions`` general unions come as ``(type name, value)``.
    """
    from ..hfile import HFileReader

    try:
        conv, parsed = _compiled(schema_json)
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    except Exception as exc:
        raise SchemaError(f"{where}: writer schema is not valid Avro: {exc}") from exc
    try:
        reader = HFileReader.from_bytes(content, f"{where} (HFile content)")
        entries = reader.read_all()
    except CorruptFileError as exc:
        raise LogFormatError(str(exc)) from exc
    has_key = any(f.get("name") == HFILE_KEY_FIELD for f in conv.raw_schema.get("fields", []))
    read = fastavro.schemaless_reader
    out = []
    for key, value in entries:
        try:
            rec = read(io.BytesIO(value), parsed, None, return_named_type=named_unions,
                       return_named_type_override=named_unions)
        except Exception as exc:  # fastavro raises many kinds on damaged bytes
            raise LogFormatError(f"{where}: record {key!r} cannot be decoded: {exc}") from exc
        if has_key and rec.get(HFILE_KEY_FIELD) == "":
            rec[HFILE_KEY_FIELD] = key.decode("utf-8", "replace")
        out.append((key, rec))
    return out


def decode_hfile_block(content: bytes, schema_json: str | None, where: str) -> pa.Table:
    """Records of an HFile data block's ``content`` (the metadata table's log blocks)."""
    if not schema_json:
        raise LogFormatError(f"{where} has no SCHEMA header")
    shaper = _shaper(schema_json)
    pairs = decode_hfile_rows(content, schema_json, where, named_unions=shaper.needed)
    conv, _ = _compiled(schema_json)
    try:
        return _rows_to_arrow(conv, shaper, [rec for _, rec in pairs])
    except HudiError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def decode_parquet_block(content: bytes, where: str) -> pa.Table:
    """Records of a Parquet data block: its content is a whole Parquet file."""
    from ..base_file import read_parquet_bytes

    try:
        table = read_parquet_bytes(content)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise LogFormatError(f"{where}: content is not a readable Parquet file: {exc}") from exc
    return table.replace_schema_metadata(None)


def align_to_schema(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``table`` with exactly ``schema``'s fields, in order: cast, or null when absent."""
    columns = []
    for field in schema:
        idx = table.schema.get_field_index(field.name)
        if idx < 0:
            if not field.nullable:
                raise SchemaError(f"{where}: required column {field.name!r} is missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        col = table.column(idx)
        if str(col.type) != str(field.type) or col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise SchemaError(f"{where}: column {field.name!r} of type {col.type} "
                                  f"cannot be read as {field.type}: {exc}") from exc
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)
