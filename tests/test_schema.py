"""Avro <-> Arrow schema conversion against the schemas and Parquet files Hudi wrote.

Truth: each fixture table's ``hoodie.table.create.schema`` and commit-metadata schema (Avro, as
written by Hudi/Spark) against the Arrow schema pyarrow reads from the base files the same
commits wrote; and the Avro spec for the logical types the fixtures do not cover.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import os
import random
import re
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import FIXTURE_TABLES
from hudi_format.config import parse_properties
from hudi_format.errors import SchemaError, UnsupportedFeatureError
from hudi_format.avro_values import AvroArrowConverter, avro_records_to_arrow
from hudi_format.schema import arrow_to_avro_schema, avro_to_arrow_schema, parse_avro_schema

REFERENCE_AVRO = Path(__file__).resolve().parents[2] / "shared" / "reference" / "avro"
PACKAGE_AVRO = Path(__file__).resolve().parents[1] / "hudi_format" / "avro"


# -- helpers over extracted fixture tables -----------------------------------------------------
def _props(root: Path) -> dict:
    return parse_properties((root / ".hoodie" / "hoodie.properties").read_text())


def _base_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out += [Path(dirpath) / f for f in files if f.endswith(".parquet") and not f.startswith(".")]
    return sorted(out)


def _data_part(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema.remove_metadata() if not f.name.startswith("_hoodie_")])


def _legacy_lists_to_standard(t: pa.DataType) -> pa.DataType:
    """parquet-avro's old 2-level lists read as ``list<array: T not null>``; the Avro schema
    (items ``["null", T]``) says ``list<element: T>``. The file layout, not the schema, differs."""
    if pa.types.is_list(t):
        vf = t.value_field
        item = _legacy_lists_to_standard(vf.type)
        if vf.name == "array":
            return pa.list_(pa.field("element", item, True))
        return pa.list_(vf.with_type(item))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_legacy_lists_to_standard(f.type)) for f in t])
    if pa.types.is_map(t):
        item = _legacy_lists_to_standard(t.item_type)
        return t if item == t.item_type else pa.map_(t.key_field, t.item_field.with_type(item))
    return t


def _normalised(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_legacy_lists_to_standard(f.type)) for f in schema])


def _has_legacy_lists(schema: pa.Schema) -> bool:
    def legacy(t: pa.DataType) -> bool:
        if pa.types.is_list(t):
            return t.value_field.name == "array" or legacy(t.value_type)
        if pa.types.is_struct(t):
            return any(legacy(f.type) for f in t)
        if pa.types.is_map(t):
            return legacy(t.item_type)
        return False
    return any(legacy(f.type) for f in schema)


def _render(t: pa.DataType) -> str:
    """A type string that shows list item names and every nested nullability (``==`` on
    Arrow types ignores the former); map entry names are left out, as pyarrow sets them
    from the column name when reading Parquet."""
    def field(f: pa.Field) -> str:
        return f"{f.name}{'' if f.nullable else '!'}: {_render(f.type)}"
    if pa.types.is_list(t):
        return f"list<{field(t.value_field)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(field(f) for f in t) + ">"
    if pa.types.is_map(t):
        return f"map<{field(t.key_field)}, {field(t.item_field)}>"
    return str(t)


def _fields(schema: pa.Schema) -> list[str]:
    return [f"{f.name}{'' if f.nullable else '!'}: {_render(f.type)}" for f in schema]


def _commit_schema(root: Path, instant: str) -> str | None:
    """``extraMetadata.schema`` of the completed commit ``instant`` (v6 JSON or v8+ Avro)."""
    hoodie = root / ".hoodie"
    for path in sorted(hoodie.glob(f"{instant}.*")) + sorted((hoodie / "timeline").glob(f"{instant}_*")):
        if path.suffix.lstrip(".") not in ("commit", "deltacommit", "replacecommit"):
            continue
        raw = path.read_bytes()
        if raw[:4] == b"Obj\x01":
            (meta,) = list(fastavro.reader(io.BytesIO(raw)))
        else:
            meta = json.loads(raw)
        schema = (meta.get("extraMetadata") or {}).get("schema")
        if schema:
            return schema
    return None


# Hudi's TimestampBasedKeyGenerator writes the partition column into base files as the
# formatted partition path (a string) while the table schema keeps the source type (long).
_KEYGEN_REWRITTEN = {"sample_table__cow__v9_timebasedkeygen_epochmillis": {"ts_millis"}}


def _tables_with_base_files() -> list[str]:
    return [n for n in FIXTURE_TABLES if not n.endswith("_empty")]


# -- create schema and commit schemas vs base files --------------------------------------------
@pytest.mark.parametrize("name", _tables_with_base_files())
def test_create_schema_matches_base_files(name, fixture_tables):
    root = fixture_tables(name)
    create = _props(root)["hoodie.table.create.schema"]
    arrow = avro_to_arrow_schema(create)
    skip = _KEYGEN_REWRITTEN.get(name, set())
    bases = _base_files(root)
    compared = 0
    for base in bases:
        file_schema = _data_part(pq.read_schema(base))
        if set(file_schema.names) != set(arrow.names):
            continue  # written after a schema change; covered by the commit-schema test
        compared += 1
        want = _normalised(pa.schema([f for f in file_schema if f.name not in skip]))
        got = pa.schema([f for f in arrow if f.name not in skip])
        assert got.equals(want), (base.name, got, want)
        # field by field including list item names and nullability
        assert _fields(got) == _fields(want)
    assert compared > 0


@pytest.mark.parametrize("name", _tables_with_base_files())
def test_commit_schema_matches_the_files_it_wrote(name, fixture_tables):
    root = fixture_tables(name)
    skip = _KEYGEN_REWRITTEN.get(name, set())
    checked = 0
    for base in _base_files(root):
        instant = base.stem.rsplit("_", 1)[-1]
        schema_json = _commit_schema(root, instant)
        if schema_json is None:
            continue
        arrow = avro_to_arrow_schema(schema_json)
        file_schema = pq.read_schema(base).remove_metadata()
        with_meta = file_schema.names[:1] == ["_hoodie_commit_time"]
        want = _normalised(pa.schema([f for f in _data_part(file_schema) if f.name not in skip]))
        got = pa.schema([f for f in arrow if f.name not in skip and not f.name.startswith("_hoodie_")])
        assert _fields(got) == _fields(want), base.name
        checked += 1
        assert with_meta or not file_schema.names[0].startswith("_hoodie_")
    assert checked > 0


@pytest.mark.parametrize("name", _tables_with_base_files())
def test_arrow_to_avro_reproduces_hudis_commit_schema(name, fixture_tables):
    """The Arrow schema of a Spark-written base file maps back to the exact Avro JSON Hudi
    put in the commit metadata (names, namespaces, null-first unions, fixed decimals)."""
    root = fixture_tables(name)
    table_name = _props(root)["hoodie.table.name"]
    checked = 0
    for base in _base_files(root):
        file_schema = _data_part(pq.read_schema(base))
        if _has_legacy_lists(file_schema) or name in _KEYGEN_REWRITTEN:
            continue  # parquet-avro's 2-level lists lose the item nullability the Avro had
        schema_json = _commit_schema(root, base.stem.rsplit("_", 1)[-1])
        if schema_json is None:
            continue
        got = arrow_to_avro_schema(file_schema, f"{table_name}_record", f"hoodie.{table_name}")
        assert got == json.loads(schema_json), base.name
        checked += 1
    if not (name.startswith(("sample_table__cow__v6_", "sample_table__cow__v8_"))
            or name in _KEYGEN_REWRITTEN):
        assert checked > 0  # only parquet-avro-written COW tables have nothing to compare


@pytest.mark.parametrize("name", [n for n in _tables_with_base_files() if "__mor__" in n])
def test_log_header_schema_round_trip(name, fixture_tables):
    """A log block's SCHEMA header equals what arrow_to_avro_schema makes of the base file
    schema, meta fields included (modulo the empty docs Hudi gives meta fields)."""
    from hudi_format.log import BlockType, read_log_file
    from hudi_format.storage import Storage

    root = fixture_tables(name)
    table_name = _props(root)["hoodie.table.name"]
    storage = Storage(str(root))
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if ".log." not in f:
                continue
            rel = (Path(dirpath) / f).relative_to(root).as_posix()
            for block in read_log_file(storage, rel):
                if block.block_type not in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                    continue
                header = json.loads(block.schema_json)
                for field in header["fields"]:
                    field.pop("doc", None)
                base = pq.read_schema(sorted(Path(dirpath).glob("*.parquet"))[0]).remove_metadata()
                assert arrow_to_avro_schema(base, f"{table_name}_record", f"hoodie.{table_name}") == header


# -- value conversion against a Hudi-written base file -----------------------------------------
def _fastavro_rows(table: pa.Table) -> list[dict]:
    """pyarrow rows shaped as fastavro expects them (maps as dicts)."""
    def fix(v, t):
        if v is None:
            return None
        if pa.types.is_map(t):
            return {k: fix(x, t.item_type) for k, x in v}
        if pa.types.is_list(t):
            return [fix(x, t.value_type) for x in v]
        if pa.types.is_struct(t):
            return {f.name: fix(v[f.name], f.type) for f in t}
        return v
    return [{f.name: fix(r[f.name], f.type) for f in table.schema} for r in table.to_pylist()]


@pytest.mark.parametrize("name", ["sample_table__mor__parquet__v6_nonpartitioned",
                                  "sample_table__mor__avro__v9_txns_simple_meta"])
def test_avro_values_to_arrow(name, fixture_tables):
    """Rows of a Hudi-written base file, Avro-encoded by fastavro with the commit schema, come
    back identical through both the logical-value and the raw (vectorised) paths."""
    root = fixture_tables(name)
    base = next(b for b in _base_files(root) if _commit_schema(root, b.stem.rsplit("_", 1)[-1]))
    schema_json = _commit_schema(root, base.stem.rsplit("_", 1)[-1])
    truth = pq.read_table(base).select(_data_part(pq.read_schema(base)).names)
    truth = truth.replace_schema_metadata(None)
    parsed = fastavro.parse_schema(json.loads(schema_json))
    encoded = []
    for row in _fastavro_rows(truth):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        encoded.append(buf.getvalue())

    logical_rows = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in encoded]
    assert avro_records_to_arrow(logical_rows, schema_json).equals(truth)

    conv = AvroArrowConverter(schema_json)
    raw_parsed = fastavro.parse_schema(conv.raw_schema)
    raw_rows = [fastavro.schemaless_reader(io.BytesIO(b), raw_parsed, None) for b in encoded]
    assert not any(isinstance(v, (decimal.Decimal, dt.date)) for r in raw_rows for v in r.values())
    assert conv.raw_to_arrow(raw_rows).equals(truth)


# -- type mappings from the Avro spec ---------------------------------------------------------
def _one(avro_type) -> pa.Field:
    return avro_to_arrow_schema({"type": "record", "name": "r", "fields": [{"name": "f", "type": avro_type}]})[0]


@pytest.mark.parametrize("avro_type, arrow_type", [
    ("boolean", pa.bool_()), ("int", pa.int32()), ("long", pa.int64()), ("float", pa.float32()),
    ("double", pa.float64()), ("bytes", pa.binary()), ("string", pa.string()),
    ({"type": "string", "logicalType": "uuid"}, pa.string()),
    ({"type": "int", "logicalType": "date"}, pa.date32()),
    ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
    ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms")),
    ({"type": "int", "logicalType": "time-millis"}, pa.time32("ms")),
    ({"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ({"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}, pa.decimal128(20, 4)),
    ({"type": "fixed", "name": "fixed", "size": 9, "logicalType": "decimal", "precision": 20,
      "scale": 0}, pa.decimal128(20, 0)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}, pa.decimal256(40, 2)),
    ({"type": "fixed", "name": "md5", "size": 16}, pa.binary(16)),
    ({"type": "enum", "name": "e", "symbols": ["A", "B"]}, pa.string()),
    ({"type": "array", "items": "long"}, pa.list_(pa.field("element", pa.int64(), False))),
    ({"type": "map", "values": ["null", "int"]}, pa.map_(pa.string(), pa.int32())),
    ({"type": "long", "logicalType": "some-future-type"}, pa.int64()),
])
def test_avro_type_mapping(avro_type, arrow_type):
    field = _one(avro_type)
    assert field.type == arrow_type and _render(field.type) == _render(arrow_type)
    assert not field.nullable
    assert _one(["null", avro_type]).nullable and _one([avro_type, "null"]).nullable
    assert _one([avro_type, "null"]).type == arrow_type


def test_named_type_references_and_records():
    schema = {"type": "record", "name": "top", "namespace": "ns", "fields": [
        {"name": "a", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": ["null", "string"], "default": None}]}},
        {"name": "b", "type": ["null", "Inner"], "default": None},
        {"name": "c", "type": {"type": "array", "items": "ns.Inner"}},
        {"name": "d", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "e", "type": "F"},
    ]}
    s = avro_to_arrow_schema(json.dumps(schema))
    inner = pa.struct([pa.field("x", pa.string())])
    assert s.field("a").type == inner and not s.field("a").nullable
    assert s.field("b").type == inner and s.field("b").nullable
    assert s.field("c").type == pa.list_(pa.field("element", inner, False))
    assert s.field("e").type == s.field("d").type == pa.binary(3)


def test_general_unions_become_member_structs():
    s = avro_to_arrow_schema({"type": "record", "name": "r", "fields": [
        {"name": "u", "type": ["null", "int", "string"]}]})
    assert s.field("u").type == pa.struct([("member0", pa.int32()), ("member1", pa.string())])
    assert s.field("u").nullable
    with pytest.raises(UnsupportedFeatureError):
        avro_records_to_arrow([{"u": 1}], {"type": "record", "name": "r", "fields": [
            {"name": "u", "type": ["null", "int", "string"]}]})


@pytest.mark.parametrize("bad, error", [
    ("{not json", SchemaError),
    ('"string"', SchemaError),                                   # top level must be a record
    ({"type": "record", "name": "r", "fields": [{"name": "f", "type": "Nope"}]}, SchemaError),
    ({"type": "record", "name": "r", "fields": [{"name": "f", "type": ["null", "r"]}]},
     UnsupportedFeatureError),                                   # recursive
    ({"type": "record", "name": "r", "fields": [{"name": "f", "type": {
        "type": "bytes", "logicalType": "decimal", "precision": 90, "scale": 0}}]}, SchemaError),
])
def test_bad_avro_schemas(bad, error):
    with pytest.raises(error):
        avro_to_arrow_schema(bad)


def test_hudi_avsc_files_parse_despite_comments():
    files = sorted(REFERENCE_AVRO.glob("*.avsc")) or sorted(PACKAGE_AVRO.glob("*.avsc"))
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        parsed = parse_avro_schema(text)
        assert isinstance(parsed, (dict, list)), path.name
    metadata = avro_to_arrow_schema(next(p for p in files if p.name == "HoodieMetadata.avsc").read_text())
    assert "filesystemMetadata" in metadata.names


# -- decimals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision, fixed_size", [(10, 5), (15, 7), (38, 16), (50, 21)])
def test_decimal_bytes_against_python_ints(precision, fixed_size):
    """Two's-complement big-endian bytes -> decimals, checked against int.from_bytes."""
    rng = random.Random(precision)
    scale = 3
    values = [0, 1, -1, 10 ** precision - 1, -(10 ** precision - 1), 127, -128, 128, -129]
    values += [rng.randrange(-(10 ** precision - 1), 10 ** precision) for _ in range(300)]
    dtype = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    for kind in ("bytes", "fixed"):
        avro_type = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
        if kind == "fixed":
            avro_type = {"type": "fixed", "name": "fixed", "size": fixed_size, **{
                k: avro_type[k] for k in ("logicalType", "precision", "scale")}}
        schema = {"type": "record", "name": "r", "fields": [{"name": "d", "type": ["null", avro_type]}]}
        conv = AvroArrowConverter(schema)
        rows = []
        for v in values + [None]:
            if v is None:
                rows.append({"d": None})
                continue
            width = fixed_size if kind == "fixed" else max(1, (v.bit_length() + 8) // 8)
            rows.append({"d": v.to_bytes(width, "big", signed=True)})
        table = conv.raw_to_arrow(rows)
        assert table.schema.field("d").type == dtype
        want = [None if r["d"] is None else
                decimal.Decimal(int.from_bytes(r["d"], "big", signed=True)).scaleb(
                    -scale, decimal.Context(prec=100))
                for r in rows]
        assert table.column("d").to_pylist() == want


# -- Arrow -> Avro -----------------------------------------------------------------------------
def test_arrow_to_avro_type_mapping():
    schema = pa.schema([
        pa.field("k", pa.string(), nullable=False),
        ("i8", pa.int8()), ("i16", pa.int16()), ("u32", pa.uint32()), ("big", pa.large_string()),
        ("dict", pa.dictionary(pa.int32(), pa.string())),
        ("ts", pa.timestamp("us", tz="UTC")), ("ts_ms", pa.timestamp("ms", tz="Asia/Tokyo")),
        ("ntz", pa.timestamp("us")), ("d", pa.date32()), ("t", pa.time64("us")),
        ("dec", pa.decimal128(38, 10)), ("bin", pa.large_binary()),
        ("l", pa.list_(pa.field("x", pa.int64(), nullable=False))),
        ("m", pa.map_(pa.string(), pa.float64())),
        ("s", pa.struct([("a", pa.decimal128(5, 2)), pa.field("b", pa.struct([("c", pa.bool_())]))])),
    ])
    avro = arrow_to_avro_schema(schema, "t_record", "hoodie.t")
    assert (avro["type"], avro["name"], avro["namespace"]) == ("record", "t_record", "hoodie.t")
    f = {x["name"]: x for x in avro["fields"]}
    assert f["k"] == {"name": "k", "type": "string"}
    assert f["i8"] == {"name": "i8", "type": ["null", "int"], "default": None}
    assert f["i16"]["type"] == ["null", "int"] and f["u32"]["type"] == ["null", "long"]
    assert f["big"]["type"] == ["null", "string"] and f["dict"]["type"] == ["null", "string"]
    assert f["ts"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert f["ts_ms"]["type"][1] == {"type": "long", "logicalType": "timestamp-millis"}
    assert f["ntz"]["type"][1] == {"type": "long", "logicalType": "local-timestamp-micros"}
    assert f["d"]["type"][1] == {"type": "int", "logicalType": "date"}
    assert f["t"]["type"][1] == {"type": "long", "logicalType": "time-micros"}
    assert f["dec"]["type"][1] == {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.dec",
                                   "size": 16, "logicalType": "decimal", "precision": 38, "scale": 10}
    assert f["bin"]["type"] == ["null", "bytes"]
    assert f["l"]["type"][1] == {"type": "array", "items": "long"}
    assert f["m"]["type"][1] == {"type": "map", "values": ["null", "double"]}
    s = f["s"]["type"][1]
    assert (s["name"], s["namespace"]) == ("s", "hoodie.t.t_record")
    a = s["fields"][0]["type"][1]
    assert (a["namespace"], a["size"]) == ("hoodie.t.t_record.s.a", 3)
    b = s["fields"][1]["type"][1]
    assert (b["name"], b["namespace"]) == ("b", "hoodie.t.t_record.s")
    fastavro.parse_schema(avro)  # valid Avro
    with pytest.raises(SchemaError):
        arrow_to_avro_schema(pa.schema([("m", pa.map_(pa.int32(), pa.int32()))]), "r", "n")
    with pytest.raises(SchemaError):
        arrow_to_avro_schema(pa.schema([("d", pa.duration("s"))]), "r", "n")


@pytest.mark.parametrize("name,record,namespace", [("trips", "trips_record", "hoodie.trips"),
                                                   ("my-table", "my__table_record", "hoodie.my__table"),
                                                   ("2024.events", "__024__events_record", "hoodie.__024__events")])
def test_a_table_named_outside_avro_names_gets_hudis_sanitized_record_name(tmp_path, name, record, namespace):
    """The table name (by default the folder's) names the schema's Avro record as Hudi names it:
    ``<name>_record`` in ``hoodie.<name>``, with what Avro's names cannot hold masked as Hudi's
    ``HoodieAvroUtils.sanitizeName`` masks it. hudi-rs rejects an invalid record name outright."""
    import json as _json

    import hudi_format as hudi
    from hudi_format.storage import Storage
    from hudi_format.timeline import Timeline
    from hudi_format.config import TableConfig
    from tests.support.writemodel import hudi_rs_read
    path = str(tmp_path / name)
    rows = pa.table({"id": ["a", "b"], "ts": [1, 1], "p": ["x", "y"]})
    hudi.write(path, rows, operation="insert", record_key="id", ordering_field="ts", partition_by="p")
    storage = Storage(path)
    tl = Timeline.load(storage, TableConfig.load(storage))
    schema = _json.loads(tl.metadata(tl.write_instants()[-1]).extra_metadata["schema"])
    assert (schema["name"], schema["namespace"]) == (record, namespace)
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == ["a", "b"]


@pytest.mark.parametrize("column", ["trip-id", "1st", "a b", "price.usd"])
def test_a_column_avro_cannot_name_is_refused_and_nothing_is_written(tmp_path, column):
    """Hudi writes its schema as Avro, whose names are ``[A-Za-z_][A-Za-z0-9_]*``: a column
    named otherwise is refused with a SchemaError naming it (Hudi's Avro rejects it too, and
    hudi-rs cannot read a table that holds it), before anything is written."""
    import hudi_format as hudi
    from hudi_format.errors import SchemaError
    path = tmp_path / "t"
    rows = pa.table({"id": ["a"], "ts": [1], column: ["x"]})
    with pytest.raises(SchemaError, match=re.escape(repr(column))):
        hudi.write(str(path), rows, operation="insert", record_key="id", ordering_field="ts")
    assert not (path / ".hoodie" / "timeline").exists() or not any((path / ".hoodie" / "timeline").iterdir())
    nested = pa.table({"id": ["a"], "ts": [1], "s": pa.array([{column: 1}])})
    with pytest.raises(SchemaError, match=re.escape(repr(column))):
        hudi.write(str(path), nested, operation="insert", record_key="id", ordering_field="ts")
