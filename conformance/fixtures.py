"""The Apache Hudi-written fixture tables shipped with the suite, and their expected results."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TABLES = FIXTURES / "tables"
EXPECTED = FIXTURES / "expected"
UNITS = FIXTURES / "units"


def table_names() -> list[str]:
    return sorted(p.stem for p in TABLES.glob("*.zip"))


def extract_table(name: str, dest: Path | str) -> Path:
    """Unzip fixture table ``name`` into ``dest``; return the table's base path."""
    dest = Path(dest)
    with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
        zf.extractall(dest, members)
    (root,) = {m.split("/")[0] for m in members}
    return dest / root


def expected(name: str) -> dict:
    return json.loads((EXPECTED / f"{name}.json").read_text())
