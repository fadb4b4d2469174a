"""``python -m benchmarks [write|streaming|index|spark|spark-scale|formats] [--rows N]``: run the benchmarks and print their ratio tables."""

from __future__ import annotations

import argparse
import sys

from . import formats_bench, index_bench, streaming_bench, write_bench


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("suite", nargs="?", default="write", choices=["write", "streaming", "index", "spark", "spark-scale",
                                                                   "formats"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--updates", type=int, default=100_000, help="index: upserts to tag")
    parser.add_argument("--big", type=int, default=20_000_000, help="spark-scale: rows of the 1g-driver upsert")
    parser.add_argument("--lookups", type=int, default=1_000, help="index: keys to look up")
    parser.add_argument("--codec", default="snappy", choices=["snappy", "gzip", "both"],
                        help="spark: Parquet codec of both sides (both: snappy, then gzip writes too)")
    args = parser.parse_args(argv)
    if args.suite == "write":
        write_bench.run(args.rows)
    elif args.suite == "streaming":
        streaming_bench.run(args.commits)
    elif args.suite == "index":
        # the index benchmark's table defaults to 5M rows (the write benchmark's to 1M)
        rows = args.rows if "--rows" in " ".join(argv) else 5_000_000
        index_bench.run(rows, args.updates, args.lookups)
    elif args.suite == "formats":
        # bloom filters of --rows keys (default 1M), Avro blocks of a tenth of that
        formats_bench.run(args.rows, max(1, args.rows // 10))
    elif args.suite == "spark":
        from . import spark_bench   # needs the spark extra (pyspark, Java 17)
        spark_bench.run(args.rows, codecs=("snappy", "gzip") if args.codec == "both" else (args.codec,))
    elif args.suite == "spark-scale":
        from . import spark_scale_bench   # needs the spark extra (pyspark, Java 17)
        rows = args.rows if "--rows" in " ".join(argv) else 2_000_000
        spark_scale_bench.run(rows, args.big)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
