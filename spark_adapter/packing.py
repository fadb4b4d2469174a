"""Packing work into Spark tasks: largest item first to the least-loaded task.

Both sides of the adapter pack: reads put file slices into input partitions as Spark sizes file
splits (:func:`spark_adapter.datasource._pack`), writes put small buckets together into one
task (:func:`spark_adapter.writer.pack_buckets`), because a Python task has a fixed cost of tens
of milliseconds that a small file does not repay.
"""

from __future__ import annotations

import heapq
from typing import Sequence


def least_loaded(sizes: Sequence[int], tasks: int, cap: int | None = None) -> list[int]:
    """The task of each item (by its size), items taken largest first (ties: in order) into
    the least-loaded of ``tasks`` tasks (LPT: no task ends more than one item above the
    average). With ``cap``, an item that would take a non-empty task past ``cap`` opens a new
    task instead, so there may be more than ``tasks``."""
    task_of = [0] * len(sizes)
    if not sizes:
        return task_of
    loads = [(0, t) for t in range(max(1, tasks))]
    opened = len(loads)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        used, t = heapq.heappop(loads)
        if cap is not None and used and used + sizes[i] > cap:
            heapq.heappush(loads, (used, t))
            used, t = 0, opened
            opened += 1
        task_of[i] = t
        heapq.heappush(loads, (used + sizes[i], t))
    return task_of
