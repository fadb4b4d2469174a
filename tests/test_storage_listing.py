"""``Storage.list`` on the local filesystem (``os.scandir``) answers as fsspec's ``ls`` does.

The local listing skips fsspec's per-entry info dict; what it returns must not change: the same
entries, sizes and folders, symlinks as fsspec sees them, an entry deleted during the listing
left out, an absent folder or a file listed as empty.
"""

from __future__ import annotations

import os

import fsspec
import pytest

from hudi_format import storage as storage_mod
from hudi_format.storage import FileInfo, Storage


def _through_fsspec(root: str, rel: str) -> list[FileInfo]:
    """What ``Storage.list`` answered before the local path: fsspec's ``ls``, relative paths."""
    fs = fsspec.filesystem("file")
    base = os.path.join(root, rel) if rel else root
    out = []
    try:
        entries = fs.ls(base, detail=True, refresh=True)
    except FileNotFoundError:
        return []
    for e in entries:
        name = e["name"].rstrip("/")
        if name == base.rstrip("/"):
            continue
        out.append(FileInfo(os.path.relpath(name, root), int(e.get("size") or 0), e["type"] == "directory"))
    return sorted(out, key=lambda f: f.path)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "p" / "sub").mkdir(parents=True)
    (tmp_path / "p" / "a.parquet").write_bytes(b"x" * 123)
    (tmp_path / "p" / ".hidden").write_bytes(b"")
    (tmp_path / "p" / "big.log.1_0-1-1").write_bytes(b"y" * 4097)
    (tmp_path / "p" / "sub" / "f").write_bytes(b"z")
    if hasattr(os, "symlink"):
        try:
            os.symlink(tmp_path / "p" / "a.parquet", tmp_path / "p" / "link_to_file")
            os.symlink(tmp_path / "p" / "sub", tmp_path / "p" / "link_to_dir")
            os.symlink(tmp_path / "p" / "gone", tmp_path / "p" / "broken_link")
        except OSError:   # no symlink privilege (Windows)
            pass
    return tmp_path


@pytest.mark.parametrize("rel", ["", "p", "p/sub", "absent", "p/a.parquet"])
def test_local_listing_equals_fsspecs(tree, rel):
    got = Storage(str(tree)).list(rel)
    assert got == _through_fsspec(str(tree), rel)
    if rel == "p":
        sizes = {f.name: (f.size, f.is_dir) for f in got}
        assert sizes["a.parquet"] == (123, False) and sizes["big.log.1_0-1-1"] == (4097, False)
        assert sizes["sub"] == (os.stat(tree / "p" / "sub").st_size, True)
        if "link_to_dir" in sizes:     # as fsspec: a link is no folder, sized as its target
            assert sizes["link_to_file"] == (123, False) and not sizes["link_to_dir"][1]
            assert sizes["broken_link"] == (0, False)


def test_an_entry_deleted_while_listed_is_left_out(tree, monkeypatch):
    """A concurrent clean or rollback deletes files while a reader lists their folder: the
    listing leaves the vanished file out and keeps the rest (never an empty folder)."""
    real = os.scandir
    victim = tree / "p" / "a.parquet"

    class ReadThenDeleted:
        """The folder's entries read, then the victim deleted before any is stat-ed."""

        def __init__(self, path):
            with real(path) as it:
                self.entries = list(it)
            os.remove(victim)

        def __enter__(self):
            return iter(self.entries)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(storage_mod.os, "scandir", ReadThenDeleted)
    names = [f.name for f in Storage(str(tree)).list("p")]
    assert "a.parquet" not in names and "big.log.1_0-1-1" in names and "sub" in names
