"""All table I/O through one fsspec-backed object, addressed by paths relative to the table.

Keeping every path relative to the table base lets the same code serve local disks, memory
and S3, and lets the format layers name files exactly as Hudi does (``.hoodie/...``,
``partition/file``) without caring where the table lives.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, Iterator

import attrs
import fsspec
from fsspec.core import url_to_fs

from .errors import StorageError


@attrs.frozen
class FileInfo:
    """One entry of a directory listing; ``path`` is relative to the table base."""

    path: str
    size: int
    is_dir: bool

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


def _join(*parts: str) -> str:
    return posixpath.join(*[p for p in parts if p])


class Storage:
    """A table location: base URL + fsspec filesystem + helpers for relative paths."""

    def __init__(self, url: str | os.PathLike, storage_options: dict[str, Any] | None = None,
                 fs: fsspec.AbstractFileSystem | None = None):
        url = os.fspath(url)
        if fs is None:
            try:
                fs, root = url_to_fs(url, **(storage_options or {}))
            except (ImportError, ValueError) as exc:
                raise StorageError(f"cannot open storage for {url!r}: {exc}") from exc
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
        url = self.url.rstrip("/") + "/" + rel.strip("/")
        return Storage(url, self.storage_options, fs=self.fs)

    def full(self, rel: str) -> str:
        return _join(self.root, rel) if rel else self.root

    def uri(self, rel: str) -> str:
        """A URL the user (or another engine) can open."""
        return self.url.rstrip("/") + ("/" + rel if rel else "")

    # -- reads -------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.full(rel))

    def read_bytes(self, rel: str) -> bytes:
        try:
            return self.fs.cat_file(self.full(rel))
        except FileNotFoundError as exc:
            raise StorageError(f"file not found: {self.uri(rel)}") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {self.uri(rel)}: {exc}") from exc

    def read_range(self, rel: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        try:
            return self.fs.cat_file(self.full(rel), start=start, end=start + length)
        except FileNotFoundError as exc:
            raise StorageError(f"file not found: {self.uri(rel)}") from exc

    def open(self, rel: str, mode: str = "rb", **kwargs):
        try:
            return self.fs.open(self.full(rel), mode, **kwargs)
        except FileNotFoundError as exc:
            raise StorageError(f"file not found: {self.uri(rel)}") from exc

    def size(self, rel: str) -> int:
        try:
            return int(self.fs.size(self.full(rel)))
        except FileNotFoundError as exc:
            raise StorageError(f"file not found: {self.uri(rel)}") from exc

    def list(self, rel: str = "") -> list[FileInfo]:
        """Entries directly under ``rel``; an absent folder lists as empty."""
        base = self.full(rel)
        try:
            entries = self.fs.ls(base, detail=True)
        except FileNotFoundError:
            return []
        out = []
        prefix = self.root.rstrip("/") + "/" if self.root not in ("", "/") else self.root
        for e in entries:
            name = e["name"].rstrip("/")
            if name == base.rstrip("/"):
                continue
            relpath = name[len(prefix):] if prefix and name.startswith(prefix) else name.lstrip("/")
            out.append(FileInfo(relpath, int(e.get("size") or 0), e.get("type") == "directory"))
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

    # -- writes ------------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        path = self.full(rel)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as f:
            f.write(data)

    def delete(self, rel: str) -> None:
        try:
            self.fs.rm_file(self.full(rel))
        except FileNotFoundError:
            pass
