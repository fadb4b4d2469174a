"""Concurrency with table services (issue 11): three writer processes insert, upsert and delete
their own keys while a service process loops compact / clean / cluster / archive with aggressive
options; afterwards our reader and hudi-rs must show every acknowledged write with its latest
acknowledged value: 0 lost, 0 stale, 0 failed-but-visible, 0 duplicate keys; and the metadata
table's ``files`` listing equals storage (it lists no deleted file, misses no committed one).

Bounded here (``HUDI_SERVICE_SOAK_SECONDS``, default 6 s a run, 4 s on S3, then on until each writer
has made each kind of write and the services did something); long runs:
``python -m tests.support.soak_concurrency --seconds N``. See ``soak_concurrency.py`` for the ledger model.
"""

from __future__ import annotations

import json
import os

import pytest

from soak_concurrency import clean, soak

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("HUDI_SERVICE_SOAK_SECONDS", "6"))
S3_SECONDS = float(os.environ.get("HUDI_SERVICE_SOAK_SECONDS", "4"))

def _check(report: dict) -> None:
    text = json.dumps(report, indent=1)
    print(text)
    assert report["writes"]["acknowledged"] > 0, text
    assert all(code == 0 for code in report["child_exits"]), text
    assert report["service"] and sum(c["ok"] for c in report["service"]["counts"].values()) > 0, \
        "the service process completed no service\n" + text
    assert clean(report), text


# version 6 on MERGE_ON_READ (its log files are named by their slice's base instant), 8 on S3 below
@pytest.mark.parametrize("table_type,version", [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 6)])
def test_writers_and_services_lose_nothing(tmp_path, table_type, version):
    _check(soak(str(tmp_path / "t"), tmp_path, SECONDS, table_type, version))


def test_writers_and_services_lose_nothing_on_s3(tmp_path, moto_s3):
    opts = moto_s3("soak")
    _check(soak("s3://soak/t", tmp_path, S3_SECONDS, "MERGE_ON_READ", 8, storage_options=opts))


def test_writers_moving_keys_between_partitions_lose_nothing(tmp_path, monkeypatch):
    """Under a global index that updates partition paths, a third of the writers' upserts give
    their keys another partition while the services run: every key must show once, with its
    last acknowledged value, in its last acknowledged partition (the record index, kept in the
    metadata table by concurrent writers and compactions, must place every key)."""
    import servicechild
    opts = {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
            "hoodie.record.index.update.partition.path": "true"}
    monkeypatch.setenv("SOAK_OPTIONS", json.dumps(opts))
    for k, v in opts.items():
        monkeypatch.setitem(servicechild.AGGRESSIVE, k, v)
    report = soak(str(tmp_path / "t"), tmp_path, SECONDS, "MERGE_ON_READ", 8)
    _check(report)
    by_op = report["writes"]["by_op"]
    assert by_op.get("move/ok", 0) + by_op.get("move/failed", 0) > 0, "no write moved a key"


def test_writers_and_services_killed_at_random_lose_nothing(tmp_path, monkeypatch):
    """The writers and the service process are SIGKILLed at random (every 2 s on average) and
    started again: no acknowledged write is lost, a killed write shows whole or not at all, and
    after the kills a write and each service succeed and leave nothing pending but requested
    plans (``soak_kills.py``; long runs: ``python -m tests.support.soak_kills --seconds N``)."""
    import servicechild
    from soak_kills import KILL_OPTIONS, clean_after_kills, soak_with_kills
    monkeypatch.setenv("SOAK_OPTIONS", json.dumps(KILL_OPTIONS))
    for k, v in KILL_OPTIONS.items():
        monkeypatch.setitem(servicechild.AGGRESSIVE, k, v)
    report = soak_with_kills(str(tmp_path / "t"), tmp_path, min(SECONDS, 9), "MERGE_ON_READ", 8, every=2.0, seed=1)
    text = json.dumps(report, indent=1)
    print(text)
    assert sum(report["kills"].values()) > 0, "nothing was killed\n" + text
    assert report["writes"]["acknowledged"] > 0, text
    assert clean_after_kills(report), text
