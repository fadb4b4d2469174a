"""Concurrency options: the commit lock, writer heartbeats, rollback of failed writes.

Hudi's keys and defaults (``HoodieLockConfig``, ``HoodieWriteConfig``, ``HoodieCleanConfig``)
except where the doc says otherwise: Hudi's default lock provider needs ZooKeeper or a cloud
service, this engine's default is a lock file on the table's own storage.
"""

from __future__ import annotations

from .registry import OptionSpec, declare

CONCURRENCY_MODES = ("OPTIMISTIC_CONCURRENCY_CONTROL", "SINGLE_WRITER", "NON_BLOCKING_CONCURRENCY_CONTROL")


def _l(key: str, type_: str, default: object, doc: str, **kw: object) -> OptionSpec:
    return OptionSpec(key, type_, default, doc, "lock", **kw)  # type: ignore[arg-type]


declare(
    _l("hoodie.write.concurrency.mode", "choice", "OPTIMISTIC_CONCURRENCY_CONTROL", "SINGLE_WRITER "
       "commits without the table lock and conflict check.", allowed=CONCURRENCY_MODES),
    _l("hoodie.write.lock.provider", "str", "filesystem", "Lock provider: filesystem, inprocess, Hudi's "
       "class names for them, or package.module.Class."),
    _l("hoodie.write.lock.wait_time_ms", "int", 1000, "With num_retries, how long to wait for the lock "
       "(wait_time_ms * num_retries in all).", minimum=0),
    _l("hoodie.write.lock.num_retries", "int", 60, "With wait_time_ms, how long to wait for the lock.", minimum=0),
    _l("hoodie.write.lock.filesystem.path", "str", None, "Folder of the lock file (default .hoodie/.lock)."),
    _l("hoodie.write.lock.filesystem.expire", "int", 0, "Lock lease in minutes; 0 is a 1-minute lease "
       "renewed while held (Hudi's 0 never expires).", minimum=0),
    _l("hoodie.client.heartbeat.interval_in_ms", "int", 60_000, "How often a writer refreshes its heartbeat.",
       minimum=1),
    _l("hoodie.client.heartbeat.tolerable.misses", "int", 2, "Missed heartbeats after which a pending "
       "write counts as failed.", minimum=0),
    _l("hoodie.cleaner.policy.failed.writes", "choice", "LAZY", "LAZY/EAGER: roll back writes whose "
       "writer died before the next write; NEVER: leave them (Hudi's default with OCC is LAZY).",
       allowed=("EAGER", "LAZY", "NEVER")),
)
