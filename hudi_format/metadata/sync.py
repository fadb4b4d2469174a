"""Whether the metadata table is in step with its data table's timeline.

Writers commit the metadata table first, then the data instant with the same timestamp, under
the table lock. The metadata table is *behind* (and must not serve the ``files`` listing) when a
completed data instant that changes files (commit, deltacommit, replacecommit, clean, rollback,
restore) has no completed metadata deltacommit (or rollback/restore) of the same timestamp and
its bootstrap did not list it either: it is not older than the first regular deltacommit (older
instants were bootstrapped, or their deltacommits archived, which goes by request time) and it
did not complete before the ``files`` partition's initialisation. That last case is real: a
write that began before another writer dropped the metadata table bootstraps it again when it
commits, so the commits between them have later instants than its regular deltacommit.

It is *ahead* of a data timeline listed earlier when it holds commits that timeline lacks
(:func:`ahead_of`): keyed entries (the record index) then describe a newer table.
"""

from __future__ import annotations

import logging

from ..errors import HudiError
from ..timeline import Instant, Timeline
from . import keys as K
from .init import SOLO_COMMIT_TIMESTAMP_V6 as SOLO_COMMIT_TIMESTAMP, is_init_instant

log = logging.getLogger(__name__)

__all__ = ["SOLO_COMMIT_TIMESTAMP", "SYNCED_ACTIONS", "is_initialisation", "unsynced", "ahead_of"]

# Data-table actions that change the file listing, and so have a metadata-table counterpart.
SYNCED_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit", "clean", "rollback", "restore"})


def is_initialisation(ts: str) -> bool:
    """A version-8 initialisation's instant time (``00000000000000`` and an offset)."""
    return ts.startswith(SOLO_COMMIT_TIMESTAMP)


def unsynced(data: Timeline, mdt: Timeline) -> str | None:
    """Why the metadata table (timeline ``mdt``) misses a completed instant of ``data``
    (``None``: it misses none). Raises ``HudiError`` when a timeline cannot be read."""
    mdt_instants = mdt.instants
    synced = {i.timestamp for i in mdt_instants if i.is_completed
              and i.action in ("deltacommit", "rollback", "restore")}
    if not synced:
        return "it has no completed deltacommit"
    regular = [ts for ts in synced if not is_initialisation(ts)]
    first_regular = min(regular) if regular else None
    inits: list[Instant] | None = None   # the files partition's initialisations, read when needed
    for inst in data.instants:
        if not inst.is_completed or inst.action not in SYNCED_ACTIONS:
            continue
        ts = inst.timestamp
        if ts in synced:
            continue
        if first_regular is not None and ts < first_regular:
            continue  # before its first regular deltacommit: bootstrapped (or archived)
        if inits is None:
            inits = files_initialisations(mdt)
        if any(_covers(init, inst) for init in inits):
            continue  # completed before the bootstrap listed the table
        return f"the data instant {ts} ({inst.action}) has no completed deltacommit in the metadata table"
    return None


def files_initialisations(mdt: Timeline) -> list[Instant]:
    """The completed deltacommits that initialised the ``files`` partition (by their commit
    metadata: a later partition's initialisation stands for no listing); from the archived
    timeline when the active one no longer has them -- they sort first, so the metadata
    table's archival takes them early, while data instants they cover may still be active."""
    found = _initialisations(mdt, mdt.instants)
    if found:
        return found
    try:
        archived = mdt.archived()
        return _initialisations(archived, archived.instants)
    except HudiError as exc:
        log.warning("cannot read the archived timeline of %s: %s", mdt.storage.url, exc)
        return []


def _initialisations(timeline, instants) -> list[Instant]:
    out = []
    for i in instants:
        # not any suffixed deltacommit: a version-6 log compaction (``<instant>005``) is one too
        if i.is_completed and i.action == "deltacommit" and is_init_instant(i.timestamp):
            try:
                if K.FILES in timeline.metadata(i).partitions:
                    out.append(i)
            except HudiError as exc:
                log.warning("cannot read the metadata table's instant %s: %s", i.timestamp, exc)
    return out


def _covers(init: Instant, inst: Instant) -> bool:
    """Did initialisation ``init`` bootstrap from a listing that already had ``inst``?"""
    if len(init.timestamp) > 17 and not is_initialisation(init.timestamp):
        return inst.timestamp <= init.timestamp[:-3]  # version 6: <latest data instant><suffix>
    if init.completion_time and inst.completion_time:
        return inst.completion_time <= init.completion_time
    return False


def ahead_of(data: Timeline, mdt: Timeline) -> bool:
    """Whether the metadata table holds commits the data timeline ``data`` does not (they
    completed after it was listed): a deltacommit of an instant that timeline neither holds
    nor archived, or a service of the metadata table (compaction, clean) that completed after
    the data timeline's last commit -- version 6 names those after the deltacommit they follow."""
    known = {i.timestamp for i in data.instants}
    if not known:
        return False
    start, top = data.start, max(known)
    done = max((i.completion_time for i in data.instants if i.is_completed and i.completion_time),
               default=None)
    for inst in mdt.instants:
        ts = inst.timestamp
        if not inst.is_completed or is_initialisation(ts):
            continue
        if inst.action == "deltacommit" and len(ts) == 17:
            if ts not in known and (start is None or ts >= start):
                return True
        elif len(ts) > 17:
            if ts[:17] > top:
                return True
        elif ts not in known and inst.completion_time and done and inst.completion_time > done:
            return True
    return False
