"""Shared test helpers: the Apache Hudi fixtures shipped in conformance/fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conformance.fixtures import (EXPECTED, FIXTURES, TABLES, UNITS, expected,  # noqa: E402,F401
                                  extract_table, table_names)

FIXTURE_TABLES = table_names()


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
