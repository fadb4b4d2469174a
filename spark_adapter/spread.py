"""Counting and routing a write that needs no index (bulk_insert, insert, insert_overwrite)
with Spark's own expressions: the rows cross into Python once, in the task writing them.

A partition path is a function of the partition fields alone, so Spark counts the rows per
*distinct value* of the partition fields (``groupBy``, in the JVM) and the driver turns each
distinct value into its path with the core's key generator (one row per partition value, the
same code the executors would run, so the paths and their checks are the core's). Routing
is a broadcast join of the rows with one row per (partition value, bucket): each partition's
inserts are spread over its buckets in proportion to the plan by ``pmod(xxhash64(record key
fields), total)`` falling in the bucket's range. The hash is of the record-key *values*, so
it is deterministic (a retried task gives every row the same bucket) and equal keys meet.

Only key generators whose partition path is a plain rendering of the values (SIMPLE,
COMPLEX, NON_PARTITION) and value types Spark and Arrow hand over exactly (strings,
integers, booleans, dates) take this route; a timestamp-based path, whose distinct raw
values may be as many as the rows, goes through :func:`.tasks.keys_of` instead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs

from hudi_format.engine import IS_DELETED
from hudi_format.errors import HudiError

from . import tasks
from .arrow import local_frame, to_hudi_arrow

_KEYGENS = ("SIMPLE", "COMPLEX", "NON_PARTITION")
_PV = "__hoodie_pv_"            # the broadcast side's copy of partition field i
_LO, _HI, _TOTAL = "__hoodie_lo", "__hoodie_hi", "__hoodie_total"


def _exact_type(dtype) -> bool:
    from pyspark.sql import types as T
    return isinstance(dtype, (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                              T.BooleanType, T.DateType))


def applies(keyer: "tasks.Keyer", df, dedupe: bool) -> bool:
    """Whether this write can be counted and routed by Spark expressions. A write that
    precombines needs equal keys to meet, which equal key *values* guarantee only for one
    key field (a composite key's rendering may make different values equal)."""
    spec = keyer.spec
    if spec.config.keygen_type not in _KEYGENS or spec.operation == "delete_partition":
        return False
    fields = {f.name: f.dataType for f in df.schema.fields}
    key_fields = list(spec.config.record_key_fields)
    if not key_fields or any(f not in fields for f in key_fields) or (dedupe and len(key_fields) > 1):
        return False     # the keys stage names a missing field
    return all(f in fields and _exact_type(fields[f]) for f in partition_fields(keyer))


def partition_fields(keyer: "tasks.Keyer") -> list[str]:
    config = keyer.spec.config
    return [] if config.keygen_type == "NON_PARTITION" else list(config.partition_fields)


@attrs.frozen
class PartitionValues:
    """The distinct values of the partition fields, each with its partition path and rows."""

    fields: list               # partition field names (empty: one partition)
    values: list               # per distinct value, the tuple of field values (Python)
    paths: list                # its partition path
    rows: list                 # its number of rows

    @property
    def inserts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for p, n in zip(self.paths, self.rows):
            out[p] += n
        return dict(out)


def count(df, keyer: "tasks.Keyer") -> PartitionValues:
    """Rows per distinct partition value (a Spark aggregation), their paths by the core's key
    generator on the driver; records without a key fail here, before the instant opens."""
    from pyspark.sql import functions as F
    fields = partition_fields(keyer)
    key_fields = list(keyer.spec.config.record_key_fields)
    types = {f.name: f.dataType for f in df.schema.fields}
    from pyspark.sql.types import StringType

    def missing(f):
        c = F.col(f)
        return c.isNull() | (c == "") if isinstance(types[f], StringType) else c.isNull()

    no_key = missing(key_fields[0])
    for f in key_fields[1:]:
        no_key = no_key & missing(f)
    grouped = df.groupBy(*fields).agg(F.count(F.lit(1)).alias("n"),
                                      F.sum(F.when(no_key, 1).otherwise(0)).alias("no_key")).toArrow()
    bad = sum(v or 0 for v in grouped.column("no_key").to_pylist())
    if bad:
        which = key_fields[0] if len(key_fields) == 1 else key_fields
        raise HudiError(f"record key field(s) {which!r} are null or empty in {bad} record(s); "
                        f"Hudi requires a key")
    ns = grouped.column("n").to_pylist()
    if not fields:
        return PartitionValues([], [()] * len(ns), [""] * len(ns), ns)
    raw = grouped.select(fields)
    conformed = keyer.spec.conform_present(to_hudi_arrow(raw, keyer.restrict(fields).in_schema))
    paths = keyer.spec.keygen.partition_paths(conformed)
    values = list(zip(*(raw.column(f).to_pylist() for f in fields)))
    return PartitionValues(fields, values, paths.to_pylist(), ns)


def route(df, values: PartitionValues, assignment: "tasks.Assignment", key_fields: list[str]):
    """``df`` with each row's bucket and shuffle slot (``tasks.BUCKET``, ``tasks.SLOT``; null:
    a partition value the plan never saw, which the writing task rejects)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType
    spark = df.sparkSession
    types = {f.name: f.dataType for f in df.schema.fields}
    fields = values.fields
    rows: list[tuple[Any, ...]] = []
    for value, path in zip(values.values, values.paths):
        targets = assignment.spread.get(path) or []
        total = sum(n for _, n in targets)
        lo = 0
        for bucket, n in targets:
            rows.append(tuple(value) + (lo, lo + n, total, bucket, assignment.slots[bucket]))
            lo += n
    schema = StructType([StructField(f"{_PV}{i}", types[f]) for i, f in enumerate(fields)] + [
        StructField(_LO, LongType()), StructField(_HI, LongType()), StructField(_TOTAL, LongType()),
        StructField(tasks.BUCKET, IntegerType()), StructField(tasks.SLOT, IntegerType())])
    ranges = F.broadcast(local_frame(spark, rows, schema))
    h = F.pmod(F.xxhash64(*[df[f] for f in key_fields]), ranges[_TOTAL])
    cond = (h >= ranges[_LO]) & (h < ranges[_HI])
    for i, f in enumerate(fields):
        cond = cond & df[f].eqNullSafe(ranges[f"{_PV}{i}"])
    joined = df.join(ranges, on=cond, how="left")
    return joined.select(*[df[c] for c in df.columns], ranges[tasks.BUCKET], ranges[tasks.SLOT])


def renders_keys(keyer: "tasks.Keyer", df) -> bool:
    """Whether Spark expressions give every row's record key and partition path exactly as
    the core's key generator does: one record key field of a string or integer type (its
    key is the value as a string, in the same decimal form), not a COMPLEX key generator
    (``field:value``), and partition paths :func:`applies` can count."""
    from pyspark.sql import types as T
    spec = keyer.spec
    key_fields = list(spec.config.record_key_fields)
    if len(key_fields) != 1 or spec.config.keygen_type == "COMPLEX" or not applies(keyer, df, False):
        return False
    dtype = {f.name: f.dataType for f in df.schema.fields}[key_fields[0]]
    return isinstance(dtype, (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def with_keys(df, keyer: "tasks.Keyer", values: PartitionValues):
    """``df`` with each row's record key and partition path (``tasks.KEY``,
    ``tasks.PARTITION``) by Spark expressions (see :func:`renders_keys`): the key is the key
    field cast to a string, the path that of the row's partition value in ``values`` (a
    broadcast join; null for a value :func:`count` never saw, which no plan holds)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType
    key_field = keyer.spec.config.record_key_fields[0]
    key = df[key_field].cast("string").alias(tasks.KEY)
    fields = values.fields
    if not fields:
        return df.select(*[df[c] for c in df.columns], key, F.lit(values.paths[0] if values.paths else "")
                         .alias(tasks.PARTITION))
    types = {f.name: f.dataType for f in df.schema.fields}
    schema = StructType([StructField(f"{_PV}{i}", types[f]) for i, f in enumerate(fields)]
                        + [StructField(tasks.PARTITION, StringType())])
    paths = F.broadcast(local_frame(df.sparkSession, [tuple(v) + (p,) for v, p in zip(values.values, values.paths)],
                                    schema))
    cond = None
    for i, f in enumerate(fields):
        eq = df[f].eqNullSafe(paths[f"{_PV}{i}"])
        cond = eq if cond is None else cond & eq
    joined = df.join(paths, on=cond, how="left")
    return joined.select(*[df[c] for c in df.columns], key, paths[tasks.PARTITION])


_KIND, _JP, _JF = tasks.KIND, tasks.TARGET_PARTITION, tasks.TARGET_FILE


def tag(rows, lookup):
    """Tagged rows (key, partition and the index's ``FOUND_IN``/``FILE_ID`` joined on), one
    row per action, by Spark expressions following the rule of the core's
    ``IndexLookup.actions``: an update (``U``) or delete (``D``) in the file group the index
    found the key in, an insert (``I``) in the record's partition, a moved key both a ``D``
    and an ``I``, a dropped one nothing. Counting (:func:`count_tagged`) and routing
    (:func:`route_tagged`) read the same rows, so the plan and the routes agree."""
    from pyspark.sql import functions as F
    op, moves = lookup.operation, lookup.global_index and lookup.moves
    known = F.col(tasks.FILE_ID).isNotNull()
    moved = (known & F.coalesce(F.col(tasks.FOUND_IN) != F.col(tasks.PARTITION), F.lit(False))) if moves \
        else F.lit(False)
    if tasks.OUTRANKED in rows.columns:    # its stored record outranks it: the key stays where it is
        moved = moved & ~F.coalesce(F.col(tasks.OUTRANKED), F.lit(False))

    def kinds(*ks):
        return F.array(*[F.lit(k) for k in ks])

    none = F.array().cast("array<string>")
    # a record flagged _hoodie_is_deleted deletes where its key is stored, and is never inserted
    flagged = F.coalesce(F.col(IS_DELETED), F.lit(False)) if IS_DELETED in rows.columns else F.lit(False)
    insert = F.when(flagged, none).otherwise(kinds("I"))
    if op == "delete":
        kind = F.when(known, kinds("D")).otherwise(none)
    elif op in ("upsert", "insert"):
        stay = kinds("U") if op == "upsert" else none
        kind = F.when(moved, F.when(flagged, kinds("D")).otherwise(kinds("D", "I"))).when(known, stay) \
            .otherwise(insert)
    else:
        kind = insert
    exploded = rows.withColumn(_KIND, F.explode(kind))
    is_insert = F.col(_KIND) == "I"
    data = [F.col(c) for c in rows.columns if c not in (tasks.FOUND_IN, tasks.FILE_ID, tasks.OUTRANKED)]
    return exploded.select(*data, F.col(_KIND),
                           F.when(is_insert, F.col(tasks.PARTITION)).otherwise(F.col(tasks.FOUND_IN)).alias(_JP),
                           F.when(is_insert, F.lit(None).cast("string")).otherwise(F.col(tasks.FILE_ID)).alias(_JF))


def count_tagged(tagged, dedupe: bool):
    """Rows of ``(kind, partition, file_id, n)``: updates and deletes per file group the index
    found, inserts per partition; with ``dedupe`` a key counts once per partition (the task
    writing it merges its duplicates)."""
    from pyspark.sql import functions as F
    n = F.count(F.lit(1))
    if dedupe and tasks.FIRST in tagged.columns:    # tagged where all rows of a key met
        n = F.sum(F.col(tasks.FIRST).cast("long"))
    elif dedupe:
        tagged = tagged.dropDuplicates([tasks.KEY, tasks.PARTITION, _KIND])
    return tagged.groupBy(F.col(_KIND).alias("kind"), F.col(_JP).alias("partition"),
                          F.col(_JF).alias("file_id")).agg(n.alias("n"))


def route_tagged(tagged, assignment: "tasks.Assignment"):
    """Tagged rows (:func:`tag`) with their bucket, delete and update flags and shuffle slot: one
    broadcast join with the plan's targets, ``(partition, file id)`` of existing file
    groups and ``(partition, hash range)`` of a partition's inserts (spread over its buckets
    in proportion to the plan by a hash of the key)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType
    targets: list[tuple[Any, ...]] = []
    for name, bucket in zip(assignment.located, assignment.located_buckets):
        part, fid = name.split("\0", 1)
        targets.append((part, fid, 0, 1, 1, bucket, assignment.slots[bucket]))
    for part, spread_over in assignment.spread.items():
        total, lo = sum(n for _, n in spread_over), 0
        for bucket, n in spread_over:
            targets.append((part, None, lo, lo + n, total, bucket, assignment.slots[bucket]))
            lo += n
    schema = StructType([StructField("__hoodie_tp", StringType()), StructField("__hoodie_tf", StringType()),
                         StructField(_LO, LongType()), StructField(_HI, LongType()), StructField(_TOTAL, LongType()),
                         StructField(tasks.BUCKET, IntegerType()), StructField(tasks.SLOT, IntegerType())])
    plan = F.broadcast(local_frame(tagged.sparkSession, targets, schema))
    h = F.pmod(F.xxhash64(tagged[tasks.KEY]), plan[_TOTAL])
    cond = (tagged[_JP].eqNullSafe(plan["__hoodie_tp"])
            & tagged[_JF].eqNullSafe(plan["__hoodie_tf"]) & (h >= plan[_LO]) & (h < plan[_HI]))
    joined = tagged.join(plan, on=cond, how="left")
    data = [c for c in tagged.columns if c not in (_KIND, _JP, _JF, tasks.FIRST)]
    return joined.select(*[tagged[c] for c in data], plan[tasks.BUCKET], plan[tasks.SLOT],
                         (tagged[_KIND] == "D").alias(tasks.DELETE), (tagged[_KIND] == "U").alias(tasks.UPDATED))
