"""The metadata table's ``files`` listing stays equal to storage through every interleaving of
writes, cleans, metadata-table compaction and archival (issue 11, defect 3: "in a long run the
metadata table also diverged from storage").

The mechanism, reproduced deterministically below: a clean is planned (its instant time ``K``),
then the metadata table is compacted (instant ``C > K``), then the clean completes -- its
metadata deltacommit ``K`` completes *after* ``C`` and lives in the log on top of ``C``'s base
files. Once the data table archived ``K``, the metadata table archived its deltacommit ``K``
(``K < C``) although no compaction had folded it in; readers and the next compaction trust a
metadata block only while its instant is on an active timeline, so the clean's deletions were
dropped: the listing showed deleted files again (hudi-rs, listing through the metadata table,
failed to read), and the next compaction baked that into its base files for good.

Truth comes from storage (the committed files), our reader without the metadata table, and
hudi-rs.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import hudi_format as hudi
from hudi_format.config import TableConfig
from hudi_format.metadata.options import MetadataTableError
from hudi_format.metadata.writer import MetadataWriter
from hudi_format.services.archival import _delete_active_files, archive
from hudi_format.services.cleaning import run_clean, schedule_clean
from hudi_format.services.metadata_table import archive_metadata_table
from hudi_format.storage import Storage
from hudi_format.timeline import Timeline
from hudi_format.timeline.history_writer import ActiveAction, LSMTimelineWriter, write_v6_archive
from test_metadata_writer import _rs_table, _st, committed_files, mdt_files

OPTS = {"hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false",
        "hoodie.archive.automatic": "false", "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3", "hoodie.metadata.compact.max.delta.commits": "100",
        "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.parquet.small.file.limit": "0"}


def _write(path, v: int, ttype: str, version: int, keys=("a", "b"), part="x", options=None) -> None:
    rows = pa.table({"id": list(keys), "p": [part] * len(keys), "ts": [v] * len(keys), "v": [v] * len(keys)})
    hudi.write(str(path), rows, operation="upsert", record_key="id", ordering_field="ts",
               partition_by="p", table_type=ttype, table_version=version, table_name="t",
               options=dict(OPTS, **(options or {})))


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


def _assert_consistent(path, where: str) -> None:
    """The metadata listing equals storage, and every reader reads the same rows."""
    assert mdt_files(path) == committed_files(path), where
    want = _rows(hudi.open_table(str(path), options={"hoodie.metadata.enable": "false"}).read())
    assert _rows(hudi.open_table(str(path)).read()) == want, where
    assert _rows(pa.Table.from_batches(_rs_table(path, metadata=True).read())) == want, where


def _mdt(path) -> tuple[Storage, TableConfig, MetadataWriter]:
    st, cfg = _st(path)
    return st, cfg, MetadataWriter(st, cfg, OPTS)


def _clean_across_a_compaction(path, ttype: str, version: int) -> str:
    """Plan a clean, write once, compact the metadata table, then complete the clean: its
    metadata deltacommit completes after the compaction although it was requested before."""
    for v in range(1, 5):
        _write(path, v, ttype, version)
    st, cfg = _st(path)
    clean = schedule_clean(st, cfg, OPTS)
    assert clean is not None
    _write(path, 10, ttype, version)   # requested after the clean, completed before the compaction
    assert _mdt(path)[2].compact() is not None
    st, cfg = _st(path)
    run_clean(st, cfg, clean, OPTS)
    _assert_consistent(path, "after the clean")
    return clean.timestamp


def _archive_past(path, clean_ts: str, ttype: str, version: int) -> None:
    """A later clean moves the earliest commit to retain on; then both timelines archive."""
    for v in range(11, 16):
        _write(path, v, ttype, version)
    st, cfg = _st(path)
    run_clean(st, cfg, schedule_clean(st, cfg, OPTS), OPTS)
    _write(path, 16, ttype, version)
    _write(path, 17, ttype, version)
    st, cfg = _st(path)
    archived = [i.timestamp for i in archive(st, cfg, OPTS)]
    assert clean_ts in archived, "the scenario needs the clean archived on the data table"


@pytest.mark.parametrize("ttype,version", [("MERGE_ON_READ", 8), ("MERGE_ON_READ", 6), ("COPY_ON_WRITE", 8)])
def test_clean_completed_after_a_metadata_compaction_is_never_dropped(tmp_path, ttype, version):
    path = tmp_path / "t"
    clean_ts = _clean_across_a_compaction(path, ttype, version)
    _archive_past(path, clean_ts, ttype, version)
    st, cfg, w = _mdt(path)
    archive_metadata_table(w)
    _assert_consistent(path, "after archival")
    md = Timeline.load(w.md, w.md_config)
    assert any(i.timestamp == clean_ts for i in md.instants), \
        "the metadata table archived a deltacommit no compaction folded into a base file"
    assert _mdt(path)[2].compact() is not None
    _assert_consistent(path, "after the next metadata compaction")
    archive_metadata_table(_mdt(path)[2])
    _write(path, 20, ttype, version)
    _assert_consistent(path, "after archiving the compacted deltacommit")


def _archive_exactly(storage: Storage, config: TableConfig, instants) -> None:
    """Archive exactly these instants, as an older writer without the compaction guard did."""
    timeline = Timeline.load(storage, config)
    actions = [ActiveAction.of(timeline, i) for i in instants]
    if config.version >= 8:
        LSMTimelineWriter(storage, config).write(actions, timeline.timeline_dir)
    else:
        write_v6_archive(storage, config, actions)
    _delete_active_files(storage, timeline, actions)


@pytest.mark.parametrize("version", [8, 6])
def test_blocks_of_archived_metadata_deltacommits_still_count(tmp_path, version):
    """A table whose metadata timeline already lost such a deltacommit to archival (written by
    an older writer): an archived deltacommit completed, so readers and compaction count its
    blocks (Hudi's ``containsOrBeforeTimelineStarts``) unless its data instant is pending."""
    path = tmp_path / "t"
    clean_ts = _clean_across_a_compaction(path, "MERGE_ON_READ", version)
    _archive_past(path, clean_ts, "MERGE_ON_READ", version)
    st, cfg, w = _mdt(path)
    md = Timeline.load(w.md, w.md_config)
    _archive_exactly(w.md, w.md_config, [i for i in md.completed if i.timestamp <= clean_ts])
    assert not any(i.timestamp == clean_ts for i in Timeline.load(w.md, w.md_config).instants)
    _assert_consistent(path, "reader, after the metadata table archived the clean")
    assert _mdt(path)[2].compact() is not None
    _assert_consistent(path, "after compacting it")


def test_metadata_compaction_fails_on_a_corrupt_block(tmp_path):
    """Compaction reads each slice whole or not at all: a corrupt block fails it (and leaves
    nothing behind) instead of being skipped into a base file that then lists stale files."""
    path = tmp_path / "t"
    for v in range(1, 4):
        _write(path, v, "MERGE_ON_READ", 8)
    st, cfg, w = _mdt(path)
    (files_slice,) = w.latest_slices("files")
    log_file = w.md.full(files_slice.log_files[-1])
    buf = bytearray(open(log_file, "rb").read())
    buf[-3] ^= 0xFF   # the block's trailing length no longer matches: a corrupt block
    with open(log_file, "wb") as f:
        f.write(bytes(buf))
    before = sorted(os.listdir(w.md.full("files")))
    timeline_before = [(i.timestamp, i.state) for i in Timeline.load(w.md, w.md_config).instants]
    with pytest.raises(MetadataTableError, match="corrupt"):
        w.compact()
    assert sorted(os.listdir(w.md.full("files"))) == before
    assert [(i.timestamp, i.state) for i in Timeline.load(w.md, w.md_config).instants] == timeline_before
    # readers do not use it either (they list storage); the data stays readable
    want = _rows(hudi.open_table(str(path), options={"hoodie.metadata.enable": "false"}).read())
    assert _rows(hudi.open_table(str(path)).read()) == want


CLUSTER = {"hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024),
           "hoodie.clustering.plan.strategy.target.file.max.bytes": str(1024 * 1024),
           "hoodie.clustering.inline.max.commits": "1"}


def test_replacecommit_stays_while_its_replaced_files_remain(tmp_path, monkeypatch):
    """A clean that could not delete a replaced file group (the delete failed) still moves the
    earliest commit to retain past the replacecommit; archiving the replacecommit then would
    bring the replaced file group back beside the clustered one (duplicate keys)."""
    path = tmp_path / "t"
    for i in range(3):   # three small file groups of partition x
        _write(path, 1, "COPY_ON_WRITE", 8, keys=(f"k{i}",))
    table = hudi.open_table(str(path))
    replace = table.cluster(options=dict(OPTS, **CLUSTER))
    assert replace is not None
    st, cfg = _st(path)
    replaced = Timeline.load(st, cfg).metadata(replace).replaced_file_ids
    assert replaced
    for v in range(2, 6):  # commits in another partition move the cleaner's retention on
        _write(path, v, "COPY_ON_WRITE", 8, keys=("y",), part="y")
    real_delete = Storage.delete
    replaced_ids = {f for _, f in replaced}

    def failing_delete(self, rel):
        if any(f in rel for f in replaced_ids):
            raise OSError("permission denied (injected)")
        return real_delete(self, rel)

    monkeypatch.setattr(Storage, "delete", failing_delete)
    st, cfg = _st(path)
    done = run_clean(st, cfg, schedule_clean(st, cfg, OPTS), OPTS)
    monkeypatch.setattr(Storage, "delete", real_delete)
    st, cfg = _st(path)
    meta = Timeline.load(st, cfg).raw_metadata(done)
    assert meta["earliestCommitToRetain"] > replace.timestamp
    assert any(pm["failedDeleteFiles"] for pm in meta["partitionMetadata"].values())
    for v in range(6, 12):
        _write(path, v, "COPY_ON_WRITE", 8, keys=("y",), part="y")
        _mdt(path)[2].compact()
    st, cfg = _st(path)
    archive(st, cfg, OPTS)
    assert any(i.timestamp == replace.timestamp for i in Timeline.load(st, cfg).instants), \
        "archived a replacecommit whose replaced file group still has files"
    for opts in ({"hoodie.metadata.enable": "false"}, {}):
        ids = hudi.open_table(str(path), options=opts).read().column("id").to_pylist()
        assert len(ids) == len(set(ids)), f"duplicate keys with {opts}"
    # a later clean deletes them; then the replacecommit may go, and nothing comes back
    st, cfg = _st(path)
    run_clean(st, cfg, schedule_clean(st, cfg, OPTS), OPTS)
    _write(path, 20, "COPY_ON_WRITE", 8, keys=("y",), part="y")
    _mdt(path)[2].compact()
    st, cfg = _st(path)
    archive(st, cfg, OPTS)
    assert not any(i.timestamp == replace.timestamp for i in Timeline.load(st, cfg).instants)
    _assert_consistent(path, "after archiving the replacecommit")
    ids = hudi.open_table(str(path)).read().column("id").to_pylist()
    assert sorted(ids) == ["k0", "k1", "k2", "y"]


@pytest.mark.parametrize("version", [6, 8])
def test_rolling_back_a_commit_the_metadata_table_was_bootstrapped_with_drops_it(tmp_path, version):
    """A restore drops the metadata table; the next write bootstraps it from the table as it is,
    its record index holding the keys a ``delete_partition`` left. Rolling that
    ``delete_partition`` back then brought partition ``b`` back in the data but not in the record
    index (nothing of the commit was in the metadata timeline to roll back), so a later delete of
    ``b``'s keys found nothing and deleted nothing (torture seed 390224). Such a rollback now
    drops the metadata table, which the next write bootstraps again."""
    path = str(tmp_path / "t")
    opts = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
            "hoodie.metadata.record.index.min.filegroup.count": "1"}
    kw = dict(record_key="id", ordering_field="ts", partition_by="p", table_type="COPY_ON_WRITE",
              table_version=version, options=opts)

    def rows(keys, ts):
        return pa.table({"id": [f"k{k}" for k in keys], "ts": [ts] * len(keys),
                         "p": ["a" if k % 2 == 0 else "b" for k in keys]})

    def ids():
        return sorted(hudi.open_table(path).read(columns=["id"]).column("id").to_pylist())

    hudi.write(path, rows(range(6), 1), operation="insert", **kw)
    dropped = hudi.write(path, rows([1], 1), operation="delete_partition",
                         **dict(kw, options=dict(opts, **{"hoodie.datasource.write.partitions.to.delete": "b"})))
    hudi.open_table(path).savepoint(dropped.timestamp)
    hudi.write(path, rows([0], 2), operation="upsert", **kw)
    hudi.open_table(path).restore(dropped.timestamp)
    hudi.open_table(path).delete_savepoint(dropped.timestamp)
    again = hudi.write(path, rows([0], 3), operation="upsert", **kw)   # bootstraps the metadata table
    hudi.open_table(path).rollback(again.timestamp)
    hudi.open_table(path).rollback(dropped.timestamp)
    assert ids() == ["k0", "k1", "k2", "k3", "k4", "k5"]
    hudi.write(path, rows([1, 3], 4), operation="delete", **kw)
    assert ids() == ["k0", "k2", "k4", "k5"]
    from hudi import HudiTableBuilder
    rs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    assert sorted(rs.column("id").to_pylist()) == ["k0", "k2", "k4", "k5"]
