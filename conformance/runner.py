"""Run the conformance cases against an engine and collect one result per case.

``Suite`` gathers the cases (fixture read cases, generated-table read cases, scripted write
cases) and materialises their tables in a work directory: fixtures are extracted on first use,
generated tables are written once per suite by the reference writer. ``run`` executes every case
with one engine; a write case runs its script with the engine, then reads the result back with
the reference readers (hudi_format and hudi-rs) and validates the table's layout.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

import pyarrow as pa

from . import fixtures
from .adapters.base import Engine, Unsupported
from .canonical import canonical_rows
from .cases import ReadCase, TableInfo, WriteCase, fixture_cases, write_cases
from .generate import derive_read_cases, generate_tables, run_script

log = logging.getLogger(__name__)

PASS, FAIL, SKIP, ERROR = "pass", "fail", "skip", "error"


@dataclass
class Result:
    case: str
    kind: str                 # "read" | "write"
    table: str
    features: tuple[str, ...]
    status: str
    message: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["features"] = list(self.features)
        d["seconds"] = round(self.seconds, 4)
        return d


class Suite:
    """The cases of one run and the tables they read, under ``workdir``."""

    def __init__(self, workdir: Path | str | None = None, *, fixtures_: bool = True, generated: bool = True,
                 writes: bool = True, select: str | None = None):
        self._own_dir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="hudi-conformance-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.select = re.compile(select) if select else None
        self.use_fixtures, self.use_generated, self.use_writes = fixtures_, generated, writes
        self.tables: dict[str, TableInfo] = {}
        self.read_cases: list[ReadCase] = []
        self.write_cases: list[WriteCase] = []
        self.prepared = False
        self.generation_seconds = 0.0

    def _selected(self, case_id: str) -> bool:
        return self.select is None or bool(self.select.search(case_id))

    def prepare(self, progress: Callable[[str], None] | None = None) -> "Suite":
        if self.prepared:
            return self
        if self.use_fixtures:
            tables, cases = fixture_cases()
            self.tables.update({t.key: t for t in tables})
            self.read_cases.extend(c for c in cases if self._selected(c.id))
        if self.use_generated:
            from .generate import GENERATED
            names = [n for n in GENERATED if self.select is None or any(
                self.select.search(f"{n}/{q}") for q in ("snapshot", "as_of", "incremental", "read_optimized",
                                                         "filter_projection", "lookup"))]
            start = time.perf_counter()
            tables, cases = generate_tables(self.workdir / "generated", names, progress)
            self.generation_seconds = time.perf_counter() - start
            self.tables.update({t.key: t for t in tables})
            self.read_cases.extend(c for c in cases if self._selected(c.id))
        if self.use_writes:
            self.write_cases = [c for c in write_cases() if self._selected(c.id)]
        self.prepared = True
        return self

    def table_path(self, key: str) -> Path:
        info = self.tables[key]
        if info.error:
            raise RuntimeError(info.error)
        if info.path is None:
            kind, name = key.split(":", 1)
            if kind != "fixture":
                raise RuntimeError(f"table {key} was not generated")
            info.path = fixtures.extract_table(name, self.workdir / "fixtures" / name)
        return info.path

    def cleanup(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


# -- comparing rows ------------------------------------------------------------------------------
def _short(row: dict, limit: int = 300) -> str:
    text = json.dumps(row, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def compare_rows(got: pa.Table | list[dict], expected: list[dict], columns: list[str] | None) -> str | None:
    """``None`` when the rows match, else what differs."""
    rows = canonical_rows(got)
    if columns is not None:
        have = set(got.column_names) if isinstance(got, pa.Table) else (set(rows[0]) if rows else set(columns))
        missing = [c for c in columns if c not in have]
        if missing:
            return f"result lacks columns {missing}"
        rows = canonical_rows([{c: r[c] for c in columns} for r in rows])
    elif isinstance(got, pa.Table) and expected:
        want_cols, got_cols = set(expected[0]), set(got.column_names)
        if want_cols != got_cols:
            return (f"columns differ: missing {sorted(want_cols - got_cols)}, "
                    f"unexpected {sorted(got_cols - want_cols)}")
    if rows == expected:
        return None
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    got_set, want_set = {key(r): r for r in rows}, {key(r): r for r in expected}
    lost = [want_set[k] for k in want_set if k not in got_set]
    extra = [got_set[k] for k in got_set if k not in want_set]
    msg = f"expected {len(expected)} rows, got {len(rows)}"
    if lost:
        msg += f"; {len(lost)} expected rows missing, e.g. {_short(lost[0])}"
    if extra:
        msg += f"; {len(extra)} unexpected rows, e.g. {_short(extra[0])}"
    if not lost and not extra:
        msg += " (same distinct rows, different multiplicity)"
    return msg


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 600 else text[:600] + "..."


def run_read_case(engine: Engine, case: ReadCase, path: Path | str) -> tuple[str, str]:
    try:
        got = engine.read(str(path), case.query)
    except Unsupported as exc:
        return SKIP, f"unsupported: {exc}"
    except Exception as exc:  # noqa: BLE001 - an engine failure is the case's result
        log.debug("case %s: %s", case.id, traceback.format_exc())
        return ERROR, _error_text(exc)
    try:
        problem = compare_rows(got, case.expected, case.compare_columns)
    except Exception as exc:  # noqa: BLE001 - malformed answer
        return ERROR, f"cannot compare the result: {_error_text(exc)}"
    return (PASS, "") if problem is None else (FAIL, problem)


# -- write cases ---------------------------------------------------------------------------------
def reference_readers() -> list[Engine]:
    from .adapters.hudi_format import HudiFormatEngine
    readers: list[Engine] = [HudiFormatEngine()]
    try:
        from .adapters.hudi_rs import HudiRsEngine
        readers.append(HudiRsEngine())
    except RuntimeError:
        log.warning("hudi-rs is not installed: write cases are read back by hudi_format only")
    return readers


def run_write_case(engine: Engine, case: WriteCase, root: Path,
                   readers: Iterable[Engine] | None = None) -> tuple[str, str]:
    from .layout import validate_layout
    if not engine.can_write:
        return SKIP, f"{engine.name} does not write"
    path = root / re.sub(r"[^A-Za-z0-9_.-]", "_", engine.name) / case.id.split("/", 1)[-1]
    if path.exists():
        shutil.rmtree(path)
    try:
        result = run_script(engine, str(path), case.spec)
    except Unsupported as exc:
        return SKIP, f"unsupported: {exc}"
    except Exception as exc:  # noqa: BLE001
        log.debug("case %s: %s", case.id, traceback.format_exc())
        return ERROR, f"executing the script failed: {_error_text(exc)}"
    problems = [f"layout: {p}" for p in validate_layout(path, case.spec)]
    checks = derive_read_cases(result, case.id, case.features, case.id)
    ref_readers = list(readers) if readers is not None else reference_readers()
    notes = []
    for reader in ref_readers:
        excusal = case.spec.get("reference_readers", {}).get(reader.name, {})
        excused = set(excusal.get("skip_queries", []))
        if excused:
            notes.append(f"{reader.name} not asked for {', '.join(sorted(excused))} queries: "
                         f"{excusal.get('why', 'known limitation')}")
        for check in checks:
            if check.query["kind"] in excused:
                continue
            status, message = run_read_case(reader, check, path)
            if status in (FAIL, ERROR):
                problems.append(f"read back by {reader.name}: {check.id.split('/', 2)[-1]}: {message}")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        return FAIL, "; ".join(problems[:5]) + more
    return PASS, "; ".join(notes)


# -- a whole run ---------------------------------------------------------------------------------
def run(engine: Engine, suite: Suite, progress: Callable[[int, int, str], None] | None = None) -> list[Result]:
    suite.prepare()
    results: list[Result] = []
    total = len(suite.read_cases) + len(suite.write_cases)
    for i, case in enumerate(suite.read_cases):
        if progress:
            progress(i, total, case.id)
        start = time.perf_counter()
        try:
            path = suite.table_path(case.table)
        except Exception as exc:  # noqa: BLE001 - the table could not be made
            results.append(Result(case.id, "read", case.table, case.features, ERROR, _error_text(exc)))
            continue
        status, message = run_read_case(engine, case, path)
        results.append(Result(case.id, "read", case.table, case.features, status, message,
                              time.perf_counter() - start))
    readers = reference_readers() if suite.write_cases and engine.can_write else []
    for j, case in enumerate(suite.write_cases):
        if progress:
            progress(len(suite.read_cases) + j, total, case.id)
        start = time.perf_counter()
        status, message = run_write_case(engine, case, suite.workdir / "writes", readers)
        results.append(Result(case.id, "write", case.id, case.features, status, message,
                              time.perf_counter() - start))
    if progress:
        progress(total, total, "")
    return results


def summarize(results: list[Result]) -> dict[str, int]:
    out = {PASS: 0, FAIL: 0, SKIP: 0, ERROR: 0}
    for r in results:
        out[r.status] += 1
    return out
