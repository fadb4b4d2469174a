"""Child process for fault injection in table services: run one service and SIGKILL ourselves
right after the metadata table's deltacommit of that service completed (before the data
instant of the service completes).

usage: python servicefaultchild.py <table> <service: compact|cluster|clean>
"""

from __future__ import annotations

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))

import hudi_format as hudi  # noqa: E402

SERVICE_OPTIONS = {"clean": {"hoodie.cleaner.commits.retained": 1}}


def install() -> None:
    from hudi_format.timeline import writer as tl_writer
    real_complete = tl_writer.TimelineWriter.complete

    def complete_then_die(self, instant, *a, **k):
        out = real_complete(self, instant, *a, **k)
        if self.storage.url.rstrip("/").endswith(".hoodie/metadata") and instant.action == "deltacommit":
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    tl_writer.TimelineWriter.complete = complete_then_die


if __name__ == "__main__":
    path, service = sys.argv[1], sys.argv[2]
    install()
    table = hudi.open_table(path)
    if service == "cluster":
        table.cluster()
    else:
        getattr(table, service)(options=SERVICE_OPTIONS.get(service))
    raise SystemExit("the service finished: the fault point was never reached")
