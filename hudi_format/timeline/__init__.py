"""The Hudi timeline: instants, their file names per table version, and their payloads.

``Timeline.load(storage, config)`` reads the active timeline; ``timeline.archived()`` reaches
the archived one (LSM history for v8+, archive log files for v6) when a query needs it.
"""

from .active import Timeline
from .archived import ArchivedTimeline, latest_manifest
from .avro_schemas import decode_payload, encode_avro, schema_json
from .instant import (ACTIONS, WRITE_ACTIONS, Instant, State, comparable_action,
                      format_file_name, format_instant_time, instant_file_name, parse_file_name)
from .metadata import CommitMetadata, WriteStat, decode_commit_metadata
from .clock import InstantClock
from .plans import encode_plan
from .writer import TimelineWriter, commit_metadata, encode_commit_metadata

__all__ = [
    "Timeline", "ArchivedTimeline", "Instant", "State", "CommitMetadata", "WriteStat",
    "ACTIONS", "WRITE_ACTIONS", "comparable_action", "parse_file_name", "format_file_name",
    "instant_file_name", "format_instant_time", "decode_commit_metadata", "decode_payload",
    "encode_avro", "schema_json", "latest_manifest",
    "InstantClock", "TimelineWriter", "encode_commit_metadata", "encode_plan",
    "commit_metadata",
]
