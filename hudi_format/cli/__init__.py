"""The ``hudi-format`` command line: inspect, query, write and maintain Hudi tables."""

from __future__ import annotations


def main(argv=None) -> int:
    from .commands import main as _main
    return _main(argv)


def console_main() -> None:
    """The ``hudi-format`` executable: run, flush, exit with the command's code.

    (It used to leave with ``os._exit`` to dodge an abort at interpreter teardown; the cause,
    Arrow worker threads releasing Python-owned buffers of archived-timeline reads, is fixed
    in :func:`hudi_format.base_file.read_parquet_bytes`.)
    """
    import os
    import sys
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # piped into a command that stopped reading (``| head``)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["main", "console_main"]
