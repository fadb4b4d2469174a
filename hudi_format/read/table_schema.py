"""The table's current schema, as writers and readers both need it."""

from __future__ import annotations

import logging

import pyarrow as pa

from ..config import TableConfig
from ..errors import HudiError
from ..schema import avro_to_arrow_schema
from ..timeline import Timeline

log = logging.getLogger(__name__)


def latest_avro_schema(config: TableConfig, timeline: Timeline) -> str | None:
    """The Avro schema of the newest commit that recorded one, else the create schema."""
    for inst in reversed(timeline.write_instants()):
        try:
            avro = timeline.metadata(inst).schema
        except HudiError as exc:
            log.warning("cannot read the schema of %s: %s", inst, exc)
            continue
        if avro:
            return avro
    return config.create_schema


def latest_data_schema(config: TableConfig, timeline: Timeline) -> pa.Schema | None:
    """The data columns (no meta fields) of the table, or ``None`` before the first commit."""
    avro = latest_avro_schema(config, timeline)
    return avro_to_arrow_schema(avro) if avro else None
