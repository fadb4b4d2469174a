"""Shared test helpers: the Apache Hudi fixtures shipped in conformance/fixtures."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "conformance" / "fixtures"
TABLES = FIXTURES / "tables"
EXPECTED = FIXTURES / "expected"
UNITS = FIXTURES / "units"

FIXTURE_TABLES = sorted(p.stem for p in TABLES.glob("*.zip"))


def extract_table(name: str, dest: Path) -> Path:
    """Unzip fixture table ``name`` into ``dest`` and return the table's base path."""
    with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
        zf.extractall(dest, members)
    roots = {m.split("/")[0] for m in members}
    (root,) = roots
    return dest / root


def expected(name: str) -> dict:
    return json.loads((EXPECTED / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory):
    """Lazily extracted fixture tables, one folder per table, shared by the whole session."""
    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("fixture_tables")

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = extract_table(name, base / name)
        return cache[name]

    return get
