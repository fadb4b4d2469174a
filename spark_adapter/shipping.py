"""A write's plan handed to the executors once per Python worker, not inside every task.

PySpark pickles a ``mapInArrow`` function, with what it binds, into the command of every task,
and each task unpickles all of it. The write binds lists that grow with the table: its buckets,
the index's lookup tasks (one per file slice), the assignment of file groups to buckets. Bound
directly, every task would pay for the whole table (100,000 buckets pickle to about 11 MB and
take about 0.5 s to unpickle, in each of 100,000 tasks). Bound as a Spark broadcast, the value
is fetched and unpickled once by each Python worker, which keeps it for the tasks that follow.
"""

from __future__ import annotations

from typing import Any


class Shipments:
    """The broadcasts of one write: made on the driver, destroyed when the write ends (Spark
    may recompute a cached stage from them until then)."""

    def __init__(self, spark: Any):
        self._sc = spark.sparkContext
        self._sent: list = []

    def ship(self, value: Any) -> Any:
        """``value`` as a broadcast, to bind in a task's function instead of the value."""
        bc = self._sc.broadcast(value)
        self._sent.append(bc)
        return bc

    def release(self) -> None:
        """Destroy every broadcast of the write (on the driver and the executors)."""
        sent, self._sent = self._sent, []
        for bc in sent:
            try:
                bc.destroy(blocking=False)
            except Exception:  # noqa: BLE001 - best effort: the session may be stopping
                pass


def received(value: Any) -> Any:
    """In a task: the value of a shipped plan; a value bound directly is returned as it is."""
    try:
        from pyspark.broadcast import Broadcast
    except ImportError:     # no Spark here: nothing can have been shipped
        return value
    return value.value if isinstance(value, Broadcast) else value


__all__ = ["Shipments", "received"]
