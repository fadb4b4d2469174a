"""Writing one deltacommit's record index changes into the ``record_index`` file groups, where
an engine's workers can do it.

The core's commit turns a write's key changes (:mod:`.key_changes`) into the record index's log
files itself. An engine whose write tasks ran elsewhere (Spark's executors) keeps those changes
where they were made, so that no record key reaches the committing process: under the commit's
lock the metadata writer hands it a :class:`RecordIndexTarget` (picklable: the metadata table's
path, the deltacommit, the file groups), and the engine's :class:`RecordIndexUpdate` runs one task
per group of file groups, each calling :func:`write_changes` with the changes hashed to its
groups, and returns the write stats. Both paths write with :func:`write_group`, so the files are
the same.

Changes are rows ``(key, partition, file_id, deleted)``: an entry ``deleted=False`` places the
key in that file group; ``deleted=True`` removes it unless the same commit places it somewhere
(a key moved between partitions: deleted from the old file group, inserted into the new one).
"""

from __future__ import annotations

import posixpath
from typing import Callable, Protocol

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..log.encode import encode_delete_block
from ..log.writer import write_log_file
from ..storage import Storage
from ..timeline.write_stat import WriteStat
from ..errors import InvalidOptionError
from . import keys as K
from . import payloads as P
from .hfiles import cells_of, file_groups_of, hfile_data_block_of
from .key_changes import CHANGES_SCHEMA
from .record_index import last_of_each

__all__ = ["CHANGES_SCHEMA", "RecordIndexGroup", "RecordIndexTarget", "RecordIndexUpdate", "resolve",
           "write_changes", "write_group"]



@attrs.frozen
class RecordIndexGroup:
    """One file group of the ``record_index`` partition, as its latest slice stands."""

    file_id: str
    base_instant: str
    base_file_name: str = ""


@attrs.frozen
class RecordIndexTarget:
    """Where one deltacommit's record index log files go (picklable, for an engine's workers)."""

    table_uri: str                 # the metadata table's base path
    instant: str                   # the deltacommit (the data instant's time)
    instant_millis: int            # the instant the index's entries carry
    table_version: int             # the metadata table's version (how log files are named)
    groups: tuple[RecordIndexGroup, ...]
    partition: str = K.RECORD_INDEX

    def group_indexes(self, keys: pa.Array) -> np.ndarray:
        """The file group of each key (Hudi's key hash)."""
        return file_groups_of(keys, len(self.groups))


class RecordIndexUpdate(Protocol):
    """A commit's record index changes held by an engine, which writes them itself."""

    def write(self, target: RecordIndexTarget, deleted: pa.Array) -> list[WriteStat]:
        """Write the changes into ``target``'s file groups (with :func:`write_changes`, one
        call per group of file groups, anywhere), plus ``deleted``: keys the committing process
        found gone (those of file groups the commit replaces); return one stat per log file."""


def write_changes(storage: Storage, target: RecordIndexTarget, changes: pa.Table, token: str) -> list[WriteStat]:
    """Write ``changes`` (:data:`CHANGES_SCHEMA`; every row hashed to any of the groups, all
    rows of a key in this call) into their file groups, one log file each, named with
    Hudi write token ``token``."""
    if not changes.num_rows:
        return []
    placed, gone = resolve(changes)
    ups = cells_of(placed.column("key").combine_chunks(), encoded_values(placed, target.instant_millis), len(target.groups))
    dels: dict[int, pa.Array] = {}
    if len(gone):
        groups = target.group_indexes(gone)
        order = np.argsort(groups, kind="stable")
        bounds = np.searchsorted(groups[order], np.arange(len(target.groups) + 1))
        taken = gone.take(pa.array(order))
        dels = {i: taken.slice(a, b - a) for i, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
                if b > a}
    return [write_group(storage, target, i, ups.get(i), dels.get(i), token) for i in sorted(set(ups) | set(dels))]


def resolve(changes: pa.Table) -> tuple[pa.Table, pa.Array]:
    """``(placed, gone)`` of change rows: each placed key once, at its last place (a key placed
    twice by one commit's files is one moved by a later file), and the removed keys no row
    places (a key moved between partitions is deleted from one group, placed in another)."""
    deleted = pc.fill_null(changes.column("deleted"), False)
    placed = changes.filter(pc.invert(deleted))
    placed = placed.take(last_of_each(placed.column("key")))
    gone = pc.unique(changes.filter(deleted).column("key").combine_chunks())
    gone = gone.filter(pc.invert(pc.is_in(gone, value_set=placed.column("key").combine_chunks())))
    return placed, gone


def encoded_values(placed: pa.Table, millis: int | Callable[[str, str], int]) -> pa.Array:
    """The ``HoodieRecordIndexInfo`` value of each row's ``(partition, file_id)``: encoded once
    per distinct file group, then taken for every row. ``millis``: the entries' instant, or a
    function of the file group giving it (a bootstrap: each slice's base instant)."""
    locs = pc.binary_join_element_wise(placed.column("partition"), placed.column("file_id"), "\x00")
    encoded = locs.combine_chunks().dictionary_encode()
    values = []
    for loc in encoded.dictionary.to_pylist():
        part, fid = loc.split("\x00", 1)
        values.append(P.encode_record_index_value(part, fid, millis if isinstance(millis, int) else millis(part, fid)))
    return pa.array(values, pa.binary()).take(encoded.indices)


def write_group(storage: Storage, target: RecordIndexTarget, index: int, upserts: tuple[pa.Array, pa.Array] | None,
                deletes: pa.Array | None, token: str) -> WriteStat:
    """One log file (or more, rolled over) on file group ``index`` of ``target``: an HFile data
    block of ``upserts`` (keys as bytes, sorted, and values) and a delete block of ``deletes``.
    ``storage``: the metadata table's."""
    g = target.groups[index]
    part, instant = target.partition, target.instant
    blocks = []
    if upserts is not None and len(upserts[0]):
        blocks.append(hfile_data_block_of(*upserts, instant, part))
    if deletes is not None and len(deletes):
        n = len(deletes)
        blocks.append(encode_delete_block(pa.table({
            "record_key": deletes.take(pc.sort_indices(deletes)).cast(pa.string()),
            "partition_path": pa.repeat(pa.scalar(part, pa.string()), n),
            "ordering_value": pa.repeat(pa.scalar(0, pa.int32()), n)}), instant, avro_schema=P.SCHEMA_JSON))
    log_instant = instant if target.table_version >= 8 else g.base_instant
    results = None
    if target.table_version >= 8:   # named by this new instant: version 1 unless a leftover has it
        try:
            results = write_log_file(storage, part, g.file_id, log_instant, blocks, token, version=1)
        except InvalidOptionError:
            pass
    if results is None:
        results = write_log_file(storage, part, g.file_id, log_instant, blocks, token)
    last = results[-1]
    nu, nd = (len(upserts[0]) if upserts is not None else 0), (len(deletes) if deletes is not None else 0)
    return WriteStat(file_id=g.file_id, path=last.path, partition_path=part, prev_commit=g.base_instant,
                     num_writes=nu, num_update_writes=nu, num_deletes=nd,
                     total_write_bytes=sum(r.size for r in results), log_version=last.version,
                     base_file=g.base_file_name, log_files=[posixpath.basename(r.path) for r in results])
