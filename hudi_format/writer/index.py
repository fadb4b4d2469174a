"""Tagging: which file group already holds each incoming record key.

The simple index matches the incoming keys with the keys stored in the latest file slices of
the affected partitions (all partitions for the global variant). With the bloom index, each base
file's footer bloom filter (and min/max key range) first rules out the files that cannot hold
any incoming key, so only candidate files are opened for their keys. Either way only the key
column is read, and only the stored keys that arrive are kept (hash sets of the incoming side).
"""

from __future__ import annotations

import logging
import os
from typing import Callable
from concurrent.futures import ThreadPoolExecutor

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..chunks import one_array
from ..membership import is_in, rows_in
from ..options import option
from ..read.merge import MergeSpec, merge_file_slice, merge_pieces, record_keys, row_numbers
from ..storage import Storage
from ..view import FileSlice
from .grouping import groups_of

log = logging.getLogger(__name__)


def candidate_slices_by_bloom(storage: Storage, slices: list[FileSlice], keys: pa.Array,
                              read_footer) -> list[FileSlice]:
    """Slices whose base file may hold one of ``keys`` (range + bloom check); log files are
    not indexed by blooms, so slices with logs always stay candidates."""
    return [s for s, _ in candidate_keys_by_bloom(storage, slices, [keys] * len(slices), read_footer)]


def candidate_keys_by_bloom(storage: Storage, slices: list[FileSlice], keys: list[pa.Array],
                            read_footer) -> list[tuple[FileSlice, pa.Array]]:
    """Each slice that may hold one of its ``keys`` (``keys[i]`` for ``slices[i]``) with the
    keys that passed its base file's key range and bloom filter: Hudi's bloom index then reads
    the file's keys for those candidates only. Slices with logs keep all their keys (log files
    are not indexed by blooms)."""
    out = []
    for s, ks in zip(slices, keys):
        if s.log_files or not s.base_file:
            out.append((s, ks))
            continue
        footer = read_footer(storage, s.base_file, s.base_file_size)
        if footer.min_key is not None and footer.max_key is not None:
            in_range = pc.and_(pc.greater_equal(ks, footer.min_key), pc.less_equal(ks, footer.max_key))
            ks = pc.filter(ks, in_range)
        if len(ks) and footer.bloom_filter is not None:
            ks = ks.filter(footer.bloom_filter.might_contain_all(ks))
        if len(ks):
            out.append((s, ks))
    return out


def keys_by_partition(slices: list[FileSlice], keys: pa.Array, partitions: pa.Array) -> list[pa.Array]:
    """For each slice, the incoming keys written to its partition: all a non-global index can
    match there (the hash set built per slice is then a partition's keys, not the batch's)."""
    grouped = groups_of(pa.table({"p": partitions, "row": row_numbers(len(keys))}), ["p"])
    part_keys = {part: keys.take(idx) for (part,), idx in grouped}
    empty = pa.array([], keys.type)
    return [part_keys.get(s.partition_path, empty) for s in slices]


def tag(incoming: pa.Table, existing: pa.Table, global_index: bool) -> pa.Table:
    """Add ``file_id`` (null for new records) and ``existing_partition`` to ``incoming``.

    ``incoming`` has columns ``key`` and ``partition`` (plus ``row``, the position in the batch);
    ``existing``, the stored locations of keys that arrive (what :func:`known_locations` finds:
    every index narrows its answer to them, so it is the smaller side). Each incoming record
    looks its (key, partition) - its key, for a global index - up among them, in place (no join,
    no re-sort). A location stored twice (a duplicated key) falls back to a join, which tags the
    record once per location.
    """
    wanted = one_array(incoming.column("key"))
    if global_index:
        probe, stored = wanted, one_array(existing.column("key"))
    else:
        probe = _pair(wanted, one_array(incoming.column("partition")))
        stored = _pair(one_array(existing.column("key")), one_array(existing.column("partition")))
    if pc.count_distinct(stored).as_py() != len(stored):
        return _tag_by_join(incoming, existing, global_index)
    at = pc.index_in(probe, value_set=stored)
    file_ids = pc.take(one_array(existing.column("file_id")), at)
    found = pc.take(one_array(existing.column("partition")), at) if global_index else \
        pc.if_else(pc.is_null(at), pa.scalar(None, pa.string()), one_array(incoming.column("partition")))
    return incoming.append_column("file_id", file_ids).append_column("existing_partition", found)


def _pair(keys: pa.Array, partitions: pa.Array) -> pa.Array:
    """One string per (key, partition) pair; NUL cannot occur in a partition path."""
    return pc.binary_join_element_wise(partitions, keys, "\x00")


def _tag_by_join(incoming: pa.Table, existing: pa.Table, global_index: bool) -> pa.Table:
    if global_index:
        right = existing.select(["key", "partition", "file_id"]).rename_columns(
            ["key", "existing_partition", "file_id"])
        joined = incoming.join(right, "key", join_type="left outer")
    else:
        right = existing.select(["key", "partition", "file_id"])
        joined = incoming.join(right, ["key", "partition"], join_type="left outer")
        joined = joined.append_column("existing_partition",
                                      pc.if_else(pc.is_null(joined.column("file_id")),
                                                 pa.scalar(None, pa.string()), joined.column("partition")))
    return joined.sort_by("row")


# -- indexes kept in the metadata table -------------------------------------------------------------
def is_global(index_type: str) -> bool:
    """Global indexes match a key in any partition (the record index is global, as in Hudi)."""
    return index_type.startswith("GLOBAL") or index_type == "RECORD_INDEX"


def usable_metadata_table(storage: Storage, config, timeline, partition: str):
    """The data table's metadata table when ``partition`` is declared and it is up to date."""
    from ..errors import HudiError
    from ..metadata.reader import MetadataTable
    if timeline is None or partition not in config.metadata_partitions:
        return None
    mdt = MetadataTable(storage, config, timeline)
    try:
        reason = mdt.staleness() if mdt.has_partition(partition) else "absent"
    except HudiError as exc:
        reason = str(exc)
    if reason is not None:
        log.info("not tagging through the metadata table of %s: %s", storage.url, reason)
        return None
    return mdt


def record_index_locations(mdt, slices, keys: pa.Array, changed: Callable[[], bool]) -> pa.Table:
    """``(key, partition, file_id)`` of the incoming keys the record index knows, in the live
    slices of the write's table state (``slices``: every latest file slice, or their
    ``(partition, file id)``).

    The record index is read as it is now, which may be newer than that state: a commit or
    clustering that completed since the write loaded the table placed keys in file groups the
    state does not have. Such a key is not absent (taken so, a delete would do nothing and an
    upsert would write a second copy), so a location outside ``slices`` raises
    ``ConcurrentWriteError`` when ``changed()`` (an instant completed since the state was
    loaded): the write, run again, plans on the table as it is then. Otherwise the index is
    behind the table itself: those entries are left out, with a warning."""
    from ..config import PROPS_PATH
    from ..errors import ConcurrentWriteError, HudiError
    # Another writer may drop or rebuild the index while this one reads it: its files gone, or
    # some of its file groups listed and not others (a key's group is its hash modulo their
    # count: a short list answers "absent" for keys the index holds). Drops and rebuilds declare
    # it anew in hoodie.properties before they touch its files, so the file read before and
    # after the index tells: then the write, run again, tags on the table as it is then.
    declared = mdt.storage.read_bytes(PROPS_PATH)
    try:
        found = mdt.record_index(keys).select(["key", "partition", "file_id"])
    except HudiError as exc:
        if changed() or mdt.storage.read_bytes(PROPS_PATH) != declared:
            raise ConcurrentWriteError(f"the record index of {mdt.storage.url} changed while this write read "
                                       f"it ({exc}); retry the write") from exc
        raise
    if mdt.storage.read_bytes(PROPS_PATH) != declared:
        raise ConcurrentWriteError(f"the metadata partitions of {mdt.storage.url} were declared anew while this "
                                   "write read the record index; retry the write")
    pairs = [(s.partition_path, s.file_id) if isinstance(s, FileSlice) else tuple(s) for s in slices]
    live = pa.table({"partition": pa.array([p for p, _ in pairs], pa.string()),
                     "file_id": pa.array([f for _, f in pairs], pa.string())})
    kept = found.join(live, ["partition", "file_id"], join_type="inner").select(["key", "partition", "file_id"])
    if kept.num_rows != found.num_rows:
        newer = found.join(live, ["partition", "file_id"], join_type="left anti")
        example = newer.slice(0, 1).to_pylist()[0]
        where = (f"{newer.num_rows} key(s) in file groups this write's table state does not have "
                 f"(e.g. {example['key']!r} in {example['partition']}/{example['file_id']})")
        if changed():
            raise ConcurrentWriteError(f"the record index of {mdt.storage.url} places {where}: another "
                                       "commit completed since the write loaded the table; retry the write")
        log.warning("the record index of %s places %s, which the table does not have: left out "
                    "(hudi-format validate checks the index)", mdt.storage.url, where)
    return kept


def completed_times(timeline) -> frozenset[str]:
    """The instant times completed on ``timeline`` (a write's table state, kept to tell later
    whether the table moved on: :func:`completed_since`)."""
    return frozenset(i.timestamp for i in timeline.instants if i.is_completed)


def completed_since(timeline, completed: frozenset[str]) -> bool:
    """Whether an instant completed on ``timeline`` (loaded now) that ``completed`` (from
    :func:`completed_times` of a state loaded earlier) does not hold."""
    return any(i.is_completed and i.timestamp not in completed for i in timeline.instants)


def candidate_slices_by_metadata_bloom(mdt, slices: list[FileSlice], keys: pa.Array) -> list[FileSlice]:
    """Like :func:`candidate_slices_by_bloom`, with the bloom filters of the metadata table's
    ``bloom_filters`` partition instead of base file footers (``hoodie.bloom.index.use.metadata``)."""
    with_base = [s for s in slices if s.base_file and not s.log_files]
    blooms = mdt.bloom_filters([(s.partition_path, s.base_file_name) for s in with_base])
    out = []
    for s in slices:
        bloom = blooms.get((s.partition_path, s.base_file_name)) if s.base_file and not s.log_files else None
        if bloom is None or pc.any(bloom.might_contain_all(keys)).as_py():
            out.append(s)
    return out


def known_locations(storage: Storage, config, options, state, slices: list[FileSlice], keys: pa.Array,
                    spec: MergeSpec, schema: pa.Schema, read_footer,
                    partitions: pa.Array | None = None) -> pa.Table:
    """``(key, partition, file_id)`` of the live records among ``slices`` that ``keys`` may
    update, by the index ``hoodie.index.type`` names:

    - ``RECORD_INDEX``: the metadata table's record index (global), no data file read;
    - ``BLOOM``/``GLOBAL_BLOOM``: bloom filters rule files out (from the metadata table's
      ``bloom_filters`` when ``hoodie.bloom.index.use.metadata``, else base file footers), then
      the candidates' keys are read;
    - ``SIMPLE``/``GLOBAL_SIMPLE``: the keys of every slice are read.

    ``partitions``: the incoming records' partition paths; a non-global index given them looks
    for each slice's partition's keys only. Without a usable metadata partition the record index falls back to the global simple index
    and the metadata bloom index to footers.
    """
    index_type = option(options, "hoodie.index.type")
    timeline = state.timeline if state is not None else None
    visible = state.visible if state is not None else (lambda _: False)
    str_keys = pc.cast(keys, pa.string())
    if index_type == "RECORD_INDEX" and slices:
        mdt = usable_metadata_table(storage, config, timeline, "record_index")
        if mdt is not None:
            from ..errors import ConcurrentWriteError, HudiError
            from ..timeline import Timeline
            planned = completed_times(timeline)
            try:
                return record_index_locations(mdt, slices, str_keys,
                                              lambda: completed_since(Timeline.load(storage, config), planned))
            except ConcurrentWriteError:
                raise
            except HudiError as exc:   # a broken index (a drop killed half-way): every key read
                log.warning("not tagging through the record index of %s: %s", storage.url, exc)
    per_slice = [str_keys] * len(slices)
    if partitions is not None and not is_global(index_type) and slices:
        per_slice = keys_by_partition(slices, str_keys, partitions)
    if index_type.endswith("BLOOM") and slices:
        mdt = usable_metadata_table(storage, config, timeline, "bloom_filters") \
            if option(options, "hoodie.bloom.index.use.metadata") else None
        if mdt is not None:
            kept = {id(s) for s in candidate_slices_by_metadata_bloom(mdt, slices, str_keys)}
            per_slice = [ks for s, ks in zip(slices, per_slice) if id(s) in kept]
            slices = [s for s in slices if id(s) in kept]
        else:
            pairs = candidate_keys_by_bloom(storage, slices, per_slice, read_footer)
            slices, per_slice = [s for s, _ in pairs], [ks for _, ks in pairs]
    return matching_keys(storage, slices, spec, schema, visible, str_keys, per_slice)


def matching_keys(storage: Storage, slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema,
                  visible, keys: pa.Array, per_slice: list[pa.Array] | None = None) -> pa.Table:
    """``(key, partition, file_id)`` of the live records in ``slices`` whose key is among
    ``keys`` (``per_slice[i]`` instead for ``slices[i]``, when given). Each slice's keys are
    read (the key column only for a slice without logs, which needs no merge; slices on
    threads, as Parquet decoding releases the GIL) and narrowed to the incoming keys at once:
    nothing is kept for the stored keys no record updates. Building the hash set of the keys
    looked for costs more than probing it, so the narrower each slice's set, the better."""
    everyone = pc.unique(pc.drop_null(keys)) if per_slice is None else None
    distinct: dict[int, pa.Array] = {}     # slices of one partition share their keys' set
    for ks in per_slice or ():
        if id(ks) not in distinct:
            distinct[id(ks)] = pc.unique(pc.drop_null(ks))
    merge_cols = set(spec.needed_columns())
    key_col = {"_hoodie_record_key"} if spec.has_meta_fields else {f.split(".")[0] for f in spec.record_key_fields}
    with_logs = pa.schema([f for f in schema if f.name in merge_cols])
    base_only = pa.schema([f for f in schema if f.name in key_col])

    def one(i: int) -> pa.Table | None:
        s = slices[i]
        wanted = everyone if per_slice is None else distinct[id(per_slice[i])]
        if not len(wanted):
            return None
        rows = merge_file_slice(storage, s, with_logs if s.log_files else base_only, spec, visible)
        found = pc.cast(record_keys(rows, spec), pa.string()) if rows.num_rows else pa.array([], pa.string())
        found = found.filter(is_in(found, wanted))
        n = len(found)
        if not n:
            return None
        return pa.table({"key": found, "partition": pa.repeat(pa.scalar(s.partition_path), n),
                         "file_id": pa.repeat(pa.scalar(s.file_id), n)})

    parts: list[pa.Table | None] = []
    if everyone is not None and not len(everyone):
        pass
    elif len(slices) > 1:
        with ThreadPoolExecutor(min(len(slices), os.cpu_count() or 1)) as pool:
            parts = list(pool.map(one, range(len(slices))))
    else:
        parts = [one(i) for i in range(len(slices))]
    found = [t for t in parts if t is not None]
    if not found:
        return pa.table({"key": pa.array([], pa.string()), "partition": pa.array([], pa.string()),
                         "file_id": pa.array([], pa.string())})
    return pa.concat_tables(found)


_SOURCE = "__hudi_source"


def stored_outranks(storage: Storage, slices: list[FileSlice], spec: MergeSpec, schema: pa.Schema, visible,
                    located: pa.Table, incoming: pa.Table) -> pa.Array:
    """Per record of ``located`` (``key``, ``existing_partition``, ``file_id``: where a global
    index found it) whether the record stored under its key outranks it, ``incoming`` holding
    the records' ordering fields (aligned with ``located``). That decides a key arriving in
    another partition as Hudi's ``mergeForPartitionUpdatesIfNeeded`` does, merging the incoming
    with the stored record first: the key moves only when the incoming one wins; else it stays
    where it is (a record flagged deleted included). Event-time ordering only: otherwise the
    incoming record always wins. Only the file slices holding these keys are read, and only
    their key and ordering columns, merged as a read merges them (this write's records
    compared as the merge would: higher ordering value, then the later write on a tie)."""
    n = located.num_rows
    ordering = [f for f in spec.ordering_fields if schema.get_field_index(f) >= 0]
    if not n or not spec.event_time or not ordering or any(f not in incoming.column_names for f in ordering):
        return pa.repeat(pa.scalar(False), n)
    by_group = {(s.partition_path, s.file_id): s for s in slices}
    cols = pa.schema([f for f in schema if f.name in set(spec.needed_columns())])
    keys = pc.cast(located.column("key"), pa.string())
    stored = []
    where = pa.table({"existing_partition": located.column("existing_partition"),
                      "file_id": located.column("file_id"), "row": row_numbers(n)})
    for (part, fid), idx in groups_of(where, ["existing_partition", "file_id"]):
        s = by_group.get((part, fid))
        if s is None:
            continue
        rows = merge_file_slice(storage, s, cols, spec, visible)
        if not rows.num_rows:
            continue
        found = pc.cast(record_keys(rows, spec), pa.string())
        hit = is_in(found, pc.take(keys, idx))
        rows = rows.filter(hit)
        stored.append(pa.table({"_hoodie_record_key": found.filter(hit),
                                **{f: rows.column(f) for f in ordering}}))
    if not stored:
        return pa.repeat(pa.scalar(False), n)
    base = pa.concat_tables(stored, promote_options="permissive")
    fields = [pa.field("_hoodie_record_key", pa.string()), *[schema.field(f) for f in ordering]]
    types = pa.schema([*fields, pa.field(_SOURCE, pa.int64())])
    base = pa.table([*base.cast(pa.schema(fields)).columns, row_numbers(base.num_rows, -base.num_rows)],
                    schema=types)
    mine = pa.table([keys, *[pc.cast(incoming.column(f.name), f.type) for f in fields[1:]], row_numbers(n)],
                    schema=types)
    merge_spec = attrs.evolve(spec, has_meta_fields=True, ordering_fields=tuple(ordering), keygen=None)
    won = merge_pieces([base, mine], [], types, merge_spec).column(_SOURCE)
    mine_won = pc.filter(won, pc.greater_equal(won, 0))
    return pc.invert(rows_in(n, mine_won))
