"""Hostile input (issue 11, defects 5, 6, 8, 9): a clear HudiError naming the value, field, file
or option, and nothing written - in particular nothing outside the table's folder."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import hudi_format as hudi
from damage import garble_footer_name
from hudi_format.keygen import KeyGenerationError
from hudi_format.storage import Storage, UnsafePathError

HIVE = {"hoodie.datasource.write.hive_style_partitioning": "true"}
URL = {"hoodie.datasource.write.partitionpath.urlencode": "true"}


def _files(root) -> set[str]:
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".lock"):
                out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def _snapshot(path) -> list:
    return sorted(hudi.open_table(path).read(columns=["id", "ts"]).to_pylist(), key=lambda r: r["id"])


@pytest.fixture()
def sandbox(tmp_path):
    """A table two folders below tmp_path, so '../../x' still lands inside tmp_path."""
    return tmp_path, str(tmp_path / "a" / "b" / "table")


# -- defect 5: partition values escaping the table folder ----------------------------------------
UNSAFE = ["..", ".", "x/../y", "../../outside", "a\\..\\b", "a//b", "x/", "a\x00b", "ABSOLUTE"]


def _create(path, options=None, partition_by="part", **kw):
    hudi.write(path, pa.table({"id": ["k0"], "ts": [1], "part": ["ok"], "q": ["ok"]}),
               record_key="id", ordering_field="ts", partition_by=partition_by, options=options, **kw)


def _expect_refused(tmp_path, path, write, match=None):
    before = _files(tmp_path)
    rows = _snapshot(path)
    with pytest.raises(hudi.HudiError, match=match) as info:
        write()
    assert _files(tmp_path) == before, "the failed write left files behind (maybe outside the table)"
    assert _snapshot(path) == rows
    return info.value


@pytest.mark.parametrize("mode", ["plain", "hive", "url"])
@pytest.mark.parametrize("value", UNSAFE)
def test_unsafe_partition_values_are_refused_or_encoded(sandbox, mode, value):
    tmp_path, path = sandbox
    opts = {"plain": None, "hive": HIVE, "url": URL}[mode]
    if value == "ABSOLUTE":
        value = str(tmp_path / "abs")
    _create(path, opts)
    data = pa.table({"id": ["k1"], "ts": [2], "part": [value], "q": ["ok"]})
    encoded_safe = mode == "url" and value not in ("..", ".")   # URLEncoder escapes '/', '\' and NUL
    hive_safe = mode == "hive" and value in ("..", ".", "ABSOLUTE") or \
        mode == "hive" and value.startswith("/")                   # 'part=..', 'part=/x/y' are folders
    if encoded_safe or hive_safe:
        hudi.write(path, data)
        assert _files(tmp_path) == {f for f in _files(tmp_path) if f.startswith("a/b/table/")}
        assert {r["id"] for r in hudi.open_table(path).read().to_pylist()} == {"k0", "k1"}
        return
    err = _expect_refused(tmp_path, path, lambda: hudi.write(path, data))
    assert isinstance(err, KeyGenerationError)
    assert "'part'" in str(err) and repr(value) in str(err)


@pytest.mark.parametrize("value", ["..", "../../outside", "x/../y"])
def test_unsafe_values_in_complex_keys_are_refused(sandbox, value):
    tmp_path, path = sandbox
    _create(path, partition_by=["q", "part"])
    data = pa.table({"id": ["k1"], "ts": [2], "part": [value], "q": ["ok"]})
    err = _expect_refused(tmp_path, path, lambda: hudi.write(path, data), match="'part'")
    assert repr(value) in str(err)


def test_unsafe_timestamp_partition_is_refused(sandbox):
    tmp_path, path = sandbox
    opts = {"hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "'../..'/yyyy"}
    with pytest.raises(KeyGenerationError, match="'ts'"):
        hudi.write(path, pa.table({"id": ["k1"], "ts": [1_700_000_000_000]}), record_key="id",
                   partition_by="ts", options=opts)
    assert _files(tmp_path) == set()


def test_unsafe_value_refused_on_the_first_write(sandbox):
    tmp_path, path = sandbox
    with pytest.raises(KeyGenerationError, match="'part'"):
        hudi.write(path, pa.table({"id": ["k"], "ts": [1], "part": ["../../outside"]}),
                   record_key="id", ordering_field="ts", partition_by="part")
    assert not os.path.exists(os.path.join(path, ".hoodie", "hoodie.properties"))
    assert not [f for f in _files(tmp_path) if f.endswith(".parquet")]


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/passwd", "a/..", "..", "a\x00b"])
def test_storage_refuses_paths_outside_the_table(tmp_path, rel):
    storage = Storage(str(tmp_path / "t"))
    for call in (lambda: storage.write_bytes(rel, b"x"), lambda: storage.read_bytes(rel),
                 lambda: storage.create_if_absent(rel, b"x"), lambda: storage.delete(rel),
                 lambda: storage.exists(rel), lambda: storage.rename("f", rel),
                 lambda: storage.open(rel, "wb"), lambda: storage.list(rel)):
        with pytest.raises(UnsafePathError):
            call()
    if not rel.startswith("/"):   # sub() takes a folder name: a leading '/' is dropped
        with pytest.raises(UnsafePathError):
            storage.sub(rel)
    assert _files(tmp_path) == set()
    storage.write_bytes("a/..b/c", b"x")   # '..b' is an ordinary name
    assert storage.read_bytes("a/..b/c") == b"x"


# -- defect 6: missing key fields ----------------------------------------------------------------
@pytest.fixture()
def keyed(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, pa.table({"id": ["a", "b"], "ts": [1, 2], "p": ["x", "y"], "n": [1, 2]}),
               record_key="id", ordering_field="ts", partition_by="p")
    return path


@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert", "delete", "insert_overwrite"])
@pytest.mark.parametrize("drop", ["id", "p", "ts"])
def test_missing_key_fields_are_refused(keyed, operation, drop):
    data = pa.table({"id": ["a"], "ts": [5], "p": ["x"], "n": [9]}).drop([drop])
    before, rows = _files(keyed), _snapshot(keyed)
    if operation == "delete" and drop == "ts":
        hudi.write(keyed, data, operation="delete")   # Hudi deletes with the default ordering value
        assert [r["id"] for r in _snapshot(keyed)] == ["b"]
        return
    with pytest.raises(hudi.SchemaError, match=f"'{drop}'"):
        hudi.write(keyed, data, operation=operation)
    assert _files(keyed) == before and _snapshot(keyed) == rows


def test_null_record_key_is_refused(keyed):
    before = _files(keyed)
    with pytest.raises(KeyGenerationError, match="'id'"):
        hudi.write(keyed, pa.table({"id": ["c", None], "ts": [5, 5], "p": ["x", "x"], "n": [1, 1]}))
    assert _files(keyed) == before


# -- defect 8: raw exceptions from bad input -----------------------------------------------------
def test_binary_record_key_gets_a_named_error(tmp_path):
    data = pa.table({"id": pa.array([b"\xff\xfe", b"b"], pa.binary()), "ts": [1, 2]})
    with pytest.raises(KeyGenerationError, match="'id'"):
        hudi.write(str(tmp_path / "t"), data, record_key="id", ordering_field="ts")
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


def test_list_of_dicts_is_accepted(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, [{"id": "a", "ts": 1, "n": 1.5}, {"id": "b", "ts": 2, "n": None}],
               record_key="id", ordering_field="ts")
    hudi.write(path, [{"id": "a", "ts": 3, "n": 2.5}])
    got = sorted(hudi.open_table(path).read(columns=["id", "n"]).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": "a", "n": 2.5}, {"id": "b", "n": None}]


@pytest.mark.parametrize("data", [42, "text", [1, 2], object()])
def test_data_arrow_cannot_hold_is_an_invalid_option(tmp_path, data):
    with pytest.raises(hudi.InvalidOptionError, match="Arrow table"):
        hudi.write(str(tmp_path / "t"), data, record_key="id")


def test_duplicate_column_names_are_refused(keyed):
    before = _files(keyed)
    data = pa.Table.from_arrays([pa.array(["a"]), pa.array([3]), pa.array(["x"]), pa.array([1]), pa.array([2])],
                                names=["id", "ts", "p", "n", "n"])
    with pytest.raises(hudi.SchemaError, match="'n'"):
        hudi.write(keyed, data)
    assert _files(keyed) == before


def _garbled_name(tmp_path, data: pa.Table, name: bytes) -> pa.Table:
    """``data`` through a Parquet file whose footer names ``name`` with a first byte that is
    not UTF-8: pyarrow reads it, keeping the name as bytes it fails on at every use."""
    import pyarrow.parquet as pq
    src = tmp_path / "in.parquet"
    pq.write_table(data, src)
    src.write_bytes(garble_footer_name(src.read_bytes(), name))
    return pq.read_table(src)


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_column_name_that_is_not_utf8_is_refused(keyed, tmp_path, nested, streamed):
    before = _files(keyed)
    rows = {"id": ["c"], "ts": [3], "p": ["x"], "n": [1], "extra": [{"inner": 1}] if nested else [1]}
    data = _garbled_name(tmp_path, pa.table(rows), b"inner" if nested else b"extra")
    if streamed:
        data = pa.RecordBatchReader.from_batches(data.schema, data.to_batches())
    with pytest.raises(hudi.SchemaError, match="not valid UTF-8"):
        hudi.write(keyed, data)
    assert _files(keyed) == before


# -- defect 9: arguments that differ from the existing table -------------------------------------
@pytest.mark.parametrize("kwargs,name", [
    ({"partition_by": "n"}, "partition_by"),
    ({"partition_by": ["p", "n"]}, "partition_by"),
    ({"table_type": "MERGE_ON_READ"}, "table_type"),
    ({"record_key": "n"}, "record_key"),
    ({"ordering_field": "n"}, "ordering_field"),
    ({"table_name": "other"}, "table_name"),
    ({"options": {"hoodie.datasource.write.partitionpath.field": "n"}}, "hoodie.datasource.write.partitionpath.field"),
    ({"options": {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}}, "hoodie.datasource.write.table.type"),
    ({"options": {"hoodie.datasource.write.precombine.field": "n"}}, "hoodie.datasource.write.precombine.field"),
    ({"options": {"hoodie.datasource.write.hive_style_partitioning": "true"}},
     "hoodie.datasource.write.hive_style_partitioning"),
    ({"options": {"hoodie.datasource.write.partitionpath.urlencode": "true"}},
     "hoodie.datasource.write.partitionpath.urlencode"),
])
def test_arguments_differing_from_the_table_are_refused(keyed, kwargs, name):
    before = _files(keyed)
    data = pa.table({"id": ["c"], "ts": [3], "p": ["x"], "n": [3]})
    with pytest.raises(hudi.InvalidOptionError, match=name) as info:
        hudi.write(keyed, data, **kwargs)
    assert _files(keyed) == before
    value = next(iter(kwargs.values())) if "options" not in kwargs else next(iter(kwargs["options"].values()))
    assert str(value if not isinstance(value, list) else value[-1]).lower() in str(info.value).lower()


@pytest.mark.parametrize("kwargs", [
    {"partition_by": "p"}, {"partition_by": ["p"]}, {"table_type": "COPY_ON_WRITE"}, {"table_type": "cow"},
    {"record_key": ["id"]}, {"ordering_field": "ts"}, {"table_version": 8},
    {"options": {"hoodie.datasource.write.recordkey.field": "id", "hoodie.table.type": "COPY_ON_WRITE",
                 "hoodie.datasource.write.hive_style_partitioning": "false"}},
])
def test_matching_arguments_are_accepted(keyed, kwargs):
    hudi.write(keyed, pa.table({"id": ["c"], "ts": [3], "p": ["x"], "n": [3]}), **kwargs)
    assert {r["id"] for r in _snapshot(keyed)} == {"a", "b", "c"}


def test_table_write_refuses_another_table_version(tmp_path):
    path = str(tmp_path / "t6")
    hudi.write(path, pa.table({"id": ["a"], "ts": [1]}), record_key="id", ordering_field="ts", table_version=6)
    table = hudi.open_table(path)
    before = _files(path)
    for key in ("hoodie.write.table.version", "hoodie.table.version"):
        with pytest.raises(hudi.InvalidOptionError, match=key) as info:
            table.write(pa.table({"id": ["b"], "ts": [2]}), options={key: 8})
        assert "6" in str(info.value) and "8" in str(info.value)
    with pytest.raises(hudi.InvalidOptionError, match="hoodie.datasource.write.recordkey.field"):
        table.write(pa.table({"id": ["b"], "ts": [2]}), options={"hoodie.datasource.write.recordkey.field": "ts"})
    assert _files(path) == before
    table.write(pa.table({"id": ["b"], "ts": [2]}), options={"hoodie.write.table.version": 6})
    assert table.read().num_rows == 2


# -- defect 8: damaged files give a HudiError naming the file ------------------------------------
def _cow(tmp_path, **options):
    path = str(tmp_path / "t")
    hudi.write(path, pa.table({"id": ["a", "b", "c"], "ts": [1, 2, 3], "p": ["x", "y", "x"]}),
               record_key="id", ordering_field="ts", partition_by="p", options=options or None)
    return path


def test_truncated_base_file_is_a_corrupt_file_error_naming_it(tmp_path):
    path = _cow(tmp_path)
    victim = next(s.base_file for s in hudi.open_table(path).file_slices() if s.partition_path == "x")
    full = os.path.join(path, victim)
    with open(full, "rb") as f:
        data = f.read()
    with open(full, "wb") as f:
        f.write(data[:len(data) // 2])
    for read in (lambda t: t.read(), lambda t: list(t.scan()), lambda t: list(t.scan(columns=["id"]))):
        with pytest.raises(hudi.CorruptFileError, match=os.path.basename(victim)):
            read(hudi.open_table(path))
    problems = validate(path)
    assert any(p.path == victim and p.severity == "error" for p in problems)
    # validate went on past the broken file: the snapshot check ran and reported it too
    assert any(p.check == "snapshot" and os.path.basename(victim) in p.message for p in problems)


# -- defect 11: validate reports bloom filters that do not decode --------------------------------
def validate(path):
    from hudi_format.cli.validate import validate_table
    return validate_table(str(path))


def test_validate_reports_a_base_file_bloom_filter_that_does_not_decode(tmp_path):
    import pyarrow.parquet as pq
    path = _cow(tmp_path)
    assert not [p for p in validate(path) if p.severity == "error"]
    victim = next(s.base_file for s in hudi.open_table(path).file_slices())
    full = os.path.join(path, victim)
    t = pq.read_table(full)
    meta = dict(pq.read_metadata(full).metadata)
    meta[b"org.apache.hudi.bloomfilter"] = b"this is not a bloom filter"
    pq.write_table(t.replace_schema_metadata(meta), full)
    assert hudi.open_table(path).read().num_rows == 3    # readers do not need it: only validate sees it
    bad = [p for p in validate(path) if p.check == "bloom-filter"]
    assert [(p.severity, p.path) for p in bad] == [("error", victim)]
    assert "org.apache.hudi.bloomfilter" in bad[0].message


def test_validate_reports_a_metadata_table_bloom_filter_that_does_not_decode(tmp_path, monkeypatch):
    from hudi_format.metadata import payloads
    real = payloads.bloom_filter_record

    def broken(partition, file_name, instant_time, type_code, serialized, deleted=False):
        return real(partition, file_name, instant_time, type_code, b"AAAA" if file_name.startswith(tuple("0123456789abcdef")) else serialized, deleted)

    opts = {"hoodie.metadata.index.bloom.filter.enable": "true"}
    good = _cow(tmp_path / "good", **opts)
    assert not [p for p in validate(good) if p.severity == "error"]
    monkeypatch.setattr(payloads, "bloom_filter_record", broken)
    path = _cow(tmp_path, **opts)
    monkeypatch.undo()
    bad = [p for p in validate(path) if p.check == "metadata-table/bloom-filter"]
    files = {s.base_file for s in hudi.open_table(path).file_slices()}
    assert bad and {p.path for p in bad} == files and all(p.severity == "error" for p in bad)


# -- defect 8: the CLI's storage options ---------------------------------------------------------
def test_cli_parses_json_storage_options(tmp_path):
    import subprocess
    import sys
    path = _cow(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "hudi_format.cli", *args], capture_output=True,
                              text=True, env=env, timeout=120)
    ok = cli("info", path, "--storage-option", 'client_kwargs={"region_name": "x"}', "--json")
    assert ok.returncode == 0, ok.stderr
    bad = cli("info", path, "--storage-option", "client_kwargs={not json")
    assert bad.returncode == 2 and "client_kwargs" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("info", path, "--storage-option", "client_kwargs=plain")
    assert bad.returncode == 2 and "client_kwargs" in bad.stderr and "JSON object" in bad.stderr


# -- arguments of the wrong type: a named InvalidOptionError/StorageError, not a TypeError -------
@pytest.mark.parametrize("kwargs,match", [
    ({"record_key": 5}, "record_key"), ({"record_key": "id", "partition_by": 5}, "partition_by"),
    ({"record_key": "id", "table_type": 5}, "table_type"), ({"record_key": "id", "table_version": "x"}, "table_version"),
    ({"record_key": "id", "options": "x"}, "options"), ({"record_key": "id", "options": {5: 1}}, "option keys"),
    ({"record_key": "id", "operation": 3}, "operation"), ({"record_key": "id", "storage_options": "x"}, "storage_options"),
    ({"record_key": "id", "partition_by": "p", "options": {
        "hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS"}}, "'p'"),
])
def test_write_arguments_of_the_wrong_type(tmp_path, kwargs, match):
    with pytest.raises(hudi.HudiError, match=match):
        hudi.write(str(tmp_path / "t"), pa.table({"id": ["a"], "ts": [1], "p": ["x"]}), **kwargs)
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


@pytest.mark.parametrize("call,match", [
    (lambda t: t.read(columns=[1]), "columns"), (lambda t: t.read(columns=5), "columns"),
    (lambda t: t.read(filters="id=a"), "filters"), (lambda t: t.read(filters=("id", "=", "a")), "filters"),
    (lambda t: t.lookup(5), "keys"), (lambda t: list(t.scan(batch_size=-1)), "batch_size"),
    (lambda t: t.write(pa.table({"id": ["a"]}), options={5: 1}), "option keys"),
])
def test_read_arguments_of_the_wrong_type(tmp_path, call, match):
    with pytest.raises(hudi.InvalidOptionError, match=match):
        call(hudi.open_table(_cow(tmp_path)))


@pytest.mark.parametrize("where", [None, 5])
def test_open_table_with_a_non_path(where):
    with pytest.raises(hudi.StorageError, match="path or URL"):
        hudi.open_table(where)
