"""Metadata table options (Hudi's ``HoodieMetadataConfig`` keys and defaults).

``hoodie.metadata.enable`` is also a reader option: a reader may list files from storage
instead of the metadata table.
"""

from __future__ import annotations

from .registry import OptionSpec, declare

GB = 1024 * 1024 * 1024


def _m(key: str, type_: str, default: object, doc: str, **kw: object) -> OptionSpec:
    return OptionSpec(key, type_, default, doc, "metadata", **kw)  # type: ignore[arg-type]


declare(
    _m("hoodie.metadata.enable", "bool", True, "Keep (writers) or use (readers) the metadata table.",
       also=("read",)),
    _m("hoodie.metadata.index.column.stats.enable", "bool", False, "Keep the column_stats index; named false, "
       "a writer drops it from a table that keeps it (left out, it stays maintained)."),
    _m("hoodie.metadata.index.column.stats.column.list", "str", None, "Columns column_stats covers "
       "(default: every column of a supported type)."),
    _m("hoodie.metadata.index.column.stats.max.columns.to.index", "int", 32, "At most this many "
       "columns in column_stats.", minimum=1),
    _m("hoodie.metadata.index.column.stats.file.group.count", "int", 2, "File groups of column_stats.", minimum=1),
    _m("hoodie.metadata.index.bloom.filter.enable", "bool", False, "Keep the bloom_filters index; named false, "
       "a writer drops it from a table that keeps it (left out, it stays maintained)."),
    _m("hoodie.metadata.index.bloom.filter.file.group.count", "int", 4, "File groups of bloom_filters.",
       minimum=1),
    _m("hoodie.metadata.record.index.enable", "bool", False, "Keep the record_index (key -> file group); named "
       "false, a writer drops it from a table that keeps it (left out, it stays maintained)."),
    _m("hoodie.metadata.record.index.min.filegroup.count", "int", 10, "Fewest file groups of record_index.",
       minimum=1),
    _m("hoodie.metadata.record.index.max.filegroup.count", "int", 10000, "Most file groups of record_index.",
       minimum=1),
    _m("hoodie.metadata.record.index.growth.factor", "float", 2.0, "Headroom when sizing record_index "
       "file groups for the records the table holds.", between=(0.0, float("inf"))),
    _m("hoodie.metadata.record.index.max.filegroup.size", "int", GB, "Target size of a record_index "
       "file group in bytes.", minimum=1),
    _m("hoodie.metadata.compact.max.delta.commits", "int", 10, "Compact the metadata table after this "
       "many deltacommits.", minimum=1),
    _m("hoodie.metadata.cleaner.commits.retained", "int", None, "Commits the metadata table's cleaner "
       "keeps (0.x key; default: follows the data table's cleaner).", minimum=0),
)
