"""How long a soak's child process goes on: its seconds, then (when its harness asks for it)
until it has done the least its test asserts.

A soak bounded by time alone proves nothing on a slow or loaded machine: a CI run gave the
services soak on S3 four writes and one round of services, all before the writes had left
anything to compact, cluster or clean, and the test failed for lack of work, not for a defect.
The harness sets ``SOAK_MIN_WORK`` in its children's environment; each child then runs past its
deadline until its own minimum is met (a write acknowledged, a service that did something, a
number of reads), within a grace that keeps a stuck child from hanging the test. The long soaks
run from the command line keep their plain deadline unless they set it too.
"""

from __future__ import annotations

import os
import time

#: The environment variable a harness sets to make its children meet their minimum.
ENV = "SOAK_MIN_WORK"


class SoakClock:
    """``running(enough)`` is true before the deadline and, under ``SOAK_MIN_WORK``, after it
    while ``enough`` is false, up to ``deadline + grace`` (``max(60 s, 5 × seconds)``)."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self.minimum = os.environ.get(ENV) == "1"
        self.cap = self.deadline + max(60.0, 5 * seconds)

    def running(self, enough: bool = True) -> bool:
        now = time.monotonic()
        return now < self.deadline or (self.minimum and not enough and now < self.cap)

    def remaining(self) -> float:
        """Seconds to the plain deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())
