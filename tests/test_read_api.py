"""The query API on Hudi-written tables: projection, filters and pruning, streaming, file
slices (checked against hudi-rs), instants in every accepted form, and errors."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import FIXTURE_TABLES, expected
from hudi_format.read.bounds import normalize_instant

MOR = "sample_table__mor__avro__v9_txns_simple_meta"
COW_NONHIVE = "sample_table__cow__v6_simplekeygen_nonhivestyle"
COW_COMPLEX = "sample_table__cow__v8_complexkeygen_hivestyle"


def _opened(monkeypatch, table) -> list[str]:
    """Record every data file the table opens."""
    opened: list[str] = []

    def spy(real):
        def call(rel, *args, **kwargs):
            opened.append(rel)
            return real(rel, *args, **kwargs)
        return call

    for name in ("open", "open_input"):   # open_input: base files, natively where it can
        monkeypatch.setattr(table.storage, name, spy(getattr(table.storage, name)))
    return opened


def _expected_where(name, pred):
    return sort_expected([r for r in expected(name)["snapshot"] if pred(r)])


def test_projection_keeps_order_and_rows(fixture_tables):
    table = hudi.open_table(fixture_tables(MOR))
    got = table.read(columns=["amount", "txn_id"])
    assert got.column_names == ["amount", "txn_id"]
    assert got.schema.field("amount").type == pa.decimal128(15, 2)
    want = sorted((r["txn_id"], r["amount"]) for r in expected(MOR)["snapshot"])
    assert sorted((r["txn_id"], str(r["amount"])) for r in got.to_pylist()) == want


def test_schema_has_meta_fields_first(fixture_tables):
    table = hudi.open_table(fixture_tables(MOR))
    names = table.schema().names
    assert names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                         "_hoodie_partition_path", "_hoodie_file_name"]
    rs = HudiTableBuilder.from_base_uri(str(fixture_tables(MOR))).build()
    assert table.schema().remove(0).remove(0).remove(0).remove(0).remove(0).equals(rs.get_schema())


def test_partition_filter_prunes_hive_partitions(fixture_tables, monkeypatch):
    table = hudi.open_table(fixture_tables(MOR))
    opened = _opened(monkeypatch, table)
    got = table.read(filters=[("region", "=", "us")])
    assert canonical_rows(got) == _expected_where(MOR, lambda r: r["region"] == "us")
    assert opened and all(p.startswith("region=us/") for p in opened)


def test_partition_filter_prunes_plain_paths(fixture_tables, monkeypatch):
    table = hudi.open_table(fixture_tables(COW_NONHIVE))
    opened = _opened(monkeypatch, table)
    got = table.read(filters=[("byteField", "in", [10, 30])])
    assert canonical_rows(got) == _expected_where(COW_NONHIVE, lambda r: r["byteField"] in (10, 30))
    assert opened and {p.split("/")[0] for p in opened} <= {"10", "30"}


def test_partition_filter_on_two_fields(fixture_tables, monkeypatch):
    table = hudi.open_table(fixture_tables(COW_COMPLEX))
    rows = expected(COW_COMPLEX)["snapshot"]
    target = rows[0]
    opened = _opened(monkeypatch, table)
    got = table.read(filters=[("byteField", "=", target["byteField"]),
                              ("shortField", "=", str(target["shortField"]))])
    assert canonical_rows(got) == _expected_where(
        COW_COMPLEX, lambda r: (r["byteField"], r["shortField"]) == (target["byteField"], target["shortField"]))
    assert len({p.rsplit("/", 1)[0] for p in opened}) == 1


@pytest.mark.parametrize("filters,pred", [
    ([("amount", ">", decimal.Decimal("1000"))], lambda r: decimal.Decimal(r["amount"]) > 1000),
    ([("amount", ">=", "999.99"), ("currency", "!=", "USD")],
     lambda r: decimal.Decimal(r["amount"]) >= decimal.Decimal("999.99") and r["currency"] != "USD"),
    ([("txn_date", "<", dt.date(2024, 1, 18))], lambda r: r["txn_date"] < "2024-01-18"),
    ([("txn_id", "not in", "TXN-001,TXN-003")], lambda r: r["txn_id"] not in ("TXN-001", "TXN-003")),
    ([("is_international", "=", "true")], lambda r: r["is_international"] is True),
    ([("txn_datetime", ">=", "2024-01-19T00:00:00Z")], lambda r: r["txn_datetime"] >= "2024-01-19"),
])
def test_row_filters(fixture_tables, filters, pred):
    table = hudi.open_table(fixture_tables(MOR))
    assert canonical_rows(table.read(filters=filters)) == _expected_where(MOR, pred)


def test_filter_on_column_outside_projection(fixture_tables):
    table = hudi.open_table(fixture_tables(MOR))
    got = table.read(columns=["txn_id"], filters=[("merchant_name", "=", "Uber")])
    assert got.to_pylist() == [{"txn_id": "TXN-014"}]


def test_timestamp_keygen_filters_rows_without_pruning(fixture_tables):
    name = "sample_table__cow__v9_timebasedkeygen_nonhivestyle"
    table = hudi.open_table(fixture_tables(name))
    some = expected(name)["snapshot"][0]["ts_str"]
    got = table.read(filters=[("ts_str", "=", some)])
    assert canonical_rows(got) == _expected_where(name, lambda r: r["ts_str"] == some)


@pytest.mark.parametrize("name", [MOR, COW_NONHIVE, "quickstart_trips_table__mor__avro__v6_trips_8i3d"])
def test_scan_streams_the_snapshot(fixture_tables, name):
    table = hudi.open_table(fixture_tables(name))
    batches = list(table.scan(batch_size=2))
    assert batches and all(b.num_rows <= 2 for b in batches)
    assert canonical_rows(pa.Table.from_batches(batches)) == sort_expected(expected(name)["snapshot"])
    cols = ["_hoodie_record_key"]
    scanned = pa.Table.from_batches(list(table.scan(columns=cols)), schema=pa.schema([table.schema().field(c) for c in cols]))
    assert sorted(scanned.column(0).to_pylist()) == sorted(r["_hoodie_record_key"] for r in expected(name)["snapshot"])


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_latest_file_slices_match_hudi_rs(fixture_tables, name):
    path = str(fixture_tables(name))
    ours = {(s.partition_path, s.file_id, s.base_file, tuple(s.log_files))
            for s in hudi.open_table(path).file_slices()}
    theirs = {(s.partition_path, s.file_id, s.base_file_relative_path() or None,
               tuple(s.log_files_relative_paths()))
              for s in HudiTableBuilder.from_base_uri(path).build().get_file_slices()}
    assert ours == theirs


def test_read_optimized_on_cow_is_the_snapshot(fixture_tables):
    table = hudi.open_table(fixture_tables(COW_NONHIVE))
    assert canonical_rows(table.read(read_optimized=True)) == canonical_rows(table.read())


def test_as_of_accepts_every_instant_form():
    assert normalize_instant("20240102030405", "UTC") == "20240102030405000"
    assert normalize_instant("20240102030405123", "UTC") == "20240102030405123"
    assert normalize_instant(dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=dt.timezone.utc),
                             "UTC") == "20240102030405123"
    assert normalize_instant("2024-01-02T03:04:05.123Z", "UTC") == "20240102030405123"
    assert normalize_instant("2024-01-02T05:04:05+02:00", "UTC") == "20240102030405000"
    epoch_s = int(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc).timestamp())
    assert normalize_instant(epoch_s, "UTC") == "20240102030405000"
    assert normalize_instant(str(epoch_s * 1000 + 123), "UTC") == "20240102030405123"
    assert normalize_instant(str(epoch_s * 1_000_000), "UTC") == "20240102030405000"
    for bad in ("2024-01-02", "2024-01-02T03:04:05", "yesterday", 1.5):
        with pytest.raises(hudi.InvalidOptionError):
            normalize_instant(bad, "UTC")


def test_time_travel_with_a_datetime(fixture_tables):
    name = "sample_table__cow__v6_nonpartitioned"
    table = hudi.open_table(fixture_tables(name))
    ts = min(expected(name)["time_travel"])
    # The v6 timeline is in the writer's local time zone; pass a naive local datetime.
    when = dt.datetime.strptime(ts, "%Y%m%d%H%M%S%f")
    got = table.read(as_of=when.replace(microsecond=int(ts[-3:]) * 1000))
    assert canonical_rows(got) == sort_expected(expected(name)["time_travel"][ts])


def test_incremental_defaults_cover_the_whole_timeline(fixture_tables):
    name = "sample_table__cow__v9_txns_simple_meta"
    table = hudi.open_table(fixture_tables(name))
    got = table.read_incremental()
    # Every record of the snapshot was written by some commit in the range.
    assert canonical_rows(got) == sort_expected(expected(name)["snapshot"])
    assert table.read_incremental(start=table.timeline.write_instants()[-1].completion_time).num_rows == 0


def test_hudi_rs_and_we_agree_on_filtered_reads(fixture_tables):
    path = str(fixture_tables(MOR))
    ours = hudi.open_table(path).read(columns=["txn_id", "region"], filters=[("region", "=", "us")])
    rs = HudiTableBuilder.from_base_uri(path).build()
    theirs = pa.Table.from_batches(rs.read(HudiReadOptions().with_filters([("region", "=", "us")])
                                           .with_projection(["txn_id", "region"])))
    assert sorted(ours.to_pylist(), key=str) == sorted(theirs.to_pylist(), key=str)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"filters": [("nope", "=", 1)]}, hudi.SchemaError, "unknown column 'nope'"),
    ({"filters": [("txn_ts", "~", 1)]}, hudi.InvalidOptionError, "unknown operator"),
    ({"filters": [("txn_ts", "in", [])]}, hudi.InvalidOptionError, "at least one value"),
    ({"filters": [("txn_ts", "=", "abc")]}, hudi.SchemaError, "cannot be compared"),
    ({"filters": [("txn_ts", "=")]}, hudi.InvalidOptionError, "tuple"),
    ({"columns": ["txn_id", "nope"]}, hudi.SchemaError, "unknown column"),
    ({"columns": "txn_id"}, hudi.InvalidOptionError, "list of column names"),
    ({"as_of": "last tuesday"}, hudi.InvalidOptionError, "not an instant"),
])
def test_bad_queries_are_clear_errors(fixture_tables, kwargs, error, match):
    table = hudi.open_table(fixture_tables(MOR))
    with pytest.raises(error, match=match):
        table.read(**kwargs)


def test_missing_table(tmp_path):
    with pytest.raises(hudi.TableNotFoundError, match="hoodie.properties"):
        hudi.open_table(tmp_path)


def test_corrupt_base_file_names_the_file(fixture_tables, tmp_path):
    import shutil
    base = tmp_path / "t"
    shutil.copytree(fixture_tables(COW_NONHIVE), base)
    victim = next(base.glob("10/*.parquet"))
    data = victim.read_bytes()
    table = hudi.open_table(base)
    for s in table.file_slices():
        if s.base_file.startswith("10/"):
            (base / s.base_file).write_bytes(data[: len(data) // 2])
            with pytest.raises(hudi.CorruptFileError, match=s.base_file.split("/")[-1]):
                table.read()
            break


def test_read_from_memory_filesystem(fixture_tables):
    import fsspec
    src = fixture_tables(COW_COMPLEX)
    fs = fsspec.filesystem("memory")
    fs.put(str(src), "/tables/complex", recursive=True)
    table = hudi.open_table("memory:///tables/complex")
    assert canonical_rows(table.read()) == sort_expected(expected(COW_COMPLEX)["snapshot"])
