"""The project rule "no module over 600 lines", held for every .py file of the code, tools and tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("hudi_format", "spark_adapter", "conformance", "benchmarks", "tests")
MAX_LINES = 600


def line_count(path: Path) -> int:
    """Lines as ``wc -l`` counts them for a file ending in a newline (a last line without one counts too)."""
    return len(path.read_bytes().splitlines())


def modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))


def test_no_module_over_600_lines():
    found = modules()
    assert len(found) > 100, "the module listing found too few files to be right"
    offenders = [(p.relative_to(ROOT).as_posix(), n) for p in found if (n := line_count(p)) > MAX_LINES]
    assert offenders == [], f"modules over {MAX_LINES} lines (split them by concept): " + \
        ", ".join(f"{name} ({n} lines)" for name, n in offenders)


def test_line_count_counts_like_wc(tmp_path):
    """The count the rule uses: one per newline, plus an unterminated last line."""
    (tmp_path / "a.py").write_bytes(b"x = 1\ny = 2\n")
    (tmp_path / "b.py").write_bytes(b"x = 1\ny = 2")
    (tmp_path / "c.py").write_bytes(b"")
    assert [line_count(tmp_path / n) for n in ("a.py", "b.py", "c.py")] == [2, 2, 0]
