"""``FileCache``: the LRU behind the small-file cache and the opened-HFile cache. A changed file
leaves with all its entries and only them, the weight stays the sum of what is kept, and a file
change costs the same however many files are cached."""

from __future__ import annotations


from hudi_format.file_cache import FileCache
from hudi_format.storage import Storage


def test_a_file_leaves_with_every_entry_of_it_and_only_them():
    cache: FileCache[bytes] = FileCache(len)
    cache.put(("s3", "/t/a", 3), b"abc", 100)
    cache.put(("s3", "/t/a", 5), b"abcde", 100)      # the same name listed with another size
    cache.put(("s3", "/t/b", 2), b"xy", 100)
    cache.put(("file", "/t/a", 3), b"123", 100)      # the same path on another filesystem
    assert len(cache) == 4 and cache.weight == 13
    cache.drop_file("s3", "/t/a")
    assert cache.get(("s3", "/t/a", 3)) is None and cache.get(("s3", "/t/a", 5)) is None
    assert cache.get(("s3", "/t/b", 2)) == b"xy" and cache.get(("file", "/t/a", 3)) == b"123"
    assert len(cache) == 2 and cache.weight == 5
    cache.drop_file("s3", "/t/absent")
    assert len(cache) == 2


def test_least_recent_entries_go_first_and_the_weight_is_kept():
    cache: FileCache[bytes] = FileCache(len)
    for name in "abcd":
        cache.put(("s3", f"/t/{name}", 4), name.encode() * 4, 12)
    assert [k[1] for k in cache._lru] == ["/t/b", "/t/c", "/t/d"] and cache.weight == 12
    cache.get(("s3", "/t/b", 4))                      # used: now the most recent
    cache.put(("s3", "/t/e", 4), b"eeee", 12)
    assert [k[1] for k in cache._lru] == ["/t/d", "/t/b", "/t/e"] and cache.weight == 12
    cache.put(("s3", "/t/e", 4), b"ee", 12)           # replaced: weighed again
    assert cache.weight == 10 and len(cache) == 3
    cache.put(("s3", "/t/big", 99), b"x" * 13, 12)    # alone over the bound: nothing kept
    assert len(cache) == 0 and cache.weight == 0 and not cache._keys_of
    cache.put(("s3", "/t/a", 1), b"a", 12)
    cache.clear()
    assert len(cache) == 0 and cache.weight == 0


def test_a_file_change_looks_at_that_files_entries_only(tmp_path, monkeypatch):
    """Each write of a file drops its entries from the caches of immutable files; it must not
    walk the other files' entries (it did: 9 ms a write with 50,000 opened files cached)."""
    from collections import OrderedDict

    from hudi_format.hfile import reader as hfile_reader

    class Unwalkable(OrderedDict):
        def __iter__(self):
            raise AssertionError("the whole cache was walked")

        def keys(self):
            raise AssertionError("the whole cache was walked")

        def values(self):
            raise AssertionError("the whole cache was walked")

        def items(self):
            raise AssertionError("the whole cache was walked")

    opened = FileCache(lambda v: 1)
    opened._lru = Unwalkable()
    monkeypatch.setattr(hfile_reader, "_OPENED", opened)
    monkeypatch.setattr("hudi_format.storage._DROPPERS", [opened.drop_file])
    st = Storage(str(tmp_path))
    for i in range(1_000):
        opened.put(("file", st.full(f"{i}.hfile"), 1), object(), 10**9)
    for i in range(0, 1_000, 7):
        st.write_bytes(f"{i}.hfile", b"x")            # this process rewrites it: its entry goes
        st.write_bytes(f"other{i}", b"x")             # nothing cached: nothing to drop
    assert len(opened) == 1_000 - len(range(0, 1_000, 7))
    assert opened.get(("file", st.full("7.hfile"), 1)) is None
    assert opened.get(("file", st.full("8.hfile"), 1)) is not None
