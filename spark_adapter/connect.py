"""Spark Connect's twins of the PySpark writer classes we hook, when Connect can be imported."""

from __future__ import annotations

import importlib
import importlib.util


def connect_class(module: str, name: str) -> type | None:
    """``module.name`` from ``pyspark.sql.connect``, or ``None`` when Connect's dependencies
    (grpc) are missing. Checked before importing: without them, importing Connect in a process
    whose ``__main__`` has no file (a pytest-xdist worker, an embedded interpreter) is taken by
    PySpark for a doctest run and ends the process with ``sys.exit(0)``, not an ImportError."""
    if importlib.util.find_spec("grpc") is None:
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - any other missing Connect dependency
        return None
