"""The ``hudi-format`` command line: inspect, query, write and maintain Hudi tables."""

from __future__ import annotations


def main(argv=None) -> int:
    from .commands import main as _main
    return _main(argv)


__all__ = ["main"]
