"""The torture test's sequence configuration (layouts, op weights, each seed's options), apart from its runner."""

from __future__ import annotations

import random
from typing import Any

LAYOUTS = [("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8), ("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6)]
PARTS = ("a", "b", "c")
WRITE_OPS = ("insert", "upsert", "delete", "bulk_insert", "insert_overwrite", "insert_overwrite_table",
             "delete_partition")
# writes a race may precede (a clustering and a clean after the write loaded the table)
RACED_OPS = ("insert", "upsert", "delete", "insert_overwrite")
# op -> weight; services only where they apply (compaction and log compaction: MERGE_ON_READ)
WEIGHTS = {"insert": 3, "upsert": 8, "delete": 3, "bulk_insert": 1, "insert_overwrite": 1,
           "insert_overwrite_table": 0.4, "delete_partition": 0.6, "compaction": 2, "log_compaction": 1,
           "clustering": 1.5, "clean": 1.5, "archive": 1.5, "rollback": 1.2, "savepoint": 0.7,
           "restore": 0.7}


def part_of(key: int) -> str:
    return PARTS[key % len(PARTS)]   # as make_rows places it: a key never changes partition


def key_id(key: int) -> str:
    return f"k{key:05d}"


def sequence_config(seed: int, table_type: str | None = None, version: int | None = None,
                    profile: str | None = None, moves: bool = False, races: bool = False,
                    mixed: bool = False) -> dict[str, Any]:
    """Layout and write/service options of the sequence ``seed`` (unless given). ``moves``: a
    global index (GLOBAL_SIMPLE, GLOBAL_BLOOM or, with the record index, RECORD_INDEX), and
    upserts that give some stored keys another partition (off by default, so the replays of
    earlier findings keep their configuration; the soak turns it on for a third of its seeds).
    ``races``: some upserts, deletes and inserts race a clustering and a clean that land after
    they loaded the table (the soak: every other seed). ``mixed``: some writes come from writers
    configured otherwise (:func:`mixed_writer`; the soak: a quarter of its seeds)."""
    rng = random.Random(f"config-{seed}")
    layout = LAYOUTS[seed % len(LAYOUTS)]
    table_type = table_type or layout[0]
    version = version or layout[1]
    profile = profile or ("aggressive" if (seed // len(LAYOUTS)) % 2 else "default")
    opts: dict[str, Any] = {}
    if profile == "aggressive":
        retained = rng.choice([2, 3])
        keep_min = retained + 1 + rng.randint(0, 1)
        opts.update({
            "hoodie.cleaner.commits.retained": retained,
            "hoodie.keep.min.commits": keep_min,
            "hoodie.keep.max.commits": keep_min + rng.randint(1, 2),
            "hoodie.parquet.max.file.size": rng.choice([6_000, 12_000, 40_000]),
            "hoodie.parquet.small.file.limit": rng.choice([0, 4_000, 10_000]),
            "hoodie.copyonwrite.insert.split.size": rng.choice([4, 10, 40]),
            "hoodie.metadata.compact.max.delta.commits": rng.choice([2, 3, 10]),
        })
        if rng.random() < 0.5:
            opts.update({"hoodie.clustering.inline": "true",
                         "hoodie.clustering.inline.max.commits": rng.choice([2, 3, 4]),
                         "hoodie.clustering.plan.strategy.small.file.limit": rng.choice([20_000, 300_000_000]),
                         "hoodie.clustering.plan.strategy.target.file.max.bytes": rng.choice([30_000, 1_000_000])})
        if table_type == "MERGE_ON_READ":
            if rng.random() < 0.7:
                opts.update({"hoodie.compact.inline": "true",
                             "hoodie.compact.inline.max.delta.commits": rng.choice([2, 3])})
            if rng.random() < 0.3:
                opts.update({"hoodie.log.compaction.inline": "true"})
            opts["hoodie.log.compaction.blocks.threshold"] = rng.choice([2, 3])
        mdt = rng.random() < 0.7
    else:
        mdt = rng.random() < 0.8
        if table_type == "MERGE_ON_READ":
            opts["hoodie.log.compaction.blocks.threshold"] = 2   # else log compaction rarely has work
    if not mdt:
        opts["hoodie.metadata.enable"] = "false"
    elif rng.random() < 0.3:
        opts.update({"hoodie.metadata.record.index.enable": "true",
                     "hoodie.metadata.record.index.min.filegroup.count": rng.choice([1, 2]),
                     "hoodie.index.type": rng.choice(["RECORD_INDEX", "SIMPLE"])})
    # COW merges of old files over this many rows are streamed batch by batch (writer/merge_handle.py;
    # 131,072 by default: tiny here so that the torture's small files take that path too), and
    # then write row groups of a few KB (32 MB by default): merged files hold several row groups
    merge_batch = random.Random(f"merge-batch-{seed}").choice([None, 5, 37])
    if random.Random(f"bloom-{seed}").random() < 0.3:   # footers without bloom filters
        opts["hoodie.parquet.bloom.filter.enabled"] = "false"
    sort_mode = random.Random(f"sort-mode-{seed}").choice(["NONE", "NONE", "GLOBAL_SORT", "PARTITION_SORT"])
    if sort_mode != "NONE":        # bulk_insert writes its files sorted by partition path and key
        opts["hoodie.bulkinsert.sort.mode"] = sort_mode
    if random.Random(f"row-groups-{seed}").random() < 0.3:   # base files of several row groups and pages
        opts.update({"hoodie.parquet.block.size": random.Random(f"row-groups-{seed}").choice([2_048, 8_192]),
                     "hoodie.parquet.page.size": 512})
    if mdt and random.Random(f"colstats-{seed}").random() < 0.4:   # filtered reads skip files by stats
        opts["hoodie.metadata.index.column.stats.enable"] = "true"
    if version >= 8 and random.Random(f"merge-mode-{seed}").random() < 0.25:   # the latest commit wins
        opts["hoodie.record.merge.mode"] = "COMMIT_TIME_ORDERING"
    if "hoodie.record.merge.mode" not in opts and random.Random(f"payload-{seed}").random() < 0.3:
        # the merge asked for the Hudi 0.x way: v8 infers its merge mode from it, v6 records it
        # (merge-on-read) or merges each write by it (copy-on-write)
        opts["hoodie.datasource.write.payload.class"] = "org.apache.hudi.common.model." + random.Random(
            f"payload-class-{seed}").choice(["DefaultHoodieRecordPayload", "EventTimeAvroPayload",
                                        "OverwriteWithLatestAvroPayload"])
    evolve = random.Random(f"evolve-{seed}").random() < 0.5
    if evolve:   # its writes without the new column leave it null, as Hudi's option asks
        opts["hoodie.write.set.null.for.missing.columns"] = "true"
    if moves:
        choices = ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"]
        if opts.get("hoodie.metadata.record.index.enable") == "true":
            choices.append("RECORD_INDEX")
        opts["hoodie.index.type"] = random.Random(f"moves-{seed}").choice(choices)
        if opts["hoodie.index.type"] == "RECORD_INDEX":   # (Hudi's default: updated where it is)
            opts["hoodie.record.index.update.partition.path"] = "true"
    return {"seed": seed, "table_type": table_type, "version": version, "profile": profile,
            "options": {k: str(v) for k, v in opts.items()}, "merge_batch_rows": merge_batch,
            "evolve": evolve, "moves": moves, "races": races, "mixed": mixed}


# what a writer keeping the table's metadata otherwise sets: the metadata table off (deleted; the
# next writer with it on bootstraps it), an index named off (dropped) or on (bootstrapped)
OTHER_WRITERS = ({"hoodie.metadata.enable": "false"}, {"hoodie.metadata.record.index.enable": "false"},
                 {"hoodie.metadata.index.column.stats.enable": "false"},
                 {"hoodie.metadata.record.index.enable": "true"}, {"hoodie.metadata.index.column.stats.enable": "true"})


def other_writer(opts: dict, rng: random.Random, global_index: bool) -> dict[str, str]:
    """The options by which a writer picked from :data:`OTHER_WRITERS` differs from ``opts``
    (the table's usual writers'): its index stays global where theirs is (keys move then) and
    never names an index the writer does not keep."""
    writer = dict(rng.choice(OTHER_WRITERS))
    if opts.get("hoodie.metadata.enable") == "false" and writer.get("hoodie.metadata.enable") != "false":
        writer["hoodie.metadata.enable"] = "true"       # an index needs the metadata table
    keeps_index = writer.get("hoodie.metadata.enable") != "false" and (
        writer.get("hoodie.metadata.record.index.enable",
                   opts.get("hoodie.metadata.record.index.enable", "false")) == "true")
    if opts.get("hoodie.index.type") == "RECORD_INDEX" and not keeps_index:
        writer["hoodie.index.type"] = "GLOBAL_SIMPLE" if global_index else "SIMPLE"
    return writer


def mixed_writer(cfg: dict, step: int) -> dict[str, str]:
    """The options by which write ``step`` of a ``mixed`` sequence differs from the sequence's
    own (none for most writes; :func:`other_writer` for about a third)."""
    if not cfg.get("mixed"):
        return {}
    rng = random.Random(f"mixed-{cfg['seed']}-{step}")
    if rng.random() >= 0.35:
        return {}
    writer = other_writer(cfg["options"], rng, bool(cfg.get("moves")))
    if writer.get("hoodie.metadata.record.index.enable") == "true":   # small index, many groups touched
        writer["hoodie.metadata.record.index.min.filegroup.count"] = "2"
    return writer


def merges_by_event_time(cfg: dict) -> bool:
    """How the sequence's table merges: v6 as 0.x's default payload (the latest commit wins),
    v8 by event time unless the merge mode (commit time, the only one set) says otherwise;
    a payload class option decides for both."""
    opts = cfg["options"]
    latest = cfg["version"] < 8 or bool(opts.get("hoodie.record.merge.mode"))
    payload = opts.get("hoodie.datasource.write.payload.class", "OverwriteWithLatestAvroPayload" if latest else "")
    return not payload.endswith("OverwriteWithLatestAvroPayload")


def replay_command(cfg: dict, steps: int) -> str:
    return (f"python -m tests.support.torture --seed {cfg['seed']} --steps {steps} --table-type {cfg['table_type']} "
            f"--version {cfg['version']} --profile {cfg['profile']}" + (" --moves" if cfg.get("moves") else "")
            + (" --races" if cfg.get("races") else "") + (" --mixed" if cfg.get("mixed") else ""))
