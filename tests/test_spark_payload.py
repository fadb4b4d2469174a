"""Payload classes in a Spark job's options merge on the executors as in the core
(``tests/test_write_config_checks.py``), read back by both readers."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark")
pytest.importorskip("pandas")   # PySpark's mapInArrow insists on it

import hudi_format as hudi  # noqa: E402
from test_spark_adapter import _opts, data_rows, model_rows, rs_rows, sdf  # noqa: E402
from writemodel import Model, hudi_rs_read  # noqa: E402


@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6), ("COPY_ON_WRITE", 8),
                                                ("MERGE_ON_READ", 8)])
def test_the_payload_class_decides_the_merge_through_spark(spark, tmp_path, table_type, version):
    """``hoodie.datasource.write.payload.class`` in a Spark job's options merges as in the core
    (an update with a lower ordering value loses under DefaultHoodieRecordPayload) on the
    executors too, where a version 6 copy-on-write job's payload lives in its shipped config."""
    path = str(tmp_path / "t")
    o = _opts(table_type, "upsert", **{"hoodie.write.table.version": str(version),
                                       "hoodie.datasource.write.payload.class":
                                           "org.apache.hudi.common.model.DefaultHoodieRecordPayload"})
    first = rs_rows(range(20), ts=5)
    sdf(spark, first).write.format("hudi_format").options(**o).save(path)
    sdf(spark, rs_rows(range(10, 30), ts=1, seed=1)).write.format("hudi_format").options(**o).mode("append").save(path)
    model = Model(event_time=True)
    model.apply("upsert", first, 0)
    model.apply("upsert", rs_rows(range(10, 30), ts=1, seed=1), 1)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)


def test_a_version_6_copy_on_write_spark_job_merges_by_its_own_payload(spark, tmp_path):
    """Hudi 0.x keeps no payload class for a copy-on-write table: each write merges by its own
    (the executors merge by the job's, not the table's default)."""
    path = str(tmp_path / "t")
    o = _opts("COPY_ON_WRITE", "upsert", **{"hoodie.write.table.version": "6"})
    first, late = rs_rows(range(20), ts=5), rs_rows(range(10, 30), ts=1, seed=1)
    sdf(spark, first).write.format("hudi_format").options(**o).save(path)
    payload = {"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}
    sdf(spark, late).write.format("hudi_format").options(**o, **payload).mode("append").save(path)
    model = Model(event_time=True)
    model.apply("upsert", first, 0)
    model.apply("upsert", late, 1)
    assert data_rows(hudi.open_table(path).read()) == model_rows(model.rows)
    assert data_rows(hudi_rs_read(path)) == model_rows(model.rows)
