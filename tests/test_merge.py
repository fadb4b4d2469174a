"""Merge semantics of a file slice, on small hand-made pieces with spec-given outcomes:
commit-time ordering (latest write wins), event-time ordering (highest ordering value wins,
ties to the latest write), deletes with and without an ordering value."""

from __future__ import annotations

import pyarrow as pa

from hudi_format.read.merge import MergeSpec, merge_pieces

SCHEMA = pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
                    ("_hoodie_is_deleted", pa.bool_())])
EVENT = MergeSpec(("id",), ("ts",), event_time=True, has_meta_fields=True)
COMMIT = MergeSpec(("id",), ("ts",), event_time=False, has_meta_fields=True)


def rows(*items):
    keys, ts, vs, dels = zip(*[tuple(i) + (None,) * (4 - len(i)) for i in items])
    return pa.table({"_hoodie_record_key": keys, "ts": ts, "v": vs, "_hoodie_is_deleted": dels},
                    schema=SCHEMA)


def deletes(*items, typ=pa.int64()):
    keys, ordering = zip(*items)
    return pa.table({"record_key": pa.array(keys, pa.string()), "partition_path": [""] * len(keys),
                     "ordering_value": pa.array(ordering, typ)})


def merged(pieces, spec):
    dels = [(i, p[1]) for i, p in enumerate(pieces) if isinstance(p, tuple)]
    plain = [None if isinstance(p, tuple) else p for p in pieces]
    out = merge_pieces(plain, dels, SCHEMA, spec)
    return {r["_hoodie_record_key"]: (r["ts"], r["v"]) for r in out.to_pylist()}


def test_commit_time_ordering_takes_the_latest_write():
    base = rows(("a", 5, "base"), ("b", 5, "base"))
    log1 = rows(("a", 1, "log1"))
    log2 = rows(("b", 9, "log2"), ("b", 2, "log2-later-row"), ("c", 1, "new"))
    assert merged([base, log1, log2], COMMIT) == {
        "a": (1, "log1"), "b": (2, "log2-later-row"), "c": (1, "new")}


def test_event_time_ordering_takes_the_highest_ordering_value():
    base = rows(("a", 5, "base"), ("b", 5, "base"), ("d", 5, "base"))
    log1 = rows(("a", 1, "stale"), ("b", 5, "tie"), ("d", 7, "newer"))
    log2 = rows(("d", 6, "older-than-log1"))
    assert merged([base, log1, log2], EVENT) == {
        "a": (5, "base"), "b": (5, "tie"), "d": (7, "newer")}


def test_delete_without_ordering_value_wins_then_loses_to_later_writes():
    base = rows(("a", 100, "base"), ("b", 100, "base"), ("c", 100, "base"))
    log1 = ("delete", deletes(("a", 0), ("b", 0), typ=pa.int32()))   # Hudi's default: IntWrapper 0
    log2 = rows(("b", 1, "reinserted"))
    assert merged([base, log1, log2], EVENT) == {"b": (1, "reinserted"), "c": (100, "base")}
    log1 = ("delete", deletes(("a", None), ("b", None)))                # no ordering value at all
    assert merged([base, log1, log2], EVENT) == {"b": (1, "reinserted"), "c": (100, "base")}


def test_a_long_zero_is_a_real_ordering_value():
    """Only an IntWrapper 0 stands for "no ordering value" (Java's Integer.equals, and hudi-rs):
    a LongWrapper 0, the soft delete of a record ordered by a long, loses to a newer record."""
    base = rows(("a", 100, "base"), ("b", -5, "base"))
    log1 = ("delete", deletes(("a", 0), ("b", 0)))
    assert merged([base, log1], EVENT) == {"a": (100, "base")}


def test_delete_with_ordering_value_is_ordered_in_event_time():
    base = rows(("a", 100, "base"), ("b", 100, "base"))
    log1 = ("delete", deletes(("a", 50), ("b", 150)))
    assert merged([base, log1], EVENT) == {"a": (100, "base")}
    assert merged([base, log1], COMMIT) == {}


def test_is_deleted_flag_marks_deletes():
    base = rows(("a", 1, "base"), ("b", 1, "base"))
    log1 = rows(("a", 2, "gone", True), ("b", 0, "stale-delete", True))
    assert merged([base, log1], EVENT) == {"b": (1, "base")}


def test_keys_missing_from_base_come_from_logs_and_order_is_kept():
    base = rows(("z", 1, "z"), ("y", 1, "y"))
    log1 = rows(("x", 1, "x"))
    out = merge_pieces([base, log1], [], SCHEMA, EVENT)
    assert out.column("_hoodie_record_key").to_pylist() == ["z", "y", "x"]
