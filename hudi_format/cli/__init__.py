"""The ``hudi-format`` command line: inspect, query, write and maintain Hudi tables."""

from __future__ import annotations


def main(argv=None) -> int:
    from .commands import main as _main
    return _main(argv)


def console_main() -> None:
    """The ``hudi-format`` executable: run, flush, and leave without interpreter teardown.

    Once the command is done and its output flushed, nothing is left to do; skipping the
    teardown avoids a rare abort ("terminate called without an active exception") when native
    thread pools (Arrow's) are destroyed while the interpreter shuts down.
    """
    import os
    import sys
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 0)


__all__ = ["main", "console_main"]
