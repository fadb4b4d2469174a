"""A COW merge of a big base file is streamed batch by batch whatever the write holds.

Deletes, ``_hoodie_is_deleted`` flags and updates that lose to a stored record (event-time
ordering) used to send the merge down the whole-file path: the old file and the merged one both
in memory. Now only an old file repeating a key the write does not touch is read whole. The
streamed merge must write what the whole-file merge writes: the same rows in the same order, the
same counts in the commit metadata and the same bloom filters, read back by hudi-rs.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hudi_format as hudi
from hudi_format.read.parquet import BaseFileReader
from hudi_format.writer import merge_handle
from writemodel import canonical_rows, hudi_rs_read

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("v", pa.int64()),
                    ("_hoodie_is_deleted", pa.bool_())])
KEY = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="COPY_ON_WRITE")
VOLATILE = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def _rows(ids, ts, v, deleted=None) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "ts": ts if isinstance(ts, list) else [ts] * len(ids),
                     "p": ["a" if i % 3 else "b" for i in ids], "v": [v] * len(ids),
                     "_hoodie_is_deleted": deleted or [False] * len(ids)}, schema=SCHEMA)


def _ops(seed: int) -> list[tuple[str, pa.Table]]:
    """An insert, then upserts with flagged deletes and stale records, and deletes."""
    rng = random.Random(seed)
    ops = [("insert", _rows(range(600), 10, 0))]
    top = 600
    for step in range(1, 7):
        kind = rng.choice(["upsert", "upsert", "delete"])
        if kind == "delete":
            ops.append(("delete", _rows(rng.sample(range(top), 40), 0, 0)))
            continue
        old = rng.sample(range(top), 60)
        new = list(range(top, top + rng.randrange(0, 30)))
        top += len(new)
        ids = old + new
        ts = [rng.choice([5, 10 + step, 20 + step]) for _ in ids]          # 5 loses to the stored 10
        flags = [rng.random() < 0.2 for _ in ids]
        ops.append(("upsert", _rows(ids, ts, step, flags)))
    return ops


def _apply(path: str, ops, version: int, options=None) -> None:
    for op, data in ops:
        hudi.write(path, data, operation=op, table_version=version, options=options, **KEY)


def _files(path: str) -> dict[str, pa.Table]:
    """The latest base files, by their first record key (file ids are random)."""
    out = {}
    for s in hudi.open_table(path).file_slices():
        t = pq.read_table(f"{path}/{s.base_file}")
        meta = pq.read_metadata(f"{path}/{s.base_file}").metadata
        bloom = meta.get(b"org.apache.hudi.bloomfilter")
        out[t.column("_hoodie_record_key")[0].as_py() if t.num_rows else s.file_id] = (
            t.drop_columns([c for c in VOLATILE if c in t.column_names]), bloom)
    return out


def _stats(path: str) -> list[dict]:
    """Per commit: the write counts summed over its files."""
    t = hudi.open_table(path)
    out = []
    for inst in t.timeline.completed:
        if inst.action not in ("commit", "replacecommit"):
            continue
        totals: dict[str, int] = {}
        for stats in t.timeline.metadata(inst).partition_to_write_stats.values():
            for s in stats:
                for k in ("num_writes", "num_update_writes", "num_inserts", "num_deletes"):
                    totals[k] = totals.get(k, 0) + int(getattr(s, k) or 0)
        out.append(totals)
    return out


def _count_whole_reads(monkeypatch) -> list:
    """The old base files merges read whole from now on (a list that fills as they do)."""
    whole_reads = []
    real = BaseFileReader.read_encoded

    def spy(self, columns, *args, **kwargs):
        if columns is None:
            whole_reads.append(self)
        return real(self, columns, *args, **kwargs)
    monkeypatch.setattr(BaseFileReader, "read_encoded", spy)
    return whole_reads


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize("seed", range(4))
def test_streamed_merge_writes_what_the_whole_file_merge_writes(tmp_path, monkeypatch, seed, version):
    ops = _ops(seed * 10 + version)
    whole, streamed = str(tmp_path / "whole"), str(tmp_path / "streamed")
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 1 << 40)
    _apply(whole, ops, version)
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 50)
    monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 37)
    monkeypatch.setattr(merge_handle, "_MERGE_BUFFER_BYTES", 4096)
    whole_reads = _count_whole_reads(monkeypatch)
    _apply(streamed, ops, version)
    assert whole_reads == [], "a merge read its old file whole"
    a, b = _files(whole), _files(streamed)
    assert a.keys() == b.keys()
    for first in a:
        assert a[first][0].equals(b[first][0]), f"rows of the file starting at {first} differ"
        assert a[first][1] == b[first][1], f"bloom filter of the file starting at {first} differs"
    assert _stats(whole) == _stats(streamed)
    ours = hudi.open_table(streamed).read()
    theirs = hudi_rs_read(streamed)
    cols = ["id", "ts", "p", "v"]
    assert canonical_rows(ours.select(cols)) == canonical_rows(theirs.select(cols))
    assert canonical_rows(ours.select(cols)) == canonical_rows(hudi.open_table(whole).read().select(cols))


def test_an_old_file_repeating_an_untouched_key_is_merged_whole(tmp_path, monkeypatch):
    """Only the whole file decides which of two stored rows of one key stays: that merge is
    not streamed, and writes what it wrote before."""
    monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", 50)
    monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 37)
    path = str(tmp_path / "t")
    dup = pa.concat_tables([_rows(range(200), 10, 0), _rows([7, 8], 11, 1)])
    hudi.write(path, dup, operation="insert", options={"hoodie.combine.before.insert": "false"}, **KEY)
    assert sum(t.num_rows for t, _ in _files(path).values()) == 202
    whole_reads = _count_whole_reads(monkeypatch)
    hudi.write(path, _rows([1, 2, 3], [20, 5, 20], 2, [True, False, False]), operation="upsert", **KEY)
    assert whole_reads
    got = {r["id"]: r["v"] for r in hudi.open_table(path).read().to_pylist()}
    # flagged deleted; stale (5 < 10: event-time ordering); updated
    assert "k0001" not in got and got["k0002"] == 0 and got["k0003"] == 2
    assert canonical_rows(hudi.open_table(path).read().select(["id", "ts", "p", "v"])) == \
        canonical_rows(hudi_rs_read(path).select(["id", "ts", "p", "v"]))


@pytest.mark.parametrize("meta_fields, record_key", [(True, "id"), (True, "id,p"), (False, "id,p")])
def test_the_streamed_merge_plans_on_one_copy_of_the_keys(tmp_path, monkeypatch, meta_fields, record_key):
    """The plan of a streamed merge reads the old file's keys once: from ``_hoodie_record_key``
    when the file stores them (not the key fields too: a second copy of every key held while
    the plan is made), from the key fields when it does not (``hoodie.populate.meta.fields``
    false). Either way it writes what the whole-file merge writes."""
    ops = _ops(7)[:4]
    key = {**KEY, "record_key": record_key}
    opts = {"hoodie.populate.meta.fields": str(meta_fields).lower()}
    if "," in record_key:
        opts["hoodie.datasource.write.keygenerator.type"] = "COMPLEX"
    whole, streamed = str(tmp_path / "whole"), str(tmp_path / "streamed")
    for path, above in ((whole, 1 << 40), (streamed, 50)):
        monkeypatch.setattr(merge_handle, "_STREAM_ABOVE_ROWS", above)
        monkeypatch.setattr(merge_handle, "_MERGE_BATCH_ROWS", 37)
        probes: list[list[str]] = []
        real = BaseFileReader.read

        def spy(self, columns=None, *args, **kwargs):
            probes.append(list(columns or []))
            return real(self, columns, *args, **kwargs)
        monkeypatch.setattr(BaseFileReader, "read", spy)
        for op, data in ops:
            hudi.write(path, data, operation=op, options=opts, **key)
        monkeypatch.setattr(BaseFileReader, "read", real)
    # the streamed run's merges: each planned on its probe, which holds the keys once
    planned = [p for p in probes if "ts" in p and len(p) < len(SCHEMA)]
    assert planned, "no streamed merge ran"
    for cols in planned:
        if meta_fields:
            assert "_hoodie_record_key" in cols and "id" not in cols and "p" not in cols, cols
        else:
            assert "_hoodie_record_key" not in cols and "id" in cols, cols
    cols = ["id", "ts", "p", "v"]
    ours = canonical_rows(hudi.open_table(streamed).read().select(cols))
    assert ours == canonical_rows(hudi.open_table(whole).read().select(cols))
    assert ours == canonical_rows(hudi_rs_read(streamed).select(cols))
    assert _stats(whole) == _stats(streamed)
