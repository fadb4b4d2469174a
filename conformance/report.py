"""Conformance reports: per engine, per case and per feature, as Markdown and JSON."""

from __future__ import annotations

import json
import platform
from collections import defaultdict
from pathlib import Path

from .runner import ERROR, FAIL, PASS, SKIP, Result, summarize

_MARK = {PASS: "pass", FAIL: "**FAIL**", SKIP: "skip", ERROR: "**ERROR**"}


def feature_table(results: list[Result]) -> dict[str, dict[str, int]]:
    """feature -> counts of pass/fail/skip/error over the cases that exercise it."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {PASS: 0, FAIL: 0, SKIP: 0, ERROR: 0})
    for r in results:
        for f in r.features:
            out[f][r.status] += 1
    return dict(sorted(out.items()))


def to_json(runs: dict[str, dict]) -> dict:
    """``runs``: engine name -> {"version", "results", "seconds"}."""
    return {
        "suite": "hudi_format conformance",
        "python": platform.python_version(),
        "engines": {
            name: {"version": run.get("version", ""), "seconds": round(run.get("seconds", 0.0), 2),
                   "summary": summarize(run["results"]),
                   "features": feature_table(run["results"]),
                   "cases": [r.to_json() for r in run["results"]]}
            for name, run in runs.items()
        },
    }


def _cell(counts: dict[str, int]) -> str:
    ran = counts[PASS] + counts[FAIL] + counts[ERROR]
    text = f"{counts[PASS]}/{ran}"
    if counts[SKIP]:
        text += f" ({counts[SKIP]} skipped)"
    if ran and counts[PASS] == ran:
        return text
    return text if not ran else f"**{text}**"


def to_markdown(runs: dict[str, dict], details: bool = True) -> str:
    engines = list(runs)
    lines = ["# Hudi format conformance", ""]
    lines += ["| engine | version | cases | pass | fail | error | skip | seconds |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in engines:
        s = summarize(runs[name]["results"])
        lines.append(f"| {name} | {runs[name].get('version', '')} | {len(runs[name]['results'])} | {s[PASS]} | "
                     f"{s[FAIL]} | {s[ERROR]} | {s[SKIP]} | {runs[name].get('seconds', 0):.1f} |")
    lines += ["", "## Per feature", "",
              "Cases passed / cases run (skipped: the engine does not support the query or operation).", ""]
    tables = {name: feature_table(runs[name]["results"]) for name in engines}
    features = sorted({f for t in tables.values() for f in t})
    lines.append("| feature | " + " | ".join(engines) + " |")
    lines.append("| --- |" + " --- |" * len(engines))
    empty = {PASS: 0, FAIL: 0, SKIP: 0, ERROR: 0}
    for f in features:
        lines.append(f"| {f} | " + " | ".join(_cell(tables[e].get(f, empty)) for e in engines) + " |")
    lines += ["", "## Not passing", ""]
    any_bad = False
    for name in engines:
        bad = [r for r in runs[name]["results"] if r.status in (FAIL, ERROR)]
        skipped = [r for r in runs[name]["results"] if r.status == SKIP]
        if not bad and not skipped:
            continue
        any_bad = True
        lines += [f"### {name}", ""]
        if bad:
            lines += ["| case | status | why |", "| --- | --- | --- |"]
            for r in bad:
                lines.append(f"| {r.case} | {_MARK[r.status]} | {_md(r.message)} |")
            lines.append("")
        if skipped:
            reasons: dict[str, int] = defaultdict(int)
            for r in skipped:
                reasons[r.message] += 1
            lines += [f"Skipped {len(skipped)}: " + "; ".join(f"{m} ({n})" for m, n in sorted(reasons.items())), ""]
    if not any_bad:
        lines += ["Every case passes on every engine.", ""]
    noted = [(name, r) for name in engines for r in runs[name]["results"] if r.status == PASS and r.message]
    if noted:
        lines += ["## Notes on passing cases", ""]
        lines += [f"- {name}, {r.case}: {_md(r.message)}" for name, r in noted]
        lines.append("")
    if details:
        lines += ["## Per case", "", "| case | kind | " + " | ".join(engines) + " |",
                  "| --- | --- |" + " --- |" * len(engines)]
        by_case: dict[str, dict[str, Result]] = defaultdict(dict)
        order: list[str] = []
        for name in engines:
            for r in runs[name]["results"]:
                if r.case not in by_case:
                    order.append(r.case)
                by_case[r.case][name] = r
        for case in order:
            row = by_case[case]
            kind = next(iter(row.values())).kind
            lines.append(f"| {case} | {kind} | " + " | ".join(
                _MARK[row[e].status] if e in row else "" for e in engines) + " |")
        lines.append("")
    return "\n".join(lines)


def _md(text: str, limit: int = 400) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def write_reports(runs: dict[str, dict], report_dir: Path | str) -> tuple[Path, Path]:
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    md = report_dir / "conformance.md"
    js = report_dir / "conformance.json"
    md.write_text(to_markdown(runs))
    js.write_text(json.dumps(to_json(runs), indent=2))
    return md, js
