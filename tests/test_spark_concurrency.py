"""Spark writes racing a core writer process and the table services (issues 11 and 14): every
acknowledged write of either engine shows in our reader and hudi-rs, nothing lost, stale,
failed-but-visible or duplicated, the metadata listing equal to storage (``soak_spark.py``).

Bounded here (``HUDI_SPARK_SOAK_SECONDS``, default 10 s); long runs:
``python -m tests.support.soak_spark --seconds N``. Needs pyspark and Java 17; marked ``spark``."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark")
pytest.importorskip("pandas")

from soak_concurrency import clean  # noqa: E402
from soak_spark import soak  # noqa: E402

SECONDS = float(os.environ.get("HUDI_SPARK_SOAK_SECONDS", "10"))


def test_spark_writes_race_a_core_writer_and_the_services_and_lose_nothing(spark, tmp_path, monkeypatch):
    """With the record index moving keys between partitions: its lookups run on the executors
    seconds after the driver planned, while the services commit (a newer index than the plan
    was taken for absent keys: deletes did nothing, upserts wrote second copies)."""
    import servicechild
    opts = {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
            "hoodie.record.index.update.partition.path": "true"}
    monkeypatch.setenv("SOAK_OPTIONS", json.dumps(opts))
    for k, v in opts.items():
        monkeypatch.setitem(servicechild.AGGRESSIVE, k, v)
    report = soak(spark, str(tmp_path / "t"), tmp_path, SECONDS, "MERGE_ON_READ", 8)
    text = json.dumps(report, indent=1)
    print(text)
    assert report["spark_writes"]["acknowledged"] > 0, text
    assert report["core_writes"]["acknowledged"] > 0, text
    assert all(code == 0 for code in report["child_exits"]), text
    assert sum(c["ok"] for c in report["service"]["counts"].values()) > 0, text
    assert clean(report), text
