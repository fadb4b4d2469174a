"""A damaged metadata table is never trusted partway (issue 11, defect 7).

A metadata slice is the fold of its base HFile and every log block: skip one corrupt block and
the listing (or an index entry) silently goes back to an older state. So whenever the metadata
table cannot be read whole (a corrupt or truncated block, an HFile that does not decode, a
missing file), readers must list storage and skip metadata-based pruning and indexes, and
``validate`` must report it. Each damaged table is checked against the same table read without
the metadata table, by our reader and by hudi-rs (which reads a copy declaring none).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

import hudi_format as hudi
from hudi_format.cli.validate import validate_table as validate
from hudi_format.log import BlockType, read_log_file
from hudi_format.storage import Storage

N = 40
KW = dict(record_key="id", ordering_field="ts", partition_by="p")


def _rows(ids, c):
    return pa.table({"id": ids, "p": [f"p{int(x.split('_')[-1]) % 4}" for x in ids],
                     "ts": [c] * len(ids), "v": [c * 100 + int(x.split('_')[-1]) for x in ids]})


def _build(path: Path, table_type: str, commits: int = 5, options: dict | None = None) -> None:
    kw = dict(KW, table_type=table_type, options=options or {})
    hudi.write(str(path), _rows([f"k_{i}" for i in range(N)], 0), operation="insert", **kw)
    for c in range(1, commits + 1):
        ids = [f"k_{i}" for i in range(N) if i % commits == c - 1] + [f"n{c}_{N + c * 10 + i}" for i in range(3)]
        hudi.write(str(path), _rows(ids, c), **kw)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache: dict[tuple, Path] = {}

    def get(table_type: str, commits: int = 5, **options) -> Path:
        key = (table_type, commits, tuple(sorted(options.items())))
        if key not in cache:
            cache[key] = tmp_path_factory.mktemp("mdt") / "t"
            _build(cache[key], table_type, commits, options)
        return cache[key]

    return get


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(src, dest)
    return dest


def _plain(table: pa.Table) -> list[dict]:
    return table.select(["id", "v"]).sort_by("id").to_pylist()


def _expected(path: Path) -> list[dict]:
    return _plain(hudi.open_table(str(path), options={"hoodie.metadata.enable": "false"}).read())


def _hudi_rs_without_metadata(path: Path) -> list[dict]:
    """hudi-rs lists through the metadata table whenever ``files`` is declared: read a copy
    that declares none."""
    copy = Path(str(path) + "-listing")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("metadata"))
    props = copy / ".hoodie" / "hoodie.properties"
    props.write_text("".join(line for line in props.read_text().splitlines(True)
                             if not line.startswith("hoodie.table.metadata.partitions")))
    t = HudiTableBuilder.from_base_uri(str(copy)).with_hudi_option("hoodie.metadata.enable", "false").build()
    return _plain(pa.Table.from_batches(t.read()))


def _log_files(path: Path, partition: str) -> list[str]:
    return sorted(glob.glob(str(path / ".hoodie" / "metadata" / partition / ".*log*")))


def _data_block(path: Path, partition: str, which: int = -1):
    """(log file, a data block of it) of the metadata partition's ``which``-th log file."""
    lf = _log_files(path, partition)[which]
    st = Storage(os.path.dirname(lf))
    blocks = [b for b in read_log_file(st, os.path.basename(lf)) if b.block_type == BlockType.HFILE_DATA]
    assert blocks, lf
    return lf, blocks[-1]


def _damage(path: Path, how: str, partition: str = "files") -> str:
    """Damage the metadata partition; returns the file damaged."""
    lf, b = _data_block(path, partition)
    buf = bytearray(Path(lf).read_bytes())
    if how == "frame":        # the trailing length no longer matches: a corrupt block
        buf[b.offset + b.length - 3] ^= 0xFF
    elif how == "truncate":   # a torn append
        buf = buf[:b.offset + b.length // 2]
    elif how == "hfile":      # a well-framed block whose HFile data block magic is flipped
        for i in range(b.content_offset, b.content_offset + 8):
            buf[i] ^= 0x5A
    elif how == "missing":    # the file vanished between listing and reading
        real_size = Storage(os.path.dirname(lf)).size

        def gone(self, rel, _name=os.path.basename(lf)):
            if rel.endswith(_name):
                from hudi_format.errors import StorageError
                raise StorageError(f"file not found: {self.uri(rel)}")
            return real_size.__func__(self, rel)
        Storage.size = gone
        return lf
    else:
        raise AssertionError(how)
    Path(lf).write_bytes(bytes(buf))
    return lf


@pytest.fixture
def restore_storage():
    real = Storage.size
    yield
    Storage.size = real


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("how", ["frame", "truncate", "hfile", "missing"])
def test_damaged_files_partition_falls_back_to_storage(built, tmp_path, caplog, restore_storage,
                                                       table_type, how):
    path = _copy(built(table_type), tmp_path)
    want = _expected(path)
    assert len(want) == N + 15
    damaged = _damage(path, how)
    with caplog.at_level(logging.WARNING):
        table = hudi.open_table(str(path))
        assert _plain(table.read()) == want
        assert _plain(table.lookup([r["id"] for r in want])) == want
        assert _plain(table.read(filters=[("v", ">=", 100)])) == [r for r in want if r["v"] >= 100]
    assert any(os.path.basename(damaged) in r.getMessage() for r in caplog.records
               if r.levelno >= logging.WARNING), "the warning names the damaged file"
    if how != "missing":
        assert _hudi_rs_without_metadata(path) == want
        report = validate(str(path))
        errors = [p for p in report if p.severity == "error" and p.check == "metadata-table"]
        assert errors and os.path.basename(damaged) in errors[0].message


@pytest.mark.parametrize("partition", ["record_index", "column_stats"])
def test_damaged_index_partition_skips_the_index(built, tmp_path, partition):
    path = _copy(built("MERGE_ON_READ", **{"hoodie.metadata.record.index.enable": "true",
                                            "hoodie.metadata.index.column.stats.enable": "true",
                                            "hoodie.index.type": "RECORD_INDEX"}), tmp_path)
    want = _expected(path)
    _damage(path, "frame", partition)
    table = hudi.open_table(str(path))
    keys = [r["id"] for r in want]
    assert _plain(table.lookup(keys)) == want
    assert _plain(table.lookup(keys[::7])) == want[::7]
    assert _plain(table.read(filters=[("v", ">=", 300)])) == [r for r in want if r["v"] >= 300]
    assert _plain(table.read()) == want
    assert any(p.severity == "error" and p.check == "metadata-table" for p in validate(str(path)))


def test_damaged_compacted_base_hfile_falls_back(built, tmp_path):
    path = _copy(built("COPY_ON_WRITE", commits=12), tmp_path)
    bases = glob.glob(str(path / ".hoodie" / "metadata" / "files" / "*.hfile"))
    assert bases, "the metadata table compacted its files partition"
    want = _expected(path)
    base = max(bases, key=os.path.getmtime)
    Path(base).write_bytes(Path(base).read_bytes()[:-30])  # truncated: the trailer is cut
    table = hudi.open_table(str(path))
    assert _plain(table.read()) == want
    errors = [p for p in validate(str(path)) if p.severity == "error" and p.check == "metadata-table"]
    assert errors and os.path.basename(base) in errors[0].message


def test_validate_passes_an_intact_metadata_table(built):
    path = built("COPY_ON_WRITE")
    assert not [p for p in validate(str(path)) if p.severity == "error"]
