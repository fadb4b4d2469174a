"""A data commit's changes to the metadata table's ``record_index``, on the committing process.

The keys a commit places and removes come from its files: the changes their write handles
reported (:mod:`.key_changes`), else the files read back (a new base file's keys minus those of
the version it replaces, a log file's keys by their last block, minus the updates in place the
index already places there). Keys of file groups the commit replaces (clustering,
insert_overwrite) go unless placed again, or placed elsewhere since (a global index), which the
record index itself tells.

The delta is change rows (:data:`.key_changes.CHANGES_SCHEMA`), the rows an engine's
workers write with :func:`.record_index_update.write_changes`: the commit writes them the same
way, so both paths resolve a key placed twice, or placed and removed, by the same rule.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import HudiError
from ..storage import FileInfo
from ..view.file_names import parse_base_file_name, parse_log_file_name
from .data_files import DataFiles
from .key_changes import CHANGES_SCHEMA, KeyChanges, change_rows
from .reader import MetadataTable

log = logging.getLogger(__name__)

__all__ = ["record_index_delta"]

def record_index_delta(w: Any, written: list, replaced: Mapping[str, list], files: DataFiles,
                       given: Mapping[str, KeyChanges]) -> pa.Table:
    """The ``record_index`` changes of a data commit (rows of ``CHANGES_SCHEMA``, in the order
    of its files): ``written`` ``(partition, path, write stat)`` of its files (``given``: the
    changes their handles reported, by write stat path; the rest are read back) and the file
    groups it ``replaced`` (keys still placed in them go). ``w``: the :class:`.writer.MetadataWriter`."""
    ext = w.config.base_file_extension
    pieces: list[pa.Table] = []
    listing_cache: dict[str, list[FileInfo]] = {}

    def listing(part: str) -> list[FileInfo]:
        if part not in listing_cache:
            listing_cache[part] = [f for f in w.storage.list(part) if not f.is_dir]
        return listing_cache[part]

    def old_base(part: str, fid: str, prev: str) -> str | None:
        for f in listing(part):
            bf = parse_base_file_name(f.name)
            if bf is not None and bf.file_id == fid and bf.instant_time == prev and f.name.endswith(ext):
                return f.path
        return None

    seen, applied = set(), set()
    from_logs: list[int] = []   # pieces placing the keys of log files read back
    for part, rel, st in written:
        if rel in seen:
            continue
        seen.add(rel)
        fid = st.file_id or ""
        changes = given.get(st.path or "")
        if changes is not None:   # the handle's changes cover every file of its stat
            if st.path not in applied:
                applied.add(st.path)
                pieces.append(changes.rows(part, fid))
            continue
        if rel.endswith(ext):
            new_keys = files.base_keys(rel)
            prev = st.prev_commit
            old = old_base(part, fid, prev) if prev is not None else None
            if old is not None:
                old_keys = files.base_keys(old)
                pieces.append(change_rows(pc.filter(old_keys, pc.invert(pc.is_in(old_keys, value_set=new_keys))),
                                    part, fid, True))
                new_keys = pc.filter(new_keys, pc.invert(pc.is_in(new_keys, value_set=old_keys)))
            pieces.append(change_rows(new_keys, part, fid, False))
        else:
            ups, dels = files.log_keys(rel)
            from_logs.append(len(pieces))
            pieces += [change_rows(ups, part, fid, False), change_rows(dels, part, fid, True)]
    if from_logs:
        pieces = _without_updates_in_place(w, pieces, from_logs)
    changes = pa.concat_tables(pieces) if pieces else CHANGES_SCHEMA.empty_table()
    from_replaced: list[pa.Array] = []
    for part, fids in replaced.items():
        wanted = set(fids)
        for f in listing(part):
            parsed = parse_base_file_name(f.name) if not f.name.startswith(".") else parse_log_file_name(f.name)
            if parsed is None or parsed.file_id not in wanted:
                continue
            if f.name.startswith("."):
                from_replaced.append(files.log_keys(f.path)[0])
            elif f.name.endswith(ext):
                from_replaced.append(files.base_keys(f.path))
    if from_replaced:
        keys = pc.unique(pa.concat_arrays([k.cast(pa.string()) for k in from_replaced]))
        placed = changes.filter(pc.invert(changes.column("deleted"))).column("key").combine_chunks()
        keys = pc.filter(keys, pc.invert(pc.is_in(keys, value_set=placed)))
        changes = pa.concat_tables([changes, change_rows(_still_in(w, keys, replaced), None, None, True)])
    return changes


def _entries(w: Any, keys: pa.Array) -> pa.Table:
    """The record index's entries (before this commit) of ``keys``; raises when unreadable."""
    return MetadataTable(w.storage, w.config, w.data_timeline()).record_index(keys)


def _where(found: pa.Table) -> pa.Array:
    """``partition \0 file id`` of record index entries (``.``: the non-partitioned table)."""
    p = found.column("partition")
    return pc.binary_join_element_wise(pc.if_else(pc.equal(p, "."), "", p), found.column("file_id"), "\x00")


def _without_updates_in_place(w: Any, pieces: list[pa.Table], from_logs: list[int]) -> list[pa.Table]:
    """``pieces`` with the keys that log files read back place where the index already places
    them left out: updates in place, whose entries Hudi leaves as they are (the write handles
    report none; read back, a log file cannot tell them from inserts). One lookup for all."""
    placed = pa.concat_tables([pieces[i] for i in from_logs])
    if not placed.num_rows:
        return pieces
    try:
        found = _entries(w, pc.unique(placed.column("key").combine_chunks()))
    except HudiError as exc:
        log.warning("record index of %s unreadable (%s): writing an entry for every key of the "
                    "log files read back", w.storage.url, exc)
        return pieces
    there = pc.binary_join_element_wise(found.column("key"), _where(found), "\x00")
    there = there.combine_chunks() if isinstance(there, pa.ChunkedArray) else there
    out = list(pieces)
    for i in from_logs:
        t = out[i]
        here = pc.binary_join_element_wise(t.column("key"), t.column("partition"), t.column("file_id"), "\x00")
        out[i] = t.filter(pc.invert(pc.is_in(here, value_set=there)))
    return out


def _still_in(w: Any, keys: pa.Array, replaced: Mapping[str, list]) -> pa.Array:
    """Of ``keys`` (read from every file of the replaced file groups, older versions
    included), those the record index still places in one of those groups. A key that has
    moved to another partition since (a global index) lives on there: its entry stays."""
    if not len(keys):
        return keys
    try:
        found = _entries(w, keys)
    except HudiError as exc:
        log.warning("record index of %s unreadable (%s): dropping every key of the replaced "
                    "file groups", w.storage.url, exc)
        return keys
    groups = pa.array([f"{p}\x00{f}" for p, fids in replaced.items() for f in fids], pa.string())
    return pc.filter(found.column("key"), pc.is_in(_where(found), value_set=groups))
