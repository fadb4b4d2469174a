"""Log file reader against log files written by Apache Hudi (units and fixture tables).

Truth comes from Hudi: the unit logs' datagen.sql, the fixture tables' base files and their
expected query results. Corruption tests cut and damage Hudi-written logs and check the reader
returns exactly the intact blocks, marks the damage as CORRUPTED and only ever raises HudiError.
"""

from __future__ import annotations

import json
import os
import random
import uuid
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from canonical import _canon
from conftest import FIXTURE_TABLES, TABLES, UNITS, expected
from hudi_format.errors import HudiError, LogFormatError, SchemaError, StorageError
from hudi_format.log import BlockType, CommandType, HeaderKey, LogBlock, read_log_file
from hudi_format.log import reader as reader_mod
from hudi_format.schema import avro_to_arrow_schema
from hudi_format.storage import Storage

LOGS = UNITS / "log_files"


def _unit(name: str) -> tuple[Storage, str]:
    (path,) = [p for p in (LOGS / name).iterdir() if ".log." in p.name]
    return Storage(str(LOGS / name)), path.name


def _blocks(name: str) -> list[LogBlock]:
    storage, rel = _unit(name)
    return list(read_log_file(storage, rel))


def _only_block(name: str) -> LogBlock:
    blocks = _blocks(name)
    assert len(blocks) == 1
    return blocks[0]


# -- unit log files --------------------------------------------------------------------------
def test_avro_data_block():
    storage, rel = _unit("valid_log_avro_data")
    block = _only_block("valid_log_avro_data")
    assert block.block_type == BlockType.AVRO_DATA and block.block_type == 3
    assert block.version == 1
    assert block.offset == 0 and block.length == (LOGS / "valid_log_avro_data" / rel).stat().st_size
    assert block.instant_time == "20250316025828811"
    assert block.header[HeaderKey.INSTANT_TIME] == "20250316025828811"
    assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    assert block.footer == {} and block.command_type is None and block.target_instant_time is None
    assert json.loads(block.schema_json)["name"] == "trips_quickstart_mor_avro_record"

    table = block.records()
    assert table.schema == avro_to_arrow_schema(block.schema_json)
    assert table.column_names == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                  "_hoodie_partition_path", "_hoodie_file_name",
                                  "ts", "uuid", "rider", "driver", "fare", "city"]
    rows = table.to_pylist()
    assert len(rows) == 1
    row = rows[0]
    # The record Hudi wrote: an update of rider-A (quickstart data) in this file group.
    assert row["_hoodie_record_key"] == row["uuid"] == "334e26e9-8355-45cc-97c6-c31daf0df330"
    assert row["_hoodie_commit_time"] == block.instant_time
    assert row["_hoodie_commit_seqno"].startswith(block.instant_time + "_")
    assert row["_hoodie_file_name"] == rel[1:].split("_")[0]  # file id of the log's file group
    assert (row["rider"], row["driver"], row["city"]) == ("rider-A", "driver-K", "san_francisco")
    assert row["fare"] == 29.1 and row["ts"] == 1695159649088


def test_parquet_data_block():
    _, rel = _unit("valid_log_parquet_data")
    block = _only_block("valid_log_parquet_data")
    assert block.block_type == BlockType.PARQUET_DATA and block.version == 1
    assert block.instant_time == "20250113230424191"
    assert json.loads(block.schema_json)["name"] == "trips_quickstart_mor_parquet_record"
    assert block.content()[:4] == b"PAR1" and block.content()[-4:] == b"PAR1"
    table = block.records()
    assert table.schema == avro_to_arrow_schema(block.schema_json)
    (row,) = table.to_pylist()
    assert row["_hoodie_record_key"] == "334e26e9-8355-45cc-97c6-c31daf0df330"
    assert row["_hoodie_commit_time"] == block.instant_time
    assert row["_hoodie_file_name"] == rel[1:].split("_")[0]
    assert (row["rider"], row["fare"], row["ts"]) == ("rider-A", 29.1, 1695159649088)


def test_delete_block():
    block = _only_block("valid_log_delete")
    assert block.block_type == BlockType.DELETE and block.version == 1
    assert block.instant_time == "20250618054714114"  # datagen.sql
    assert block.schema_json is not None
    keys = block.deleted_keys()
    assert keys.schema.names == ["record_key", "partition_path", "ordering_value"]
    assert keys.schema.field("record_key").type == pa.string()
    assert keys.schema.field("partition_path").type == pa.string()
    # DELETE FROM v6_trips_8i3d WHERE rider in ('rider-A', 'rider-C', 'rider-D')
    assert sorted(keys.column("record_key").to_pylist()) == sorted([
        "334e26e9-8355-45cc-97c6-c31daf0df330", "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00"])
    assert set(keys.column("partition_path").to_pylist()) == {"city=san_francisco"}
    # Spark SQL deletes carry Hudi's default ordering value, an IntWrapper(0)
    assert keys.schema.field("ordering_value").type == pa.int32()
    assert keys.column("ordering_value").to_pylist() == [0, 0, 0]
    with pytest.raises(LogFormatError):
        block.records()


def test_rollback_command_block():
    block = _only_block("valid_log_rollback")
    assert block.block_type == BlockType.COMMAND and block.block_type == 0
    assert block.command_type == CommandType.ROLLBACK_BLOCK
    assert block.instant_time == "20250126040936578"          # datagen.sql
    assert block.target_instant_time == "20250126040826878"   # datagen.sql
    assert block.header[HeaderKey.COMMAND_BLOCK_TYPE] == "0"
    assert block.content_length == 0 and block.content() == b""
    assert block.length == 105
    with pytest.raises(LogFormatError):
        block.records()
    with pytest.raises(LogFormatError):
        block.deleted_keys()


def test_records_aligned_to_a_target_schema():
    block = _only_block("valid_log_avro_data")
    target = pa.schema([("fare", pa.float64()), ("ts", pa.int64()), ("extra", pa.string()),
                        ("_hoodie_record_key", pa.large_string())])
    table = block.records(arrow_schema=target)
    assert table.schema == target
    assert table.to_pylist() == [{"fare": 29.1, "ts": 1695159649088, "extra": None,
                                  "_hoodie_record_key": "334e26e9-8355-45cc-97c6-c31daf0df330"}]
    with pytest.raises(SchemaError, match="rider"):
        block.records(arrow_schema=pa.schema([("rider", pa.int32())]))
    with pytest.raises(SchemaError, match="missing"):
        block.records(arrow_schema=pa.schema([pa.field("nope", pa.int32(), nullable=False)]))


def test_missing_file_is_a_storage_error(tmp_path):
    with pytest.raises(StorageError):
        list(read_log_file(Storage(str(tmp_path)), ".nope.log.1_0-1-1"))


# -- every log file in the fixture tables -------------------------------------------------------
def _tables_with_logs() -> list[str]:
    out = []
    for name in FIXTURE_TABLES:
        with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
            if any(".log." in m and "__MACOSX" not in m for m in zf.namelist()):
                out.append(name)
    return out


def _log_files(root: Path):
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.startswith(".") and ".log." in f:
                yield Path(dirpath) / f


def _expected_rows_by_key(exp: dict) -> dict[str, list[dict]]:
    fields = exp["record_key_fields"]
    fields = fields.split(",") if isinstance(fields, str) else list(fields)
    rows: dict[str, list[dict]] = {}
    groups = [exp.get("snapshot") or [], exp.get("read_optimized") or []]
    groups += [w["rows"] for w in exp.get("incremental") or []]
    groups += list((exp.get("time_travel") or {}).values())
    for group in groups:
        for r in group:
            rows.setdefault(",".join(str(r[f]) for f in fields), []).append(r)
    return rows


def _data_columns(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if not f.name.startswith("_hoodie_")])


@pytest.mark.parametrize("name", _tables_with_logs())
def test_fixture_table_logs(name, fixture_tables):
    root = fixture_tables(name)
    storage = Storage(str(root))
    exp = expected(name)
    key_fields = exp["record_key_fields"]
    key_fields = key_fields.split(",") if isinstance(key_fields, str) else list(key_fields)
    by_key = _expected_rows_by_key(exp)
    seen = {BlockType.AVRO_DATA: 0, BlockType.PARQUET_DATA: 0, BlockType.DELETE: 0}
    for path in _log_files(root):
        rel = path.relative_to(root).as_posix()
        blocks = list(read_log_file(storage, rel))
        assert blocks, rel
        for block in blocks:
            assert block.block_type != BlockType.CORRUPTED, (rel, block.reason)
            assert block.version == 1 and block.instant_time, rel
            assert block.offset + block.length <= path.stat().st_size
        assert blocks[-1].offset + blocks[-1].length == path.stat().st_size
        if rel.startswith(".hoodie/"):  # metadata table: HFile data blocks and deletes
            for block in blocks:
                if block.block_type == BlockType.HFILE_DATA:  # decoded in test_hfile_log_blocks
                    records = block.records()
                    assert records.num_rows and "key" in records.column_names
                    assert records.column("key").null_count == 0
                elif block.block_type == BlockType.DELETE:
                    keys = block.deleted_keys()  # often empty: metadata-table bookkeeping
                    assert keys.schema.names == ["record_key", "partition_path", "ordering_value"]
                    assert keys.column("record_key").null_count == 0
            continue
        bases = sorted(path.parent.glob("*.parquet"))
        base_schema = pq.read_schema(bases[0])
        for block in blocks:
            kind = block.block_type
            assert kind in seen, (rel, kind)
            seen[kind] += 1
            if kind == BlockType.DELETE:
                _check_deleted_keys(block, exp, by_key)
                continue
            expected_kind = BlockType.AVRO_DATA if "__avro__" in name else BlockType.PARQUET_DATA
            assert kind == expected_kind
            # the log side decodes to exactly the types pyarrow reads from the base files
            table = block.records()
            assert table.schema.equals(base_schema.remove_metadata()), rel
            aligned = block.records(arrow_schema=base_schema)
            assert aligned.schema.equals(base_schema, check_metadata=True)
            assert aligned.num_rows == table.num_rows > 0
            # every value equals the row Hudi's own reader returned for that record version
            for row in table.to_pylist():
                got = {k: _canon(v) for k, v in row.items()}
                key = ",".join(str(got[f]) for f in key_fields)
                if got.get("_hoodie_commit_time") is not None:
                    assert got["_hoodie_commit_time"] == block.instant_time
                candidates = by_key.get(key, [])
                assert any(all(got.get(c) == v for c, v in e.items()) for e in candidates), \
                    (rel, key, got, candidates[-1:] if candidates else None)
    data_logs = [p for p in _log_files(root) if not p.relative_to(root).as_posix().startswith(".hoodie/")]
    assert sum(seen.values()) >= len(data_logs)  # one block at least per data log file


def _check_deleted_keys(block: LogBlock, exp: dict, by_key: dict) -> None:
    keys = block.deleted_keys()
    assert keys.num_rows > 0
    time_travel = exp.get("time_travel") or {}
    key_field = exp["record_key_fields"]
    for rec in keys.to_pylist():
        # a key Hudi once wrote, in the partition it was written to ...
        versions = by_key[rec["record_key"]]
        parts = {r.get("_hoodie_partition_path") for r in versions} - {None}
        if parts:
            assert rec["partition_path"] in parts
        # ... and gone from the table as of the delete's instant
        if block.instant_time in time_travel:
            alive = {str(r[key_field]) for r in time_travel[block.instant_time]}
            assert rec["record_key"] not in alive


def test_fixture_delete_keys_match_datagen(fixture_tables):
    root = fixture_tables("quickstart_trips_table__mor__avro__v6_trips_8i3d")
    (path,) = [p for p in _log_files(root) if not p.relative_to(root).as_posix().startswith(".hoodie")]
    (block,) = read_log_file(Storage(str(root)), path.relative_to(root).as_posix())
    assert block.instant_time == "20250618054714114"
    assert sorted(block.deleted_keys().column("record_key").to_pylist()) == sorted([
        "334e26e9-8355-45cc-97c6-c31daf0df330", "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00"])


# -- corruption --------------------------------------------------------------------------------
class _MemLog:
    """Writes byte strings into an fsspec memory filesystem and reads them back as logs."""

    def __init__(self):
        self.storage = Storage(f"memory://log-tests-{uuid.uuid4().hex}")
        self.rel = "p/.f1-0_20250101000000000.log.1_0-1-1"

    def read(self, data: bytes) -> list[LogBlock]:
        self.storage.write_bytes(self.rel, data)
        return list(read_log_file(self.storage, self.rel))


def _multi_block_log() -> tuple[bytes, list[LogBlock]]:
    """Hudi-written blocks appended into one file (as appends to a log produce)."""
    parts = []
    for name in ("valid_log_avro_data", "valid_log_delete", "valid_log_rollback",
                 "valid_log_parquet_data", "valid_log_rollback"):
        storage, rel = _unit(name)
        parts.append(storage.read_bytes(rel))
    data = b"".join(parts)
    blocks = _MemLog().read(data)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND,
                                              BlockType.PARQUET_DATA, BlockType.COMMAND]
    offsets = [0]
    for p in parts:
        offsets.append(offsets[-1] + len(p))
    assert [b.offset for b in blocks] == offsets[:-1]
    return data, blocks


def _shape(blocks: list[LogBlock]) -> list[tuple]:
    return [(b.offset, b.length, b.block_type, tuple(sorted(b.header.items()))) for b in blocks]


def _expect_truncated(intact: list[LogBlock], t: int) -> list[tuple]:
    out = [s for s, b in zip(_shape(intact), intact) if b.offset + b.length <= t]
    for b in intact:
        if b.offset < t < b.offset + b.length:
            out.append((b.offset, t - b.offset, BlockType.CORRUPTED, ()))
    return out


def test_truncation_at_every_byte():
    data, intact = _multi_block_log()
    mem = _MemLog()
    for t in range(len(data) + 1):
        got = mem.read(data[:t])
        assert _shape(got) == _expect_truncated(intact, t), t
        for b in got:
            if b.block_type == BlockType.CORRUPTED:
                assert b.reason and b.version == -1 and b.content() == data[b.offset:t]


def _field_offsets(block: LogBlock) -> dict[str, int]:
    """Where each length/count field of ``block`` sits in the file."""
    o = block.offset
    end = o + block.length
    return {"size": o + 6, "version": o + 14, "type": o + 18, "header_count": o + 22,
            "first_entry_len": o + 30, "content_length": block.content_offset - 8,
            "footer_count": block.content_offset + block.content_length, "total": end - 8}


_DAMAGE = {
    "size": [(7, 0x01), (0, 0x7F), (0, 0x80), (5, 0x10)],
    "version": [(3, 0x03)],
    "type": [(3, 0x02 ^ 0x03), (3, 0x60)],
    "header_count": [(3, 0x01), (0, 0x7F)],
    "first_entry_len": [(3, 0x01), (0, 0x40), (2, 0x10)],
    "content_length": [(7, 0x01), (0, 0x7F), (6, 0x04)],
    "footer_count": [(3, 0x01), (0, 0x80)],
    "total": [(7, 0x01), (0, 0x7F), (7, 0x06)],
}


def test_damaged_length_fields_cost_exactly_one_block():
    data, intact = _multi_block_log()
    mem = _MemLog()
    for k, victim in enumerate(intact):
        for field, at in _field_offsets(victim).items():
            for byte, mask in _DAMAGE[field]:
                if field == "type" and victim.block_type != BlockType.AVRO_DATA:
                    continue  # turning one valid type into another is undetectable by design
                damaged = bytearray(data)
                damaged[at + byte] ^= mask
                got = mem.read(bytes(damaged))
                want = _shape(intact)
                want[k] = (victim.offset, victim.length, BlockType.CORRUPTED, ())
                assert _shape(got) == want, (k, field, byte, mask)
                assert got[k].reason


def test_damaged_content_only_raises_hudi_errors():
    data, intact = _multi_block_log()
    mem = _MemLog()
    rng = random.Random(7)
    for victim in intact:
        if victim.content_length == 0:
            continue
        start, n = victim.content_offset, victim.content_length
        positions = range(start, start + n) if n < 400 else sorted(rng.sample(range(start, start + n), 250))
        for pos in positions:
            damaged = bytearray(data)
            damaged[pos] ^= 1 << rng.randrange(8)
            got = mem.read(bytes(damaged))
            assert _shape(got) == _shape(intact)  # framing is intact, only content differs
            block = got[intact.index(victim)]
            try:
                if block.block_type == BlockType.DELETE:
                    block.deleted_keys()
                else:
                    block.records()
            except HudiError:
                pass


def test_random_damage_never_raises_anything_but_hudi_errors():
    data, intact = _multi_block_log()
    mem = _MemLog()
    rng = random.Random(11)
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            damaged[rng.randrange(6, len(damaged))] = rng.randrange(256)
        cut = rng.choice([len(damaged), rng.randrange(len(damaged))])
        try:
            for block in mem.read(bytes(damaged[:cut])):
                if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                    block.records()
                elif block.block_type == BlockType.DELETE:
                    block.deleted_keys()
        except HudiError:
            pass


def test_not_a_log_file():
    mem = _MemLog()
    garbage = bytes(random.Random(3).randrange(256) for _ in range(5000)).replace(b"#", b"x")
    with pytest.raises(LogFormatError, match=r"\.f1-0_20250101000000000\.log\.1_0-1-1"):
        mem.read(garbage)
    with pytest.raises(LogFormatError, match="not a Hudi log file"):
        mem.read(b"PAR1" + b"\0" * 100)
    assert mem.read(b"") == []


def test_damage_at_the_very_start():
    data, intact = _multi_block_log()
    mem = _MemLog()
    # only a magic and garbage: one corrupt region, the whole file
    (block,) = mem.read(b"#HUDI#" + b"\x00\x01" * 40)
    assert block.block_type == BlockType.CORRUPTED and (block.offset, block.length) == (0, 86)
    # a first block torn mid-way, then intact blocks: recover at the next magic
    second = intact[1].offset
    torn = data[:100] + data[second:]
    got = mem.read(torn)
    assert got[0].block_type == BlockType.CORRUPTED and (got[0].offset, got[0].length) == (0, 100)
    assert [(b.offset - second + 100, b.block_type) for b in intact[1:]] == \
        [(b.offset, b.block_type) for b in got[1:]]


# -- bounded memory: ranged reads for large files -------------------------------------------
class _CountingStorage(Storage):
    def __init__(self, url):
        super().__init__(url)
        self.reads: list[int] = []

    def read_bytes(self, rel):  # noqa: D102
        raise AssertionError("a large log file must not be read whole")

    def read_range(self, rel, start, length):  # noqa: D102
        self.reads.append(length)
        return super().read_range(rel, start, length)


def test_large_files_use_ranged_reads(monkeypatch):
    data, intact = _multi_block_log()
    monkeypatch.setattr(reader_mod, "_WHOLE_FILE_LIMIT", 0)
    monkeypatch.setattr(reader_mod, "_WINDOW", 64)
    monkeypatch.setattr(reader_mod, "_SCAN_CHUNK", 40)
    mem = _MemLog()
    mem.storage.write_bytes(mem.rel, data)
    storage = _CountingStorage(mem.storage.url)
    blocks = list(read_log_file(storage, mem.rel))
    assert _shape(blocks) == _shape(intact)
    longest_header_value = max(len(v.encode()) for b in intact for v in b.header.values())
    assert max(storage.reads) <= max(64, longest_header_value)
    parquet = blocks[3]
    assert parquet.content_length > longest_header_value  # its content was not fetched ...
    assert parquet.records().equals(intact[3].records())  # ... until asked for
    assert blocks[0].records().equals(intact[0].records())
    assert blocks[1].deleted_keys().equals(intact[1].deleted_keys())
    # truncations and damage behave the same in ranged mode (chunked magic scans included)
    for t in range(0, len(data) + 1, 7):
        storage.write_bytes(mem.rel, data[:t])
        assert _shape(list(read_log_file(storage, mem.rel))) == _expect_truncated(intact, t), t
    damaged = bytearray(data)
    damaged[_field_offsets(intact[1])["total"] + 7] ^= 1
    storage.write_bytes(mem.rel, bytes(damaged))
    got = list(read_log_file(storage, mem.rel))
    assert [b.block_type for b in got] == [BlockType.AVRO_DATA, BlockType.CORRUPTED, BlockType.COMMAND,
                                           BlockType.PARQUET_DATA, BlockType.COMMAND]


def test_file_above_the_whole_file_limit():
    storage, rel = _unit("valid_log_avro_data")
    one = storage.read_bytes(rel)
    copies = reader_mod._WHOLE_FILE_LIMIT // len(one) + 2
    mem = _MemLog()
    mem.storage.write_bytes(mem.rel, one * copies)
    counting = _CountingStorage(mem.storage.url)
    n = 0
    for n, block in enumerate(read_log_file(counting, mem.rel), 1):
        assert block.block_type == BlockType.AVRO_DATA
    assert n == copies
    assert max(counting.reads) <= reader_mod._WINDOW
    assert block.records().column("rider").to_pylist() == ["rider-A"]
