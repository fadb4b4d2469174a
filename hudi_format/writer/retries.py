"""A write that lost a conflict, run again: Hudi's ``hoodie.write.num.retries.on.conflict.failures``.

One policy for every write path (``hudi_format.write``/``Table.write`` and engines through
:mod:`hudi_format.engine`), as Hudi's Spark writer retries ``HoodieWriteConflictException``.
Retrying is safe because every ``ConcurrentWriteError`` is raised before the data instant
completes and the lost attempt is undone; the next attempt loads the table again."""

from __future__ import annotations

import logging
from typing import Callable, TypeVar

from ..errors import ConcurrentWriteError

__all__ = ["RETRIES_ON_CONFLICT", "retrying_conflicts"]

log = logging.getLogger(__name__)

RETRIES_ON_CONFLICT = "hoodie.write.num.retries.on.conflict.failures"

T = TypeVar("T")


def retrying_conflicts(attempt: Callable[[], T], retries: int, where: str) -> T:
    """``attempt()``, run again up to ``retries`` more times while it raises
    ``ConcurrentWriteError``; the last one's error is raised."""
    for n in range(retries + 1):
        try:
            return attempt()
        except ConcurrentWriteError as exc:
            if n >= retries:
                raise
            log.warning("write to %s lost a conflict (%s); attempt %d of %d", where, exc, n + 2, retries + 1)
    raise AssertionError("unreachable")
