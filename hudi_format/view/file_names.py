"""Hudi data file names: the only place a file's file group, instant and version are recorded.

Base file: ``<fileId>_<writeToken>_<instantTime>.<ext>``.
Log file:  ``.<fileId>_<instantTime>.log.<version>_<writeToken>[.cdc]``, defined with the log
format in :mod:`hudi_format.log.file_name` (the log writer needs it, and sits below the view)
and re-exported here so the view's users find both kinds of name in one place.
A write token is ``<taskPartitionId>-<stageId>-<taskAttemptId>``.
"""

from __future__ import annotations

import re

import attrs

from ..log.file_name import LogFileName, parse_log_file_name

__all__ = ["BASE_FILE_EXTENSIONS", "BaseFileName", "LogFileName", "parse_base_file_name",
           "parse_log_file_name"]

_BASE_RE = re.compile(r"^(?P<file_id>.+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d+)(?P<ext>\.[A-Za-z]+)$")
# Some writers (and old tables) omit the write token: <fileId>_<instant>.parquet is not valid
# Hudi, so we deliberately do not accept it.

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


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parse a base file name; ``None`` when ``name`` is not a Hudi base file."""
    m = _BASE_RE.match(name)
    if m is None or m["ext"].lower() not in BASE_FILE_EXTENSIONS:
        return None
    return BaseFileName(m["file_id"], m["token"], m["instant"], m["ext"])
