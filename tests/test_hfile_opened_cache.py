"""The process-wide cache of opened HFiles (``hfile/reader.py``): a committed HFile opened with
its listed size is parsed once per process (trailer, root and meta indexes, file info), the
readers that come after answer the same, and a file rewritten under its name (by this process,
or with another size) is never answered from what was parsed of the old one."""

from __future__ import annotations

import pytest

import hudi_format as hudi
from hudi_format.hfile import HFileReader, HFileWriter
from hudi_format.hfile import index as hfile_index
from hudi_format.hfile import reader as hfile_reader
from hudi_format.storage import Storage


def _write(st: Storage, rel: str, n: int, value: bytes = b"v") -> int:
    with HFileWriter(st, rel, block_size=256, compression="NONE") as w:
        w.extend([(f"key{i:06d}".encode(), value + str(i).encode()) for i in range(n)])
        w.add_file_info("schema", '{"type":"string"}')
    return st.size(rel)


@pytest.fixture
def parses(monkeypatch):
    """Root index parses of data indexes, counted; the cache emptied before and after."""
    count = []
    real = hfile_index.parse_root_index

    def counted(payload, n, where, *, key_only=False):
        if not key_only:
            count.append(where)
        return real(payload, n, where, key_only=key_only)

    monkeypatch.setattr(hfile_reader, "parse_root_index", counted)
    hfile_reader._OPENED.clear()
    yield count
    hfile_reader._OPENED.clear()


def test_opened_once_per_process_and_answers_the_same(tmp_path, parses):
    st = Storage(str(tmp_path))
    size = _write(st, "a.hfile", 3000)
    first = HFileReader(st, "a.hfile", size=size, immutable=True)
    second = HFileReader(st, "a.hfile", size=size, immutable=True)
    assert len(parses) == 1
    assert second.num_entries == first.num_entries == 3000
    assert second.first_key == b"key000000" and second.last_key == b"key002999"
    assert second.get("key001234") == b"v1234" and list(second.items()) == list(first.items())
    assert second.file_info == first.file_info and second.avro_schema == '{"type":"string"}'
    HFileReader(st, "a.hfile", size=size)          # not vouched immutable: parsed again
    HFileReader(st, "a.hfile", immutable=True)     # no listed size: parsed again
    assert len(parses) == 3


def test_a_file_rewritten_under_its_name_is_opened_afresh(tmp_path, parses):
    st = Storage(str(tmp_path))
    size = _write(st, "a.hfile", 3000)
    assert HFileReader(st, "a.hfile", size=size, immutable=True).get("key000007") == b"v7"
    # by this process, with the very same size: its own change drops what was parsed
    assert _write(st, "a.hfile", 3000, value=b"w") == size
    again = HFileReader(st, "a.hfile", size=size, immutable=True)
    assert again.get("key000007") == b"w7" and len(parses) == 2
    # by another process (no notice here): another size is another file
    other = Storage(str(tmp_path))
    (tmp_path / "a.hfile").write_bytes(_bytes_of([(b"key000007", b"other")]))
    changed = HFileReader(other, "a.hfile", size=(tmp_path / "a.hfile").stat().st_size, immutable=True)
    assert changed.num_entries == 1 and changed.get("key000007") == b"other"


def _bytes_of(entries):
    w = HFileWriter(None)
    w.extend(entries)
    return w.close()


def test_the_cache_is_bounded_by_root_entries(tmp_path, parses, monkeypatch):
    st = Storage(str(tmp_path))
    sizes = [_write(st, f"{i}.hfile", 3000) for i in range(4)]
    one = len(HFileReader(st, "0.hfile")._root)
    parses.clear()
    monkeypatch.setattr(hfile_reader, "OPENED_MAX_ENTRIES", 2 * one)
    for i, size in enumerate(sizes):
        HFileReader(st, f"{i}.hfile", size=size, immutable=True)
    assert len(hfile_reader._OPENED) == 2                     # the two latest
    HFileReader(st, "3.hfile", size=sizes[3], immutable=True)
    HFileReader(st, "0.hfile", size=sizes[0], immutable=True)
    assert len(parses) == 5                                   # 3 was kept, 0 was not
    monkeypatch.setattr(hfile_reader, "OPENED_MAX_ENTRIES", one - 1)
    HFileReader(st, "1.hfile", size=sizes[1], immutable=True)
    assert not hfile_reader._OPENED                           # one file over the bound: none kept


def test_lookups_through_tables_opened_afresh_reuse_the_index_files(tmp_path, parses):
    """What the cache is for: every new table's lookup (or upsert) through the record index
    opens the index's base HFiles; after the first, none is parsed again, and the answers
    follow the table as it changes (a compaction of the metadata table writes new files)."""
    import pyarrow as pa
    path = str(tmp_path / "t")
    opts = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX",
            "hoodie.metadata.compact.max.delta.commits": "2"}
    checked = 0
    for v in range(6):
        hudi.write(path, pa.table({"id": [f"k{i}" for i in range(50)], "v": [v] * 50, "ts": [v] * 50}),
                   operation="upsert", record_key="id", ordering_field="ts", options=opts)
        parses.clear()
        for _ in range(3):
            got = hudi.open_table(path).lookup(["k3", "k40", "nope"], columns=["id", "v"])
            assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [{"id": "k3", "v": v}, {"id": "k40", "v": v}]
        opened = [w for w in parses if w.endswith(".hfile")]
        assert len(opened) == len(set(opened))         # each base HFile parsed once at most
        in_logs = [w for w in parses if "HFILE_DATA block" in w]
        assert len(in_logs) == len(set(in_logs))       # and each log block's HFile
        checked += bool(list((tmp_path / "t" / ".hoodie" / "metadata" / "record_index").glob("*.hfile")))
    assert checked >= 2                                # lookups with base HFiles, two compactions


def test_a_log_block_hfile_is_read_in_ranges_within_its_content(tmp_path):
    """A log block's HFile is read in ranges of its content; a range outside it is a clear
    error naming the block, not bytes of the next block."""
    import pyarrow as pa

    from hudi_format.errors import HudiError
    from hudi_format.log.block import BlockType
    from hudi_format.log.reader import read_log_file
    path = str(tmp_path / "t")
    opts = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"}
    hudi.write(path, pa.table({"id": ["a", "b"], "ts": [1, 1]}), operation="upsert", record_key="id",
               ordering_field="ts", options=opts)
    md = Storage(str(tmp_path / "t" / ".hoodie" / "metadata"))
    blocks = [b for f in md.walk_files("record_index") if ".log." in f.path
              for b in read_log_file(md, f.path) if b.block_type == BlockType.HFILE_DATA]
    assert blocks
    b = blocks[0]
    assert b.read_content(0, b.content_length) == b.content()
    assert b.read_content(3, 5) == b.content()[3:8]
    with pytest.raises(HudiError, match="outside"):
        b.read_content(b.content_length - 2, 4)
