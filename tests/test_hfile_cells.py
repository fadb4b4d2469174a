"""Bulk decoding of HFile data blocks (``hfile.cells``) and the column-wise record-index path.

Truth: the sequential cell parser over HBase-written fixture HFiles (``conformance/fixtures/
units/hfile``) and point lookups (``HFileReader.get``); ``metadata.keys.file_group_index``
(Hudi's ``mapRecordKeyToFileGroupIndex``) for the vectorised file-group hashing.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from conftest import UNITS
from hudi_format.errors import CorruptFileError
from hudi_format.hfile import HFileReader, HFileWriter
from hudi_format.hfile.blocks import decode_block, make_key
from hudi_format.hfile.cells import KEY_SUFFIX, _decode_columnwise, decode_cells, decode_cells_sequential
from hudi_format.metadata import keys as K
from hudi_format.storage import Storage

HFILES = UNITS / "hfile"
NAMES = sorted(p.name for p in HFILES.glob("*.hfile"))


def _payloads(r: HFileReader):
    for _, offset, size in r.data_blocks():
        _, payload = decode_block(r._read(offset, size), 0, r.compression, "t", verify=False)
        yield payload


@pytest.mark.parametrize("name", NAMES)
def test_bulk_decode_equals_cell_by_cell_on_hbase_fixtures(name):
    r = HFileReader(Storage(str(HFILES)), name)
    blocks = 0
    for payload in _payloads(r):
        rows, values = decode_cells_sequential(payload, r._mvcc, r._tags, "t")
        assert _decode_columnwise(payload, r._mvcc) is not None  # HBase's layout takes the fast path
        got_rows, got_values = decode_cells(payload, r._mvcc, r._tags, "t")
        assert got_rows.to_pylist() == rows and got_values.to_pylist() == values
        blocks += 1
    assert blocks or not r.num_entries


def _cell(row: bytes, value: bytes, *, family: bytes = b"", mvcc: bool = True) -> bytes:
    key = make_key(row) if not family else (struct.pack(">H", len(row)) + row + bytes([len(family)])
                                           + family + KEY_SUFFIX)
    return struct.pack(">ii", len(key), len(value)) + key + value + (b"\x00" if mvcc else b"")


@pytest.mark.parametrize("mvcc", [True, False])
def test_marker_inside_values_and_other_layouts_fall_back_exactly(mvcc):
    rng = random.Random(7)
    cells = []
    for i in range(300):
        v = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
        if i % 37 == 0:
            v += KEY_SUFFIX + v  # the key marker inside a value: must not split a cell
        cells.append((b"k%05d" % i, v))
    payload = b"".join(_cell(k, v, mvcc=mvcc) for k, v in cells)
    rows, values = decode_cells(payload, mvcc, False, "t")
    assert rows.to_pylist() == [k for k, _ in cells] and values.to_pylist() == [v for _, v in cells]
    # a family name breaks Hudi's layout: the sequential parser takes over
    odd = b"".join(_cell(k, v, family=b"f" if i == 5 else b"", mvcc=mvcc) for i, (k, v) in enumerate(cells[:20]))
    assert _decode_columnwise(odd, mvcc) is None
    assert decode_cells(odd, mvcc, False, "t")[0].to_pylist() == [k for k, _ in cells[:20]]


def test_search_finds_cells_and_refuses_other_layouts(monkeypatch):
    """A key's cell searched in a block (``find_cell``): found with its value, absent keys
    (including one that is a prefix or an extension of a present row) are ``None``, a framed
    key inside a value without a cell header around it is refused, and a block whose cells
    carry a family name is not searched: the lookup then locates every cell, same answer.
    Many keys per block are matched by their frames (``hfile.framed``), no cell located."""
    from hudi_format.hfile.cells import NOT_HUDI_LAYOUT, find_cell, hudi_layout
    inner = struct.pack(">H", 5) + b"k0003" + b"\x00" + KEY_SUFFIX   # k0003 framed, inside a value
    cells = [(b"k%04d" % i, b"v%d" % i + (inner if i == 2 else b"")) for i in range(0, 40, 2)]
    payload = b"".join(_cell(k, v, mvcc=True) for k, v in cells)
    assert hudi_layout(payload)
    for k, v in cells:
        assert find_cell(payload, k) == v
    assert find_cell(payload, b"k0001") is None and find_cell(payload, b"k000") is None
    assert find_cell(payload, b"k00020") is None
    assert find_cell(payload, b"k0003") is NOT_HUDI_LAYOUT
    odd = b"".join(_cell(k, v, family=b"f") for k, v in cells[:5])
    assert not hudi_layout(odd)
    w_keys = [b"r%04d" % i for i in range(300)]
    import hudi_format.hfile.reader as reader_mod
    called = []
    real = reader_mod.find_cells

    def spy(*a, **k):
        called.append(1)
        return real(*a, **k)
    monkeypatch.setattr(reader_mod, "find_cells", spy)
    r = HFileReader.from_bytes(_hfile_of(w_keys))
    found, values = r.lookup_arrays(pa.array(w_keys[::50], pa.binary()), search=True)
    assert found.to_pylist() == w_keys[::50] and values.to_pylist() == [b"v" + k for k in w_keys[::50]]
    assert not called   # searched: no block's cells located
    found, values = r.lookup_arrays(pa.array(w_keys, pa.binary()), search=True)
    assert found.to_pylist() == w_keys and not called   # many keys per block: matched by frame
    assert values.to_pylist() == [b"v" + k for k in w_keys]
    found, values = r.lookup_arrays(pa.array(w_keys, pa.binary()))
    assert found.to_pylist() == w_keys and called   # not searching: located column-wise
    called.clear()
    import hudi_format.hfile.framed as framed_mod
    monkeypatch.setattr(framed_mod, "hudi_layout", lambda payload: False)
    found, values = r.lookup_arrays(pa.array(w_keys[::50], pa.binary()), search=True)
    assert found.to_pylist() == w_keys[::50] and called   # another layout: every cell located


def _hfile_of(keys):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        w = HFileWriter(Storage(d), "x.hfile", block_size=512, compression="GZ")
        for k in keys:
            w.append(k, b"v" + k)
        w.close()
        with open(f"{d}/x.hfile", "rb") as f:
            return f.read()


def test_damaged_block_is_named():
    payload = _cell(b"a", b"x") + _cell(b"b", b"y")
    with pytest.raises(CorruptFileError, match="block 7"):
        decode_cells(payload[:-3], True, False, "block 7")


@pytest.mark.parametrize("search", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_lookup_arrays_matches_point_lookups(name, search):
    r = HFileReader(Storage(str(HFILES)), name)
    everything = list(r.scan())
    rng = random.Random(3)
    present = [k for k, _ in rng.sample(everything, min(300, len(everything)))]
    probes = sorted(set(present + [b"", b"\x00", b"hudi-key-", b"hudi-key-000000500x", b"\xff" * 4]
                        + [k + b"\x00" for k in present[:20]]))
    found, values = r.lookup_arrays(pa.array(probes, pa.binary()), search=search)
    expect = {k: r.get(k) for k in probes if r.get(k) is not None}
    assert dict(zip(found.to_pylist(), values.to_pylist())) == expect


def test_lookup_arrays_on_written_file_with_many_blocks(tmp_path):
    w = HFileWriter(Storage(str(tmp_path)), "x.hfile", block_size=256, compression="GZ")
    keys = sorted(b"rec-%06d" % i for i in range(0, 20000, 3))
    for k in keys:
        w.append(k, b"v" + k)
    w.close()
    r = HFileReader(Storage(str(tmp_path)), "x.hfile")
    probes = sorted(set(b"rec-%06d" % i for i in range(0, 20000, 7)))
    found, values = r.lookup_arrays(pa.array(probes, pa.binary()))
    assert found.to_pylist() == [k for k in probes if k in set(keys)]
    assert values.to_pylist() == [b"v" + k for k in found.to_pylist()]


@pytest.mark.parametrize("search", [False, True])
@pytest.mark.parametrize("levels", [1, 3])
@pytest.mark.parametrize("few", [1, 5, 40, 5000])
def test_lookup_arrays_with_fewer_keys_than_blocks(tmp_path, few, levels, search):
    """A point lookup (fewer keys than blocks) picks blocks key by key, and descends a
    multi-level index through the leaves it needs: keys equal to an index entry (real or
    shortened first keys), between blocks, before the first and after the last key, and
    repeated rows, all answer as :meth:`HFileReader.get`."""
    w = HFileWriter(Storage(str(tmp_path)), "x.hfile", block_size=128, compression="GZ",
                    index_block_max_size=128 * 1024 if levels == 1 else 256)
    keys = sorted(b"rec-%05d" % i for i in range(0, 9000, 3))
    for k in keys:
        for j in range(3 if k.endswith(b"0") else 1):  # runs of equal rows
            w.append(k, b"v%d" % j + k)
    w.close()
    r = HFileReader(Storage(str(tmp_path)), "x.hfile")
    assert r.trailer.num_data_index_levels == levels
    starts = [row for row, _, _ in r.data_blocks()]
    assert len(starts) > 200 and any(s not in set(keys) for s in starts)  # shortened index keys
    rng = random.Random(few)
    pool = starts + keys + [k + b"\x00" for k in keys] + [b"", b"rec-", b"rec-99999", b"\xff"]
    for _ in range(20 if few < 1000 else 2):
        probes = sorted(set(rng.sample(pool, few)))
        found, values = r.lookup_arrays(pa.array(probes, pa.binary()), search=search)
        expect = {k: r.get(k) for k in probes if r.get(k) is not None}
        assert dict(zip(found.to_pylist(), values.to_pylist())) == expect
        assert found.to_pylist() == sorted(expect)


@pytest.mark.parametrize("search", [False, True])
@pytest.mark.parametrize("index_block_max_size", [128 * 1024, 64])
def test_lookup_arrays_with_runs_cut_across_blocks(tmp_path, index_block_max_size, search):
    """Other writers may cut a block inside a run of equal rows: the next block's index key is
    then that row, and the run's first entry (the one returned) sits in the block before (in
    a multi-level index, maybe under the leaf before)."""
    w = HFileWriter(Storage(str(tmp_path)), "x.hfile", block_size=1 << 20, compression="GZ",
                    index_block_max_size=index_block_max_size, index_min_entries=2)
    keys = [b"k%04d" % i for i in range(0, 400, 2)]
    for k in keys:
        w.append(k, b"first-" + k)
        if k.endswith(b"0"):  # cut here, as HBase does not but other writers may
            w._finish_block()
            w._write_leaves(False)
        w.append(k, b"second-" + k)
    w.close()
    r = HFileReader(Storage(str(tmp_path)), "x.hfile")
    starts = [row for row, _, _ in r.data_blocks()]
    assert len(starts) == 41 and starts[1] == b"k0000"
    assert (r.trailer.num_data_index_levels > 2) == (index_block_max_size < 1024)  # intermediate levels
    for probes in ([b"k0000"], [b"k0010", b"k0011"], [b"k0020", b"k0380"], keys[:30]):
        found, values = r.lookup_arrays(pa.array(probes, pa.binary()), search=search)
        assert dict(zip(found.to_pylist(), values.to_pylist())) == {k: b"first-" + k for k in probes if k in keys}


def test_file_group_indexes_equal_hudis_mapping():
    rng = random.Random(11)
    keys = ([f"trip-{rng.randrange(10**9)}" for _ in range(3000)]
            + ["", "polygenelubricants",  # String.hashCode() == Integer.MIN_VALUE
               "é", "a\U0001F600b", "x" * 200, None]
            + ["".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(0, 12)))
               for _ in range(300)])
    assert K.java_string_hash("polygenelubricants") == -(1 << 31)
    for n in (1, 2, 7, 10, 64, 1000):
        got = K.file_group_indexes(pa.array(keys, pa.string()), n).to_pylist()
        assert got == [None if k is None else K.file_group_index(k, n) for k in keys]
    with pytest.raises(ValueError):
        K.file_group_indexes(pa.array(["a"]), 0)


def _random_block(rng: random.Random, n: int, lengths: list[int], fakes: bool) -> list[tuple[bytes, bytes]]:
    rows = sorted({b"r%0*d" % (rng.choice([3, 5, 9]), rng.randrange(10 ** 9)) for _ in range(n)})
    out = []
    for row in rows:
        v = bytes(rng.randrange(256) for _ in range(rng.choice(lengths)))
        if fakes and rng.random() < 0.05:  # the key marker (and a whole fake key) inside a value
            v = v[:3] + make_key(rows[0]) + v[3:]
        out.append((row, v))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_cell_spans_equal_the_sequential_parser_on_random_blocks(seed):
    """Random rows and values (few or many distinct value lengths, empty values, markers and
    fake keys inside values): the column-wise path either declines or agrees exactly with the
    cell-by-cell parser, and ``find_cells`` returns exactly the wanted cells."""
    from hudi_format.hfile.cells import cell_spans, find_cells
    rng = random.Random(seed)
    mvcc = seed % 2 == 0
    lengths = [rng.randrange(0, 60) for _ in range(rng.choice([1, 2, 5, 40]))]
    fakes = seed % 3 == 0
    cells = _random_block(rng, rng.randrange(1, 400), lengths, fakes)
    payload = b"".join(_cell(k, v, mvcc=mvcc) for k, v in cells)
    rows, values = decode_cells_sequential(payload, mvcc, False, "t")
    spans = cell_spans(payload, mvcc)
    assert spans is not None or fakes  # Hudi's layout without markers in values: the fast path
    if spans is not None:
        assert spans.rows().to_pylist() == rows and spans.values().to_pylist() == values
    wanted = sorted({k for k, _ in rng.sample(cells, min(len(cells), 7))} | {b"r0", b"zz"})
    cut = len(cells) // 2  # two blocks, decoded joined (or one by one when that declines)
    blocks = [b"".join(_cell(k, v, mvcc=mvcc) for k, v in part) for part in (cells[:cut], cells[cut:]) if part]
    found, got = find_cells(blocks, mvcc, False, ["a", "b"][:len(blocks)], pa.array(wanted, pa.binary()))
    expect = [(k, v) for k, v in cells if k in set(wanted)]
    assert list(zip(found.to_pylist(), got.to_pylist())) == expect


@pytest.mark.parametrize("mvcc", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_framed_lookup_equals_the_first_cell_of_each_row(mvcc, seed):
    """``hfile.framed.lookup`` on blocks of Hudi's layout: keys of many lengths (lengths with
    many keys matched by frame, the others searched), runs of equal rows (the first cell is
    returned first), values holding the key marker (a spurious split) or the frame of a key
    not looked up, absent keys and keys between blocks -- the answer is the first cell of each
    row, as the sequential parser reads the blocks; a value holding the frame of a key looked
    up, which no Hudi value does, is refused (``None``) or still answered right."""
    from hudi_format.hfile import framed
    rng = random.Random(seed)
    rows = sorted({b"key-" + str(rng.randrange(10 ** rng.randrange(1, 7))).encode() for _ in range(3000)})
    cells = []
    for row in rows:
        for j in range(2 if rng.random() < 0.05 else 1):
            v = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 30))) + b"#%d" % j
            if rng.random() < 0.03:
                v += KEY_SUFFIX + v   # the marker inside a value
            if rng.random() < 0.02:   # the frame of a key nobody looks up, then the marker
                v += struct.pack(">H", 9) + b"absent-xx" + b"\x00" + KEY_SUFFIX
            cells.append((row, v))
    payloads, block, starts = [], [], []
    for row, v in cells:   # blocks of ~40 cells, never cut inside a run (as Hudi writes)
        if len(block) >= 40 and block[-1][0] != row:
            payloads.append(b"".join(_cell(r, x, mvcc=mvcc) for r, x in block))
            starts.append(block[0][0])
            block = []
        block.append((row, v))
    payloads.append(b"".join(_cell(r, x, mvcc=mvcc) for r, x in block))
    starts.append(block[0][0])
    first = {}
    for p in payloads:
        for r, x in zip(*decode_cells_sequential(p, mvcc, False, "t")):
            first.setdefault(r, x)
    for n in (len(payloads), 300, 2000):
        probes = sorted(set(rng.sample(rows, min(n, len(rows)))) | {b"key-", b"key-99999999", b"absent-x"})
        got = framed.lookup(pa.array(probes, pa.binary()), probes, payloads, starts)
        assert got is not None
        found, values = got
        seen = {}
        for r, x in zip(found.to_pylist(), values.to_pylist()):
            seen.setdefault(r, x)
        assert seen == {k: first[k] for k in probes if k in first}
        assert sorted(found.to_pylist()) == found.to_pylist()
    # a value framing a key looked up (impossible in Hudi's files): refused, or right
    target = rows[len(rows) // 2]
    fake = struct.pack(">H", len(target)) + target + b"\x00" + KEY_SUFFIX
    bad = [p + _cell(b"\xff" * 3, b"pad" + fake, mvcc=mvcc) for p in payloads[:1]] + payloads[1:]
    got = framed.lookup(pa.array(rows, pa.binary()), rows, bad, starts)
    if got is not None:
        assert dict(zip(*(a.to_pylist() for a in got))).get(target) == first[target]
