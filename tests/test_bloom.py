"""Bloom filters against the filters Apache Hudi wrote into the fixture tables' base files.

Truth: every ``org.apache.hudi.bloomfilter`` footer string in the fixtures. Our filters must
load them, agree on every key the file holds, and rebuild the very same string from those keys
with Hudi's default parameters. Behaviour no fixture exercises (non-ASCII keys, which hit the
sign-extended tail of Hudi's MurmurHash; dynamic filters that grow past one row and wrap around)
is pinned by values computed with a Java port of Hudi's ``MurmurHash``/``HashFunction``/
``InternalDynamicBloomFilter`` code run on a JVM (Java int and byte semantics are the point).
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import FIXTURE_TABLES
from hudi_format.bloom import (DYNAMIC_V0, SIMPLE, BloomFilter, DynamicBloomFilter,
                               SimpleBloomFilter, bit_size, hash_positions, hash_positions_all,
                               murmur_hash, new_bloom_filter, num_hashes)
from hudi_format.bloom.murmur import as_binary, iter_positions
from hudi_format.config import parse_properties
from hudi_format.errors import CorruptFileError, InvalidOptionError, UnsupportedFeatureError

BLOOM_KEY = b"org.apache.hudi.bloomfilter"
TYPE_KEY = b"hoodie_bloom_filter_type_code"


def base_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if ".hoodie" not in p.relative_to(root).parts)


def derived_keys(table: pa.Table, props: dict) -> list[str]:
    """Record keys as Hudi's key generators format them (simple: the value; complex:
    ``field:value`` pairs joined by commas)."""
    fields = [f for f in props["hoodie.table.recordkey.fields"].split(",") if f]
    cols = [table.column(f).to_pylist() for f in fields]
    if len(fields) == 1:
        return [str(v) for v in cols[0]]
    return [",".join(f"{f}:{c[i]}" for f, c in zip(fields, cols)) for i in range(table.num_rows)]


def random_keys(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "abcXYZ019-_:,/ é€ñÿ\u00ff\u07ff\uffff𝄞\U0010ffff"
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 70))) for _ in range(n)]


_RND = random.Random(0)
OTHERS = pa.array([str(uuid.UUID(int=_RND.getrandbits(128))) for _ in range(10_000)])   # not in any file


# -- every Hudi-written filter ----------------------------------------------------------------
@pytest.mark.parametrize("name", FIXTURE_TABLES)
def test_fixture_filters(fixture_tables, name):
    root = fixture_tables(name)
    (props_path,) = root.glob(".hoodie/hoodie.properties")
    props = parse_properties(props_path.read_text())
    meta_fields = props.get("hoodie.populate.meta.fields", "true") == "true"
    files = base_files(root)
    with_bloom = 0
    for path in files:
        kv = pq.read_metadata(path).metadata or {}
        if not meta_fields:  # Hudi writes no bloom filter without meta fields
            assert BLOOM_KEY not in kv, path
            continue
        text, code = kv[BLOOM_KEY].decode(), kv[TYPE_KEY].decode()
        with_bloom += 1
        table = pq.read_table(path)
        keys = table.column("_hoodie_record_key").combine_chunks()
        # the key generator's format reproduces Hudi's stored keys (complex: "f1:v1,f2:v2")
        assert derived_keys(table, props) == keys.to_pylist(), path

        bf = BloomFilter.deserialize(text, code)
        assert bf.type_code == code == DYNAMIC_V0
        assert bf.serialize() == text
        assert isinstance(bf, DynamicBloomFilter) and bf.current_nb_record == table.num_rows
        assert all(bf.might_contain(k) for k in keys.to_pylist())
        if len(keys):
            assert pc.all(bf.might_contain_all(keys)).as_py()
        assert sum(bf.might_contain(k) for k in OTHERS.to_pylist()[:100]) == 0
        assert bf.might_contain_all(OTHERS).true_count <= 5     # fpp 1e-9: expect none

        rebuilt = new_bloom_filter()           # Hudi's defaults: 60000, 1e-9, DYNAMIC_V0, 100000
        rebuilt.add_all(keys)
        assert rebuilt.serialize() == text, path
        one_by_one = new_bloom_filter()
        for k in keys.to_pylist():
            one_by_one.add(k)
        assert one_by_one.serialize() == text, path
    if meta_fields and files:
        assert with_bloom == len(files)


def test_default_sizing_matches_hudi_headers(fixture_tables):
    # Every fixture header says: version -1, 30 murmur hashes, 2587966 bits, nr 60000.
    path = base_files(fixture_tables("sample_table__cow__v6_nonpartitioned"))[0]
    raw = base64.b64decode(pq.read_metadata(path).metadata[BLOOM_KEY])
    assert struct.unpack(">iibii", raw[:17]) == (-1, 30, 1, 2587966, 60000)
    assert bit_size(60000, 0.000000001) == 2587966
    assert num_hashes(2587966, 60000) == 30


def test_empty_default_filter_matches_a_zero_row_hudi_file(fixture_tables):
    root = fixture_tables("sample_table__cow__v9_timebasedkeygen_epochmillis")
    empty = [p for p in base_files(root) if pq.read_metadata(p).num_rows == 0]
    assert empty
    text = pq.read_metadata(empty[0]).metadata[BLOOM_KEY].decode()
    assert new_bloom_filter().serialize() == text


# -- hashing ----------------------------------------------------------------------------------
# (key, murmur(seed 0), murmur(seed -1), murmur(seed 123456789)) from Java, Hudi's MurmurHash code
JAVA_MURMUR = [
    ("a", -1838653602, 713507990, 846967266),
    ("ab", 1525573013, -1797532438, 773214199),
    ("abc", 1775488903, -1465591341, 923286241),
    ("abcd", 646393889, 1555318719, -342526052),
    ("é", -384040333, -1125067414, 776216079),
    ("ñañ", 1142994768, 187976543, 1221068016),
    ("€x", -540445419, -2036870400, -1006988376),
    ("\U0001d11e", 1779983370, -1353472689, 1269657914),
    ("key-ÿ", 105652624, -31128302, -2007147297),
    ("uuid-1234-5678-äöü", -844040827, 9360188, -1134492908),
]


@pytest.mark.parametrize("key,h0,hm1,h123", JAVA_MURMUR)
def test_murmur_matches_java(key, h0, hm1, h123):
    data = key.encode()
    assert (murmur_hash(data, 0), murmur_hash(data, -1), murmur_hash(data, 123456789)) == (h0, hm1, h123)


def test_vectorised_hashing_matches_scalar():
    keys = random_keys(6000, seed=1) + [str(uuid.uuid4()) for _ in range(2000)] + ["x" * 4, "y" * 400]
    arr = pa.array(keys)
    for nb_hash, size in ((30, 2587966), (7, 1000), (3, 2**31 - 1)):
        cols = hash_positions_all(arr, nb_hash, size)
        assert len(cols) == nb_hash and all(len(c) == len(keys) for c in cols)
        rows = [list(r) for r in zip(*(c.to_pylist() for c in cols))]
        assert rows == [hash_positions(k.encode(), nb_hash, size) for k in keys]
    # chunked, sliced and large_string inputs hash the same
    cols = hash_positions_all(pa.chunked_array([arr.slice(0, 10), arr.slice(10, 20)]), 4, 999)
    assert [c.to_pylist() for c in cols] == [c.slice(0, 30).to_pylist() for c in hash_positions_all(arr, 4, 999)]
    big = hash_positions_all(arr.slice(5, 50).cast(pa.large_string()), 4, 999)
    assert [c.to_pylist() for c in big] == [c.slice(5, 50).to_pylist() for c in hash_positions_all(arr, 4, 999)]
    # keys of mixed lengths in blocks smaller than a length's run (a run spans several blocks),
    # sliced and large: each block's keys are the ones its index selects
    want = [hash_positions(k.encode(), 5, 999) for k in keys]
    for part, first in ((arr, 0), (arr.slice(3, 700), 3), (arr.slice(3, 700).cast(pa.large_string()), 3)):
        got: dict[int, list[int]] = {}
        for which, pos in iter_positions(as_binary(part), 5, 999, block=7):
            ids = np.arange(len(part))[which]
            assert 0 < len(ids) <= 7
            got.update((int(i), pos[:, j].tolist()) for j, i in enumerate(ids))
        assert [got[i] for i in range(len(part))] == want[first:first + len(part)]
    # keys of one byte length hash straight from the data buffer (sliced: at its offset)
    same = pa.array([f"k{i:06d}é" for i in range(3000)])
    for part in (same, same.slice(7, 2000), same.slice(7, 2000).cast(pa.large_string())):
        cols = hash_positions_all(part, 30, 2587966)
        rows = [list(r) for r in zip(*(c.to_pylist() for c in cols))]
        assert rows == [hash_positions(k.encode(), 30, 2587966) for k in part.to_pylist()]


def test_might_contain_all_agrees_with_scalar():
    bf = new_bloom_filter(200, 0.05, DYNAMIC_V0, 600)   # small: plenty of false positives
    members = random_keys(900, seed=2)
    bf.add_all(members)
    probe = members[::3] + random_keys(3000, seed=3)
    vec = bf.might_contain_all(pa.array(probe)).to_pylist()
    assert vec == [bf.might_contain(k) for k in probe]
    assert all(vec[:300])
    assert 0 < sum(vec[300:]) < 3000      # some false positives, not all


# -- dynamic growth and serialization ---------------------------------------------------------
# sha256 of the Base64 string a Java port of Hudi's filters produced for these inputs
JAVA_DYNAMIC_700 = "f4d96851b514fe3c27f9b245a15eb98cb86f6c946114358a9b3ea0ea78de4568"
JAVA_SIMPLE_300 = "fcd4715621263ecb5d7beaa31a21810c11774b5abe2d0344a8879df244b0aaa4"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("mode", ["scalar", "vector", "pieces"])
def test_dynamic_filter_grows_then_wraps_like_hudi(mode):
    keys = [f"key-{i}" for i in range(700)]
    bf = new_bloom_filter(100, 0.01, "DYNAMIC_V0", 250)
    if mode == "scalar":
        for k in keys:
            bf.add(k)
    elif mode == "vector":
        bf.add_all(pa.array(keys))
    else:
        for start in range(0, 700, 97):
            bf.add_all(keys[start:start + 97])
    # rows open every 100 keys until 3 * 100 >= 250, then keys cycle over the 3 rows
    assert bf.num_rows == 3
    raw = base64.b64decode(bf.serialize())
    assert struct.unpack(">iii", raw[13:25]) == (100, 500, 3)   # nr, records since last row, rows
    assert _sha(bf.serialize()) == JAVA_DYNAMIC_700
    assert all(bf.might_contain(k) for k in keys)


def test_dynamic_row_count_over_the_default_bound():
    bf = new_bloom_filter()
    bf.add_all(pa.array([f"k{i}" for i in range(60_001)]))
    assert bf.num_rows == 2          # 60000 per row, a second row under max_entries=100000
    bf.add_all(pa.array([f"j{i}" for i in range(70_000)]))
    assert bf.num_rows == 2          # 2 * 60000 >= 100000: no third row, keys wrap around
    assert bf.current_nb_record == 130_001 - 60_000


def test_simple_filter_matches_java_and_has_no_rows():
    keys = [f"k€y-{i}" for i in range(300)]
    bf = new_bloom_filter(100, 0.01, "simple")
    bf.add_all(keys)
    assert isinstance(bf, SimpleBloomFilter) and bf.type_code == SIMPLE
    assert _sha(bf.serialize()) == JAVA_SIMPLE_300
    raw = base64.b64decode(bf.serialize())
    assert struct.unpack(">iibi", raw[:13]) == (-1, bf.nb_hash, 1, bf.vector_size)
    assert len(raw) == 13 + (bf.vector_size + 7) // 8


@pytest.mark.parametrize("code", [SIMPLE, DYNAMIC_V0])
def test_round_trip_and_further_adds(code):
    keys = random_keys(500, seed=4)
    bf = new_bloom_filter(300, 0.001, code, 1000)
    bf.add_all(keys[:400])
    loaded = BloomFilter.deserialize(bf.serialize(), code)
    assert loaded == bf and loaded.serialize() == bf.serialize() and loaded.type_code == code
    assert all(loaded.might_contain(k) for k in keys[:400])
    loaded.add_all(keys[400:])
    assert all(loaded.might_contain(k) for k in keys)
    assert loaded != bf


def test_absent_type_code_means_simple():
    bf = new_bloom_filter(100, 0.01, SIMPLE)
    bf.add("x")
    assert isinstance(BloomFilter.deserialize(bf.serialize(), None), SimpleBloomFilter)
    assert isinstance(BloomFilter.deserialize(bf.serialize().encode(), b"SIMPLE"), SimpleBloomFilter)


def test_add_all_accepts_iterables_and_chunked_arrays():
    keys = random_keys(300, seed=5)
    ref = new_bloom_filter(100, 0.01)
    for k in keys:
        ref.add(k)
    for source in (iter(keys), pa.chunked_array([keys[:123], keys[123:]]),
                   pa.array(keys, pa.large_string()), pa.array(keys).dictionary_encode()):
        bf = new_bloom_filter(100, 0.01)
        bf.add_all(source)
        assert bf.serialize() == ref.serialize()


# -- errors -----------------------------------------------------------------------------------
def test_bad_input_is_rejected():
    bf = new_bloom_filter(100, 0.01)
    with pytest.raises(ValueError):
        bf.add("")
    with pytest.raises(ValueError):
        bf.add(None)
    with pytest.raises(ValueError):
        bf.add_all(pa.array(["a"] * 100 + [None]))
    with pytest.raises(ValueError):
        bf.might_contain_all(pa.array(["a"] * 100 + [""]))
    with pytest.raises(TypeError):
        bf.add_all(pa.array([1, 2, 3]))
    with pytest.raises(InvalidOptionError):
        new_bloom_filter(type_code="BLOCKED")
    with pytest.raises(InvalidOptionError):
        new_bloom_filter(num_entries=0)
    with pytest.raises(InvalidOptionError):
        new_bloom_filter(fpp=1.5)


def test_corrupt_strings_are_reported():
    text = new_bloom_filter(100, 0.01).serialize()
    raw = base64.b64decode(text)
    with pytest.raises(CorruptFileError):
        BloomFilter.deserialize("not base64 !!", DYNAMIC_V0)
    with pytest.raises(CorruptFileError):
        BloomFilter.deserialize(base64.b64encode(raw[:-1]).decode(), DYNAMIC_V0)
    with pytest.raises(CorruptFileError):
        BloomFilter.deserialize(base64.b64encode(raw + b"\0").decode(), DYNAMIC_V0)
    with pytest.raises(CorruptFileError):
        BloomFilter.deserialize(base64.b64encode(b"\xff\xff\xff\xfe" + raw[4:]).decode(), DYNAMIC_V0)
    with pytest.raises(InvalidOptionError):
        BloomFilter.deserialize(text, "DYNAMIC_V1")
    # a Jenkins-hashed filter (old Hadoop layout) loads, but cannot be queried
    simple = new_bloom_filter(100, 0.01, SIMPLE)
    jenkins = bytearray(base64.b64decode(simple.serialize()))
    jenkins[8] = 0
    loaded = BloomFilter.deserialize(base64.b64encode(bytes(jenkins)).decode(), SIMPLE)
    with pytest.raises(UnsupportedFeatureError):
        loaded.might_contain("x")


@pytest.mark.parametrize("count", [201, 250, 300])
def test_batched_adds_match_one_by_one(monkeypatch, count):
    # batches of 100 keys: a last batch of one key, rows set row by row and in one scatter
    from hudi_format.bloom import filters

    keys = random_keys(count, seed=7) + ["ü" * 3, "k"]
    ref = new_bloom_filter(40, 0.05, DYNAMIC_V0, 200)
    for k in keys:
        ref.add(k)
    monkeypatch.setattr(filters, "_CHUNK", 100)
    fast = new_bloom_filter(40, 0.05, DYNAMIC_V0, 200)
    fast.add_all(keys)
    assert fast.serialize() == ref.serialize()
    monkeypatch.setattr(filters, "_MAX_SPAN", 1)
    narrow = new_bloom_filter(40, 0.05, DYNAMIC_V0, 200)
    narrow.add_all(keys)
    assert narrow.serialize() == ref.serialize()


@pytest.mark.parametrize("filter_type", ["DYNAMIC_V0", "SIMPLE"])
def test_holds_as_is_only_for_the_exact_state_of_its_keys(filter_type):
    """A stored filter is written again as it is only when the configured filter, after the
    same number of keys, would serialize to the very same bytes; any doubt rebuilds it."""
    from hudi_format.bloom import holds_as_is, new_bloom_filter

    def fresh(entries=300):
        return new_bloom_filter(entries, 1e-9, filter_type, 1000)

    keys = [f"k{i}" for i in range(700)]
    stored = fresh()
    stored.add_all(keys)
    text = stored.serialize()
    assert holds_as_is(text, fresh(), len(keys))
    rebuilt = fresh()
    rebuilt.add_all(keys)
    assert rebuilt.serialize() == text
    assert not holds_as_is(text, fresh(400), len(keys))             # other options
    assert not holds_as_is(text[:-8], fresh(), len(keys))           # truncated
    assert not holds_as_is(text + "AAAA", fresh(), len(keys))       # trailing bytes
    assert not holds_as_is("!" + text[1:], fresh(), len(keys))      # not Base64
    if filter_type == "DYNAMIC_V0":                                 # another key count: other rows
        assert not holds_as_is(text, fresh(), len(keys) - 300)
