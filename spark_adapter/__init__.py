"""PySpark <-> hudi_format: read and write Hudi tables from Spark through the core, no Hudi jar.

    import spark_adapter
    spark_adapter.register(spark)
    df = spark.read.format("hudi_format").load("/data/trips")
    df.write.format("hudi_format").options(**hudi_options).mode("append").save("/data/trips")

:func:`register` registers the ``hudi_format`` Python data source (reads, and writes from SQL)
and routes ``DataFrameWriter.save`` of format ``hudi_format`` to the distributed writer
(:mod:`spark_adapter.writer`), which needs the DataFrame on the driver to plan the commit and
shuffle rows to file groups. Spark's own save modes map to Hudi as Hudi's datasource does:
``append`` runs ``hoodie.datasource.write.operation``; ``overwrite`` replaces the whole table
(``insert_overwrite_table``; creates it if missing); ``errorifexists`` (Spark's default) and
``ignore`` create the table or fail / do nothing when it exists. It also routes
``df.writeStream.format("hudi_format")`` to the exactly-once streaming sink, and
``spark.readStream.format("hudi_format")`` streams a table's commits (:mod:`spark_adapter.streaming`).
"""

from __future__ import annotations

from typing import Any

from .connect import connect_class
from .datasource import MIN_PARTITIONS, NAME, HudiDataSource

__all__ = ["register", "write_dataframe", "HudiDataSource", "NAME"]

_STATE = "_hudi_format_writer_state"


def __getattr__(name: str) -> Any:
    # The writer (and with it the core) loads on first use: Spark imports this package in every
    # Python worker that unpickles the data source, most of which never write.
    if name == "write_dataframe":
        from .writer import write_dataframe
        return write_dataframe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark) -> None:
    """Register ``hudi_format`` with ``spark`` (a ``SparkSession``); idempotent."""
    from .streaming import install_stream_hooks
    spark.dataSource.register(HudiDataSource)
    try:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    except Exception:  # noqa: BLE001 - Spark 4.0 has no filter push-down; filters run in Spark
        pass
    _install_writer_hook()
    _install_reader_hook()
    install_stream_hooks()


def _install_reader_hook() -> None:
    """Make ``spark.read.format("hudi_format")...load(path)`` plan at least the session's
    default parallelism of tasks (option ``minPartitions``), as Spark's file sources do (the
    data source's planner runs in a Python worker that cannot ask the session itself), and
    give Spark the table's schema from the driver, which has the core loaded already, instead
    of a fresh Python worker loading it to answer ``DataSource.schema()``."""
    from pyspark.sql.readwriter import DataFrameReader
    if getattr(DataFrameReader, "_hudi_format_hooked", False):
        return
    names = ("format", "option", "options", "schema", "load")
    orig = {name: getattr(DataFrameReader, name) for name in names}

    def _given(self) -> dict:
        return self.__dict__.setdefault("_hudi_format_options", {})

    def format(self, source: str):
        self.__dict__["_hudi_format_source"] = source
        return orig["format"](self, source)

    def option(self, key: str, value: Any):
        _given(self)[key.lower()] = value
        return orig["option"](self, key, value)

    def options(self, **opts: Any):
        _given(self).update((k.lower(), v) for k, v in opts.items())
        return orig["options"](self, **opts)

    def schema(self, schema):
        self.__dict__["_hudi_format_schema"] = True
        return orig["schema"](self, schema)

    def load(self, path=None, format=None, schema=None, **opts: Any):
        fmt = format or self.__dict__.get("_hudi_format_source")
        if fmt is not None and fmt.lower() == NAME:
            given = {**_given(self), **{k.lower(): v for k, v in opts.items()}}
            if MIN_PARTITIONS.lower() not in given:
                parallelism = _default_parallelism()
                if parallelism:
                    opts[MIN_PARTITIONS] = str(parallelism)
            if schema is None and not self.__dict__.get("_hudi_format_schema"):
                schema = _table_schema(path if path is not None else given.get("path"), given)
        return orig["load"](self, path, format, schema, **opts)

    for name, fn in (("format", format), ("option", option), ("options", options), ("schema", schema),
                     ("load", load)):
        fn.__doc__ = orig[name].__doc__
        fn.__wrapped__ = orig[name]
        setattr(DataFrameReader, name, fn)
    DataFrameReader._hudi_format_hooked = True


def _table_schema(path: Any, options: dict) -> Any:
    """The table's Spark schema as the data source declares it, or ``None`` (Spark then asks
    the data source, which reports what is wrong with the path or options)."""
    if not isinstance(path, str) or not path:
        return None
    try:
        return HudiDataSource({**{k: str(v) for k, v in options.items() if v is not None}, "path": path}).schema()
    except Exception:  # noqa: BLE001 - the same call in Spark's worker raises it to the user
        return None


def _default_parallelism() -> int | None:
    """``spark.sql.files.minPartitionNum`` if set, else the active session's default parallelism."""
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    if spark is None:
        return None
    try:
        configured = spark.conf.get("spark.sql.files.minPartitionNum", None)
        return int(configured) if configured else spark.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: the planner's default
        return None


def _install_writer_hook() -> None:
    """Make ``df.write.format("hudi_format")...save(path)`` run :func:`write_dataframe`.

    PySpark keeps a writer's format, mode and options in the JVM; we also record them on the
    Python object so that ``save`` can hand the DataFrame to the distributed writer. Every
    other format goes to Spark unchanged."""
    from pyspark.sql.readwriter import DataFrameWriter
    classes = [DataFrameWriter]
    connect = connect_class("pyspark.sql.connect.readwriter", "DataFrameWriter")
    if connect is not None:  # Spark Connect has its own writer class with the same API
        classes.append(connect)
    for cls in classes:
        if getattr(cls, "_hudi_format_hooked", False):
            continue
        _wrap(cls)
        cls._hudi_format_hooked = True


def _state(writer) -> dict:
    st = writer.__dict__.get(_STATE)
    if st is None:
        st = {"format": None, "mode": None, "options": {}, "partition_by": None}
        writer.__dict__[_STATE] = st
    return st


def _wrap(cls) -> None:
    orig = {name: getattr(cls, name) for name in ("format", "mode", "option", "options", "partitionBy", "save")}

    def format(self, source: str):
        _state(self)["format"] = source
        return orig["format"](self, source)

    def mode(self, saveMode):
        if saveMode is not None:
            _state(self)["mode"] = saveMode
        return orig["mode"](self, saveMode)

    def option(self, key: str, value: Any):
        _state(self)["options"][key] = None if value is None else _to_str(value)
        return orig["option"](self, key, value)

    def options(self, **opts: Any):
        for k, v in opts.items():
            _state(self)["options"][k] = None if v is None else _to_str(v)
        return orig["options"](self, **opts)

    def partitionBy(self, *cols):
        if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
            cols = tuple(cols[0])
        _state(self)["partition_by"] = [str(c) for c in cols]
        return orig["partitionBy"](self, *cols)

    def save(self, path=None, format=None, mode=None, partitionBy=None, **opts: Any):
        st = _state(self)
        fmt = format or st["format"]
        if fmt is None or fmt.lower() not in (NAME, f"{HudiDataSource.__module__}.{HudiDataSource.__name__}".lower()):
            return orig["save"](self, path, format, mode, partitionBy, **opts)
        options = dict(st["options"])
        options.update({k: _to_str(v) for k, v in opts.items() if v is not None})
        path = path or options.pop("path", None)
        if not path:
            raise ValueError("hudi_format needs a table path: df.write.format('hudi_format').save(path)")
        if isinstance(partitionBy, str):
            partitionBy = [partitionBy]
        from .writer import write_dataframe
        write_dataframe(self._df, path, mode=mode or st["mode"] or "errorifexists", options=options,
                        partition_by=list(partitionBy) if partitionBy else st["partition_by"])
        return None

    for name, fn in (("format", format), ("mode", mode), ("option", option), ("options", options),
                     ("partitionBy", partitionBy), ("save", save)):
        fn.__doc__ = orig[name].__doc__
        fn.__wrapped__ = orig[name]
        setattr(cls, name, fn)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
