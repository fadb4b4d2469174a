"""Tagging with the metadata table: the record index and the bloom filters partition.

For :mod:`hudi_format.writer.index`:

* :func:`usable_metadata_table` gives the metadata table when it has a partition and is not
  behind the data timeline (an index that is behind would miss the latest writes' keys);
* :func:`existing_keys_from_record_index` answers, for incoming keys, the ``(key, partition,
  file_id)`` table that :func:`hudi_format.writer.index.tag` joins with, without reading data;
* :func:`metadata_footer_reader` is a drop-in ``read_footer`` for
  :func:`hudi_format.writer.index.candidate_slices_by_bloom`: bloom filters come from the
  ``bloom_filters`` partition and key ranges from ``column_stats`` of ``_hoodie_record_key``
  instead of each base file's footer; :func:`candidate_slices_by_metadata_bloom` wraps both.
"""

from __future__ import annotations

import logging
from typing import Callable

import attrs
import pyarrow as pa

from ..config import TableConfig
from ..errors import HudiError
from ..storage import Storage
from ..view import FileSlice
from . import keys as K
from .reader import MetadataTable

log = logging.getLogger(__name__)

__all__ = ["usable_metadata_table", "existing_keys_from_record_index", "metadata_footer_reader",
           "candidate_slices_by_metadata_bloom", "MetadataFooter"]

_KEY_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])


def usable_metadata_table(storage: Storage, config: TableConfig, partition: str,
                          timeline=None) -> MetadataTable | None:
    """The metadata table if it declares ``partition`` and is up to date, else ``None``."""
    if partition not in config.metadata_partitions:
        return None
    mdt = MetadataTable(storage, config, timeline)
    try:
        if not mdt.exists:
            return None
        reason = mdt.staleness()
    except HudiError as exc:
        reason = str(exc)
    if reason is not None:
        log.warning("not using the %s index of %s: %s", partition, storage.url, reason)
        return None
    return mdt


def existing_keys_from_record_index(mdt: MetadataTable, keys) -> pa.Table:
    """``(key, partition, file_id)`` of the incoming ``keys`` the record index knows (others are
    new records). Partitions are data-table relative paths (``""`` when non-partitioned)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = keys.to_pylist()
    wanted = [k for k in dict.fromkeys(keys) if k is not None]
    locations = mdt.record_locations(wanted)
    rows = {"key": [], "partition": [], "file_id": []}
    for key in wanted:
        loc = locations.get(key)
        if loc is None:
            continue
        rows["key"].append(key)
        rows["partition"].append("" if loc.partition == K.NON_PARTITIONED_NAME else loc.partition)
        rows["file_id"].append(loc.file_id)
    return pa.table(rows, schema=_KEY_SCHEMA)


@attrs.frozen
class MetadataFooter:
    """The parts of :class:`hudi_format.base_file.BaseFileFooter` the bloom index uses."""

    bloom_filter: object | None
    min_key: str | None
    max_key: str | None


def metadata_footer_reader(mdt: MetadataTable, slices: list[FileSlice], *,
                           fallback: Callable | None = None) -> Callable:
    """A ``read_footer(storage, path)`` answering from the metadata table for the base files
    of ``slices`` (looked up in one pass); files it has no bloom filter for go to
    ``fallback`` (the real footer reader) when given, else have no bloom filter (candidates)."""
    files = [(s.partition_path, s.base_file_name) for s in slices if s.base_file]
    blooms = mdt.bloom_filters(files) if mdt.has_partition(K.BLOOM_FILTERS) else {}
    ranges = {}
    if mdt.has_partition(K.COLUMN_STATS):
        stats = mdt.column_stats(["_hoodie_record_key"], {p for p, _ in files})
        for (p, f), cols in stats.items():
            cs = cols.get("_hoodie_record_key")
            if cs is not None and isinstance(cs.min_value, str) and isinstance(cs.max_value, str):
                ranges[(p, f)] = (cs.min_value, cs.max_value)
    by_path = {s.base_file: (s.partition_path, s.base_file_name) for s in slices if s.base_file}

    def read(storage: Storage, path: str):
        ident = by_path.get(path)
        bloom = blooms.get(ident) if ident else None
        if bloom is None and fallback is not None:
            return fallback(storage, path)
        lo, hi = ranges.get(ident, (None, None)) if ident else (None, None)
        return MetadataFooter(bloom, lo, hi)

    return read


def candidate_slices_by_metadata_bloom(storage: Storage, mdt: MetadataTable, slices: list[FileSlice],
                                       keys: pa.Array, fallback: Callable | None = None) -> list[FileSlice]:
    """:func:`hudi_format.writer.index.candidate_slices_by_bloom` with the metadata table's
    bloom filters and key ranges."""
    from ..writer.index import candidate_slices_by_bloom
    return candidate_slices_by_bloom(storage, slices, keys,
                                     metadata_footer_reader(mdt, slices, fallback=fallback))
