"""Writes that arrive through Spark's Python data source API itself.

``df.write.format("hudi_format")`` from PySpark goes to the distributed writer
(:mod:`spark_adapter.writer`), which plans on the driver. Writes that reach the data source
without a PySpark driver in between (``INSERT INTO`` a table ``USING hudi_format`` in Spark SQL,
or before :func:`spark_adapter.register` installed its hook) come here: Spark calls ``write`` on
the executors and ``commit`` once in a Python worker on the driver, with no DataFrame to plan
from. So each task stages its rows as an Arrow IPC file under ``.hoodie/.temp/`` of the table,
and ``commit`` writes them as one Hudi commit through the core (``hudi_format.write``) and
removes the staging files; ``abort`` removes them. Spark allows only ``append`` and
``overwrite`` here; ``overwrite`` is ``insert_overwrite_table`` on an existing table.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from hudi_format.errors import HudiError
from hudi_format.options import option

from .arrow import hudi_schema, spark_arrow_schema, to_hudi_arrow
from .datasource import _path, storage_options

STAGING = ".hoodie/.temp/spark-staging-"


class StagedFile(WriterCommitMessage):
    def __init__(self, path: str | None, rows: int):
        self.path = path
        self.rows = rows


def stage_rows(storage, name: str, iterator: Iterator[pa.RecordBatch], schema: pa.Schema) -> StagedFile:
    """A task's rows staged as one Arrow IPC file ``name`` (nothing written for no rows)."""
    sink = pa.BufferOutputStream()
    rows = 0
    with pa.ipc.new_file(sink, schema) as out:
        for batch in iterator:
            if batch.num_rows:
                out.write_table(to_hudi_arrow(batch, schema))
                rows += batch.num_rows
    if not rows:
        return StagedFile(None, 0)
    storage.write_bytes(name, sink.getvalue().to_pybytes())
    return StagedFile(name, rows)


def read_staged(storage, messages: list) -> list[pa.Table]:
    """The tables the tasks' messages name, in message order."""
    return [pa.ipc.open_file(pa.BufferReader(storage.read_bytes(m.path))).read_all()
            for m in messages if isinstance(m, StagedFile) and m.path]


def remove_staging(storage, folder: str) -> None:
    """Drop a staging folder and whatever attempts left in it (absent: nothing to do)."""
    try:
        storage.delete_tree(folder)
    except (FileNotFoundError, OSError, HudiError):
        pass


class StagedWriter(DataSourceArrowWriter):
    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        lower = {k.lower(): v for k, v in options.items()}
        self.path = _path(lower)
        self.storage_options = storage_options(lower)
        self.options = {k: v for k, v in options.items() if k.lower().startswith("hoodie.")
                        and not k.lower().startswith(("hoodie.datasource.query.", "hoodie.datasource.read."))}
        self.overwrite = overwrite
        self.in_schema = hudi_schema(spark_arrow_schema(schema))
        self.staging = f"{STAGING}{uuid.uuid4().hex}"

    def _storage(self):
        from hudi_format.storage import Storage
        return Storage(self.path, self.storage_options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
        from pyspark import TaskContext
        tc = TaskContext.get()
        name = f"{self.staging}/part-{tc.partitionId() if tc else 0}-{tc.taskAttemptId() if tc else 0}.arrow"
        return stage_rows(self._storage(), name, iterator, self.in_schema)

    def commit(self, messages: list) -> None:
        import hudi_format as hudi
        storage = self._storage()
        try:
            pieces = read_staged(storage, messages)
            data = pa.concat_tables(pieces) if pieces else self.in_schema.empty_table()
            operation = option(self.options, "hoodie.datasource.write.operation")
            self.options.pop("hoodie.datasource.write.operation", None)
            if self.overwrite and storage.exists(".hoodie/hoodie.properties"):
                operation = "insert_overwrite_table"
            hudi.write(self.path, data, operation=operation, options=self.options,
                       storage_options=self.storage_options)
        finally:
            self._cleanup(storage)

    def abort(self, messages: list) -> None:
        self._cleanup(self._storage())

    def _cleanup(self, storage) -> None:
        try:
            storage.fs.rm(storage.full(self.staging), recursive=True)
        except (FileNotFoundError, OSError):
            pass
