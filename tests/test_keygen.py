"""Key generators reproduce the record keys and partition paths Apache Hudi stored."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from conftest import FIXTURE_TABLES
from hudi_format.keygen import DEFAULT_PARTITION, KeyGenerationError, KeyGenerator, java_to_strftime

WITH_ROWS_AND_META = [n for n in FIXTURE_TABLES if "empty" not in n and "no_metafields" not in n]


@pytest.mark.parametrize("name", WITH_ROWS_AND_META)
def test_keys_and_paths_equal_the_meta_fields_hudi_wrote(fixture_tables, name):
    table = hudi.open_table(fixture_tables(name))
    data = table.read()
    keygen = KeyGenerator.from_config(table.config)
    assert keygen.record_keys(data).to_pylist() == data.column("_hoodie_record_key").to_pylist()
    assert keygen.partition_paths(data).to_pylist() == data.column("_hoodie_partition_path").to_pylist()


def test_simple_key_rejects_null_and_empty_keys():
    kg = KeyGenerator(("id",), ("p",))
    with pytest.raises(KeyGenerationError, match="null or empty"):
        kg.record_keys(pa.table({"id": ["a", None], "p": ["x", "y"]}))
    with pytest.raises(KeyGenerationError, match="not in the data"):
        kg.record_keys(pa.table({"other": [1]}))


def test_complex_key_marks_null_and_empty_parts():
    kg = KeyGenerator(("a", "b"), ("p", "q"), "COMPLEX", hive_style=True)
    t = pa.table({"a": [1, None, 3], "b": ["x", "y", ""], "p": ["p1", None, ""], "q": [1, 2, 3]})
    assert kg.record_keys(t).to_pylist() == ["a:1,b:x", "a:__null__,b:y", "a:3,b:__empty__"]
    assert kg.partition_paths(t).to_pylist() == [
        "p=p1/q=1", f"p={DEFAULT_PARTITION}/q=2", f"p={DEFAULT_PARTITION}/q=3"]
    with pytest.raises(KeyGenerationError, match="all record key fields"):
        kg.record_keys(pa.table({"a": [None], "b": [""], "p": ["x"], "q": [1]}))


def test_url_encoded_partition_paths_match_hudi_escape_path_name():
    """Hudi 0.10+ escapes partition values with PartitionPathEncodeUtils.escapePathName: only
    controls, DEL and ``"#%'*/:=?\\{[]^``, as '%' + two upper-case hex digits; a space, '~',
    '+' and non-ASCII stay as they are (expected paths worked out from Hudi's character set)."""
    kg = KeyGenerator(("id",), ("p",), url_encode=True)
    t = pa.table({"id": ["1", "2", "3", "4", "5"],
                  "p": ["a b/c", "2024-01-01 10:00:00", "x*y~z", "50%=half?", "ü\\t\x01[x]{y}^'\"#+"]})
    assert kg.partition_paths(t).to_pylist() == [
        "a b%2Fc", "2024-01-01 10%3A00%3A00", "x%2Ay~z", "50%25%3Dhalf%3F",
        "ü%5Ct%01%5Bx%5D%7By}%5E%27%22%23+"]


def test_timestamp_partition_formats():
    assert java_to_strftime("yyyy/MM/dd/HH") == "%Y/%m/%d/%H"
    assert java_to_strftime("yyyy-MM-dd'T'HH") == "%Y-%m-%dT%H"
    opts = {"hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
            "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd"}
    kg = KeyGenerator(("id",), ("ts",), "TIMESTAMP", timestamp_options=opts)
    assert kg.partition_paths(pa.table({"id": ["1"], "ts": [1705311000]})).to_pylist() == ["20240115"]
