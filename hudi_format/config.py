"""``hoodie.properties``: parse Java properties, validate, and expose typed table settings.

The file is the table's identity: every layer asks it how keys, partitions, timeline and merge
behave. A missing or broken file must stop a reader with an error that names the file and the
bad key, rather than letting it guess and return wrong rows.
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Mapping
from typing import Iterator

from .errors import TableConfigError, TableNotFoundError, StorageError
from .storage import Storage

PROPS_PATH = ".hoodie/hoodie.properties"
META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
               "_hoodie_partition_path", "_hoodie_file_name")

_TABLE_TYPES = {"copy_on_write": "COPY_ON_WRITE", "copy-on-write": "COPY_ON_WRITE",
                "cow": "COPY_ON_WRITE", "merge_on_read": "MERGE_ON_READ",
                "merge-on-read": "MERGE_ON_READ", "mor": "MERGE_ON_READ"}
_BASE_FORMATS = {"PARQUET", "HFILE", "ORC"}
_MERGE_MODES = {"EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING", "CUSTOM"}
_BOOL_KEYS = ("hoodie.datasource.write.drop.partition.columns",
              "hoodie.datasource.write.hive_style_partitioning",
              "hoodie.datasource.write.partitionpath.urlencode",
              "hoodie.populate.meta.fields", "hoodie.table.cdc.enabled")
SUPPORTED_VERSIONS = (6, 8, 9)

_KEYGEN_TYPE_BY_CLASS = {
    "SimpleKeyGenerator": "SIMPLE", "SimpleAvroKeyGenerator": "SIMPLE",
    "ComplexKeyGenerator": "COMPLEX", "ComplexAvroKeyGenerator": "COMPLEX",
    "NonpartitionedKeyGenerator": "NON_PARTITION", "NonpartitionedAvroKeyGenerator": "NON_PARTITION",
    "TimestampBasedKeyGenerator": "TIMESTAMP", "TimestampBasedAvroKeyGenerator": "TIMESTAMP",
    "CustomKeyGenerator": "CUSTOM", "CustomAvroKeyGenerator": "CUSTOM",
    "GlobalDeleteKeyGenerator": "GLOBAL_DELETE",
}


def builtin_keygen_type(keygen_class: str | None) -> str | None:
    """The type of Hudi's key generator class ``keygen_class`` (any package prefix); ``None``
    for a class of the user's own (or none), whose keys only its Java code knows."""
    return _KEYGEN_TYPE_BY_CLASS.get((keygen_class or "").strip().rsplit(".", 1)[-1])


# -- Java properties format ------------------------------------------------------------------
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


# a backslash and what it escapes: ``\uxxxx`` (up to four characters, checked) or one character
_ESCAPE = re.compile(r"\\(?:u(.{0,4})|(.))", re.DOTALL)


def _unescape_one(m: "re.Match[str]") -> str:
    digits = m.group(1)
    if digits is None:
        return _ESCAPES.get(m.group(2), m.group(2))
    if len(digits) != 4 or any(d not in _HEX for d in digits):   # Java's Properties.load refuses it too
        raise TableConfigError(f"malformed \\uxxxx escape {m.group()!r}")
    return chr(int(digits, 16))


def _unescape(s: str) -> str:
    # a regex pass, not a character loop: the table's schema (kilobytes, ``\:`` escaped) is
    # read at every table load
    return _ESCAPE.sub(_unescape_one, s) if "\\" in s else s


def _logical_lines(text: str) -> Iterator[str]:
    buf = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not buf else raw.lstrip()
        if not buf and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        yield buf + line
        buf = ""
    if buf:
        yield buf


_SEP = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def parse_properties(text: str) -> dict[str, str]:
    """Parse the Java ``.properties`` format (escapes, ``=``/``:``/space separators, continuations)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        m = _SEP.search(line)
        if m is None:
            key, value = line, ""
        else:
            end = m.end()
            key = line[:end - 1]
            rest = line[end - 1:]
            rest = rest.lstrip(" \t\f")
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t\f")
            value = rest
        props[_unescape(key)] = _unescape(value)
    return props


_PLAIN = re.compile(r"[\x21-\x7e]*")     # printable ASCII without spaces
_SPECIAL = re.compile(r"[\\=:#!]")


def _escape(s: str, is_key: bool) -> str:
    if _PLAIN.fullmatch(s) and not _SPECIAL.search(s):   # nothing to escape: no character loop
        return s
    out = []
    for i, c in enumerate(s):
        if c in "\\=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append("\\u%04X" % ord(c))
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: Mapping[str, str], comment: str | None = None) -> str:
    """Serialise as ``java.util.Properties.store`` does (one comment line, escapes)."""
    lines = [f"#{comment}"] if comment else []
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def replace_properties(storage: Storage, text: str, rel: str = PROPS_PATH) -> None:
    """Rewrite ``hoodie.properties`` so that a reader (or a process killed half-way) sees the old
    file or the new one whole, never a part: as Hudi's ``HoodieTableConfig.modify``, a backup
    copy first (``load`` falls back to it), then the new file (locally a temp file renamed over
    the old one, atomically; on object stores one PUT, atomic by itself), then the backup goes."""
    backup = rel + ".backup"
    storage.write_bytes(backup, storage.read_bytes(rel))
    data = text.encode("utf-8")
    if storage.is_local:
        folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        tmp = f"{folder}/.{name}.{uuid.uuid4().hex}.tmp" if folder else f".{name}.{uuid.uuid4().hex}.tmp"
        storage.write_bytes(tmp, data)
        try:
            storage.rename(tmp, rel, overwrite=True)
        except BaseException:
            storage.delete(tmp)
            raise
    else:
        storage.write_bytes(rel, data)
    storage.delete(backup)


def table_checksum(name: str, database: str = "") -> int:
    """CRC32 of ``"<database>.<table>"``: the value Hudi stores as ``hoodie.table.checksum``."""
    return zlib.crc32(f"{database}.{name}".encode("utf-8"))


def _parse_bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise TableConfigError(f"{PROPS_PATH}: {key} must be true or false, got {value!r}")


def _split_fields(value: str | None) -> list[str]:
    if not value:
        return []
    return [f.strip() for f in value.split(",") if f.strip()]


class TableConfig(Mapping):
    """Read-only view of ``hoodie.properties`` with typed accessors for what readers need."""

    def __init__(self, props: Mapping[str, str], source: str = PROPS_PATH):
        self._props = dict(props)
        self.source = source

    # Mapping protocol
    def __getitem__(self, key: str) -> str:
        return self._props[key]

    def __iter__(self):
        return iter(self._props)

    def __len__(self) -> int:
        return len(self._props)

    def __repr__(self) -> str:
        return f"TableConfig({self._props!r})"

    @classmethod
    def load(cls, storage: Storage, rel: str = PROPS_PATH) -> "TableConfig":
        backup = rel + ".backup"
        try:
            raw = storage.read_bytes(rel)
        except StorageError:
            # Hudi keeps a backup while it rewrites the file; fall back to it like Hudi does.
            if storage.exists(backup):
                raw = storage.read_bytes(backup)
            elif not storage.exists(rel):
                raise TableNotFoundError(
                    f"no Hudi table at {storage.url}: {rel} does not exist") from None
            else:
                raise
        try:
            return cls._parse(raw, storage.uri(rel))
        except TableConfigError:
            # a file another writer's rewrite left broken: the backup is the last good one
            if not storage.exists(backup):
                raise
            return cls._parse(storage.read_bytes(backup), storage.uri(backup))

    @classmethod
    def _parse(cls, raw: bytes, source: str) -> "TableConfig":
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        try:
            props = parse_properties(text)
        except TableConfigError as exc:
            raise TableConfigError(f"{source}: {exc}") from None
        cfg = cls(props, source)
        cfg.validate()
        return cfg

    def _err(self, msg: str) -> TableConfigError:
        return TableConfigError(f"{self.source}: {msg}")

    def validate(self) -> None:
        """Raise ``TableConfigError`` naming every bad or missing key."""
        problems = []
        for check in (lambda: self.name, lambda: self.table_type, lambda: self.version,
                      lambda: self.base_file_format, lambda: self.timeline_layout_version,
                      lambda: self.merge_mode):
            try:
                check()
            except TableConfigError as exc:
                problems.append(str(exc).split(": ", 1)[-1])
        for key in _BOOL_KEYS:
            if key in self._props:
                try:
                    _parse_bool(key, self._props[key])
                except TableConfigError as exc:
                    problems.append(str(exc).split(": ", 1)[-1])
        if "hoodie.table.checksum" in self._props:
            raw = self._props["hoodie.table.checksum"]
            try:
                stored = int(raw)
            except ValueError:
                problems.append(f"hoodie.table.checksum must be an integer, got {raw!r}")
                stored = None
            if stored is not None and "hoodie.table.name" in self._props:
                name = self._props["hoodie.table.name"]
                db = self._props.get("hoodie.database.name", "")
                # Hudi computes it with the database name known at creation; a name added later
                # (or none at all) leaves the checksum of ".<table>".
                if stored not in (table_checksum(name, db), table_checksum(name, "")):
                    problems.append(f"hoodie.table.checksum {stored} does not match table "
                                    f"name {name!r}: the file is corrupt or was edited")
        if problems:
            raise self._err("; ".join(problems))

    # -- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        v = self._props.get("hoodie.table.name")
        if not v:
            raise self._err("hoodie.table.name is missing")
        return v

    @property
    def database(self) -> str | None:
        return self._props.get("hoodie.database.name") or None

    @property
    def table_type(self) -> str:
        raw = self._props.get("hoodie.table.type", "COPY_ON_WRITE")
        t = _TABLE_TYPES.get(raw.strip().lower())
        if t is None:
            raise self._err(f"hoodie.table.type must be COPY_ON_WRITE or MERGE_ON_READ, got {raw!r}")
        return t

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def version(self) -> int:
        raw = self._props.get("hoodie.table.version")
        if raw is None:
            raise self._err("hoodie.table.version is missing")
        try:
            v = int(raw)
        except ValueError:
            raise self._err(f"hoodie.table.version must be an integer, got {raw!r}") from None
        if v not in SUPPORTED_VERSIONS and not (0 <= v <= 9):
            raise self._err(f"hoodie.table.version {v} is not a Hudi table version")
        return v

    @property
    def timeline_layout_version(self) -> int:
        raw = self._props.get("hoodie.timeline.layout.version")
        if raw is None:
            return 2 if self.version >= 8 else 1
        try:
            return int(raw)
        except ValueError:
            raise self._err(f"hoodie.timeline.layout.version must be an integer, got {raw!r}") from None

    @property
    def base_file_format(self) -> str:
        raw = self._props.get("hoodie.table.base.file.format", "PARQUET")
        v = raw.strip().upper()
        if v not in _BASE_FORMATS:
            raise self._err(f"hoodie.table.base.file.format must be one of "
                            f"{sorted(_BASE_FORMATS)}, got {raw!r}")
        return v

    @property
    def base_file_extension(self) -> str:
        return "." + self.base_file_format.lower()

    # -- keys and partitions -----------------------------------------------------------------
    @property
    def record_key_fields(self) -> list[str]:
        return _split_fields(self._props.get("hoodie.table.recordkey.fields"))

    @property
    def partition_fields(self) -> list[str]:
        # CUSTOM key generators store "field:type"; the field name is what readers need.
        return [f.split(":")[0] for f in _split_fields(self._props.get("hoodie.table.partition.fields"))]

    @property
    def ordering_fields(self) -> list[str]:
        v = self._props.get("hoodie.table.ordering.fields") or self._props.get("hoodie.table.precombine.field")
        return _split_fields(v)

    @property
    def keygen_type(self) -> str:
        t = self._props.get("hoodie.table.keygenerator.type")
        if t:
            return t.strip().upper()
        builtin = builtin_keygen_type(self._props.get("hoodie.table.keygenerator.class"))
        if builtin is not None:
            return builtin
        if not self.partition_fields:
            return "NON_PARTITION"
        return "COMPLEX" if len(self.record_key_fields) > 1 or len(self.partition_fields) > 1 else "SIMPLE"

    def _bool(self, key: str, default: bool) -> bool:
        return _parse_bool(key, self._props[key]) if key in self._props else default

    @property
    def hive_style_partitioning(self) -> bool:
        return self._bool("hoodie.datasource.write.hive_style_partitioning", False)

    @property
    def url_encode_partitions(self) -> bool:
        return self._bool("hoodie.datasource.write.partitionpath.urlencode", False)

    @property
    def drop_partition_columns(self) -> bool:
        return self._bool("hoodie.datasource.write.drop.partition.columns", False)

    @property
    def populate_meta_fields(self) -> bool:
        return self._bool("hoodie.populate.meta.fields", True)

    # -- merging -----------------------------------------------------------------------------
    @property
    def payload_class(self) -> str | None:
        return (self._props.get("hoodie.compaction.payload.class")
                or self._props.get("hoodie.table.legacy.payload.class"))

    @property
    def merge_mode(self) -> str:
        raw = self._props.get("hoodie.record.merge.mode")
        if raw:
            v = raw.strip().upper()
            if v not in _MERGE_MODES:
                raise self._err(f"hoodie.record.merge.mode must be one of {sorted(_MERGE_MODES)}, got {raw!r}")
            return v
        # As Hudi 1.x infers it when upgrading a 0.x table: the 0.x default payload overwrites
        # with the latest write whatever the ordering field says.
        payload = (self.payload_class or "").rsplit(".", 1)[-1]
        if not payload and self._props.get("hoodie.table.version", "6").strip() in ("0", "1", "2", "3", "4", "5", "6"):
            payload = "OverwriteWithLatestAvroPayload"  # the 0.x default when none is recorded
        if payload == "OverwriteWithLatestAvroPayload":
            return "COMMIT_TIME_ORDERING"
        if payload in ("DefaultHoodieRecordPayload", "EventTimeAvroPayload", ""):
            return "EVENT_TIME_ORDERING" if self.ordering_fields else "COMMIT_TIME_ORDERING"
        return "CUSTOM"

    # -- timeline layout ---------------------------------------------------------------------
    @property
    def timeline_dir(self) -> str:
        """Folder of the active timeline, relative to the table."""
        if self.version >= 8:
            return ".hoodie/" + self._props.get("hoodie.timeline.path", "timeline")
        return ".hoodie"

    @property
    def history_dir(self) -> str:
        """LSM history (v8+) folder, relative to the table."""
        return self.timeline_dir + "/" + self._props.get("hoodie.timeline.history.path", "history")

    @property
    def archive_dir(self) -> str:
        """Archived timeline folder of v6 tables, relative to the table."""
        return ".hoodie/" + (self._props.get("hoodie.archivelog.folder") or "archived")

    @property
    def timeline_timezone(self) -> str:
        return (self._props.get("hoodie.table.timeline.timezone") or "LOCAL").upper()

    @property
    def create_schema(self) -> str | None:
        return self._props.get("hoodie.table.create.schema") or None

    @property
    def metadata_partitions(self) -> list[str]:
        return _split_fields(self._props.get("hoodie.table.metadata.partitions"))

    @property
    def bootstrap_base_path(self) -> str | None:
        return self._props.get("hoodie.bootstrap.base.path") or None
