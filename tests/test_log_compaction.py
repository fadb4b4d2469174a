"""Log compaction (MOR, v8 and v6): restating a slice's logs as one must keep its rows, history and merge outcome."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hudi_format as hudi
from canonical import canonical_rows
from hudi_format.log import BlockType, HeaderKey, read_log_file
from hudi_format.services import (compact, log_compact, run_log_compaction, schedule_compaction,
                                  schedule_log_compaction)
from test_compaction import MOR, assert_history_kept, both, history, mor_history


@pytest.mark.parametrize("version", MOR)
def test_log_compaction_merges_logs_into_one_and_keeps_rows(tmp_path, version):
    path = tmp_path / "t"
    instants = mor_history(path, version)
    full_before = canonical_rows(hudi.open_table(str(path)).read())
    before = both(path)
    recorded = history(path, instants)
    t = hudi.open_table(str(path))
    old = {s.file_id: s for s in t.file_slices() if s.log_files}
    assert schedule_log_compaction(t.storage, t.config) is None      # 4 log files < threshold 5

    done = log_compact(t.storage, t.config, {"hoodie.log.compaction.blocks.threshold": 3})
    assert done is not None and done.action == "deltacommit"
    # every field, file names included, is unchanged: the base files stay, the logs are restated
    assert canonical_rows(hudi.open_table(str(path)).read()) == full_before
    assert both(path) == before
    assert_history_kept(path, recorded)

    t = hudi.open_table(str(path))
    plan = t.timeline.plan(done.timestamp)
    assert plan["strategy"]["compactorClassName"] == \
        "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"
    assert plan["preserveHoodieMetadata"] is True
    meta = t.timeline.metadata(done)
    assert meta.operation_type == "LOG_COMPACT"
    assert {st.file_id for st in meta.write_stats} == set(old)
    for s in t.file_slices():
        if s.file_id not in old:
            continue
        assert s.base_file == old[s.file_id].base_file            # the base file stays
        assert len(s.log_files) == len(old[s.file_id].log_files) + 1
        new_log = s.log_files[-1]
        assert new_log not in old[s.file_id].log_files
        if version >= 8:
            assert f"_{done.timestamp}.log.1_" in new_log
        else:
            assert f"_{s.base_instant}.log." in new_log
        blocks = list(read_log_file(t.storage, new_log))
        compacted = {b.header[HeaderKey.COMPACTED_BLOCK_TIMES] for b in blocks}
        originals = sorted({b.instant_time for p in old[s.file_id].log_files for b in read_log_file(t.storage, p)})
        assert compacted == {",".join(originals)} and len(originals) >= 3
        assert all(b.instant_time == done.timestamp for b in blocks)
        data = [b for b in blocks if b.block_type == BlockType.AVRO_DATA]
        keys = [r for b in data for r in b.records().column("_hoodie_record_key").to_pylist()]
        assert len(keys) == len(set(keys)), "one record per key"

    # a full compaction on top still reads the same
    compact(t.storage, t.config)
    assert both(path) == before


@pytest.mark.parametrize("event_time", [True, False])
def test_log_compaction_restates_the_merge_outcome(tmp_path, event_time):
    """Slices our writer cannot produce (another engine's): a delete without ordering value
    followed by a lower-ordering re-insert, a delete with a winning ordering value, stale
    updates. Base + compacted log, base + original logs, and base + both all read the same."""
    from hudi_format.base_file import write_base_file
    from hudi_format.log import encode_avro_data_block, encode_delete_block, write_log_file
    from hudi_format.read.merge import MergeSpec, collect_log_blocks, merge_file_slice
    from hudi_format.schema import arrow_to_avro_schema
    from hudi_format.services.log_compaction import merge_log_blocks
    from hudi_format.storage import Storage
    from hudi_format.view import FileSlice

    storage = Storage(str(tmp_path))
    schema = pa.schema([pa.field(n, pa.string()) for n in ("_hoodie_commit_time", "_hoodie_commit_seqno",
                        "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")]
                       + [pa.field("id", pa.string()), pa.field("ts", pa.int64())])
    avro = arrow_to_avro_schema(schema, "t_record", "hoodie.t")

    def rows(instant, pairs):
        return pa.table({"_hoodie_commit_time": [instant] * len(pairs),
                         "_hoodie_commit_seqno": [f"{instant}_{i}" for i in range(len(pairs))],
                         "_hoodie_record_key": [k for k, _ in pairs], "_hoodie_partition_path": [""] * len(pairs),
                         "_hoodie_file_name": ["fg-0"] * len(pairs), "id": [k for k, _ in pairs],
                         "ts": pa.array([v for _, v in pairs], pa.int64())}, schema=schema)

    def dels(pairs, typ=pa.int32()):
        return pa.table({"record_key": [k for k, _ in pairs], "partition_path": [""] * len(pairs),
                         "ordering_value": pa.array([v for _, v in pairs], typ)})
    base = rows("001", [("k0", 10), ("k1", 10), ("k2", 10), ("k3", 10), ("k4", 10)])
    write_base_file(storage, "fg-0_1-1-1_001.parquet", base, avro, base.column("_hoodie_record_key"))
    blocks = [encode_delete_block(dels([("k0", 0)]), "002"),                  # hard delete
              encode_avro_data_block(rows("003", [("k0", 5), ("k1", 3)]), avro, "003"),
              encode_delete_block(dels([("k2", 12), ("k4", 0)]), "004"),      # k2: real ordering value
              encode_avro_data_block(rows("005", [("k2", 11), ("k3", 1), ("k4", 2)]), avro, "005")]
    originals = tuple(r.path for r in write_log_file(storage, "", "fg-0", "001", blocks, "1-1-1"))
    spec = MergeSpec(("id",), ("ts",), event_time, True)
    merged = merge_log_blocks(collect_log_blocks(storage, originals, lambda _: True), schema, spec)
    header = {HeaderKey.COMPACTED_BLOCK_TIMES: "002,003,004,005"}
    # restated with the ordering-value types they came with: an int32 0 stays Hudi's default
    assert [d.column("ordering_value").type for d in merged.hard_deletes] == [pa.int32()]
    out = [encode_delete_block(d, "006", extra_header=header) for d in merged.hard_deletes]
    out.append(encode_avro_data_block(merged.records, avro, "006", extra_header=header))
    out += [encode_delete_block(d, "006", extra_header=header) for d in merged.deletes]
    compacted = tuple(r.path for r in write_log_file(storage, "", "fg-0", "001", out, "2-1-2"))

    def read(logs):
        fs = FileSlice("", "fg-0", "001", "fg-0_1-1-1_001.parquet", logs)
        t = merge_file_slice(storage, fs, schema, spec, lambda _: True)
        return sorted(zip(t.column("id").to_pylist(), t.column("ts").to_pylist()))
    expect = read(originals)
    if event_time:
        assert expect == [("k0", 5), ("k1", 10), ("k3", 10), ("k4", 2)]
    else:
        assert expect == [("k0", 5), ("k1", 3), ("k2", 11), ("k3", 1), ("k4", 2)]
    assert read(compacted) == expect
    assert read(originals + compacted) == expect
    assert merged.records.num_rows == len(set(merged.records.column("id").to_pylist()))


def test_pending_log_compaction_is_invisible_and_blocks_compaction_of_its_groups(tmp_path):
    path = tmp_path / "t"
    mor_history(path, 8)
    before = both(path)
    t = hudi.open_table(str(path))
    pending = schedule_log_compaction(t.storage, t.config, {"hoodie.log.compaction.blocks.threshold": 2})
    assert pending is not None and pending.action == "logcompaction"
    assert schedule_compaction(t.storage, t.config) is None          # every group is taken
    assert both(path) == before
    done = run_log_compaction(t.storage, t.config)
    assert done.timestamp == pending.timestamp and both(path) == before
