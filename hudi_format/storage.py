"""All table I/O through one fsspec-backed object, addressed by paths relative to the table.

Keeping every path relative to the table base lets the same code serve local disks, memory
and S3, and lets the format layers name files exactly as Hudi does (``.hoodie/...``,
``partition/file``) without caring where the table lives.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import threading
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs
import fsspec
import pyarrow as pa
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from .errors import FileMissingError, StorageError
from .file_cache import FileCache


# Folder -> how many times this process changed something in it (created, wrote, deleted,
# renamed a file). A state loaded from a folder (the timeline) is still current for this
# process while the count is unchanged: an operation reuses it instead of listing again. Other
# processes' changes are not counted; code that must see them (the conflict check under the
# commit lock) lists again.
_CHANGES: dict[tuple[str, str, bool], int] = {}   # (protocol, folder, hidden name) -> count
_CHANGES_LOCK = threading.Lock()
_GLOB = re.compile(r"[*?[]")   # characters fsspec expands in a path


def _folder_key(fs: fsspec.AbstractFileSystem, folder: str, hidden: bool) -> tuple[str, str, bool]:
    # by protocol and path, not filesystem instance: two Storage objects of one location count
    # each other's changes
    return (_protocol(fs), folder.rstrip("/"), hidden)


#: ``drop(protocol, path)`` of each cache of immutable files (see :func:`on_file_changed`).
_DROPPERS: list[Callable[[str, str], None]] = []


def on_file_changed(drop: Callable[[str, str], None]) -> None:
    """Have ``drop(protocol, full path)`` called whenever this process writes, renames or
    deletes a file: a cache of what immutable files hold (keyed by
    :meth:`Storage.immutable_key`) forgets it, as the small-file cache does."""
    _DROPPERS.append(drop)


def _changed(fs: fsspec.AbstractFileSystem, path: str) -> None:
    path = path.rstrip("/")
    proto = _protocol(fs)
    for drop in _DROPPERS:
        drop(proto, path)
    key = _folder_key(fs, posixpath.dirname(path), posixpath.basename(path).startswith("."))
    with _CHANGES_LOCK:
        _CHANGES[key] = _CHANGES.get(key, 0) + 1


@attrs.frozen
class FileInfo:
    """One entry of a directory listing; ``path`` is relative to the table base."""

    path: str
    size: int
    is_dir: bool

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


# Serialises check-then-write sequences on filesystems without an atomic create (memory, ...):
# atomic within this process, best effort across processes.
_CREATE_LOCK = threading.RLock()


# Small committed data files read through ``Storage.read_immutable`` on object stores, by
# (protocol, path, size): an upsert reads a base file's footer to plan, its keys to tag and all of
# it to merge; one GET serves all three. A committed data file is never rewritten under its name
# (a retry or a new commit writes a new name), and files this process changes are dropped.
_SMALL_FILE_MAX = 8 << 20
_SMALL_CACHE_MAX = 64 << 20
_SMALL_CACHE: "FileCache[bytes]" = FileCache(len)


def _local_entries(base: str) -> list[tuple[str, int, bool]]:
    """``(path, size, is_dir)`` of the entries of the local folder ``base`` (none when it is a
    file), as fsspec's local ``ls(detail=True)`` gives them (a symlink is not a folder and has
    its target's size, 0 when broken; an entry deleted meanwhile is left out) without the
    info dict and path normalising it spends per entry (1,000 files: 4.8 ms against 8.7 ms)."""
    out = []
    folder = base.rstrip("/")
    try:
        with os.scandir(base) as it:
            for e in it:
                try:
                    size = e.stat(follow_symlinks=False).st_size
                    if e.is_symlink():
                        try:
                            size = e.stat().st_size
                        except OSError:
                            size = 0
                    out.append((f"{folder}/{e.name}", size, e.is_dir(follow_symlinks=False)))
                except FileNotFoundError:
                    continue
    except NotADirectoryError:
        return []
    return out


on_file_changed(_SMALL_CACHE.drop_file)


_OBJECT_STORES = ("s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl")


def _join(*parts: str) -> str:
    return posixpath.join(*[p for p in parts if p])


class UnsafePathError(StorageError):
    """A path relative to the table would resolve outside the table's folder."""


def check_relative(rel: str) -> str:
    """``rel`` if it stays inside the table, else ``UnsafePathError``.

    Defence in depth: partition values are validated where they are made (the key generator),
    but every path built from data, plans or metadata records ends here, so a ``..`` segment,
    an absolute path or a NUL byte never reaches the filesystem whatever produced it.
    """
    if rel.startswith("/") or "\x00" in rel or ".." in rel.split("/"):
        raise UnsafePathError(f"path {rel!r} escapes the table folder (absolute, '..' segment "
                              f"or NUL byte); refusing to touch it")
    return rel


class Storage:
    """A table location: base URL + fsspec filesystem + helpers for relative paths."""

    def __init__(self, url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None,
                 fs: fsspec.AbstractFileSystem | None = None):
        try:
            url = os.fspath(url)
        except TypeError:
            raise StorageError(f"a table location is a path or URL string, got {url!r}") from None
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise StorageError(f"storage_options for {url!r} must be a mapping of fsspec options, "
                               f"got {storage_options!r}")
        if fs is None:
            opts = dict(storage_options or {})
            if url.split("://", 1)[0].lower() in _OBJECT_STORES:
                # Other writers change the table under us; a cached listing would hide their
                # commits (and make files look missing), so object stores list afresh.
                opts.setdefault("use_listings_cache", False)
            try:
                fs, root = url_to_fs(url, **opts)
            except (ImportError, ValueError, TypeError, AttributeError) as exc:
                # a storage option of the wrong shape (a string where fsspec wants a mapping...)
                raise StorageError(f"cannot open storage for {url!r} with storage options "
                                   f"{sorted(opts)}: {type(exc).__name__}: {exc}") from exc
        else:
            root = fs._strip_protocol(url)
        self.url = url
        self.fs = fs
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.storage_options = dict(storage_options or {})

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"

    def sub(self, rel: str) -> "Storage":
        """A storage rooted at a sub-folder (the metadata table lives at ``.hoodie/metadata``)."""
        url = self.url.rstrip("/") + "/" + check_relative(rel.strip("/"))
        return Storage(url, self.storage_options, fs=self.fs)

    def full(self, rel: str) -> str:
        return _join(self.root, check_relative(rel)) if rel else self.root

    def uri(self, rel: str) -> str:
        """A URL the user (or another engine) can open."""
        return self.url.rstrip("/") + ("/" + rel if rel else "")

    # -- reads -------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        path = self.full(rel)
        self._forget(path)
        return self.fs.exists(path)

    def _forget(self, path: str) -> None:
        """Drop cached listings of ``path`` and its folder before asking about them."""
        if not self.is_local:
            try:
                self.fs.invalidate_cache(path)
                self.fs.invalidate_cache(posixpath.dirname(path))
            except Exception:  # noqa: BLE001 - a cache we cannot clear is only slower
                pass

    def read_bytes(self, rel: str) -> bytes:
        try:
            if self._is_s3:
                # one GET: s3fs otherwise asks for the size first (a HEAD) to split big reads
                return self.fs.cat_file(self.full(rel), max_concurrency=1)
            return self.fs.cat_file(self.full(rel))
        except FileNotFoundError as exc:
            raise FileMissingError(f"file not found: {self.uri(rel)}") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {self.uri(rel)}: {exc}") from exc

    def read_immutable(self, rel: str, size: int) -> bytes | None:
        """The whole of a committed data file of ``size`` bytes (as listed), in one GET and
        cached for the next reader, on object stores when it is small; ``None`` otherwise (the
        caller reads it its usual way). Only for files never rewritten under their name."""
        if not self.is_object_store or not 0 < size <= _SMALL_FILE_MAX:
            return None
        key = self.immutable_key(rel, size)
        data = _SMALL_CACHE.get(key)
        if data is not None:
            return data
        data = self.read_bytes(rel)
        if len(data) != size:
            return data    # not the file that was listed: do not keep it
        _SMALL_CACHE.put(key, data, _SMALL_CACHE_MAX)
        return data

    def immutable_key(self, rel: str, size: int) -> tuple[str, str, int]:
        """``(protocol, full path, size)``: what names a committed file of ``size`` bytes (as
        listed) in a process-wide cache of what it holds; only for files never rewritten
        under their name (see :func:`on_file_changed` for this process's own changes)."""
        return (_protocol(self.fs), self.full(rel), int(size))

    def read_range(self, rel: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        try:
            return self.fs.cat_file(self.full(rel), start=start, end=start + length)
        except FileNotFoundError as exc:
            raise FileMissingError(f"file not found: {self.uri(rel)}") from exc

    def open(self, rel: str, mode: str = "rb", *, size: int | None = None, **kwargs):
        """``size``: the file's size when a listing gave it, so an object store is not asked
        for it again (a HEAD per file)."""
        if "r" not in mode or "+" in mode:
            _changed(self.fs, self.full(rel))
        if size and "r" in mode and self.is_object_store:   # 0: not known (FileSlice's default)
            kwargs["size"] = int(size)
        if "r" in mode:
            # a folder listing cached before another process wrote the file would deny it
            # (s3fs answers info() from its listing cache); files found through the metadata
            # table are opened without listing their folder first
            self._forget(self.full(rel))
        try:
            return self.fs.open(self.full(rel), mode, **kwargs)
        except FileNotFoundError as exc:
            raise FileMissingError(f"file not found: {self.uri(rel)}") from exc

    def open_input(self, rel: str, size: int | None = None) -> pa.NativeFile:
        """A committed data file as an Arrow input file. A local one is memory-mapped (Arrow
        then reads it without the GIL, so several files decode in parallel; data files are
        never rewritten in place); any other is the fsspec file of :meth:`open`."""
        if self.is_local and os.name != "nt":   # Windows: a mapped file could not be deleted
            path = self.full(rel)
            try:
                return pa.memory_map(path)
            except FileNotFoundError as exc:
                raise FileMissingError(f"file not found: {self.uri(rel)}") from exc
        return pa.PythonFile(self.open(rel, size=size), mode="r")

    def size(self, rel: str) -> int:
        self._forget(self.full(rel))
        try:
            return int(self.fs.size(self.full(rel)))
        except FileNotFoundError as exc:
            raise FileMissingError(f"file not found: {self.uri(rel)}") from exc

    def list(self, rel: str = "") -> list[FileInfo]:
        """Entries directly under ``rel``; an absent folder lists as empty."""
        base = self.full(rel)
        try:
            if self.is_local:
                entries = _local_entries(base)
            else:
                # Other processes change the table under us: never answer from fsspec's listing
                # cache (s3fs keeps one per filesystem instance, and instances are shared).
                entries = [(e["name"].rstrip("/"), int(e.get("size") or 0), e.get("type") == "directory")
                           for e in self.fs.ls(base, detail=True, refresh=True)]
        except FileNotFoundError:
            return []
        out = []
        prefix = self.root.rstrip("/") + "/" if self.root not in ("", "/") else self.root
        for name, size, is_dir in entries:
            if name == base.rstrip("/"):
                continue
            relpath = name[len(prefix):] if prefix and name.startswith(prefix) else name.lstrip("/")
            out.append(FileInfo(relpath, size, is_dir))
        out.sort(key=lambda f: f.path)
        return out

    def walk_files(self, rel: str = "", skip_dirs: tuple[str, ...] = ()) -> Iterator[FileInfo]:
        """All files below ``rel``, depth first, skipping folders named in ``skip_dirs``."""
        for info in self.list(rel):
            if info.is_dir:
                if info.name in skip_dirs:
                    continue
                yield from self.walk_files(info.path, skip_dirs)
            else:
                yield info

    def changes(self, rel: str, *, hidden: bool = True) -> int:
        """How many times this process changed an entry directly in folder ``rel`` (see
        ``_CHANGES``); ``hidden=False`` leaves out names starting with a dot (lock, temp and
        checksum files: what a timeline listing skips)."""
        folder = self.full(rel)
        visible = _CHANGES.get(_folder_key(self.fs, folder, False), 0)
        return visible + _CHANGES.get(_folder_key(self.fs, folder, True), 0) if hidden else visible

    # -- writes ------------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        path = self.full(rel)
        _changed(self.fs, path)
        if not self.is_object_store:   # object stores have no folders (and makedirs costs a HEAD)
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as f:
            f.write(data)
        self._forget(path)

    def delete(self, rel: str) -> None:
        _changed(self.fs, self.full(rel))
        try:
            self.fs.rm_file(self.full(rel))
        except FileNotFoundError:
            pass
        self._forget(self.full(rel))

    @property
    def deletes_in_batches(self) -> bool:
        """Whether :meth:`delete_many` removes many files in one request (S3's DeleteObjects:
        up to 1,000 keys, absent ones included, per POST)."""
        return self._is_s3

    def delete_many(self, rels: Iterable[str]) -> None:
        """Remove these files; absent ones are no error. One request per 1,000 files where
        the store deletes in batches (:attr:`deletes_in_batches`), else one per file."""
        paths = [self.full(r) for r in rels]
        if not paths:
            return
        for path in paths:
            _changed(self.fs, path)
        # names with glob characters would be expanded by fsspec: those go one by one
        batch = [p for p in paths if not _GLOB.search(p)] if self.deletes_in_batches else []
        if batch:
            self.fs.rm(batch)
        for path in paths:
            if not batch or _GLOB.search(path):
                try:
                    self.fs.rm_file(path)
                except FileNotFoundError:
                    pass
        for path in paths:
            self._forget(path)

    def delete_tree(self, rel: str) -> None:
        """Remove folder ``rel`` and everything below it (absent: nothing to do). One recursive
        removal: the filesystem lists the tree once (one LIST on object stores), not a
        listing per sub-folder."""
        path = self.full(rel)
        _changed(self.fs, path)
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        self._forget(path)

    # -- atomic creation and renames --------------------------------------------------------
    @property
    def is_object_store(self) -> bool:
        """True for S3, GCS, Azure...: no folders, and every request is a paid round trip."""
        return any(p in _OBJECT_STORES for p in _protocols(self.fs))

    @property
    def _is_s3(self) -> bool:
        return "s3" in _protocols(self.fs)

    @property
    def is_local(self) -> bool:
        """True when the table lives on the local filesystem (where ``os`` calls apply)."""
        return isinstance(self.fs, LocalFileSystem)

    def _temp_name(self, path: str) -> str:
        # hidden, so timeline listings and file-system views skip it while it exists
        return posixpath.join(posixpath.dirname(path),
                              f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")

    def create_if_absent(self, rel: str, data: bytes) -> bool:
        """Create ``rel`` holding ``data`` unless it exists; True if this call created it.

        A reader either sees no file or the whole content, never a part of it, and an existing
        file is never replaced:

        - local filesystem: the bytes go to a hidden temp file in the same folder, which is then
          hard-linked to the final name (``link`` fails atomically if the name exists) and
          removed. Where hard links are unsupported the file is created with ``O_EXCL``
          (exclusive, but its content may briefly be incomplete). Content is flushed to disk
          before the link (so a power loss cannot leave the name with no content); an empty
          file -- a marker, a requested or inflight instant without a plan -- has no content
          to lose, so it is not synced (half the syncs of a write).
        - S3 (s3fs): one conditional PUT (``If-None-Match: *``), atomic where the store honours
          it (AWS S3, MinIO, the S3 test server); an s3fs without conditional writes degrades to
          the best-effort check below.
        - other fsspec filesystems (memory, ...): check ``exists``, write a temp file and ``mv``
          it under an in-process lock: atomic within this process, best effort across
          processes (until the storage layer gets a real conditional write for them).
        """
        data = bytes(data)
        path = self.full(rel)
        _changed(self.fs, path)
        if self.is_local:
            return self._create_local(path, data)
        if self._is_s3:
            # one conditional PUT: the store refuses it when the name exists (S3, MinIO and
            # the S3 test server honour If-None-Match); no HEAD or listing first
            try:
                self.fs.pipe_file(path, data, mode="create")
                self.fs.invalidate_cache(posixpath.dirname(path))
                return True
            except FileExistsError:
                return False
            except TypeError:
                pass  # an s3fs without conditional writes: the best-effort path below
            except OSError as exc:
                # 412 Precondition Failed: someone else created it first
                self.fs.invalidate_cache(path)
                if self.fs.exists(path):
                    return False
                raise StorageError(f"cannot create {self.uri(rel)}: {exc}") from exc
        if not self.is_object_store:
            try:
                self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            except OSError:
                pass
        with _CREATE_LOCK:
            if self.fs.exists(path):
                return False
            tmp = self._temp_name(path)
            try:
                with self.fs.open(tmp, "wb") as f:
                    f.write(data)
                self.fs.mv(tmp, path)
            except OSError as exc:
                raise StorageError(f"cannot create {self.uri(rel)}: {exc}") from exc
            finally:
                try:
                    if self.fs.exists(tmp):
                        self.fs.rm_file(tmp)
                except OSError:
                    pass
            return True

    def _create_local(self, path: str, data: bytes) -> bool:
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create folder {folder}: {exc}") from exc
        if os.path.lexists(path):
            return False
        tmp = self._temp_name(path)
        try:
            with open(tmp, "xb") as f:
                _write_durably(f, data)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                                     errno.EMLINK, errno.ENOSYS):
                    raise
            # no hard links here: exclusive create (content may briefly be partial)
            try:
                with open(path, "xb") as f:
                    _write_durably(f, data)
                return True
            except FileExistsError:
                return False
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc}") from exc
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Rename ``src`` to ``dst`` (both relative to the table).

        Without ``overwrite`` an existing ``dst`` raises ``StorageError`` and is left alone
        (atomically on the local filesystem, best effort elsewhere); with it, ``dst`` is
        replaced (atomically on the local filesystem; copy-and-delete on object stores).
        """
        a, b = self.full(src), self.full(dst)
        _changed(self.fs, a)
        _changed(self.fs, b)
        if self.is_local:
            try:
                os.makedirs(os.path.dirname(b), exist_ok=True)
                if overwrite:
                    os.replace(a, b)
                    return
                if os.path.isdir(a):
                    if os.path.lexists(b):
                        raise FileExistsError(errno.EEXIST, "exists", b)
                    os.rename(a, b)
                    return
                os.link(a, b)   # fails if b exists, atomically
                os.unlink(a)
                return
            except FileExistsError as exc:
                raise StorageError(f"cannot rename {self.uri(src)}: {self.uri(dst)} exists") from exc
            except FileNotFoundError as exc:
                raise FileMissingError(f"file not found: {self.uri(src)}") from exc
            except OSError as exc:
                raise StorageError(f"cannot rename {self.uri(src)} to {self.uri(dst)}: {exc}") from exc
        with _CREATE_LOCK:
            if not self.fs.exists(a):
                raise FileMissingError(f"file not found: {self.uri(src)}")
            if not overwrite and self.fs.exists(b):
                raise StorageError(f"cannot rename {self.uri(src)}: {self.uri(dst)} exists")
            try:
                self.fs.mv(a, b)
            except OSError as exc:
                raise StorageError(f"cannot rename {self.uri(src)} to {self.uri(dst)}: {exc}") from exc


def _protocol(fs: fsspec.AbstractFileSystem) -> str:
    """The name caches and change counts know a filesystem by (its first protocol)."""
    protos = _protocols(fs)
    return protos[0] if protos else type(fs).__name__


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


SYNC_ENV = "HUDI_FORMAT_FSYNC"


def _write_durably(f, data: bytes) -> None:
    """Write ``data`` to the open file and sync it to disk when there is any (see
    :meth:`Storage.create_if_absent`).

    ``HUDI_FORMAT_FSYNC=0`` in the environment skips the sync, as PostgreSQL's ``fsync=off``:
    for tests and throwaway tables only. A killed process still loses nothing (the page cache
    outlives it); a power loss may then lose a completed instant."""
    f.write(data)
    if data and os.environ.get(SYNC_ENV, "1") != "0":
        f.flush()
        os.fsync(f.fileno())
