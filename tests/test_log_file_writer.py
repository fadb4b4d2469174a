"""write_log_file and block splitting: size limits, version rollover, no overwrite, every cut of a file readable."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from hudi_format.errors import InvalidOptionError, LogFormatError, StorageError
from hudi_format.log import (BlockType, encode_avro_data_block, encode_data_blocks, encode_delete_block,
                             encode_parquet_data_block, encode_rollback_block, next_log_version,
                             read_log_file, write_log_file)
from hudi_format.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hudi_format.storage import Storage
from hudi_format.view.file_names import LogFileName, parse_log_file_name
from test_log_writer import RICH_AVRO, TOKEN, _decode, _rich_rows


# -- splitting into blocks and files -------------------------------------------------------------
def _many_rows(n: int) -> pa.Table:
    return pa.table({"key": pa.array([f"key-{i:05d}" for i in range(n)]),
                     "payload": pa.array(["x" * (i % 50) for i in range(n)])})


MANY_AVRO = arrow_to_avro_schema(pa.schema([pa.field("key", pa.string(), nullable=False),
                                            pa.field("payload", pa.string())]), "m_record", "hoodie.m")


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_large_tables_split_into_blocks_within_the_limit(fmt, tmp_path):
    table = _many_rows(3000)
    limit = 16 << 10
    blocks = encode_data_blocks(table, MANY_AVRO, "20250101000000000", block_format=fmt,
                                max_block_size=limit)
    assert len(blocks) > 3
    decoded = _decode(b"".join(blocks), tmp_path)
    assert len(decoded) == len(blocks)
    assert all(b.content_length <= limit for b in decoded)
    assert pa.concat_tables([b.records() for b in decoded]).equals(
        pa.Table.from_arrays(table.columns, schema=avro_to_arrow_schema(MANY_AVRO)))
    (single,) = encode_data_blocks(table, MANY_AVRO, "20250101000000000", block_format=fmt)
    assert _decode(single, tmp_path)[0].records().num_rows == 3000
    assert encode_data_blocks(table.slice(0, 0), MANY_AVRO, "1", block_format=fmt) == []
    if fmt == "avro":  # exact record sizes: each block is as full as the limit allows
        sizes = [b.content_length for b in decoded]
        assert all(s > limit - 4 - 4 - 60 for s in sizes[:-1])


def test_a_record_larger_than_the_block_limit_gets_its_own_block(tmp_path):
    table = pa.table({"key": ["a", "b", "c"], "payload": ["small", "y" * 5000, "small"]})
    blocks = encode_data_blocks(table, MANY_AVRO, "1", max_block_size=1000)
    assert [b.records().column("key").to_pylist() for b in _decode(b"".join(blocks), tmp_path)] == \
        [["a"], ["b"], ["c"]]


def test_rollover_starts_consecutive_versions(tmp_path):
    storage = Storage(str(tmp_path))
    rows = _many_rows(20).set_column(1, "payload", pa.array(["same size"] * 20))
    blocks = [encode_avro_data_block(rows.slice(i * 5, 5), MANY_AVRO, "20250101000000001")
              for i in range(4)]
    blocks.append(encode_rollback_block("20250101000000002", "20250101000000001"))
    sizes = [len(b) for b in blocks]
    assert len(set(sizes[:4])) == 1 and sizes[4] < sizes[0]
    limit = 2 * sizes[0] + sizes[4] - 1  # two data blocks fit; neither a third nor the rollback
    results = write_log_file(storage, "2024/01/01", "fg-1", "20250101000000000", blocks, TOKEN,
                             max_file_size=limit)
    assert [r.version for r in results] == [1, 2, 3]
    assert [r.num_blocks for r in results] == [2, 2, 1]
    assert [r.size for r in results] == [sizes[0] + sizes[1], sizes[2] + sizes[3], sizes[4]]
    names = sorted(os.listdir(tmp_path / "2024/01/01"))
    assert names == [LogFileName("fg-1", "20250101000000000", v, TOKEN).name for v in (1, 2, 3)]
    back = [b for r in results for b in read_log_file(storage, r.path)]
    assert [bytes(tmp_path.joinpath(r.path).read_bytes()) for r in results] == \
        [b"".join(blocks[0:2]), b"".join(blocks[2:4]), blocks[4]]
    assert [b.block_type for b in back] == [BlockType.AVRO_DATA] * 4 + [BlockType.COMMAND]
    assert pa.concat_tables([b.records() for b in back[:4]]).column("key").to_pylist() == \
        [f"key-{i:05d}" for i in range(20)]
    # the next write continues the version sequence; other file ids and instants do not count
    write_log_file(storage, "2024/01/01", "fg-2", "20250101000000000", blocks[:1], TOKEN)
    write_log_file(storage, "2024/01/01", "fg-1", "20250101000000009", blocks[:1], TOKEN)
    assert next_log_version(storage, "2024/01/01", "fg-1", "20250101000000000") == 4
    (more,) = write_log_file(storage, "2024/01/01", "fg-1", "20250101000000000", blocks[:1], "0-9-9")
    assert more.version == 4 and more.path.endswith(".log.4_0-9-9")
    # a block bigger than the limit still goes, alone
    big = write_log_file(storage, "2024/01/01", "fg-3", "20250101000000000", blocks[:3], TOKEN,
                         max_file_size=1)
    assert [(r.version, r.num_blocks) for r in big] == [(1, 1), (2, 1), (3, 1)]


def test_existing_files_are_never_overwritten(tmp_path):
    storage = Storage(str(tmp_path))
    block = encode_rollback_block("2", "1")
    (first,) = write_log_file(storage, "", "fg", "1", [block], TOKEN, version=1)
    assert first.path == ".fg_1.log.1_1-2-3"
    with pytest.raises(InvalidOptionError, match="already exists"):
        write_log_file(storage, "", "fg", "1", [encode_rollback_block("3", "1")], TOKEN, version=1)
    assert (tmp_path / first.path).read_bytes() == block
    assert write_log_file(storage, "", "fg", "1", [], TOKEN) == []
    assert next_log_version(storage, "", "fg", "1") == 2


def test_memory_filesystem_and_argument_checks():
    storage = Storage("memory://log-writer-test/table")
    (res,) = write_log_file(storage, "a", "fg", "20250101000000000",
                            [encode_rollback_block("2", "1")], TOKEN)
    assert [b.block_type for b in read_log_file(storage, res.path)] == [BlockType.COMMAND]
    block = encode_rollback_block("2", "1")
    with pytest.raises(LogFormatError):
        write_log_file(storage, "a", "fg", "1", [block[:-1]], TOKEN)
    with pytest.raises(LogFormatError):
        write_log_file(storage, "a", "fg", "1", [block + b"x"], TOKEN)
    for kwargs in ({"write_token": "1-2"}, {"instant_time": "abc"}, {"version": 0},
                   {"max_file_size": 0}, {"file_id": "a/b"}):
        args = {"storage": storage, "partition_path": "a", "file_id": "fg",
                "instant_time": "20250101000000000", "blocks": [block], "write_token": TOKEN}
        with pytest.raises(InvalidOptionError):
            write_log_file(**{**args, **kwargs})


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    storage = Storage(str(tmp_path))
    real_open = storage.fs.open

    class Failing:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += 1
            if self.n == 2:
                raise OSError("disk full")
            return self.f.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(storage.fs, "open", lambda *a, **k: Failing(real_open(*a, **k)))
    blocks = [encode_rollback_block("2", "1"), encode_rollback_block("3", "1")]
    with pytest.raises(StorageError, match="disk full"):
        write_log_file(storage, "p", "fg", "1", blocks, TOKEN)
    assert not any(parse_log_file_name(f) for f in os.listdir(tmp_path / "p"))


# -- crash safety: every cut of a written file -----------------------------------------------------
def test_every_cut_reads_as_the_complete_blocks_before_it(tmp_path):
    storage = Storage("memory://log-writer-cuts")
    keys = pa.table({"record_key": ["a", "b"], "partition_path": ["p", "p"],
                     "ordering_value": pa.array([1, 2], pa.int64())})
    blocks = [encode_avro_data_block(_rich_rows(), RICH_AVRO, "20250101000000001"),
              encode_delete_block(keys, "20250101000000002", avro_schema=RICH_AVRO),
              encode_rollback_block("20250101000000003", "20250101000000002"),
              encode_parquet_data_block(_rich_rows().slice(0, 1), RICH_AVRO, "20250101000000004")]
    (res,) = write_log_file(storage, "p", "fg", "20250101000000000", blocks, TOKEN)
    data = storage.read_bytes(res.path)
    ends, pos = [], 0
    for b in blocks:
        pos += len(b)
        ends.append(pos)
    full = list(read_log_file(storage, res.path))
    assert [(b.offset, b.length) for b in full] == [(e - len(b), len(b)) for e, b in zip(ends, blocks)]
    cut_storage = Storage("memory://log-writer-cuts/cut")
    for cut in range(len(data) + 1):
        cut_storage.write_bytes("f.log", data[:cut])
        got = list(read_log_file(cut_storage, "f.log"))
        complete = sum(1 for e in ends if e <= cut)
        valid = [b for b in got if not b.is_corrupted]
        corrupt = [b for b in got if b.is_corrupted]
        assert [(b.offset, b.length, b.block_type, b.header) for b in valid] == \
            [(b.offset, b.length, b.block_type, b.header) for b in full[:complete]], cut
        assert len(corrupt) == (0 if cut in ends or cut == 0 else 1), cut
        if corrupt:
            assert corrupt[0].offset == (ends[complete - 1] if complete else 0)
            assert corrupt[0].offset + corrupt[0].length == cut
    # the complete file's content is intact
    assert full[0].records().equals(_rich_rows())
    assert full[1].deleted_keys().column("ordering_value").to_pylist() == [1, 2]
    assert full[3].records().equals(_rich_rows().slice(0, 1))


def test_a_stale_version_listing_moves_on_to_a_free_version(tmp_path, monkeypatch):
    """Another writer took the version we listed as free: ours goes to the next, theirs stays."""
    from hudi_format.log import writer

    storage = Storage(str(tmp_path))
    theirs = encode_rollback_block("2", "1")
    write_log_file(storage, "p", "fg", "1", [theirs], TOKEN)
    monkeypatch.setattr(writer, "next_log_version", lambda *a: 1)
    (ours,) = write_log_file(storage, "p", "fg", "1", [encode_rollback_block("3", "1")], TOKEN)
    assert ours.version == 2
    assert (tmp_path / "p" / ".fg_1.log.1_1-2-3").read_bytes() == theirs


@pytest.fixture(scope="module")
def s3_storage(moto_s3):
    yield Storage("s3://log-writer/table", moto_s3("log-writer"))


def test_s3_files_are_created_exclusively(s3_storage, monkeypatch):
    """s3fs checks "xb" when the upload commits: an existing object must survive untouched."""
    from hudi_format.log import writer

    storage = s3_storage
    theirs = encode_rollback_block("2", "1")
    (first,) = write_log_file(storage, "p", "fg", "1", [theirs], TOKEN)
    with pytest.raises(InvalidOptionError, match="already exists"):
        write_log_file(storage, "p", "fg", "1", [encode_rollback_block("3", "1")], TOKEN, version=1)
    storage.fs.invalidate_cache()
    assert storage.read_bytes(first.path) == theirs
    monkeypatch.setattr(writer, "next_log_version", lambda *a: 1)
    blocks = [encode_avro_data_block(_rich_rows(), RICH_AVRO, "3"), encode_rollback_block("4", "3")]
    (ours,) = write_log_file(storage, "p", "fg", "1", blocks, TOKEN)
    assert ours.version == 2
    storage.fs.invalidate_cache()
    assert storage.read_bytes(first.path) == theirs
    back = list(read_log_file(storage, ours.path))
    assert [b.block_type for b in back] == [BlockType.AVRO_DATA, BlockType.COMMAND]
    assert back[0].records().equals(_rich_rows())
