"""Damaged Parquet files for the bad-input tests."""

from __future__ import annotations


def garble_footer_name(data: bytes, name: bytes) -> bytes:
    """``data`` (a Parquet file) with the first byte of ``name``'s first occurrence in its
    footer set to 0x80, so that the name is no longer UTF-8 (what the footer fuzz test found:
    pyarrow keeps such a name as bytes and fails on every use of it)."""
    footer_at = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = data.index(name, footer_at)
    return data[:at] + b"\x80" + data[at + 1:]
