"""Write planning: which file group each record of a write goes to.

Index tagging (which existing file group holds each key), small-file top-up and file sizing
(how inserts are spread over new file groups), replaced file groups (insert_overwrite,
delete_partition) and the pending-service checks, all decided from the records' keys and
partition paths alone, without touching storage beyond reads. The result, a :class:`Plan`,
becomes the write's buckets (:mod:`hudi_format.writer.job`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import parquet_codec
from ..config import TableConfig
from ..errors import ConcurrentWriteError, HudiError, InvalidOptionError
from ..membership import rows_in
from ..read.merge import MergeSpec, live_rows, row_numbers
from ..storage import Storage
from .grouping import groups_of
from .file_sizing import SmallFile, assign_inserts, average_record_size, small_files
from .index import is_global, known_locations, stored_outranks, tag
from .index_lookup import INSERT, MOVE, UPDATE, actions_of, moves_partitions
from ..options import option
from .options import sizing_config

REPLACE_OPS = ("insert_overwrite", "insert_overwrite_table", "delete_partition")
SAMPLE_ROWS = 50_000   # bulk_insert sizes its files from the compressed size of this many rows



#: operations that look the incoming keys up: a flagged record there deletes a stored one
TAGGING_OPS = ("upsert", "delete")


@attrs.define
class Plan:
    """Per file group: records to upsert (with their keys), keys to delete; new groups."""

    upserts: dict = attrs.field(factory=lambda: defaultdict(list))   # (partition, fid) -> [row arrays]
    updates: dict = attrs.field(factory=lambda: defaultdict(int))    # (partition, fid) -> count
    deletes: dict = attrs.field(factory=lambda: defaultdict(list))   # (partition, fid) -> [row arrays]
    new_groups: list = attrs.field(factory=list)                     # [(partition, row array)]
    replaced: dict = attrs.field(factory=lambda: defaultdict(list))  # partition -> [fid]
    # planned from counts (WritePlanner.plan_counts): no row numbers, how many records
    records: dict = attrs.field(factory=lambda: defaultdict(int))    # (partition, fid) -> to write
    deleted: dict = attrs.field(factory=lambda: defaultdict(int))    # (partition, fid) -> to delete
    new_counts: list = attrs.field(factory=list)                     # [(partition, records)]


@attrs.frozen
class WriteCounts:
    """What an engine that tagged a write on its workers tells the planner: records per
    existing file group to update and to delete, per partition to insert (a moved key counts
    as a delete in its old partition and an insert in its new one), and the partitions the
    records fall in (replace operations replace their file groups)."""

    updates: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    deletes: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    inserts: Mapping[str, int] = attrs.field(factory=dict)
    partitions: frozenset = frozenset()


def record_size_bound(table: pa.Table) -> int:
    """An upper bound of the bytes a record of ``table`` takes in a base file: its Arrow
    (uncompressed) size twice over, for its data and a record key copied from it, plus the
    other meta fields, doubled again for encoding overheads. Compression only makes it less."""
    if table.num_rows == 0:
        return 0
    return 4 * -(-table.nbytes // table.num_rows) + 256


def concat_rows(chunks: list) -> pa.Array:
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())


class WritePlanner:
    """Plans one write against the table state it was given (see the module doc)."""

    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any], spec: MergeSpec,
                 sample: pa.Table | None = None):
        self.storage = storage
        self.config = config
        self.options = options
        self.spec = spec
        self.sample = sample     # bulk_insert: real rows to size files from, when planning from keys

    @staticmethod
    def pending_service_groups(state) -> tuple[dict, set]:
        """File groups under a pending compaction (-> its instant) and under pending clustering."""
        compacting, clustering = {}, set()
        if state is None:
            return compacting, clustering
        timeline = state.timeline
        for inst in timeline.pending:
            if inst.action not in ("compaction", "clustering", "replacecommit"):
                continue
            try:
                plan = timeline.plan(inst)
            except HudiError:
                continue
            if inst.action == "compaction":
                for op in plan.get("operations") or []:
                    compacting[(op.get("partitionPath") or "", op.get("fileId"))] = inst.timestamp
            else:
                for group in ((plan.get("clusteringPlan") or {}).get("inputGroups") or []):
                    for sl in group.get("slices") or []:
                        clustering.add((sl.get("partitionPath") or "", sl.get("fileId")))
        return compacting, clustering

    def latest_slices(self, state: Any, view: Any, partitions: Any = None) -> list:
        if state is None:
            return []
        return state.file_slices(view, partitions=partitions) if partitions is not None else state.file_slices(view)

    def plan(self, op, table, keys, partitions, state, view, full_schema) -> Plan:
        """Where each row of ``table`` (its ``keys`` and ``partitions``) goes; ``table`` may be
        just the key columns (its row count is what sizing needs), or ``None`` for a
        delete_partition by option."""
        plan = Plan()
        rows = row_numbers(table.num_rows) if table is not None else None
        if op in REPLACE_OPS:
            if op == "insert_overwrite_table":
                targets = None
            elif op == "delete_partition" and (table is None or table.num_rows == 0):
                raw = option(self.options, "hoodie.datasource.write.partitions.to.delete") or ""
                targets = {p.strip() for p in str(raw).split(",") if p.strip()}
                if not targets:
                    raise InvalidOptionError("delete_partition needs data or the option "
                                             "hoodie.datasource.write.partitions.to.delete")
            else:
                targets = set(pc.unique(partitions).to_pylist())
            for s in self.latest_slices(state, view, targets):
                plan.replaced[s.partition_path].append(s.file_id)
            if op != "delete_partition":
                avg = average_record_size(self.commit_sizes(state), sizing_config(self.options).small_file_limit,
                                          sizing_config(self.options).record_size_estimate)
                self.plan_new_groups(plan, partitions, rows, avg)
            return plan
        if op == "bulk_insert":
            # Hudi's bulk insert rolls files over by the bytes actually written; we size them
            # from the compressed size of a sample of this batch.
            sample = self.sample if self.sample is not None else table
            self.plan_new_groups(plan, partitions, rows, lambda: self.measured_record_size(sample),
                                 record_size_bound(sample))
            return plan

        index_type = option(self.options, "hoodie.index.type")
        global_index = is_global(index_type)
        touched = None if global_index else set(pc.unique(partitions).to_pylist())
        slices = self.latest_slices(state, view, touched)
        tagged = None
        if op in ("upsert", "delete") or option(self.options, "hoodie.datasource.write.insert.drop.duplicates"):
            from ..base_file import read_footer
            if pa.types.is_dictionary(partitions.type):   # the index joins on plain strings
                partitions = pc.cast(partitions, pa.string())
            known = known_locations(self.storage, self.config, self.options, state, slices, keys,
                                    self.spec, full_schema, read_footer, partitions)
            incoming = pa.table({"key": pc.cast(keys, pa.string()), "partition": partitions, "row": rows})
            tagged = tag(incoming, known, global_index)

        _, clustering = self.pending_service_groups(state)
        if op == "delete":
            found = tagged.filter(pc.is_valid(tagged.column("file_id")))
            for (part, fid), idx in groups_of(found, ["existing_partition", "file_id"]):
                plan.deletes[(part, fid)].append(idx)
            self.reject_clustered(plan, clustering)
            return plan

        if tagged is not None:
            acts = actions_of(op, global_index and moves_partitions(self.options), tagged.column("partition"),
                              tagged.column("existing_partition"), tagged.column("file_id"))
            if op == "upsert":
                acts = self.keep_outranked_in_place(acts, tagged, table, slices, state, full_schema)
            moved = pc.equal(acts, MOVE)
            for (part, f), idx in groups_of(tagged.filter(moved), ["existing_partition", "file_id"]):
                plan.deletes[(part, f)].append(idx)   # a move: delete there, insert here
            for (part, f), idx in groups_of(tagged.filter(pc.equal(acts, UPDATE)), ["existing_partition", "file_id"]):
                plan.upserts[(part, f)].append(idx)
                plan.updates[(part, f)] += len(idx)
            inserts = tagged.filter(pc.or_(pc.equal(acts, INSERT), moved))
        else:
            inserts = pa.table({"partition": partitions, "row": rows})
        live = live_rows(table) if table is not None else None
        if live is not None:   # a flagged record of a key stored nowhere deletes nothing
            inserts = inserts.filter(pc.take(live, inserts.column("row")))
        insert_rows = {part: idx for (part,), idx in groups_of(inserts, ["partition"])}
        sized = self.size_inserts({p: len(idx) for p, idx in insert_rows.items()}, slices, state, clustering)
        for part, idx in insert_rows.items():
            pos = 0
            for b in sized[part]:
                chunk = idx.slice(pos, b.count)
                pos += b.count
                if b.is_new:
                    plan.new_groups.append((part, chunk))
                else:
                    plan.upserts[(part, b.file_id)].append(chunk)
        self.reject_clustered(plan, clustering)
        return plan

    def keep_outranked_in_place(self, acts: pa.Array, tagged: pa.Table, table: pa.Table, slices: list,
                                state: Any, full_schema: pa.Schema) -> pa.Array:
        """``acts`` with each move whose stored record outranks the incoming one made an update
        where the key is (:func:`.index.stored_outranks`): the merge there keeps the stored
        record, and the key does not move. Needs the incoming ordering values (``table``)."""
        moved = pc.equal(acts, MOVE)
        if not self.spec.event_time or not pc.any(moved).as_py():
            return acts
        missing = [f for f in self.spec.ordering_fields
                   if full_schema.get_field_index(f) >= 0 and f not in table.column_names]
        if missing:
            raise InvalidOptionError(
                f"this upsert moves keys to other partitions (a global index), which under event-time "
                f"ordering needs each record's ordering value {missing}: plan it with the rows, not "
                f"with keys and partitions only")
        located = tagged.filter(moved)
        incoming = table.take(located.column("row"))
        visible = state.visible if state is not None else (lambda _: False)
        outranked = stored_outranks(self.storage, slices, self.spec, full_schema, visible,
                                    located, incoming)
        if not pc.any(outranked).as_py():
            return acts
        flip = rows_in(len(acts), pc.indices_nonzero(moved).to_numpy()[np.asarray(outranked.to_numpy(zero_copy_only=False))])
        return pc.if_else(flip, pa.scalar(UPDATE, acts.type), acts)

    def size_inserts(self, counts: Mapping[str, int], slices, state, clustering: set) -> dict[str, list]:
        """Per partition, how its ``counts`` inserts are split: small files first (their
        ``InsertBucket`` names the file id), the rest into new file groups."""
        cfg = sizing_config(self.options)
        avg = self.insert_record_size(state)
        by_partition = defaultdict(list)
        for s in slices:
            by_partition[s.partition_path].append(s)
        return {part: assign_inserts(n, self.small_files_of(part, by_partition.get(part, ()), clustering), avg, cfg)
                for part, n in counts.items()}

    def insert_record_size(self, state) -> int:
        """Bytes per record that insert sizing assumes: from earlier commits, else the estimate."""
        cfg = sizing_config(self.options)
        return average_record_size(self.commit_sizes(state), cfg.small_file_limit, cfg.record_size_estimate)

    def small_files_of(self, part: str, slices, clustering: set) -> list[SmallFile]:
        """The file groups of partition ``part`` (its latest ``slices``) that take inserts
        first, in the order they fill."""
        candidates = [(s.file_id, s.base_file_size) for s in slices
                      if s.base_file and (not self.config.is_mor or not s.log_files)
                      and (part, s.file_id) not in clustering]
        small = small_files(candidates, sizing_config(self.options))
        if self.config.is_mor:
            # As Hudi: slices with log files cannot be padded without compacting them first
            # (the index cannot see log-only inserts), so only the smallest few base files
            # take inserts, as new log blocks.
            small = small[:option(self.options, "hoodie.merge.small.file.group.candidates.limit")]
        return small

    def plan_counts(self, op: str, counts: "WriteCounts", state, view) -> Plan:
        """The plan of a write known only by counts (an engine tagged its records on its
        workers): ``counts.updates`` / ``counts.deletes`` per existing file group,
        ``counts.inserts`` per partition. Sizing is the same as :meth:`plan`'s; the plan holds
        how many records each file group takes (``records``, ``deleted``, ``new_counts``)."""
        plan = Plan()
        inserts = {p: n for p, n in counts.inserts.items() if n > 0}
        if op in REPLACE_OPS:
            targets: set | None = set(inserts) | set(counts.partitions)
            if op == "insert_overwrite_table":
                targets = None
            elif op == "delete_partition" and not targets:
                raw = option(self.options, "hoodie.datasource.write.partitions.to.delete") or ""
                targets = {p.strip() for p in str(raw).split(",") if p.strip()}
                if not targets:
                    raise InvalidOptionError("delete_partition needs data or the option "
                                             "hoodie.datasource.write.partitions.to.delete")
            for s in self.latest_slices(state, view, targets):
                plan.replaced[s.partition_path].append(s.file_id)
            if op != "delete_partition":
                cfg = sizing_config(self.options)
                self.new_group_counts(plan, inserts, average_record_size(self.commit_sizes(state),
                                      cfg.small_file_limit, cfg.record_size_estimate))
            return plan
        if op == "bulk_insert":
            sample = self.sample if self.sample is not None else pa.table({})
            self.new_group_counts(plan, inserts, self.measured_record_size(sample))
            return plan
        _, clustering = self.pending_service_groups(state)
        for key, n in counts.deletes.items():
            plan.deleted[key] += n
        for key, n in counts.updates.items():
            plan.updates[key] += n
            plan.records[key] += n
        if inserts:
            global_index = is_global(option(self.options, "hoodie.index.type"))
            slices = self.latest_slices(state, view, None if global_index else set(inserts))
            for part, buckets in self.size_inserts(inserts, slices, state, clustering).items():
                for b in buckets:
                    if b.is_new:
                        plan.new_counts.append((part, b.count))
                    else:
                        plan.records[(part, b.file_id)] += b.count
        self.reject_clustered(plan, clustering)
        return plan

    def new_group_counts(self, plan: Plan, inserts: Mapping[str, int], avg: int) -> None:
        cfg = sizing_config(self.options)
        for part in sorted(inserts):
            for b in assign_inserts(inserts[part], [], avg, cfg, bin_pack=False):
                plan.new_counts.append((part, b.count))

    @staticmethod
    def reject_clustered(plan: Plan, clustering: set) -> None:
        """As Hudi's default update strategy: no updates to file groups being clustered."""
        blocked = sorted((set(plan.upserts) | set(plan.deletes) | set(plan.records) | set(plan.deleted))
                         & clustering)
        if blocked:
            raise ConcurrentWriteError(
                f"{len(blocked)} file group(s) this write updates are being clustered by a pending "
                f"clustering (e.g. {blocked[0][0]}/{blocked[0][1]}); retry after it completes")

    def plan_new_groups(self, plan: Plan, partitions, rows, avg: int | Callable[[], int], bound: int = 0) -> None:
        """New file groups for the rows of each partition, ``avg`` bytes a record. A callable
        ``avg`` (a measurement) is asked only when the split depends on it: not when every
        partition fits one file even at ``bound`` bytes a record (an upper bound)."""
        cfg = sizing_config(self.options)
        groups = groups_of(pa.table({"partition": partitions, "row": rows}), ["partition"])
        if callable(avg):
            if not cfg.auto_split:
                avg = cfg.record_size_estimate      # files of insert_split_size records: no size needed
            elif bound > 0 and all(len(idx) * bound <= cfg.max_file_size for _, idx in groups):
                avg = bound
            else:
                avg = avg()
        for (part,), idx in groups:
            pos = 0
            for b in assign_inserts(len(idx), [], avg, cfg, bin_pack=False):
                plan.new_groups.append((part, idx.slice(pos, b.count)))
                pos += b.count

    def measured_record_size(self, table: pa.Table) -> int:
        """Compressed bytes per record of a sample of ``table``, meta fields included."""
        sample = table.slice(0, min(table.num_rows, SAMPLE_ROWS))
        if sample.num_rows == 0:
            return sizing_config(self.options).record_size_estimate
        size = parquet_codec.compressed_size(sample, option(self.options, "hoodie.parquet.compression.codec"))
        meta_overhead = 40 if self.config.populate_meta_fields else 0  # seqno + key, compressed
        return max(1, size // sample.num_rows + meta_overhead)

    def commit_sizes(self, state):
        """(bytes, records) written to base files by each commit, newest first."""
        if state is None:
            return
        ext = self.config.base_file_extension
        for inst in reversed(state.instants):
            try:
                meta = state.timeline.metadata(inst)
            except HudiError:
                continue
            stats = [st for sts in meta.partition_to_write_stats.values() for st in sts
                     if (st.path or "").endswith(ext)]
            yield (sum(st.total_write_bytes or 0 for st in stats), sum(st.num_writes or 0 for st in stats))
