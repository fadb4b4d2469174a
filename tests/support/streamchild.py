"""Child process for the killed-stream test: a rate stream into the ``hudi_format`` sink.

usage: python streamchild.py <table path> <checkpoint dir> <options json> [stop after batch]

Prints ``batch <id>`` whenever the query reports progress; with a last argument, stops the query
gracefully once that micro-batch completed, else runs until killed. Batch ``n`` holds the ids
``[n*30, (n+1)*30)``, the same when Spark replays it.
"""

from __future__ import annotations

import json
import os
import sys
import time

ROWS_PER_BATCH = 30

if __name__ == "__main__":
    path, checkpoint, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    stop_after = int(sys.argv[4]) if len(sys.argv) > 4 else None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_adapter
    from spark_jvm import TEST_JVM_OPTIONS

    spark = (SparkSession.builder.master("local[2]").appName("streamchild")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.default.parallelism", "2")
             .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_adapter.register(spark)
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH)
            .option("numPartitions", 2).load()
            .selectExpr("cast(value as long) as id", "cast(value as long) as ts",
                        "cast(value % 3 as string) as part"))
    query = (rows.writeStream.format("hudi_format").options(**options).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start(path))
    last = -1
    while True:
        if query.exception() is not None:
            print(f"error {query.exception()}", flush=True)
            sys.exit(3)
        progress = query.lastProgress
        if progress and progress["batchId"] != last:
            last = progress["batchId"]
            print(f"batch {last}", flush=True)
            if stop_after is not None and last >= stop_after:
                query.stop()
                break
        time.sleep(0.05)
    spark.stop()
