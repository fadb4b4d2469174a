"""Every fixture table written by Apache Hudi reads exactly as its expected results say."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from canonical import canonical_rows, sort_expected
from conftest import FIXTURE_TABLES, expected


def _cases():
    for name in FIXTURE_TABLES:
        exp = expected(name)
        yield pytest.param(name, "snapshot", None, id=f"{name}-snapshot")
        if exp.get("read_optimized") is not None:
            yield pytest.param(name, "read_optimized", None, id=f"{name}-read_optimized")
        for ts in exp.get("time_travel", {}):
            yield pytest.param(name, "time_travel", ts, id=f"{name}-as_of-{ts}")
        for i, inc in enumerate(exp.get("incremental", [])):
            yield pytest.param(name, "incremental", i, id=f"{name}-incremental-{i}")


def _as_of_value(exp: dict, ts: str) -> str:
    if exp["query_bounds_use"] == "completion_time":
        for inst in exp["completed_write_instants"]:
            if inst["timestamp"] == ts:
                return inst["completion_time"]
        raise AssertionError(f"no completed instant {ts}")
    return ts


@pytest.mark.parametrize("name,query,arg", list(_cases()))
def test_fixture_query(fixture_tables, name, query, arg):
    exp = expected(name)
    table = hudi.open_table(fixture_tables(name))
    assert table.table_type == exp["table_type"]
    assert table.version == int(exp["table_version"])
    if query == "snapshot":
        got, want = table.read(), exp["snapshot"]
    elif query == "read_optimized":
        got, want = table.read(read_optimized=True), exp["read_optimized"]
    elif query == "time_travel":
        got, want = table.read(as_of=_as_of_value(exp, arg)), exp["time_travel"][arg]
    else:
        inc = exp["incremental"][arg]
        got = table.read_incremental(inc["start_exclusive"], inc["end_inclusive"])
        want = inc["rows"]
    assert canonical_rows(got) == sort_expected(want)


@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_fixture_identity(fixture_tables, name):
    exp = expected(name)
    table = hudi.open_table(fixture_tables(name))
    assert table.config.record_key_fields == exp["record_key_fields"].split(",")
    assert table.config.partition_fields == [f for f in (exp["partition_fields"] or "").split(",") if f]
    got = [{"timestamp": i.timestamp, "action": i.action,
            **({"completion_time": i.completion_time} if int(exp["table_version"]) >= 8 else {})}
           for i in table.timeline.write_instants()]
    want = [{k: v for k, v in i.items() if k != "completion_time" or int(exp["table_version"]) >= 8}
            for i in exp["completed_write_instants"]]
    assert sorted(got, key=lambda r: r["timestamp"]) == sorted(want, key=lambda r: r["timestamp"])
