"""HFile cells appended column-wise (``HFileWriter.append_sorted``, Arrow arrays): the record
index's commits append ~10^5 cells at once. The bytes must be HBase's, and those of the cells
appended one by one."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hudi_format.errors import InvalidOptionError
from hudi_format.hfile import HFileWriter
from test_hfile import ALL_FIXTURES, HFILES, _block_size, open_fixture


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_cells_appended_column_wise_reproduce_hbase_files_byte_for_byte(name):
    """``append_sorted`` (Arrow arrays of keys and values) lays out and cuts the blocks as HBase."""
    r = open_fixture(name)
    items = list(r.items())
    extra = dict(index_block_max_size=2048, index_min_entries=4) if "deep_index" in name else {}
    w = HFileWriter(None, block_size=_block_size(name), compression=r.compression, checksum="CRC32C",
                    comparator=r.trailer.comparator_class_name,
                    create_time=int.from_bytes(r.file_info[b"hfile.CREATE_TIME_TS"], "big"), **extra)
    half = len(items) // 2   # two batches: the second goes on with the first one's open block
    for part in (items[:half], items[half:]):
        w.append_sorted(pa.array([k for k, _ in part], pa.binary()), pa.array([v for _, v in part], pa.binary()))
    for k, v in r.file_info.items():
        if not k.startswith(b"hfile.") and k not in (b"KEY_VALUE_VERSION", b"MAX_MEMSTORE_TS_KEY"):
            w.add_file_info(k, v)
    for n in r.meta_block_names:
        w.add_meta_block(n, r.meta_block(n))
    assert w.close() == (HFILES / name).read_bytes()


@pytest.mark.parametrize("seed", range(4))
def test_cells_appended_column_wise_equal_cells_appended_one_by_one(seed):
    """Random keys (repeated ones included: a block never ends inside their run), values, block
    sizes down to one byte, and batches mixed with single appends: the same bytes."""
    rng = random.Random(seed)
    for _ in range(40):
        n = rng.randrange(0, 300)
        keys = sorted(b"k%04d" % rng.randrange(600) if rng.random() < 0.7 else
                      bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20))) for _ in range(n))
        values = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in keys]
        opts = dict(block_size=rng.choice([1, 64, 700, 16384]), compression=rng.choice(["GZ", "NONE"]),
                    index_block_max_size=rng.choice([64, 131072]), index_min_entries=rng.choice([1, 16]))
        one, batched = HFileWriter(None, **opts), HFileWriter(None, **opts)
        for k, v in zip(keys, values):
            one.append(k, v)
        cut = rng.randrange(0, n + 1)
        batched.append_sorted(pa.array(keys[:cut], pa.binary()), pa.array(values[:cut], pa.binary()))
        for k, v in zip(keys[cut:cut + 2], values[cut:cut + 2]):
            batched.append(k, v)
        batched.append_sorted(pa.array(keys[cut + 2:], pa.binary()), pa.array(values[cut + 2:], pa.binary()))
        assert one.close() == batched.close()


def test_cells_appended_column_wise_must_be_sorted():
    w = HFileWriter(None)
    with pytest.raises(InvalidOptionError, match="sorted"):
        w.append_sorted(pa.array([b"b", b"a"]), pa.array([b"1", b"2"]))
    w = HFileWriter(None)
    w.append(b"m", b"1")
    with pytest.raises(InvalidOptionError, match="sorted"):
        w.append_sorted(pa.array([b"a"]), pa.array([b"2"]))
