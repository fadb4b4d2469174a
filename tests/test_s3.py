"""Reading tables from a real S3 API server on loopback (moto's server mode), through s3fs."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import expected

s3fs = pytest.importorskip("s3fs")


@pytest.fixture(scope="module")
def s3(moto_s3):
    options = moto_s3("hudi-test")
    return s3fs.S3FileSystem(**options), options


@pytest.mark.parametrize("name", [
    "sample_table__mor__avro__v9_txns_simple_meta",
    "quickstart_trips_table__mor__avro__v6_trips_8i3d",
    "sample_table__cow__v8_complexkeygen_hivestyle",
])
def test_read_table_on_s3(s3, fixture_tables, name):
    fs, options = s3
    local = fixture_tables(name)
    fs.put(str(local), f"hudi-test/{name}", recursive=True)
    fs.invalidate_cache()
    table = hudi.open_table(f"s3://hudi-test/{name}", storage_options=options)
    exp = expected(name)
    assert canonical_rows(table.read()) == sort_expected(exp["snapshot"])
    if exp.get("read_optimized") is not None:
        assert canonical_rows(table.read(read_optimized=True)) == sort_expected(exp["read_optimized"])
    for inc in exp["incremental"]:
        got = table.read_incremental(inc["start_exclusive"], inc["end_inclusive"])
        assert canonical_rows(got) == sort_expected(inc["rows"])


def test_missing_table_on_s3(s3):
    _, options = s3
    with pytest.raises(hudi.TableNotFoundError, match="hoodie.properties"):
        hudi.open_table("s3://hudi-test/no_such_table", storage_options=options)
