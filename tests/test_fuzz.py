"""Fuzzing the parsers that face bytes from storage: log blocks, timeline file names and
payloads, hoodie.properties. Damaged input may only ever raise a HudiError, never crash."""

from __future__ import annotations


import fsspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import UNITS
from hudi_format.config import TableConfig, parse_properties
from hudi_format.errors import HudiError
from hudi_format.log import BlockType, read_log_file
from hudi_format.storage import Storage
from hudi_format.timeline import decode_commit_metadata
from hudi_format.timeline.instant import parse_file_name

LOGS = sorted(p for p in (UNITS / "log_files").rglob("*") if p.is_file() and ".log." in p.name)
SEEDS = [p.read_bytes() for p in LOGS]
COMMITS = [p.read_bytes() for p in (UNITS / "commit_metadata").iterdir()]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    return bytes(buf[: cut % (len(buf) + 1)] if cut is not None else buf)


def _read_all(data: bytes) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/fuzz/.f-0_20250101000000000.log.1_0-0-0", data)
    storage = Storage("memory:///fuzz")
    for block in read_log_file(storage, ".f-0_20250101000000000.log.1_0-0-0"):
        try:
            if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA):
                block.records()
            elif block.block_type == BlockType.DELETE:
                block.deleted_keys()
        except HudiError:
            pass


@FUZZ
@given(seed=st.sampled_from(range(len(SEEDS))),
       edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8),
       cut=st.one_of(st.none(), st.integers(0, 1 << 20)))
def test_log_reader_survives_damage(seed, edits, cut):
    try:
        _read_all(_mutate(SEEDS[seed], edits, cut))
    except HudiError:
        pass


@FUZZ
@given(st.binary(max_size=400))
def test_log_reader_survives_garbage(data):
    try:
        _read_all(b"#HUDI#" + data)
    except HudiError:
        pass


@FUZZ
@given(name=st.text(alphabet="0123456789._abcdefghijklmnopqrstuvwxyz", max_size=60),
       version=st.sampled_from([6, 8]))
def test_instant_file_names(name, version):
    try:
        inst = parse_file_name(name, version)
    except HudiError:
        return
    assert inst.timestamp and inst.action


@FUZZ
@given(seed=st.sampled_from(range(len(COMMITS))),
       edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6),
       cut=st.one_of(st.none(), st.integers(0, 1 << 16)))
def test_commit_metadata_decoding(seed, edits, cut):
    try:
        decode_commit_metadata(_mutate(COMMITS[seed], edits, cut), "fuzz")
    except HudiError:
        pass


@FUZZ
@given(st.text(max_size=300))
def test_properties(text):
    try:
        TableConfig(parse_properties(text)).validate()
    except HudiError:
        pass
