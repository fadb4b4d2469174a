"""Child process for the service crash test: run one table service and SIGKILL ourselves at the
N-th storage mutation (``before`` it starts, or ``after`` it completed), or count the mutations.

usage: python servicecrashchild.py <table> <service> <arg> count
       python servicecrashchild.py <table> <service> <arg> <N> before|after

A mutation is one outermost call that changes storage: Storage.write_bytes / create_if_absent /
delete / rename / open for writing, and the fsspec calls the library makes directly (open for
writing, rm, rm_file, mv, makedirs of a missing folder, ...). Calls nested in a counted one are
part of it. A file opened for writing completes when it is closed. Worker threads are limited to
one so the order of mutations, and so N, is the same in every run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

os.cpu_count = lambda: 1   # one worker thread: mutations in a deterministic order

import hudi_format as hudi  # noqa: E402

SERVICE_OPTIONS = {
    "compaction": {},
    "log_compaction": {"hoodie.log.compaction.blocks.threshold": "2"},
    "clustering": {},
    "clean": {"hoodie.cleaner.commits.retained": "1"},
    "archive": {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                "hoodie.cleaner.commits.retained": "1"},
    "rollback": {},
    "restore": {},
}


def run_service(path: str, service: str, arg: str = "", extra: dict | None = None):
    """Run ``service`` on the table at ``path`` (``arg``: the instant to roll back / restore to)."""
    opts = dict(SERVICE_OPTIONS[service], **(extra or {}))
    table = hudi.open_table(path)
    if service == "compaction":
        return table.compact(options=opts)
    if service == "log_compaction":
        return table.log_compact(options=opts)
    if service == "clustering":
        return table.cluster(options=opts)
    if service == "clean":
        return table.clean(options=opts)
    if service == "archive":
        return table.archive(options=opts)
    if service == "rollback":
        return table.rollback(arg, options=opts)
    if service == "restore":
        return table.restore(arg, options=opts)
    raise SystemExit(f"unknown service {service}")


class Mutations:
    """Counts outermost storage mutations; kills the process at the chosen one."""

    def __init__(self, kill_at: int | None, when: str):
        self.kill_at, self.when = kill_at, when
        self.count = 0
        self.names: list[str] = []
        self.local = threading.local()
        self.lock = threading.RLock()

    def die(self) -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def wrap(self, owner, name: str, describe, is_mutation=lambda *a, **k: True, streams: bool = False):
        real = getattr(owner, name)
        counter = self

        def wrapper(*args, **kwargs):
            depth = getattr(counter.local, "depth", 0)
            if depth or not is_mutation(*args, **kwargs):
                return real(*args, **kwargs)
            with counter.lock:
                counter.count += 1
                n = counter.count
                counter.names.append(f"{name} {describe(*args, **kwargs)}")
            if n == counter.kill_at and counter.when == "before":
                counter.die()
            counter.local.depth = depth + 1
            try:
                out = real(*args, **kwargs)
            except BaseException:
                if n == counter.kill_at and counter.when == "after":
                    counter.die()   # the call is over (it failed, e.g. nothing to remove)
                raise
            finally:
                counter.local.depth = depth
            if n == counter.kill_at and counter.when == "after":
                if streams:   # the mutation completes when the file is closed
                    base = type(out)

                    def close(self, *a, **k):
                        base.close(self, *a, **k)
                        counter.die()

                    def exit_(self, *a, **k):
                        base.__exit__(self, *a, **k)
                        counter.die()
                    out.__class__ = type(f"Killing{base.__name__}", (base,), {"close": close, "__exit__": exit_})
                else:
                    counter.die()
            return out

        setattr(owner, name, wrapper)


def install(kill_at: int | None, when: str) -> Mutations:
    from fsspec.implementations.local import LocalFileSystem

    from hudi_format.storage import Storage

    m = Mutations(kill_at, when)

    def rel(self, path, *a, **k):
        if isinstance(self, Storage) and self.url.rstrip("/").endswith(".hoodie/metadata"):
            return f"MDT:{path}"   # a path relative to the metadata table
        return str(path)

    def writing(self, path, mode="rb", *a, **k):
        return any(c in mode for c in "wax+")

    for name in ("write_bytes", "create_if_absent", "delete", "rename"):
        m.wrap(Storage, name, rel)
    m.wrap(Storage, "open", rel, writing, streams=True)
    m.wrap(LocalFileSystem, "open", rel, writing, streams=True)
    for name in ("rm", "rm_file", "mv", "cp_file", "pipe_file", "touch", "put_file", "rmdir"):
        m.wrap(LocalFileSystem, name, rel)
    for name in ("makedirs", "mkdir"):
        m.wrap(LocalFileSystem, name, rel, lambda self, path, *a, **k: not os.path.isdir(path))
    return m


if __name__ == "__main__":
    path, service, arg, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    extra = json.loads(os.environ.get("CRASH_SERVICE_OPTIONS", "{}"))
    if mode == "count":
        m = install(None, "before")
        run_service(path, service, arg, extra)
        print(json.dumps({"mutations": m.count, "names": m.names}))
        sys.stdout.flush()
        os._exit(0)
    m = install(int(mode), sys.argv[5])
    run_service(path, service, arg, extra)
    print(json.dumps({"finished": m.count}))
    sys.stdout.flush()
    os._exit(3)   # the kill point was never reached
