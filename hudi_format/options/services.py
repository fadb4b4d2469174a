"""Table service options: compaction, log compaction, clustering, cleaning, archival.

Hudi's keys and defaults (``HoodieCompactionConfig``, ``HoodieClusteringConfig``,
``HoodieCleanConfig``, ``HoodieArchivalConfig``, ``HoodieLayoutConfig``).
"""

from __future__ import annotations

from .registry import OptionSpec, declare, declare_below

MB = 1024 * 1024
LOG_FILE_SIZE_STRATEGY = "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy"
SIZE_BASED_PLAN = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"
SORT_AND_SIZE_EXECUTION = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
TRIGGER_STRATEGIES = ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED",
                      "NUM_AND_TIME", "NUM_OR_TIME")
CLEANER_POLICIES = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS")


def _s(key: str, type_: str, default: object, doc: str, **kw: object) -> OptionSpec:
    return OptionSpec(key, type_, default, doc, "service", **kw)  # type: ignore[arg-type]


declare(
    # -- compaction ---------------------------------------------------------------------------
    _s("hoodie.compact.inline", "bool", False, "MERGE_ON_READ: schedule and run a compaction after each "
       "write when the trigger is met."),
    _s("hoodie.compact.schedule.inline", "bool", False, "MERGE_ON_READ: only schedule compactions after writes."),
    _s("hoodie.compact.inline.max.delta.commits", "int", 5, "Compaction trigger: deltacommits since the last "
       "compaction (also bounds archival of MERGE_ON_READ tables).", minimum=1),
    _s("hoodie.compact.inline.max.delta.seconds", "int", 3600, "Compaction trigger: seconds since the last "
       "compaction.", minimum=0),
    _s("hoodie.compact.inline.trigger.strategy", "choice", "NUM_COMMITS", "Which of the two triggers "
       "schedules a compaction.", allowed=TRIGGER_STRATEGIES),
    _s("hoodie.compaction.strategy", "str", LOG_FILE_SIZE_STRATEGY, "Which file slices a compaction takes: "
       "LogFileSize-, LogFileNum-, BoundedIO- or UnBoundedCompactionStrategy."),
    _s("hoodie.compaction.target.io", "int", 500 * 1024, "BoundedIO: megabytes of IO one compaction may do.",
       minimum=1),
    _s("hoodie.compaction.logfile.size.threshold", "int", 0, "LogFileSize: only slices with at least this "
       "many log bytes.", minimum=0),
    _s("hoodie.compaction.logfile.num.threshold", "int", 0, "LogFileNum: only slices with at least this "
       "many log files.", minimum=0),
    # -- log compaction -----------------------------------------------------------------------
    _s("hoodie.log.compaction.enable", "bool", False, "Allow log compaction."),
    _s("hoodie.log.compaction.inline", "bool", False, "MERGE_ON_READ: log-compact after each write."),
    _s("hoodie.log.compaction.blocks.threshold", "int", 5, "Log-compact slices with at least this many "
       "log blocks.", minimum=0),
    # -- clustering ---------------------------------------------------------------------------
    _s("hoodie.clustering.inline", "bool", False, "Schedule and run a clustering after each write when "
       "the trigger is met.", aliases=("hoodie.datasource.clustering.inline.enable",)),
    _s("hoodie.clustering.schedule.inline", "bool", False, "Only schedule clusterings after writes."),
    _s("hoodie.clustering.async.enabled", "bool", False, "Clustering runs asynchronously: scheduling "
       "waits for async.max.commits.", aliases=("hoodie.datasource.clustering.async.enable",)),
    _s("hoodie.clustering.inline.max.commits", "int", 4, "Inline clustering trigger: commits since the "
       "last clustering.", minimum=1),
    _s("hoodie.clustering.async.max.commits", "int", 4, "Async clustering trigger: commits since the "
       "last clustering.", minimum=1),
    _s("hoodie.clustering.plan.strategy.class", "str", SIZE_BASED_PLAN, "Plan strategy; only the "
       "size-based ones (Spark/Java/Flink names)."),
    _s("hoodie.clustering.execution.strategy.class", "str", SORT_AND_SIZE_EXECUTION, "Execution strategy; "
       "only sort-and-size (Spark/Java names)."),
    _s("hoodie.clustering.plan.strategy.small.file.limit", "int", 300 * MB, "Base files smaller than this "
       "(bytes) are clustered.", minimum=0),
    _s("hoodie.clustering.plan.strategy.target.file.max.bytes", "int", 1024 * MB, "Size of the files "
       "clustering writes.", minimum=1),
    _s("hoodie.clustering.plan.strategy.max.bytes.per.group", "int", 2048 * MB, "Bytes of input per "
       "clustering group.", minimum=1),
    _s("hoodie.clustering.plan.strategy.max.num.groups", "int", 30, "Clustering groups per plan.", minimum=1),
    _s("hoodie.clustering.plan.strategy.sort.columns", "str", None, "Columns clustering sorts by, comma "
       "separated."),
    _s("hoodie.clustering.plan.strategy.single.group.clustering.enabled", "bool", True, "Cluster a group "
       "of a single file slice too."),
    _s("hoodie.clustering.plan.strategy.partition.selected", "str", None, "Only these partitions, comma "
       "separated."),
    _s("hoodie.clustering.plan.strategy.partition.regex.pattern", "str", None, "Only partitions matching "
       "this regular expression."),
    _s("hoodie.clustering.preserve.commit.metadata", "bool", True, "Keep the records' commit time and "
       "sequence number when clustering."),
    _s("hoodie.layout.optimize.strategy", "choice", "linear", "Sort order of clustering: linear, z-order "
       "or hilbert curve.", allowed=("linear", "z-order", "zorder", "hilbert")),
    _s("hoodie.layout.optimize.curve.build.method", "choice", "direct", "How the space curve is built; "
       "only direct.", allowed=("direct", "sample")),
    # -- cleaning -----------------------------------------------------------------------------
    _s("hoodie.clean.automatic", "bool", True, "Clean after each write."),
    _s("hoodie.cleaner.policy", "choice", "KEEP_LATEST_COMMITS", "Which file slices the cleaner keeps.",
       allowed=CLEANER_POLICIES),
    _s("hoodie.cleaner.commits.retained", "int", 10, "KEEP_LATEST_COMMITS: commits whose file slices are kept.", minimum=1),
    _s("hoodie.cleaner.fileversions.retained", "int", 3, "KEEP_LATEST_FILE_VERSIONS: slices kept per file group.", minimum=1),
    _s("hoodie.cleaner.hours.retained", "int", 24, "KEEP_LATEST_BY_HOURS: hours of commits whose slices are kept.", minimum=0),
    _s("hoodie.clean.trigger.strategy", "choice", "NUM_COMMITS", "What schedules a clean.",
       allowed=("NUM_COMMITS",)),
    _s("hoodie.clean.max.commits", "int", 1, "Commits since the last clean before the next is scheduled.", minimum=1),
    # -- archival -----------------------------------------------------------------------------
    _s("hoodie.archive.automatic", "bool", True, "Archive after each write."),
    _s("hoodie.keep.min.commits", "int", 20, "Commits archival leaves in the active timeline.", minimum=1),
    _s("hoodie.keep.max.commits", "int", 30, "Archive once the active timeline holds more commits.", minimum=2),
    _s("hoodie.archive.beyond.savepoint", "bool", False, "Archive past the earliest savepoint (keeping "
       "savepointed commits)."),
    _s("hoodie.timeline.compaction.batch.size", "int", 10, "v8+: LSM history files merged by one compaction.", minimum=2),
    _s("hoodie.timeline.compaction.target.file.max.bytes", "int", 1024 * MB, "v8+: largest LSM history "
       "file a compaction writes.", minimum=1),
    _s("hoodie.commits.archival.batch", "int", 10, "v6: instants per archived log block.", minimum=1),
)
# archival leaves keep.min commits once the timeline holds more than keep.max
declare_below("hoodie.keep.min.commits", "hoodie.keep.max.commits")
