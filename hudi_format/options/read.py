"""Reader options (Hudi's ``DataSourceReadOptions`` keys a reader of this engine takes).

``hoodie.metadata.enable`` is declared with the metadata table's options (writers take it too).
"""

from __future__ import annotations

from .registry import OptionSpec, declare

#: Hudi 1.x reads the whole table when an incremental range's files are gone (HUDI-8624: true
#: from table version 8); its version-6 relation keeps 0.x's false. ``None``: by table version.
INCR_FALLBACK = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"

declare(
    OptionSpec(INCR_FALLBACK, "bool", None,
               "When files an incremental query's commits wrote were cleaned, read the latest "
               "snapshot's records of those commits instead of failing (default: true from table "
               "version 8, false for 6, as Hudi).", "read"),
)
