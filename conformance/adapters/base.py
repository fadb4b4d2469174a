"""The interface an engine implements to be checked by the conformance suite.

An engine answers read queries on a table path and, if it can write, executes write steps and
table services. Queries and steps are plain JSON-able dicts so that the same cases drive an
in-process adapter and an external command (see ``command.py`` for the wire protocol).

Query (``read``)::

    {"kind": "snapshot" | "read_optimized" | "time_travel" | "incremental" | "lookup",
     "as_of": "<instant>",                 # time_travel: completion time (v8+) or instant (v6)
     "start": "<instant>", "end": "<instant>",   # incremental: (start, end]
     "columns": ["col", ...] | null,       # projection (null: every column)
     "filters": [["col", "=", value], ...] | null,   # ANDed; ops = != < <= > >= in "not in"
     "keys": ["k1", ...]}                  # lookup: record keys

Write step (``write``)::

    {"table": {"table_type", "table_version", "record_key", "ordering_field", "partition_by",
               "options"},                 # creation arguments (used when the table is new)
     "operation": "insert" | "upsert" | ..., "options": {...}}   # plus the rows as Arrow

Service step (``service``)::

    {"service": "compact" | "log_compact" | "cluster" | "clean" | "archive" | "rollback" |
                "savepoint" | "restore", "instant": "<ts>" | null, "sort_by": [...] | null,
     "options": {...}}

Writes and services return the instant they completed, ``{"timestamp", "action",
"completion_time"}``, or ``None`` when a service had nothing to do.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa


class Unsupported(Exception):
    """The engine does not support this query or operation: the case is skipped, not failed."""


class Engine:
    """Base class of conformance adapters."""

    name: str = "engine"
    capabilities: frozenset[str] = frozenset({"read"})

    @property
    def can_write(self) -> bool:
        return "write" in self.capabilities

    def read(self, path: str, query: dict) -> pa.Table | list[dict]:
        """Rows of ``query`` on the table at ``path``: an Arrow table or canonical rows."""
        raise Unsupported(f"{self.name} cannot read")

    def write(self, path: str, data: pa.Table, step: dict) -> dict | None:
        raise Unsupported(f"{self.name} cannot write")

    def service(self, path: str, step: dict) -> dict | None:
        raise Unsupported(f"{self.name} cannot run table services")

    def version(self) -> str:
        return ""

    def close(self) -> None:
        pass


def instant_dict(instant: Any) -> dict | None:
    if instant is None:
        return None
    return {"timestamp": instant.timestamp, "action": instant.action,
            "completion_time": getattr(instant, "completion_time", None)}
