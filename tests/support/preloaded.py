"""Child scripts run in processes forked from a server that has the library imported already.

The crash tests run a child process per kill point (85 in ``make test``); a fresh
interpreter spent over a second importing pyarrow, pandas (which pyarrow pulls in) and
``hudi_format`` before doing a few milliseconds of work. A ``forkserver`` imports them once per
test worker, and each child is forked from it: a real process with its own pid, which the
kill points end with SIGKILL as before, and whose heartbeat a later writer finds dead.

Tests about the interpreter itself (how a process exits, the command line's entry points)
still start fresh interpreters.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from typing import Mapping, Sequence

__all__ = ["run_script"]

PRELOAD = ["pyarrow", "pyarrow.compute", "pyarrow.parquet", "hudi_format", "hudi_format.table", "writemodel"]
_context = None


def _forkserver():
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _context = ctx
    return _context


def _child(script: str, argv: list[str], env: dict[str, str], out_path: str, err_path: str) -> None:
    os.environ.clear()
    os.environ.update(env)
    for p in reversed([p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]):
        if p not in sys.path:
            sys.path.insert(0, p)
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    sys.argv = [script, *argv]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:   # as the interpreter: None is 0, another non-int is printed, 1
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run_script(script: str | os.PathLike, args: Sequence[str], env: Mapping[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """``python script args...`` in a process forked from the preloaded server: its exit code
    (negative: the signal that ended it), stdout and stderr, as ``subprocess.run`` gives them."""
    argv = [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="child-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        proc = _forkserver().Process(target=_child, args=(str(script), argv, dict(env or os.environ), out, err))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired([str(script), *argv], timeout)

        def text(path: str) -> str:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    return f.read()
            except FileNotFoundError:
                return ""
        return subprocess.CompletedProcess([str(script), *argv], proc.exitcode, text(out), text(err))
