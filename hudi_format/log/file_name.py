"""Log file names: ``.<fileId>_<instantTime>.log.<version>_<writeToken>[.cdc]``.

The instant is the base instant of the slice for table version 6 and the delta commit's own
instant for version 8+; a write token is ``<taskPartitionId>-<stageId>-<taskAttemptId>``. The
name is part of the log format (the log writer picks the next version from it), so it lives
here, below the file-system view, which re-exports it beside the base file name.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["LogFileName", "parse_log_file_name"]

_LOG_RE = re.compile(
    r"^\.(?P<file_id>.+)_(?P<instant>\d+)\.(?P<ext>log|archive)\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+))?(?P<suffix>\.cdc)?$")


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


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a log file name; ``None`` when ``name`` is not a Hudi log file."""
    m = _LOG_RE.match(name)
    if m is None:
        return None
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"],
                       m["ext"], m["suffix"] or "")
