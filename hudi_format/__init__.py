"""hudi_format: read and write Apache Hudi tables from Python, without a JVM."""

from .errors import (ConcurrentWriteError, CorruptFileError, LockError, HudiError, InvalidOptionError, LogFormatError,
                     FileMissingError, SchemaError, StorageError, TableConfigError, TableNotFoundError,
                     TimelineError, UnsupportedFeatureError)

from .table import Table, open_table
from .write_api import write

__version__ = "0.1.0"

__all__ = [
    "open_table", "Table", "write",
    "HudiError", "TableNotFoundError", "TableConfigError", "InvalidOptionError", "TimelineError",
    "CorruptFileError", "LogFormatError", "UnsupportedFeatureError", "SchemaError",
    "StorageError", "FileMissingError", "ConcurrentWriteError", "LockError", "__version__",
]
