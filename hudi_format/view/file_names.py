"""Hudi data file names: the only place a file's file group, instant and version are recorded.

Base file: ``<fileId>_<writeToken>_<instantTime>.<ext>``.
Log file:  ``.<fileId>_<instantTime>.log.<version>_<writeToken>[.cdc]``; the instant is the base
instant of the slice for table version 6 and the delta commit's own instant for version 8+.
A write token is ``<taskPartitionId>-<stageId>-<taskAttemptId>``.
"""

from __future__ import annotations

import re

import attrs

_BASE_RE = re.compile(r"^(?P<file_id>.+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d+)(?P<ext>\.[A-Za-z]+)$")
# Some writers (and old tables) omit the write token: <fileId>_<instant>.parquet is not valid
# Hudi, so we deliberately do not accept it.
_LOG_RE = re.compile(
    r"^\.(?P<file_id>.+)_(?P<instant>\d+)\.(?P<ext>log|archive)\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+))?(?P<suffix>\.cdc)?$")

BASE_FILE_EXTENSIONS = (".parquet", ".hfile", ".orc")


@attrs.frozen
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str
    extension: str

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}{self.extension}"


@attrs.frozen(order=False)
class LogFileName:
    file_id: str
    instant_time: str
    version: int
    write_token: str | None
    extension: str = "log"
    suffix: str = ""

    @property
    def name(self) -> str:
        token = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.instant_time}.{self.extension}.{self.version}{token}{self.suffix}"

    @property
    def is_cdc(self) -> bool:
        return self.suffix == ".cdc"

    def sort_key(self) -> tuple:
        """Hudi's log file order: instant, then version, then write token."""
        return (self.instant_time, self.version, self.write_token or "")


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parse a base file name; ``None`` when ``name`` is not a Hudi base file."""
    m = _BASE_RE.match(name)
    if m is None or m["ext"].lower() not in BASE_FILE_EXTENSIONS:
        return None
    return BaseFileName(m["file_id"], m["token"], m["instant"], m["ext"])


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a log file name; ``None`` when ``name`` is not a Hudi log file."""
    m = _LOG_RE.match(name)
    if m is None:
        return None
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"],
                       m["ext"], m["suffix"] or "")
