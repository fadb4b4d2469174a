"""JVM options of the Spark drivers and executors the tests start, in their session and in child
processes: short-lived JVMs running many small jobs warm up faster on the C1 compiler alone."""

TEST_JVM_OPTIONS = "-XX:+UseParallelGC -XX:TieredStopAtLevel=1"
