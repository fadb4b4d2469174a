"""``python -m conformance``: run the Hudi format conformance suite against an engine.

    python -m conformance run --engine hudi_format [--engine hudi-rs] [--report-dir DIR]
    python -m conformance run --engine "cmd:my-engine --conformance"   # JSON lines over stdio
    python -m conformance list                                          # the cases
    python -m conformance serve --engine hudi_format                    # reference protocol server

Exit code: 0 when every case that ran passed on every engine, 1 when any failed, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from .adapters import check_engine, get_engine
from .report import to_markdown, write_reports
from .runner import ERROR, FAIL, Suite, run, summarize


def _progress_factory(enabled: bool, label: str):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the dev/cli extras
        return None
    bar = None

    def progress(i: int, total: int, case: str) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=label, unit="case", file=sys.stderr, leave=False)
        bar.n = i
        bar.set_postfix_str(case[-50:], refresh=True)
        if i >= total:
            bar.close()

    return progress


def _cmd_run(args) -> int:
    for spec in args.engine:
        check_engine(spec)
    suite = Suite(args.workdir, fixtures_=not args.no_fixtures, generated=not args.no_generated,
                  writes=not args.no_writes, select=args.only)
    show = not args.quiet and sys.stderr.isatty()
    try:
        gen = None
        if show:
            gen = lambda name: print(f"generating {name}", file=sys.stderr)  # noqa: E731
        suite.prepare(gen)
        runs = {}
        for spec in args.engine:
            engine = get_engine(spec)
            start = time.perf_counter()
            try:
                results = run(engine, suite, _progress_factory(show, engine.name))
            finally:
                engine.close()
            runs[engine.name] = {"version": engine.version(), "results": results,
                                 "seconds": time.perf_counter() - start}
            s = summarize(results)
            if not args.quiet:
                print(f"{engine.name}: {len(results)} cases, {s['pass']} pass, {s['fail']} fail, "
                      f"{s['error']} error, {s['skip']} skip ({runs[engine.name]['seconds']:.1f}s)",
                      file=sys.stderr)
        if args.report_dir:
            md, js = write_reports(runs, args.report_dir)
            if not args.quiet:
                print(f"report: {md} and {js}", file=sys.stderr)
        else:
            print(to_markdown(runs, details=args.details))
    finally:
        if not args.keep:
            suite.cleanup()
    bad = any(r.status in (FAIL, ERROR) for run_ in runs.values() for r in run_["results"])
    return 1 if bad else 0


def _cmd_list(args) -> int:
    suite = Suite(args.workdir, generated=False, select=args.only)
    suite.prepare()
    from .generate import GENERATED
    for case in suite.read_cases:
        print(f"read   {case.id}   [{', '.join(case.features)}]")
    for name, spec in GENERATED.items():
        print(f"read   {name}/*   (generated at run time) [{', '.join(spec.get('features', []))}]")
    for case in suite.write_cases:
        print(f"write  {case.id}   [{', '.join(case.features)}]")
    suite.cleanup()
    return 0


def _cmd_serve(args) -> int:
    from .adapters.command import serve
    engine = get_engine(args.engine)
    try:
        serve(engine)
    finally:
        engine.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the cases against one or more engines")
    r.add_argument("--engine", action="append", required=True,
                   help="hudi_format, hudi-rs or cmd:<command> (repeat to compare engines)")
    r.add_argument("--report-dir", type=Path, help="write conformance.md and conformance.json here "
                   "(default: print the Markdown report)")
    r.add_argument("--only", help="regular expression: run the cases whose id matches")
    r.add_argument("--workdir", type=Path, help="where tables are extracted and generated (default: a temp dir)")
    r.add_argument("--keep", action="store_true", help="keep the work directory")
    r.add_argument("--no-fixtures", action="store_true", help="skip the Apache Hudi fixture tables")
    r.add_argument("--no-generated", action="store_true", help="skip the generated tables")
    r.add_argument("--no-writes", action="store_true", help="skip the write cases")
    r.add_argument("--details", action="store_true", help="list every case in the printed report")
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(func=_cmd_run)
    ls = sub.add_parser("list", help="list the cases")
    ls.add_argument("--only")
    ls.add_argument("--workdir", type=Path)
    ls.set_defaults(func=_cmd_list)
    s = sub.add_parser("serve", help="serve an in-process engine over the JSON-lines protocol")
    s.add_argument("--engine", default="hudi_format")
    s.set_defaults(func=_cmd_serve)
    return p


def main(argv=None) -> int:
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        sys.stdout = None  # output closed early (| head): nothing left to say
        return 0


if __name__ == "__main__":
    sys.exit(main())
