"""A data commit's changes to the metadata table's ``record_index``, on the committing process.

The keys a commit places and removes come from its files: the changes their write handles
reported (:mod:`.key_changes`), else the files read back (a new base file's keys minus those of
the version it replaces, a log file's keys by their last block, minus the updates in place the
index already places there). Keys of file groups the commit replaces (clustering,
insert_overwrite) go unless placed again, or placed elsewhere since (a global index), which the
record index itself tells.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import HudiError
from ..storage import FileInfo
from ..view.file_names import parse_base_file_name, parse_log_file_name
from . import payloads as P
from .data_files import DataFiles
from .key_changes import KeyChanges
from .payloads import Delta
from .reader import MetadataTable

log = logging.getLogger(__name__)

__all__ = ["record_index_delta"]


def record_index_delta(w: Any, instant: str, written: list, replaced: Mapping[str, list], files: DataFiles,
                       given: Mapping[str, KeyChanges]) -> Delta:
    """The ``record_index`` delta of a data commit: ``written`` ``(partition, path, write stat)``
    of its files (``given``: the changes their handles reported, by write stat path; the rest
    are read back) and the file groups it ``replaced`` (keys still placed in them go). ``w``: the
    :class:`.writer.MetadataWriter`."""
    ext = w.config.base_file_extension
    located: dict[str, tuple[str, str]] = {}
    gone: set[str] = set()
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
    from_logs: set[str] = set()   # keys placed by log files read back: updates among them stay as they are
    for part, rel, st in written:
        if rel in seen:
            continue
        seen.add(rel)
        fid = st.file_id or ""
        changes = given.get(st.path or "")
        if changes is not None:   # the handle's changes cover every file of its stat
            if st.path not in applied:
                applied.add(st.path)
                located.update(dict.fromkeys(changes.upserted.to_pylist(), (part, fid)))
                gone.update(changes.removed.to_pylist())
            continue
        if rel.endswith(ext):
            new_keys = files.base_keys(rel)
            prev = st.prev_commit
            old = old_base(part, fid, prev) if prev is not None else None
            if old is not None:
                old_keys = files.base_keys(old)
                inserted = pc.filter(new_keys, pc.invert(pc.is_in(new_keys, value_set=old_keys)))
                removed = pc.filter(old_keys, pc.invert(pc.is_in(old_keys, value_set=new_keys)))
                gone.update(removed.to_pylist())
                new_keys = inserted
            for k in new_keys.to_pylist():
                located[k] = (part, fid)
        else:
            ups, dels = files.log_keys(rel)
            for k in ups.to_pylist():
                located[k] = (part, fid)
                from_logs.add(k)
            gone.update(dels.to_pylist())
    from_replaced: set[str] = set()
    for part, fids in replaced.items():
        wanted = set(fids)
        for f in listing(part):
            parsed = parse_base_file_name(f.name) if not f.name.startswith(".") else parse_log_file_name(f.name)
            if parsed is None or parsed.file_id not in wanted:
                continue
            if f.name.startswith("."):
                ups, _ = files.log_keys(f.path)
                from_replaced.update(ups.to_pylist())
            elif f.name.endswith(ext):
                from_replaced.update(files.base_keys(f.path).to_pylist())
    for k in _in_place(w, {k: located[k] for k in from_logs if located.get(k) is not None}):
        del located[k]
    gone |= _still_in(w, from_replaced - located.keys(), replaced)
    tz = w.config.timeline_timezone
    millis = P.instant_millis(instant, tz)
    cache: dict[tuple[str, str], bytes] = {}
    ups_out = {}
    for k, loc in located.items():
        v = cache.get(loc)
        if v is None:
            v = cache[loc] = P.encode_record_index_value(loc[0], loc[1], millis)
        ups_out[k] = v
    return Delta(ups_out, {k for k in gone if k not in located})

def _entries(w: Any, keys: Iterable[str]) -> pa.Table:
    """The record index's entries (before this commit) of ``keys``; raises when unreadable."""
    return MetadataTable(w.storage, w.config, w.data_timeline()).record_index(pa.array(sorted(keys), pa.string()))


def _in_place(w: Any, placed: Mapping[str, tuple[str, str]]) -> list[str]:
    """Of the keys log files place (``placed``: key -> (partition, file id)), those the index
    already places there: updates in place, whose entries Hudi leaves as they are (the write
    handles report none; read back, a log file cannot tell them from inserts)."""
    if not placed:
        return []
    try:
        found = _entries(w, placed)
    except HudiError as exc:
        log.warning("record index of %s unreadable (%s): writing an entry for every key of the "
                    "log files read back", w.storage.url, exc)
        return []
    return [k for k, p, f in zip(*(found.column(c).to_pylist() for c in ("key", "partition", "file_id")))
            if placed.get(k) == ("" if p == "." else p, f)]


def _still_in(w: Any, keys: set[str], replaced: Mapping[str, list]) -> set[str]:
    """Of ``keys`` (read from every file of the replaced file groups, older versions
    included), those the record index still places in one of those groups. A key that has
    moved to another partition since (a global index) lives on there: its entry stays."""
    if not keys:
        return keys
    try:
        found = _entries(w, keys)
    except HudiError as exc:
        log.warning("record index of %s unreadable (%s): dropping every key of the replaced "
                    "file groups", w.storage.url, exc)
        return keys
    groups = {(p, f) for p, fids in replaced.items() for f in fids}
    return {k for k, p, f in zip(*(found.column(c).to_pylist() for c in ("key", "partition", "file_id")))
            if ("" if p == "." else p, f) in groups}

