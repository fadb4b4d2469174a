"""Optimistic concurrency control lives in :mod:`hudi_format.transaction.conflicts` (the commit
protocol's layer); this alias keeps the old names."""

from ..transaction.conflicts import (WRITE_ACTIONS, check_conflicts, check_write_conflicts,  # noqa: F401
                                     touched_file_groups)
