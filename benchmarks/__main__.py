"""``python -m benchmarks [write|memory|index|streaming|formats|spark|spark-scale] [--rows N] [--codec C]``:
run a benchmark suite and print its ratio table (ours / peer, target, met?).

``write`` (the default) is issue 13's table at ``--rows`` (1M by default); ``memory`` measures
peak RSS in child processes (5M rows by default: slow); ``index`` is the record index at 5M rows.
"""

from __future__ import annotations

import argparse
import sys

from . import formats_bench, index_bench, memory_bench, streaming_bench, write_bench

SUITES = ["write", "memory", "streaming", "index", "spark", "spark-scale", "formats"]
# each suite's table size when --rows is not given
DEFAULT_ROWS = {"index": 5_000_000, "memory": 5_000_000, "spark-scale": 2_000_000}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("suite", nargs="?", default="write", choices=SUITES)
    parser.add_argument("--rows", type=int, default=None, help="table rows (write: 1M; index, memory: 5M)")
    parser.add_argument("--repeat", type=int, default=3, help="write, index: best of this many runs")
    parser.add_argument("--commits", type=int, default=200, help="streaming: upsert commits")
    parser.add_argument("--updates", type=int, default=100_000, help="index: upserts to tag")
    parser.add_argument("--big", type=int, default=20_000_000, help="spark-scale: rows of the 1g-driver upsert")
    parser.add_argument("--lookups", type=int, default=1_000, help="index: keys to look up")
    parser.add_argument("--index", default=None, choices=["SIMPLE", "BLOOM", "RECORD_INDEX"],
                        help="spark-scale: the index of the tables (default: the table's default)")
    parser.add_argument("--codec", default="snappy", choices=["snappy", "gzip", "both"],
                        help="write, spark: Parquet codec of both sides (both: snappy, then gzip for the record)")
    args = parser.parse_args(argv)
    rows = args.rows if args.rows is not None else DEFAULT_ROWS.get(args.suite, 1_000_000)
    codecs = ("snappy", "gzip") if args.codec == "both" else (args.codec,)
    if args.suite == "write":
        write_bench.run(rows, codecs=codecs, repeat=args.repeat)
    elif args.suite == "memory":
        memory_bench.run(rows, codec=codecs[0])
    elif args.suite == "streaming":
        streaming_bench.run(args.commits)
    elif args.suite == "index":
        index_bench.run(rows, args.updates, args.lookups, repeat=args.repeat)
    elif args.suite == "formats":
        # bloom filters of --rows keys (default 1M), Avro blocks of a tenth of that
        formats_bench.run(rows, max(1, rows // 10))
    elif args.suite == "spark":
        from . import spark_bench   # needs the spark extra (pyspark, Java 17)
        spark_bench.run(rows, codecs=codecs)
    elif args.suite == "spark-scale":
        from . import spark_scale_bench   # needs the spark extra (pyspark, Java 17)
        spark_scale_bench.run(rows, args.big, args.index)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
