"""The commit protocol: instant begin/commit/abort, heartbeats, markers, the table lock and
conflict checks, with the metadata table plugged in as a hook. Writes and every table service
commit through :class:`Transaction`; it sits below ``writer`` and ``services`` and above
``metadata``, ``read``, ``view`` and ``timeline``."""

from .commit import (MetadataHook, ServiceBusyError, Transaction, WriteResult, default_metadata_hook,
                     install_metadata_table_services, is_metadata_storage, table_lock)
from .conflicts import (check_write_conflicts, clustering_plan_groups, new_file_groups, started_with,
                        touched_file_groups)
from .locks import TableLock, holds_lock

__all__ = ["Transaction", "WriteResult", "MetadataHook", "ServiceBusyError", "default_metadata_hook",
           "install_metadata_table_services", "is_metadata_storage", "table_lock", "check_write_conflicts",
           "clustering_plan_groups", "new_file_groups", "started_with", "touched_file_groups", "TableLock",
           "holds_lock"]
