"""Write options: table identity, keys and partitioning, file sizing, file formats, indexing.

Hudi's keys and defaults (``HoodieWriteConfig``, ``HoodieStorageConfig``, ``HoodieIndexConfig``,
``KeyGeneratorOptions``, ``DataSourceWriteOptions``). Where this engine's default differs from
Hudi's the doc says so.
"""

from __future__ import annotations

from .registry import OptionSpec, declare

OPERATIONS = ("insert", "upsert", "bulk_insert", "delete", "insert_overwrite",
              "insert_overwrite_table", "delete_partition")
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
BULK_INSERT_SORT_MODES = ("NONE", "GLOBAL_SORT", "PARTITION_SORT", "PARTITION_PATH_REPARTITION",
                          "PARTITION_PATH_REPARTITION_AND_SORT")
# the modes that sort the records by partition path and record key
KEY_SORTING_MODES = ("GLOBAL_SORT", "PARTITION_SORT")
# Hudi's Parquet codec names pyarrow writes (``hudi_format.parquet_codec`` maps them); Hudi's
# lzo has no pyarrow writer
PARQUET_CODECS = ("gzip", "snappy", "zstd", "lz4", "lz4_raw", "brotli", "uncompressed", "none")
INDEX_TYPES = ("SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "RECORD_INDEX")
MB = 1024 * 1024


def _w(key: str, type_: str, default: object, doc: str, **kw: object) -> OptionSpec:
    return OptionSpec(key, type_, default, doc, "write", **kw)  # type: ignore[arg-type]


def _ignored(key: str) -> OptionSpec:
    return _w(key, "any", None, "Spark/Flink-only: accepted so pasted option maps work; no effect here.")


declare(
    # -- the table: created by the first write, checked against hoodie.properties after -------
    _w("hoodie.table.name", "str", None, "Table name; defaults to the last folder of the table path."),
    _w("hoodie.database.name", "str", None, "Database name recorded in hoodie.properties."),
    _w("hoodie.datasource.write.operation", "choice", "upsert", "Write operation when none is passed.",
       allowed=OPERATIONS),
    _w("hoodie.datasource.write.table.type", "choice", None, "Table type of a new table (default COPY_ON_WRITE).",
       allowed=TABLE_TYPES),
    _w("hoodie.table.type", "choice", None, "Table type as hoodie.properties spells it.", allowed=TABLE_TYPES),
    _w("hoodie.write.table.version", "int", 8, "Table version of a new table: 6 (Hudi 0.14/0.15) or 8 "
       "(Hudi 1.0); Hudi 1.1 defaults to 9."),
    _w("hoodie.table.version", "int", None, "Table version as hoodie.properties spells it."),
    _w("hoodie.populate.meta.fields", "bool", True, "Write the _hoodie_* meta columns into data files."),
    _w("hoodie.table.timeline.timezone", "choice", "LOCAL", "Time zone of instant times.",
       allowed=("LOCAL", "UTC")),
    _w("hoodie.avro.schema.validate", "bool", True, "Refuse a write whose schema is not compatible with the table's."),
    # -- keys and partitions ------------------------------------------------------------------
    _w("hoodie.datasource.write.recordkey.field", "str", None, "Record key column(s), comma separated."),
    _w("hoodie.table.recordkey.fields", "str", None, "Record key column(s) as hoodie.properties spells it."),
    _w("hoodie.datasource.write.partitionpath.field", "str", None, "Partition column(s), comma separated."),
    _w("hoodie.table.partition.fields", "str", None, "Partition column(s) as hoodie.properties spells it."),
    _w("hoodie.datasource.write.precombine.field", "str", None, "Ordering column: the latest record of a key wins."),
    _w("hoodie.table.precombine.field", "str", None, "Ordering column as 0.x hoodie.properties spells it."),
    _w("hoodie.table.ordering.fields", "str", None, "Ordering column(s) as 1.x hoodie.properties spells it."),
    _w("hoodie.datasource.write.keygenerator.type", "str", None, "Key generator: SIMPLE, COMPLEX, "
       "NON_PARTITION, TIMESTAMP, CUSTOM (inferred from the key and partition columns)."),
    _w("hoodie.datasource.write.keygenerator.class", "str", None, "Key generator by Hudi class name."),
    _w("hoodie.table.keygenerator.type", "str", None, "Key generator type as hoodie.properties spells it."),
    _w("hoodie.table.keygenerator.class", "str", None, "Key generator class as hoodie.properties spells it."),
    _w("hoodie.datasource.write.hive_style_partitioning", "bool", False, "Partition folders as column=value."),
    _w("hoodie.datasource.write.partitionpath.urlencode", "bool", False, "URL-encode partition values in paths."),
    _w("hoodie.keygen.timebased.*", "any", None, "Timestamp key generator settings, kept in hoodie.properties."),
    _w("hoodie.datasource.write.partitions.to.delete", "str", None, "Partitions a delete_partition "
       "operation drops, comma separated."),
    # -- merging ------------------------------------------------------------------------------
    _w("hoodie.record.merge.mode", "choice", None, "How records of one key merge (default "
       "EVENT_TIME_ORDERING with an ordering column).", allowed=("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING")),
    _w("hoodie.compaction.payload.class", "str", None, "Record payload class: on a new table it decides the "
       "merge (OverwriteWithLatestAvroPayload: commit time; DefaultHoodieRecordPayload, EventTimeAvroPayload: "
       "event time; v8 records the merge mode it implies), on an existing one it must merge as the table "
       "does. Other payloads are Java code: refused."),
    _w("hoodie.datasource.write.payload.class", "str", None, "Record payload class (datasource spelling of "
       "hoodie.compaction.payload.class)."),
    _w("hoodie.write.set.null.for.missing.columns", "bool", False, "Write nulls for table columns a batch "
       "lacks (false, Hudi's default: such a write fails, so an upsert cannot blank columns it left out)."),
    _w("hoodie.write.num.retries.on.conflict.failures", "int", 0, "Times a write that lost a conflict to "
       "another writer (ConcurrentWriteError) runs again on the table as it is then (0: it fails).",
       minimum=0),
    _w("hoodie.combine.before.insert", "bool", False, "Deduplicate incoming records by key on insert."),
    _w("hoodie.combine.before.upsert", "bool", True, "Deduplicate incoming records by key on upsert."),
    _w("hoodie.combine.before.delete", "bool", True, "Deduplicate incoming keys on delete."),
    _w("hoodie.datasource.write.insert.drop.duplicates", "bool", False, "On insert, drop records whose "
       "key is already in the table."),
    # -- file sizing --------------------------------------------------------------------------
    _w("hoodie.parquet.max.file.size", "int", 120 * MB, "Target size of base files, in bytes.", minimum=1),
    _w("hoodie.parquet.small.file.limit", "int", 100 * MB, "Base files smaller than this take new inserts "
       "(0 turns bin-packing off).", minimum=0),
    _w("hoodie.copyonwrite.insert.split.size", "int", 500_000, "Records per new file group when the "
       "record size is unknown and auto split is off.", minimum=1),
    _w("hoodie.copyonwrite.insert.auto.split", "bool", True, "Size new file groups from the average record size."),
    _w("hoodie.copyonwrite.record.size.estimate", "int", 1024, "Record size in bytes assumed before any commit.", minimum=1),
    _w("hoodie.merge.small.file.group.candidates.limit", "int", 1, "MERGE_ON_READ: small file groups per "
       "partition that take inserts into their logs.", minimum=0),
    # -- file formats -------------------------------------------------------------------------
    _w("hoodie.parquet.compression.codec", "choice", "gzip", "Parquet codec of base files and Parquet log "
       "blocks; gzip and zstd at the levels Hudi's writer uses (zlib 6, zstd 3). Hudi's lzo has no "
       "pyarrow writer: refused before anything is written.", allowed=PARQUET_CODECS),
    _w("hoodie.parquet.block.size", "int", 120 * MB, "Parquet row group size in bytes, of the Arrow rows buffered "
       "(base files of writes, compaction and clustering; a streamed write or merge caps it to its memory budget).", minimum=1),
    _w("hoodie.parquet.page.size", "int", MB, "Parquet data page size in bytes (base files of writes, "
       "compaction and clustering).", minimum=1),
    _w("hoodie.parquet.bloom.filter.enabled", "bool", True, "Write the record-key bloom filter (and min/max "
       "keys) into base file footers, as Hudi does; false saves its hashing (about half of an insert's CPU) "
       "where no bloom index reads it: a BLOOM or GLOBAL_BLOOM index type writes it anyway."),
    _w("hoodie.parquet.dictionary.enabled", "bool", True, "Dictionary-encode Parquet columns (base files of "
       "writes, compaction and clustering; unique meta columns and a single record-key field never are)."),
    _w("hoodie.logfile.max.size", "int", 1024 * MB, "Roll over to a new log file beyond this size in bytes.", minimum=1),
    _w("hoodie.logfile.data.block.format", "choice", "avro", "Format of log data blocks.",
       allowed=("avro", "parquet")),
    _w("hoodie.logfile.data.block.max.size", "int", 256 * MB, "Split log data blocks beyond this size in bytes.", minimum=1),
    # -- index --------------------------------------------------------------------------------
    _w("hoodie.index.type", "choice", "SIMPLE", "How incoming keys find their file group.", allowed=INDEX_TYPES),
    _w("hoodie.simple.index.update.partition.path", "bool", True, "GLOBAL_SIMPLE: a key that moves "
       "partition is deleted from the old one."),
    _w("hoodie.bloom.index.update.partition.path", "bool", True, "GLOBAL_BLOOM: a key that moves "
       "partition is deleted from the old one."),
    _w("hoodie.record.index.update.partition.path", "bool", False, "RECORD_INDEX: a key that moves "
       "partition is deleted from the old one (off, as in Hudi: the record is updated where it is)."),
    _w("hoodie.bloom.index.use.metadata", "bool", False, "BLOOM: read bloom filters from the metadata "
       "table instead of base file footers."),
    _w("hoodie.index.bloom.num_entries", "int", 60000, "Keys a bloom filter is sized for.", minimum=1),
    _w("hoodie.index.bloom.fpp", "float", 0.000000001, "False positive rate a bloom filter is sized for.",
       between=(0.0, 1.0)),
    _w("hoodie.bloom.index.filter.type", "choice", "DYNAMIC_V0", "Bloom filter kind written to footers.",
       allowed=("SIMPLE", "DYNAMIC_V0")),
    _w("hoodie.bloom.index.filter.dynamic.max.entries", "int", 100000, "DYNAMIC_V0: keys a filter grows to.", minimum=1),
    _w("hoodie.datasource.write.streaming.checkpoint.identifier", "str", "default_single_writer",
       "Structured Streaming sink: this writer's name in the commit's _hudi_streaming_sink_checkpoint "
       "(micro-batches it already committed are skipped on replay); one per streaming writer."),
    _w("hoodie.bulkinsert.sort.mode", "choice", "NONE", "bulk_insert's row order and layout, as Hudi's "
       "BulkInsertSortMode: NONE (rows as they come; on Spark each task writes its own rows, no shuffle), "
       "GLOBAL_SORT (sorted by partition path and record key across the input), PARTITION_SORT (sorted within "
       "each Spark task; in one process the same as GLOBAL_SORT), PARTITION_PATH_REPARTITION (on Spark, each "
       "partition path's rows in one task), PARTITION_PATH_REPARTITION_AND_SORT (that, sorted by partition "
       "path). A sorting mode reads a streamed input whole.", allowed=BULK_INSERT_SORT_MODES),
    _w("hoodie.bulkinsert.shuffle.parallelism", "int", None, "Spark: tasks of bulk_insert's shuffling sort "
       "modes (GLOBAL_SORT, PARTITION_PATH_REPARTITION*); default: the DataFrame's partitions.", minimum=1),
    # -- Spark streaming sink (HoodieStreamingSink) -----------------------------------------------
    _w("hoodie.datasource.write.streaming.retry.count", "int", 3, "Spark streaming sink: attempts at a "
       "micro-batch whose write failed (each failed attempt leaves nothing behind).", minimum=0),
    _w("hoodie.datasource.write.streaming.retry.interval.ms", "int", 2000, "Spark streaming sink: wait "
       "before the first retry of a micro-batch, doubled before each next one.", minimum=0),
    _w("hoodie.datasource.write.streaming.ignore.failed.batch", "bool", False, "Spark streaming sink: a "
       "micro-batch that failed every attempt is logged and dropped instead of failing the query (its rows "
       "are not written)."),
    # -- Spark-only keys ----------------------------------------------------------------------
    *(_ignored(k) for k in (
        "hoodie.upsert.shuffle.parallelism", "hoodie.insert.shuffle.parallelism",
        "hoodie.delete.shuffle.parallelism",
        "hoodie.datasource.hive_sync.enable",
        "hoodie.embed.timeline.server", "hoodie.write.markers.type")),
)
