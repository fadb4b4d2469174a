"""One exception hierarchy so callers can catch every format problem with ``HudiError``.

Each error names the file or option at fault: a user staring at a broken table needs to know
*which* file to look at, not only that something is wrong.
"""

from __future__ import annotations


class HudiError(Exception):
    """Root of every error raised by hudi_format."""


class TableNotFoundError(HudiError):
    """No Hudi table at the given location (no ``.hoodie/hoodie.properties``)."""


class TableConfigError(HudiError):
    """``hoodie.properties`` is missing, unparsable, inconsistent or has a bad checksum."""


class InvalidOptionError(HudiError, ValueError):
    """An option (``hoodie.*`` key or API argument) is unknown or has an invalid value."""


class TimelineError(HudiError):
    """A timeline file is malformed or its metadata cannot be decoded."""


class CorruptFileError(HudiError):
    """A data, log or metadata file is truncated or corrupt beyond recovery."""


class LogFormatError(CorruptFileError):
    """A log file or log block does not follow the ``#HUDI#`` log format."""


class UnsupportedFeatureError(HudiError, NotImplementedError):
    """The table uses a feature this version of hudi_format cannot handle yet."""


class SchemaError(HudiError):
    """Schemas are incompatible, or a column named in a query does not exist."""


class StorageError(HudiError):
    """The underlying storage failed (missing file, permission, network)."""


class FileMissingError(StorageError):
    """A file is not in storage (never was, or removed since it was listed)."""


class ConcurrentWriteError(HudiError):
    """Another writer committed changes to the same file groups first; this write was undone."""


class LockError(HudiError):
    """The table lock could not be taken (timeout) or was lost while held."""
