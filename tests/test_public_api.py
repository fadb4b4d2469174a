"""The public API in plain sight: ``Table``'s methods have real signatures, type hints and
docstrings (what IDEs, ``help()`` and ``inspect`` show), ``hudi_format.write`` and
``Table.write`` share one write path, and the package ships ``py.typed``."""

from __future__ import annotations

import inspect
import tomllib
import typing
from pathlib import Path

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format import write_api
from hudi_format.table import Table

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = ["refresh", "schema", "file_slices", "read", "scan", "read_incremental", "lookup", "write",
          "compact", "log_compact", "cluster", "clean", "archive", "rollback", "savepoint",
          "delete_savepoint", "restore"]


@pytest.mark.parametrize("name", PUBLIC)
def test_method_has_a_real_signature(name):
    method = Table.__dict__.get(name)
    assert inspect.isfunction(method), f"Table.{name} is not defined in the class body"
    sig = inspect.signature(method)
    kinds = {p.kind for p in sig.parameters.values()}
    assert inspect.Parameter.VAR_POSITIONAL not in kinds and inspect.Parameter.VAR_KEYWORD not in kinds, \
        f"Table.{name}{sig}"
    hints = typing.get_type_hints(method)       # resolves every annotation: a typo fails here
    missing = [p for p in list(sig.parameters)[1:] if p not in hints]
    assert not missing and "return" in hints, f"Table.{name} lacks type hints for {missing or 'return'}"
    assert method.__doc__ and len(method.__doc__.split()) >= 5, f"Table.{name} has no docstring"


def test_service_signatures_name_their_parameters():
    assert list(inspect.signature(Table.compact).parameters) == ["self", "options"]
    assert list(inspect.signature(Table.cluster).parameters) == ["self", "sort_by", "options"]
    assert list(inspect.signature(Table.rollback).parameters) == ["self", "instant", "options"]
    assert list(inspect.signature(Table.savepoint).parameters) == ["self", "instant", "user", "comment"]
    assert list(inspect.signature(Table.write).parameters) == ["self", "data", "operation", "options"]


def test_write_and_table_write_share_one_path(tmp_path, monkeypatch):
    calls = []
    real = write_api.write_data

    def spy(storage, config, data, operation, options, **table_args):
        calls.append((config is None, operation, sorted(table_args)))
        return real(storage, config, data, operation, options, **table_args)

    monkeypatch.setattr(write_api, "write_data", spy)
    path = str(tmp_path / "t")
    data = pa.table({"id": ["a", "b"], "v": [1, 2]})
    hudi.write(path, data, record_key="id", operation="insert")
    table = hudi.open_table(path)
    table.write(pa.table({"id": ["b"], "v": [3]}), operation="upsert")
    assert calls == [(True, "insert", ["ordering_field", "partition_by", "record_key", "table_name",
                                       "table_type", "table_version"]),
                     (False, "upsert", [])]
    assert table.read(columns=["id", "v"]).sort_by("id").to_pydict() == {"id": ["a", "b"], "v": [1, 3]}


def test_table_write_refuses_a_bad_operation_before_writing(tmp_path):
    path = str(tmp_path / "t")
    hudi.write(path, pa.table({"id": ["a"], "v": [1]}), record_key="id")
    table = hudi.open_table(path)
    before = [i.timestamp for i in table.timeline.instants]
    with pytest.raises(hudi.InvalidOptionError, match="operation"):
        table.write(pa.table({"id": ["b"], "v": [2]}), operation=5)
    assert [i.timestamp for i in hudi.open_table(path).timeline.instants] == before


def test_entry_points_stay_importable():
    from hudi_format.table import new_table_config, open_table, write
    assert write is hudi.write is write_api.write
    assert open_table is hudi.open_table
    assert new_table_config is write_api.new_table_config


def test_package_ships_py_typed():
    assert (ROOT / "hudi_format" / "py.typed").is_file()
    with open(ROOT / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["hudi_format"]
    assert "py.typed" in data
