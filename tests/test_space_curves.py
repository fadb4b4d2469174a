"""The Z-order and Hilbert curves clustering sorts by (services/space_curves.py), value by value as Hudi's."""

from __future__ import annotations

import random
import struct

import pyarrow as pa

from hudi_format.services import space_curves as sc


def test_binary_util_mappings_by_hand():
    """``BinaryUtil``: sign bit flipped for ints/longs, IEEE tricks for doubles, zero-left-padded
    UTF-8 for strings."""
    assert sc.long_to_8(-1) == bytes.fromhex("7fffffffffffffff")
    assert sc.long_to_8(0) == bytes.fromhex("8000000000000000")
    assert sc.int_to_8(1) == bytes.fromhex("0000000080000001")
    assert sc.int_to_8(-2147483648) == bytes.fromhex("0000000000000000")
    assert sc.double_to_8(1.0) == bytes.fromhex("bff0000000000000")
    assert sc.double_to_8(-1.0) == bytes.fromhex("400fffffffffffff")
    assert sc.double_to_8(0.0) == bytes(8)
    assert sc.utf8_to_8("ab") == bytes.fromhex("0000000000006162")
    assert sc.utf8_to_8("abcdefghij") == b"abcdefgh"
    assert sc.byte_to_8(-1) == bytes.fromhex("00000000000000ff")
    assert sc.bytes_to_long(b"\xff" * 8) == -1


def test_zorder_interleaving_by_hand():
    """``BinaryUtil.interleaving`` of intTo8Byte(1) and intTo8Byte(2): bytes 0-3 are zero in
    both (8 zero bytes out), byte 4 is 0x80 in both (bits 1,1 then zeros: c0 00), bytes 5-6
    zero (4 zero bytes), byte 7 is 0x01 / 0x02 (a7=1 at position 14, b6=1 at 13: 00 06)."""
    got = sc.interleaving([sc.int_to_8(1), sc.int_to_8(2)])
    assert got == bytes(8) + bytes.fromhex("c000") + bytes(4) + bytes.fromhex("0006")
    assert sc.interleaving([b"\xf0" + bytes(7), bytes(8)]) == bytes.fromhex("aa00") + bytes(14)
    three = sc.interleaving([b"\x80" + bytes(7), b"\x40" + bytes(7), b"\x20" + bytes(7)])
    assert three[:2] == bytes.fromhex("8880") and three[2:] == bytes(22)   # a0 at 0, b1 at 4, c2 at 8


def test_hilbert_index_matches_the_curve_library():
    """``HilbertCurve.index`` (davidmoten/hilbert-curve, used by ``HilbertCurveUtils``): the
    library's own expected 4x4 grid for bits=2 (indexes-2d-bits-2.txt, row i = index(i, j))
    and its test values index(1, 2) = 7 (bits 2), index(0, 16) = 256 (bits 5)."""
    grid = [[0, 3, 4, 5], [1, 2, 7, 6], [14, 13, 8, 9], [15, 12, 11, 10]]
    assert [[sc.hilbert_index([i, j], 2) for j in range(4)] for i in range(4)] == grid
    assert sc.hilbert_index([1, 2], 2) == 7
    assert sc.hilbert_index([0, 16], 5) == 256
    # 63 bits, as Hudi: a bijection that keeps neighbours on the curve adjacent in space
    pts = {sc.hilbert_index([i, j], 3): (i, j) for i in range(8) for j in range(8)}
    assert sorted(pts) == list(range(64))
    for d in range(63):
        (a, b), (c, e) = pts[d], pts[d + 1]
        assert abs(a - c) + abs(b - e) == 1
    # indexBytes: BigInteger.toByteArray left-padded to 63 bytes
    assert sc.hilbert_index_bytes([0, 1]) == bytes(62) + b"\x01"
    assert len(sc.hilbert_index_bytes([-1, -1])) == 63


def test_vectorised_keys_equal_the_scalar_reference():
    rng = random.Random(3)
    n = 300
    ints = [rng.randint(-2**31, 2**31 - 1) for _ in range(n - 1)] + [None]
    longs = [rng.randint(-2**63, 2**63 - 1) for _ in range(n - 1)] + [None]
    dbls = [rng.uniform(-1e9, 1e9) for _ in range(n - 4)] + [0.0, -0.0, float("nan"), None]
    strs = ["".join(rng.choice("aé€z") for _ in range(rng.randint(0, 12))) for _ in range(n - 1)] + [None]
    bools = [rng.choice([True, False]) for _ in range(n - 1)] + [None]
    table = pa.table({"i": pa.array(ints, pa.int32()), "l": pa.array(longs, pa.int64()),
                      "d": pa.array(dbls, pa.float64()), "s": pa.array(strs, pa.string()),
                      "b": pa.array(bools, pa.bool_())})

    def zbytes(col, v):
        if col == "i":
            return sc.int_to_8(sc.INT_MAX if v is None else v)
        if col == "l":
            return sc.long_to_8(sc.LONG_MAX if v is None else v)
        if col == "d":
            return sc.double_to_8(sc.DOUBLE_MAX if v is None else v)
        if col == "s":
            return sc.utf8_to_8("" if v is None else v)
        return sc.int_to_8(1 if v else 0)

    def hlong(col, v):
        if col == "b":
            return sc.LONG_MAX if v else 0
        if v is None:
            return sc.LONG_MAX
        if col == "d":
            return 0x7FF8000000000000 if v != v else struct.unpack(">q", struct.pack(">d", v))[0]
        if col == "s":
            return sc.bytes_to_long(v.encode())
        return v

    for cols in (["i", "l"], ["d", "s"], ["i", "d", "s", "b"], ["l", "b"]):
        z = sc.zorder_keys([table.column(c) for c in cols])
        h = sc.hilbert_keys([table.column(c) for c in cols])
        width = 63 * len(cols)
        for r in range(n):
            vals = [table.column(c)[r].as_py() for c in cols]
            assert sc.words_to_bytes(z, r) == sc.interleaving([zbytes(c, v) for c, v in zip(cols, vals)])
            got = int.from_bytes(sc.words_to_bytes(h, r), "big") >> (64 * len(h) - width)
            assert got == sc.hilbert_index([hlong(c, v) for c, v in zip(cols, vals)])


def test_other_types_map_like_spark():
    import datetime as dt
    import decimal
    t = pa.table({
        "ts": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999500), None], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(1970, 1, 2), None], pa.date32()),
        "dec": pa.array([decimal.Decimal("-7.9"), None], pa.decimal128(5, 1)),
        "bin": pa.array([b"\x01\x02", None], pa.binary()),
        "small": pa.array([-3, None], pa.int16()),
    })
    z = lambda c: [w.as_py() for w in sc.zorder_word(t.column(c))]  # noqa: E731
    as_long = lambda b: int.from_bytes(b, "big")  # noqa: E731
    assert z("ts") == [as_long(sc.long_to_8(-1)), as_long(sc.long_to_8(sc.LONG_MAX))]   # floor to ms
    assert z("day") == [as_long(sc.long_to_8(86_400_000)), as_long(sc.long_to_8(sc.LONG_MAX))]
    assert z("dec") == [as_long(sc.long_to_8(-7)), as_long(sc.long_to_8(sc.LONG_MAX))]  # longValue truncates
    assert z("bin") == [0x0102, 0]
    assert z("small") == [as_long(sc.int_to_8(-3)), as_long(sc.int_to_8(sc.INT_MAX))]
    h = [w.as_py() for w in sc.hilbert_word(t.column("small"))]
    assert h == [(-3) & sc.MASK64, sc.LONG_MAX]


def test_java_hashmap_column_order():
    assert sc.java_int_hashmap_order([11, 10]) == [10, 11]
    assert sc.java_int_hashmap_order([3, 17]) == [17, 3]          # 17 & 15 = 1 < 3
    assert sc.java_int_hashmap_order([3, 20, 5]) == [3, 20, 5]    # 20 & 15 = 4
    assert sc.java_int_hashmap_order(list(range(20, 7, -1))) == sorted(range(8, 21))  # resized to 32


def test_sort_indices_linear_nulls_first_and_one_column_curve_is_linear():
    t = pa.table({"a": pa.array([3, None, 1, 2], pa.int64()), "b": pa.array([1, 2, 3, 4], pa.int64())})
    assert sc.sort_indices(t, ["a"]).to_pylist() == [1, 2, 3, 0]
    assert sc.sort_indices(t, ["a"], "z-order").to_pylist() == [1, 2, 3, 0]
    z = sc.sort_indices(t, ["a", "b"], "z-order").to_pylist()
    keys = [sc.interleaving([sc.long_to_8(sc.LONG_MAX if a is None else a), sc.long_to_8(b)])
            for a, b in zip(t.column("a").to_pylist(), t.column("b").to_pylist())]
    assert [keys[i] for i in z] == sorted(keys)
