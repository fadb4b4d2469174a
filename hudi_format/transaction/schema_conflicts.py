"""The schema a commit records when other writers committed while it ran (Hudi's
``SimpleSchemaConflictResolutionStrategy``, RFC-82), resolved under the table lock.

A commit records its writer schema, which readers take as the table's when it is the latest.
A writer (or a table service) that loaded the table before a concurrent writer evolved it
would record the old schema last, and every reader would lose the new columns, and the next
merge would drop their values. So the recorded schema becomes the table's current schema
evolved by this writer's own changes: a writer that changed nothing records the evolved
schema (its files lack the new columns, which read as nulls); two writers that added
different columns both keep theirs. Changes that cannot be combined (one column given
incompatible types) fail the later commit with ``ConcurrentWriteError``, as Hudi's do.

Readers take the schema of the latest commit *by request time* (table version 6 knows no
other order; hudi-rs and Hudi's schema resolver use it on version 8 as well), so a commit
requested before one that already completed cannot make changes of its own the table's: it
fails (``ConcurrentWriteError``; the retry commits) unless the table's schema already holds
them.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from ..config import META_FIELDS, TableConfig
from ..errors import ConcurrentWriteError, HudiError, SchemaError
from ..read.table_schema import evolve, latest_avro_schema, normalize_type
from ..schema import arrow_to_avro_schema, avro_to_arrow_schema, parse_avro_schema
from ..timeline import Timeline


def _columns(avro: str | dict) -> pa.Schema:
    schema = avro_to_arrow_schema(avro)
    return pa.schema([pa.field(f.name, normalize_type(f.type), True) for f in schema if f.name not in META_FIELDS])


def _same(a: pa.Schema, b: pa.Schema) -> bool:
    return {f.name: f.type for f in a} == {f.name: f.type for f in b}


def resolve_commit_schema(config: TableConfig, now: Timeline, instant_time: str, metadata: Any) -> None:
    """Set ``metadata``'s ``extraMetadata.schema`` to what this commit must record on ``now``
    (the timeline listed under the lock), or raise ``ConcurrentWriteError``."""
    extra = metadata.get("extraMetadata") if isinstance(metadata, dict) else None
    written = extra.get("schema") if isinstance(extra, dict) else None
    if not written:
        return
    current = latest_avro_schema(config, now)
    if not current:
        return
    try:
        mine, table = _columns(written), _columns(current)
    except HudiError:
        return   # a schema we cannot read: Hudi's resolver skips it as well
    resolved = mine
    if not _same(mine, table):
        try:
            resolved = evolve(table, mine)
        except SchemaError as exc:
            raise ConcurrentWriteError(
                f"{instant_time} on {now.storage.url}: another writer evolved the table's schema while this "
                f"write ran, incompatibly with this write's ({exc}); retry the write") from None
        if _same(resolved, table):
            extra["schema"] = current if isinstance(current, str) else json.dumps(current, separators=(",", ":"))
        elif not _same(resolved, mine):
            top = parse_avro_schema(written)
            extra["schema"] = json.dumps(arrow_to_avro_schema(resolved, top.get("name", "record"),
                                                              top.get("namespace", "hoodie")),
                                         separators=(",", ":"))
    later = [i.timestamp for i in now.write_instants() if i.timestamp > instant_time]
    if later and not _same(resolved, table):
        raise ConcurrentWriteError(
            f"{instant_time} on {now.storage.url}: {max(later)}, requested after this write, completed first "
            f"with a schema that lacks this write's changes; readers take the schema of the latest-requested "
            f"commit, so this write would lose them: retry it")
