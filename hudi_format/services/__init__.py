"""Table services: compaction, log compaction, clustering, cleaning, archival.

Each service plans first (a ``requested`` instant carrying its plan in Hudi's Avro schema), then
executes and completes; readers never wait for a service and never see it half done.
"""

# -- compaction, log compaction, clustering ---------------------------------------------------
from .common import SERVICE_OPTIONS, ServiceConflictError, validate_service_options
from .clustering import cluster, run_clustering, schedule_clustering
from .compaction import (compact, pending_compaction_base_instants, run_compaction,
                         schedule_compaction)
from .log_compaction import log_compact, run_log_compaction, schedule_log_compaction

__all__ = [
    "SERVICE_OPTIONS", "ServiceConflictError", "validate_service_options",
    "schedule_compaction", "run_compaction", "compact", "pending_compaction_base_instants",
    "schedule_log_compaction", "run_log_compaction", "log_compact",
    "schedule_clustering", "run_clustering", "cluster",
]

# -- the metadata table's own services, handed to the metadata hook of every commit -------------
from ..transaction import install_metadata_table_services
from .metadata_table import MetadataTableServiceRunner

install_metadata_table_services(MetadataTableServiceRunner())
