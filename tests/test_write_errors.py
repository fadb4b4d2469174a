"""Bad input gets a clear error and writes nothing: no data file, no instant, no table."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.keygen import KeyGenerationError


def _listing(root) -> set[str]:
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".lock"):
                out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


@pytest.fixture()
def table_path(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, pa.table({"id": ["a", "b"], "ts": [1, 2], "n": [1, 2], "p": ["x", "y"]}),
               record_key="id", ordering_field="ts", partition_by="p")
    return path


@pytest.mark.parametrize("data,kwargs,error,match", [
    (pa.table({"ts": [1], "n": [1], "p": ["x"]}), {}, hudi.SchemaError, "record key field 'id'"),
    (pa.table({"id": ["c", None], "ts": [1, 1], "n": [1, 1], "p": ["x", "x"]}), {}, KeyGenerationError, "null or empty"),
    (pa.table({"id": ["c"], "ts": [1], "n": ["not a number"], "p": ["x"]}), {}, hudi.SchemaError, "'n'"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"operation": "merge"}, hudi.InvalidOptionError, "unknown write operation"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"table_version": 6}, hudi.InvalidOptionError, "version 8"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"options": {"hoodie.parquet.max.filesize": "1"}},
     hudi.InvalidOptionError, "hoodie.parquet.max.file.size"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"options": {"hoodie.write.table.version": "6"}},
     hudi.InvalidOptionError, "version 8"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"record_key": "n"}, hudi.InvalidOptionError, "record key"),
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["x"]}), {"options": {"hoodie.parquet.small.file.limit": "lots"}},
     hudi.InvalidOptionError, "integer"),
    # a codec Hudi names but pyarrow cannot write: refused before anything is written
    (pa.table({"id": ["c"], "ts": [1], "n": [1], "p": ["z"]}), {"options": {"hoodie.parquet.compression.codec": "lzo"}},
     hudi.InvalidOptionError, "hoodie.parquet.compression.codec.*lzo"),
])
def test_bad_input_writes_nothing(table_path, data, kwargs, error, match):
    before = _listing(table_path)
    with pytest.raises(error, match=match):
        hudi.write(table_path, data, **kwargs)
    assert _listing(table_path) == before
    assert hudi.open_table(table_path).read().num_rows == 2


def test_bad_first_write_creates_no_table(tmp_path):
    path = tmp_path / "new"
    with pytest.raises(KeyGenerationError):
        hudi.write(str(path), pa.table({"id": [None], "ts": [1]}), record_key="id")
    assert not path.exists() or not (path / ".hoodie" / "hoodie.properties").exists()
    with pytest.raises(hudi.InvalidOptionError, match="record_key"):
        hudi.write(str(path), pa.table({"id": ["a"]}))
    with pytest.raises(hudi.InvalidOptionError, match="table_type"):
        hudi.write(str(path), pa.table({"id": ["a"]}), record_key="id", table_type="LSM")
    with pytest.raises(hudi.InvalidOptionError, match="hoodie.parquet.compression.codec.*lzo"):
        hudi.write(str(path), pa.table({"id": ["a"], "p": ["x"]}), record_key="id", partition_by="p",
                   options={"hoodie.parquet.compression.codec": "lzo"})
    assert not path.exists() or not os.listdir(path)


def test_all_error_types_are_hudi_errors():
    assert issubclass(KeyGenerationError, hudi.HudiError)
    assert issubclass(hudi.InvalidOptionError, hudi.HudiError)


def test_failure_mid_write_leaves_no_trace(table_path, monkeypatch):
    from hudi_format.writer import handles
    before = _listing(table_path)
    real = handles.create
    calls = []

    def failing(ctx, partition, rows, keys):
        calls.append(partition)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(ctx, partition, rows, keys)

    monkeypatch.setattr(handles, "create", failing)
    data = pa.table({"id": ["c", "d", "e"], "ts": [1, 1, 1], "n": [1, 2, 3], "p": ["q", "r", "s"]})
    with pytest.raises(OSError, match="disk full"):
        hudi.write(table_path, data, operation="insert")
    after = _listing(table_path)
    leftover = {f for f in after - before if not f.endswith(".hoodie_partition_metadata")}
    assert leftover == set()
    assert hudi.open_table(table_path).read().num_rows == 2
