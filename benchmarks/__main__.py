"""``python -m benchmarks [write] [--rows N]``: run the benchmarks and print their ratio tables."""

from __future__ import annotations

import argparse
import sys

from . import streaming_bench, write_bench


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("suite", nargs="?", default="write", choices=["write", "streaming"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args(argv)
    if args.suite == "write":
        write_bench.run(args.rows)
    elif args.suite == "streaming":
        streaming_bench.run(args.commits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
