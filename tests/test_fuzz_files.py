"""Damaged files of a real table (issue 11, defect 8): base files, metadata-table HFiles,
timeline files and hoodie.properties. Whatever the damage, opening and reading the table may
only raise a HudiError (naming the file), never a raw Arrow/Unicode/Key error."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hudi_format as hudi
from hudi_format.base_file import read_footer
from hudi_format.errors import HudiError
from hudi_format.hfile.reader import HFileReader
from hudi_format.storage import Storage

pytestmark = pytest.mark.slow

# a few examples per run keep the suite fast; HUDI_FUZZ_EXAMPLES=500 for a deeper soak
FUZZ = settings(max_examples=int(os.environ.get("HUDI_FUZZ_EXAMPLES", "12")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fuzz") / "t")
    opts = {"hoodie.metadata.index.bloom.filter.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true"}
    hudi.write(path, pa.table({"id": ["a", "b", "c"], "ts": [1, 2, 3], "p": ["x", "y", "x"]}),
               record_key="id", ordering_field="ts", partition_by="p", table_type="MERGE_ON_READ", options=opts)
    hudi.write(path, pa.table({"id": ["a", "d"], "ts": [5, 6], "p": ["x", "y"]}), options=opts)
    return path


def _files(root: str, pick) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names if pick(os.path.relpath(os.path.join(d, n), root))]
    return sorted(out)


def _damage(data: bytes, edits, cut) -> bytes:
    buf = bytearray(data)
    for pos, val in edits:
        if buf:
            buf[pos % len(buf)] = val
    return bytes(buf[: cut % (len(buf) + 1)] if cut is not None else buf)


def _use_table(path: str) -> None:
    """Everything a reader does with a table; only HudiError may come out."""
    for options in (None, {"hoodie.metadata.enable": "false"}):
        try:
            t = hudi.open_table(path, options=options)
            t.read()
            list(t.scan(batch_size=2))
            t.file_slices()
            t.read(filters=[("id", "=", "a")])
        except HudiError:
            pass


# the files each kind of damage hits (relative paths in the table)
PICK = {
    "base": lambda r: r.endswith(".parquet") and not r.startswith(".hoodie"),
    "log": lambda r: ".log." in r and not r.startswith(".hoodie"),
    "mdt": lambda r: r.startswith(".hoodie/metadata/") and (".hfile" in r or ".log." in r),
    "timeline": lambda r: r.startswith(".hoodie/timeline/") and r.count("/") == 2 and "." in r.rsplit("/", 1)[-1]
    and not r.endswith(".lock"),
    "properties": lambda r: r == ".hoodie/hoodie.properties",
}


def _damaged_copy(pristine: str, tmp_path, kind: str, which: int, edits, cut) -> str:
    """A copy of the table with one file of ``kind`` damaged."""
    path = str(tmp_path / f"copy{which}")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(pristine, path)
    victims = _files(path, PICK[kind])
    assert victims, kind
    victim = os.path.join(path, victims[which % len(victims)])
    with open(victim, "rb") as f:
        data = f.read()
    with open(victim, "wb") as f:
        f.write(_damage(data, edits, cut))
    return path


EDITS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6)
CUT = st.one_of(st.none(), st.integers(0, 1 << 20))


@pytest.mark.parametrize("kind", list(PICK))
@FUZZ
@given(which=st.integers(0, 1000), edits=EDITS, cut=CUT)
def test_damaged_table_files_only_raise_hudi_errors(pristine, tmp_path, kind, which, edits, cut):
    path = _damaged_copy(pristine, tmp_path, kind, which, edits, cut)
    _use_table(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("kind", list(PICK))
@settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 2))     # a write costs what several reads do
@given(which=st.integers(0, 1000), edits=EDITS, cut=CUT)
def test_writes_and_services_on_damaged_table_files_only_raise_hudi_errors(pristine, tmp_path, kind, which,
                                                                           edits, cut):
    """What a writer does next with a damaged table (an upsert that tags and merges through
    the damaged file, a compaction and a clean) may only fail with a HudiError too."""
    path = _damaged_copy(pristine, tmp_path, kind, which, edits, cut)
    steps = (lambda: hudi.write(path, pa.table({"id": ["a", "b", "e"], "ts": [7, 8, 9], "p": ["x", "x", "y"]})),
             lambda: hudi.open_table(path).compact(),
             lambda: hudi.open_table(path).clean())
    for step in steps:
        try:
            step()
        except HudiError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def test_every_flipped_byte_of_a_metadata_hfile_is_a_hudi_error(pristine, tmp_path):
    """Exhaustive over the bytes of one metadata-table HFile (a flip in the file info's Avro
    schema raised UnicodeDecodeError)."""
    rel = _files(pristine, lambda r: r.startswith(".hoodie/metadata/files/") and r.endswith(".hfile"))[0]
    with open(os.path.join(pristine, rel), "rb") as f:
        data = f.read()
    for pos in range(len(data)):
        for bit in (0x01,) if pos % 2 else (0x80,):
            buf = bytearray(data)
            buf[pos] ^= bit
            try:
                r = HFileReader.from_bytes(bytes(buf), name=rel)
                r.avro_schema
                r.read_all()
                r.meta_block_names
            except HudiError as exc:
                assert rel in str(exc)


@FUZZ
@given(edits=EDITS, cut=CUT)
def test_damaged_base_file_footer_reads_only_raise_hudi_errors(pristine, edits, cut):
    storage = Storage("memory:///fuzz-footer")
    rel = _files(pristine, lambda r: r.endswith(".parquet") and not r.startswith(".hoodie"))[0]
    with open(os.path.join(pristine, rel), "rb") as f:
        storage.write_bytes("x/f.parquet", _damage(f.read(), edits, cut))
    try:
        read_footer(storage, "x/f.parquet")
    except HudiError as exc:
        assert "f.parquet" in str(exc)
