"""A write's configuration that cannot work, or that asks for other semantics than the table
has, is refused before anything is written, with a ``HudiError`` naming the option; and the
payload class Hudi users pass decides how a new table merges, as it does in Apache Hudi."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest

import hudi_format as hudi
from writemodel import hudi_rs_read

KW = dict(record_key="id", ordering_field="ts", partition_by="p")
OVERWRITE = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
EVENT_TIME = "org.apache.hudi.common.model.EventTimeAvroPayload"


def _rows(ts, v):
    return pa.table({"id": ["a", "b"], "ts": [ts, ts], "v": [v, v], "p": ["x", "y"]})


def _listing(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if not f.endswith(".lock")}


def _props(path) -> dict[str, str]:
    out = {}
    for line in open(os.path.join(path, ".hoodie", "hoodie.properties")):
        if "=" in line and not line.startswith("#"):
            k, v = line.rstrip("\n").split("=", 1)
            out[k] = v
    return out


# -- the payload class decides a new table's merging ------------------------------------------
@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("key", ["hoodie.datasource.write.payload.class", "hoodie.compaction.payload.class"])
@pytest.mark.parametrize("payload,late_wins", [(OVERWRITE, True), (DEFAULT, False), (EVENT_TIME, False)])
def test_the_payload_class_decides_how_a_new_table_merges(tmp_path, version, table_type, key, payload, late_wins):
    """An update with a lower ordering value wins under OverwriteWithLatestAvroPayload (commit
    time) and loses under DefaultHoodieRecordPayload/EventTimeAvroPayload (event time); both
    readers agree, and the table records it as Hudi does (v8: the merge mode it implies)."""
    path = str(tmp_path / "t")
    opts = {key: payload}
    hudi.write(path, _rows(5, 1), table_type=table_type, table_version=version, options=opts, **KW)
    hudi.write(path, _rows(1, 2), operation="upsert", options=opts, **KW)
    want = [2, 2] if late_wins else [1, 1]
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == want
    assert sorted(hudi_rs_read(path).column("v").to_pylist()) == want
    props = _props(path)
    if version == 8:
        mode = "COMMIT_TIME_ORDERING" if late_wins else "EVENT_TIME_ORDERING"
        assert props["hoodie.record.merge.mode"] == mode
    assert props.get("hoodie.compaction.payload.class", OVERWRITE) == payload
    # the same write without the option merges as the table says
    hudi.write(path, _rows(0, 3), operation="upsert", **KW)
    want = [3, 3] if late_wins else [1, 1]
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == want


def test_a_version_6_copy_on_write_write_merges_by_its_own_payload(tmp_path):
    """Hudi 0.x keeps a payload class in hoodie.properties for merge-on-read tables only: a
    copy-on-write write merges by the payload of its own options (0.x's default without one)."""
    path = str(tmp_path / "t")
    hudi.write(path, _rows(5, 1), table_version=6, **KW)          # as 0.x leaves it: no payload
    assert "hoodie.compaction.payload.class" not in _props(path)
    hudi.write(path, _rows(1, 2), operation="upsert", options={"hoodie.datasource.write.payload.class": DEFAULT}, **KW)
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1]
    hudi.write(path, _rows(1, 3), operation="upsert", **KW)     # 0.x's default: the latest write wins
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [3, 3]
    hudi.write(path, _rows(0, 4), operation="upsert", options={"hoodie.compaction.payload.class": EVENT_TIME}, **KW)
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [3, 3]
    assert sorted(hudi_rs_read(path).column("v").to_pylist()) == [3, 3]
    assert "hoodie.compaction.payload.class" not in _props(path)


@pytest.mark.parametrize("version", [6, 8])
def test_a_payload_the_table_does_not_merge_with_is_refused(tmp_path, version):
    path = str(tmp_path / "t")
    hudi.write(path, _rows(5, 1), table_type="MERGE_ON_READ", table_version=version,
               options={"hoodie.datasource.write.payload.class": DEFAULT}, **KW)
    before = _listing(path)
    with pytest.raises(hudi.InvalidOptionError, match="payload.class.*does not match the table"):
        hudi.write(path, _rows(1, 2), operation="upsert",
                   options={"hoodie.datasource.write.payload.class": OVERWRITE}, **KW)
    assert _listing(path) == before
    # the class the table has, or another of the same merge semantics, is fine
    hudi.write(path, _rows(1, 2), operation="upsert", options={"hoodie.compaction.payload.class": EVENT_TIME}, **KW)
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1]


@pytest.mark.parametrize("opts,match", [
    ({"hoodie.datasource.write.payload.class": "com.example.MyPayload"}, "MyPayload"),
    ({"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.PartialUpdateAvroPayload"},
     "PartialUpdateAvroPayload"),
    ({"hoodie.datasource.write.payload.class": OVERWRITE, "hoodie.compaction.payload.class": DEFAULT},
     "payload.class"),
    ({"hoodie.record.merge.mode": "EVENT_TIME_ORDERING", "hoodie.datasource.write.payload.class": OVERWRITE},
     "merge.mode"),
    ({"hoodie.record.merge.mode": "CUSTOM", "hoodie.compaction.payload.class": "com.example.MyPayload"}, "CUSTOM"),
    ({"hoodie.datasource.write.keygenerator.class": "com.example.MyKeyGenerator"}, "MyKeyGenerator"),
    ({"hoodie.write.lock.provider": "com.example.NoSuchLock"}, "hoodie.write.lock.provider"),
    ({"hoodie.datasource.write.recordkey.field": "v"}, "recordkey.field"),
    ({"hoodie.datasource.write.precombine.field": "v"}, "precombine.field"),
    ({"hoodie.datasource.write.partitionpath.field": "v"}, "partitionpath.field"),
    ({"hoodie.compact.inline": "true", "hoodie.compaction.strategy": "com.example.MyStrategy"},
     "hoodie.compaction.strategy"),
    ({"hoodie.clustering.inline": "true", "hoodie.clustering.plan.strategy.class": "com.example.MyPlan"},
     "hoodie.clustering.plan.strategy.class"),
    ({"hoodie.clustering.inline": "true", "hoodie.clustering.plan.strategy.partition.regex.pattern": "(["},
     "regex"),
    ({"hoodie.clustering.inline": "true", "hoodie.clustering.plan.strategy.sort.columns": "v,nosuch"}, "nosuch"),
])
@pytest.mark.parametrize("existing", [False, True])
def test_a_configuration_that_cannot_work_writes_nothing(tmp_path, opts, match, existing):
    """On a new table nothing at all is left; on an existing one, nothing changes."""
    path = str(tmp_path / "t")
    if existing:
        hudi.write(path, _rows(5, 1), table_type="MERGE_ON_READ", **KW)
    before = _listing(path) if existing else set()
    kw = dict(KW, table_type="MERGE_ON_READ")
    with pytest.raises(hudi.HudiError, match=match):
        hudi.write(path, _rows(6, 2), operation="upsert", options=opts, **kw)
    assert (_listing(path) if os.path.exists(path) else set()) == before
    if existing:
        assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1]


def test_a_table_with_a_user_key_generator_is_read_but_not_written(tmp_path):
    """A key generator class of the user's own runs only in Java: the keys it would give are
    unknown here, so writing with any other would split records; reads need no key generator."""
    path = str(tmp_path / "t")
    hudi.write(path, _rows(5, 1), **KW)
    props_file = os.path.join(path, ".hoodie", "hoodie.properties")
    from hudi_format.config import TableConfig, format_properties
    from hudi_format.storage import Storage
    cfg = TableConfig.load(Storage(path))
    props = dict(cfg)
    props.pop("hoodie.table.checksum", None)
    props["hoodie.table.keygenerator.type"] = "USER_PROVIDED"
    props["hoodie.table.keygenerator.class"] = "com.example.MyKeyGenerator"
    with open(props_file, "w") as f:
        f.write(format_properties(props))
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1]
    before = _listing(path)
    with pytest.raises(hudi.UnsupportedFeatureError, match="MyKeyGenerator"):
        hudi.write(path, _rows(6, 2), operation="upsert", **KW)
    assert _listing(path) == before


def test_an_empty_table_name_is_no_name(tmp_path, caplog):
    path = str(tmp_path / "t")
    hudi.write(path, _rows(5, 1), options={"hoodie.table.name": ""}, **KW)
    with caplog.at_level(logging.ERROR):
        hudi.write(path, _rows(6, 2), operation="upsert", options={"hoodie.table.name": ""}, **KW)
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [2, 2]


def test_the_operation_option_is_the_operation_when_none_is_passed(tmp_path):
    """An option map pasted from a Hudi job names its operation: a bulk_insert of a stored key
    adds a second record (it looks no key up), where an upsert updates it."""
    path = str(tmp_path / "t")
    hudi.write(path, _rows(5, 1), **KW)
    bulk = {"hoodie.datasource.write.operation": "bulk_insert"}
    hudi.write(path, _rows(6, 2), options=bulk, **KW)
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1, 2, 2]
    hudi.open_table(path).write(_rows(7, 3), options={"hoodie.datasource.write.operation": "bulk_insert"})
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1, 2, 2, 3, 3]
    before = _listing(path)
    with pytest.raises(hudi.InvalidOptionError, match="different operations"):
        hudi.write(path, _rows(8, 4), operation="upsert", options=bulk, **KW)
    with pytest.raises(hudi.InvalidOptionError, match="different operations"):
        hudi.engine.begin_write(path, "upsert", schema=_rows(8, 4).schema, options=bulk)
    assert _listing(path) == before
    hudi.write(path, _rows(8, 4), operation="BULK_INSERT", options=bulk, **KW)   # the same, spelt otherwise
    assert sorted(hudi.open_table(path).read().column("v").to_pylist()) == [1, 1, 2, 2, 3, 3, 4, 4]
