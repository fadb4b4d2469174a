"""The write client: one call of ``write`` is one Hudi commit.

Order of work, so that a bad batch writes nothing and a failed write never shows: validate the
options, the schema and every record key first; plan (tag, size) without touching storage; then
create the table if needed, open the instant (requested, inflight), write the files, and only
then complete the instant, which is what makes the files visible to readers.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

import attrs
import pyarrow as pa
import pyarrow.compute as pc

from ..config import META_FIELDS, TableConfig
from ..errors import ConcurrentWriteError, HudiError, InvalidOptionError
from ..keygen import KeyGenerator
from ..read.merge import MergeSpec, _merge_pieces
from ..read.snapshot import ReadState
from ..read.table_schema import latest_data_schema
from ..schema import arrow_to_avro_schema
from ..storage import Storage
from ..table_init import ensure_table, write_partition_metadata
from ..timeline import Instant, Timeline
from ..transaction import Transaction, check_write_conflicts, new_file_groups, started_with, touched_file_groups
from ..view import FileSystemView
from . import handles
from .file_sizing import assign_inserts, average_record_size, small_files
from .index import is_global, known_locations, tag
from .input import read_input
from ..options import OPERATIONS, WRITE_SCOPES, option, validate
from .options import sizing_config
from .schema_evolution import conform, evolve, incoming_schema

log = logging.getLogger(__name__)

_OPERATION_TYPES = {"insert": "INSERT", "upsert": "UPSERT", "bulk_insert": "BULK_INSERT",
                    "delete": "DELETE", "insert_overwrite": "INSERT_OVERWRITE",
                    "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
                    "delete_partition": "DELETE_PARTITION"}
_REPLACE_OPS = ("insert_overwrite", "insert_overwrite_table", "delete_partition")


@attrs.define
class Plan:
    """Per file group: records to upsert (with their keys), keys to delete; new groups."""

    upserts: dict = attrs.field(factory=lambda: defaultdict(list))   # (partition, fid) -> [row arrays]
    updates: dict = attrs.field(factory=lambda: defaultdict(int))    # (partition, fid) -> count
    deletes: dict = attrs.field(factory=lambda: defaultdict(list))   # (partition, fid) -> [row arrays]
    new_groups: list = attrs.field(factory=list)                     # [(partition, row array)]
    replaced: dict = attrs.field(factory=lambda: defaultdict(list))  # partition -> [fid]


def _groups(table: pa.Table, by: list[str]) -> list[tuple[tuple, pa.Array]]:
    """Row numbers (column ``row``) of ``table`` grouped by the ``by`` columns, in row order."""
    if table.num_rows == 0:
        return []
    agg = table.group_by(by, use_threads=False).aggregate([("row", "list")])
    keys = [agg.column(c).to_pylist() for c in by]
    lists = agg.column("row_list")
    return [(tuple(k[i] for k in keys), lists[i].values) for i in range(agg.num_rows)]


def _rows(chunks: list) -> pa.Array:
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())


class WriteClient:
    def __init__(self, storage: Storage, config: TableConfig, options: Mapping[str, Any] | None = None,
                 create: bool = False):
        self.storage = storage
        self.config = config
        self.options = validate(options, WRITE_SCOPES)
        self.create = create
        self.keygen = KeyGenerator.from_config(config, self.options)
        self.spec = MergeSpec.from_config(config)

    # -- entry point -------------------------------------------------------------------------
    def write(self, data: Any, operation: str = "upsert") -> Instant:
        op = (operation or "").strip().lower()
        if op not in OPERATIONS:
            raise InvalidOptionError(f"unknown write operation {operation!r}; use one of {', '.join(OPERATIONS)}")
        timeline = Timeline.load(self.storage, self.config) if not self.create else None
        state = ReadState(self.config, timeline) if timeline is not None else None
        existing = latest_data_schema(self.config, timeline) if timeline is not None else None
        if existing is None and self.config.create_schema:
            from ..schema import avro_to_arrow_schema
            existing = avro_to_arrow_schema(self.config.create_schema)

        table = read_input(data, op, self.config) if data is not None else None
        if table is None and op != "delete_partition":
            raise InvalidOptionError(f"operation {op!r} needs data")
        if table is not None:
            schema = evolve(existing, incoming_schema(table)) if op not in ("delete", "delete_partition") \
                else (existing or incoming_schema(table))
            if op in ("delete", "delete_partition"):
                table = conform(table.select([c for c in table.column_names if c in schema.names]),
                                pa.schema([f for f in schema if f.name in table.column_names]))
            else:
                table = conform(table, schema)
            keys = self.keygen.record_keys(table) if op != "delete_partition" else None
            partitions = self.keygen.partition_paths(table)
        else:
            schema, keys, partitions = existing, None, None
        if schema is None:
            raise InvalidOptionError("the table has no schema yet: its first write must carry data")

        if table is not None and keys is not None and self._should_dedupe(op):
            table, keys, partitions = self._dedupe(table, keys, partitions)

        full_schema = self._full_schema(schema)
        avro = arrow_to_avro_schema(full_schema, f"{self.config.name}_record", f"hoodie.{self.config.name}")
        data_avro = arrow_to_avro_schema(schema, f"{self.config.name}_record", f"hoodie.{self.config.name}")
        view = FileSystemView(self.storage, self.config)
        plan = self._plan(op, table, keys, partitions, state, view, full_schema)
        return self._execute(op, table, keys, plan, state, view, full_schema, avro, data_avro)

    # -- preparation -------------------------------------------------------------------------
    def _should_dedupe(self, op: str) -> bool:
        if op == "upsert":
            return option(self.options, "hoodie.combine.before.upsert")
        if op == "delete":
            return option(self.options, "hoodie.combine.before.delete")
        if op in ("insert", "bulk_insert", "insert_overwrite", "insert_overwrite_table"):
            return option(self.options, "hoodie.combine.before.insert") or \
                option(self.options, "hoodie.datasource.write.insert.drop.duplicates")
        return False

    def _dedupe(self, table, keys, partitions):
        """Precombine: one record per key (and partition), the highest ordering value winning."""
        spec = attrs.evolve(self.spec, event_time=bool(self.spec.ordering_fields), has_meta_fields=False,
                            keygen=KeyGenerator(self.keygen.record_key_fields, (), self.keygen.keygen_type))
        rows = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
        merged = _merge_pieces([rows], [], pa.schema(list(table.schema) + [pa.field("__row", pa.int64())]), spec)
        idx = pc.sort_indices(merged.column("__row"))
        keep = pc.take(merged.column("__row"), idx)
        return table.take(keep), pc.take(keys, keep), pc.take(partitions, keep)

    def _full_schema(self, data_schema: pa.Schema) -> pa.Schema:
        fields = [f for f in data_schema if f.name not in META_FIELDS]
        if self.config.populate_meta_fields:
            return pa.schema([pa.field(n, pa.string()) for n in META_FIELDS] + fields)
        return pa.schema(fields)

    # -- planning ----------------------------------------------------------------------------
    @staticmethod
    def _pending_service_groups(state) -> tuple[dict, set]:
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

    def _latest_slices(self, state, view, partitions=None):
        if state is None:
            return []
        return state.file_slices(view, (lambda p: p in partitions) if partitions is not None else None)

    def _plan(self, op, table, keys, partitions, state, view, full_schema) -> Plan:
        plan = Plan()
        rows = pa.array(range(table.num_rows), pa.int64()) if table is not None else None
        if op in _REPLACE_OPS:
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
            for s in self._latest_slices(state, view, targets):
                plan.replaced[s.partition_path].append(s.file_id)
            if op != "delete_partition":
                avg = average_record_size(self._commit_sizes(state), sizing_config(self.options).small_file_limit,
                                          sizing_config(self.options).record_size_estimate)
                self._plan_new_groups(plan, partitions, rows, avg)
            return plan
        if op == "bulk_insert":
            # Hudi's bulk insert rolls files over by the bytes actually written; we size them
            # from the compressed size of a sample of this batch.
            self._plan_new_groups(plan, partitions, rows, self._measured_record_size(table))
            return plan

        index_type = option(self.options, "hoodie.index.type")
        global_index = is_global(index_type)
        touched = None if global_index else set(pc.unique(partitions).to_pylist())
        slices = self._latest_slices(state, view, touched)
        tagged = None
        if op in ("upsert", "delete") or option(self.options, "hoodie.datasource.write.insert.drop.duplicates"):
            from ..base_file import read_footer
            known = known_locations(self.storage, self.config, self.options, state, slices, keys,
                                    self.spec, full_schema, read_footer)
            incoming = pa.table({"key": pc.cast(keys, pa.string()), "partition": partitions, "row": rows})
            tagged = tag(incoming, known, global_index)

        _, clustering = self._pending_service_groups(state)
        if op == "delete":
            found = tagged.filter(pc.is_valid(tagged.column("file_id")))
            for (part, fid), idx in _groups(found, ["existing_partition", "file_id"]):
                plan.deletes[(part, fid)].append(idx)
            self._reject_clustered(plan, clustering)
            return plan

        if tagged is not None:
            fid = tagged.column("file_id")
            known_mask = pc.is_valid(fid)
            moved = pc.and_(known_mask, pc.not_equal(tagged.column("existing_partition"), tagged.column("partition")))
            if not (global_index and option(self.options, "hoodie.simple.index.update.partition.path")):
                moved = pc.and_(moved, pa.scalar(False))
            moved = pc.fill_null(moved, False)
            for (part, f), idx in _groups(tagged.filter(moved), ["existing_partition", "file_id"]):
                plan.deletes[(part, f)].append(idx)   # a move: delete there, insert here
            if op != "insert":                        # insert with drop-duplicates skips known keys
                updates = tagged.filter(pc.and_(known_mask, pc.invert(moved)))
                for (part, f), idx in _groups(updates, ["existing_partition", "file_id"]):
                    plan.upserts[(part, f)].append(idx)
                    plan.updates[(part, f)] += len(idx)
            inserts = tagged.filter(pc.or_(pc.invert(known_mask), moved))
        else:
            inserts = pa.table({"partition": partitions, "row": rows})
        insert_rows = {part: idx for (part,), idx in _groups(inserts, ["partition"])}

        cfg = sizing_config(self.options)
        avg = average_record_size(self._commit_sizes(state), cfg.small_file_limit, cfg.record_size_estimate)
        by_partition = defaultdict(list)
        for s in slices:
            by_partition[s.partition_path].append(s)
        for part, idx in insert_rows.items():
            candidates = [(s.file_id, s.base_file_size) for s in by_partition.get(part, ())
                          if s.base_file and (not self.config.is_mor or not s.log_files)
                          and (part, s.file_id) not in clustering]
            small = small_files(candidates, cfg)
            if self.config.is_mor:
                # As Hudi: slices with log files cannot be padded without compacting them first
                # (the index cannot see log-only inserts), so only the smallest few base files
                # take inserts, as new log blocks.
                small = small[:option(self.options, "hoodie.merge.small.file.group.candidates.limit")]
            pos = 0
            for b in assign_inserts(len(idx), small, avg, cfg):
                chunk = idx.slice(pos, b.count)
                pos += b.count
                if b.is_new:
                    plan.new_groups.append((part, chunk))
                else:
                    plan.upserts[(part, b.file_id)].append(chunk)
        self._reject_clustered(plan, clustering)
        return plan

    @staticmethod
    def _reject_clustered(plan: Plan, clustering: set) -> None:
        """As Hudi's default update strategy: no updates to file groups being clustered."""
        blocked = sorted((set(plan.upserts) | set(plan.deletes)) & clustering)
        if blocked:
            raise ConcurrentWriteError(
                f"{len(blocked)} file group(s) this write updates are being clustered by a pending "
                f"clustering (e.g. {blocked[0][0]}/{blocked[0][1]}); retry after it completes")

    def _plan_new_groups(self, plan: Plan, partitions, rows, avg: int) -> None:
        cfg = sizing_config(self.options)
        for (part,), idx in _groups(pa.table({"partition": partitions, "row": rows}), ["partition"]):
            pos = 0
            for b in assign_inserts(len(idx), [], avg, cfg, bin_pack=False):
                plan.new_groups.append((part, idx.slice(pos, b.count)))
                pos += b.count

    def _measured_record_size(self, table: pa.Table) -> int:
        """Compressed bytes per record of a sample of ``table``, meta fields included."""
        import io

        import pyarrow.parquet as pq
        sample = table.slice(0, min(table.num_rows, 50_000))
        if sample.num_rows == 0:
            return sizing_config(self.options).record_size_estimate
        buf = io.BytesIO()
        codec = option(self.options, "hoodie.parquet.compression.codec")
        pq.write_table(sample, buf, compression=None if codec == "uncompressed" else codec)
        meta_overhead = 40 if self.config.populate_meta_fields else 0  # seqno + key, compressed
        return max(1, buf.tell() // sample.num_rows + meta_overhead)

    def _commit_sizes(self, state):
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

    # -- execution ---------------------------------------------------------------------------
    def _execute(self, op, table, keys, plan, state, view, full_schema, avro, data_avro) -> Instant:
        if self.create and not self.config.create_schema:
            # As Hudi: the first writer's schema is kept in hoodie.properties, so a table whose
            # every commit is rolled back (or not yet written) still has its columns.
            self.config = TableConfig({**dict(self.config), "hoodie.table.create.schema": _json(data_avro)})
        ensure_table(self.storage, self.config, create=self.create)
        action = ("replacecommit" if op in _REPLACE_OPS
                  else "deltacommit" if self.config.is_mor else "commit")
        # Hudi records the operation of a replacecommit in its requested file.
        requested_meta = ({"operationType": _OPERATION_TYPES[op], "clusteringPlan": None,
                           "extraMetadata": {}, "version": 1} if action == "replacecommit" else None)
        with Transaction.begin(self.storage, self.config, action, self.options, plan=requested_meta) as txn:
            ctx = handles.WriteContext(
                storage=self.storage, instant=txn.instant_time, schema=full_schema, avro_schema=avro,
                spec=self.spec, meta_fields=self.config.populate_meta_fields,
                table_version=self.config.version,
                log_block_format=option(self.options, "hoodie.logfile.data.block.format"),
                compression=option(self.options, "hoodie.parquet.compression.codec"),
                max_log_file_size=option(self.options, "hoodie.logfile.max.size"),
                bloom={k: v for k, v in self.options.items() if k.startswith(("hoodie.index.bloom.", "hoodie.bloom."))},
                written=txn.written)
            metadata = self._write_files(op, table, keys, plan, state, view, full_schema, ctx, data_avro)
            return self._commit(txn, metadata, plan, state)

    def _commit(self, txn: Transaction, metadata: dict, plan: Plan, state) -> Instant:
        """Commit through the one commit path; the conflict check under the table lock makes
        exactly one of two overlapping writers commit."""
        stats = metadata["partitionToWriteStats"]
        mine = touched_file_groups(stats, metadata.get("partitionToReplaceFileIds"))
        new_groups = new_file_groups(stats)
        seen = started_with(state.timeline if state is not None else None)
        done = txn.commit(metadata, lambda now: check_write_conflicts(now, txn.instant_time, seen, mine, new_groups))
        self.config = txn.config
        return done

    def _write_files(self, op, table, keys, plan, state, view, full_schema, ctx, data_avro) -> dict:
        instant_time = ctx.instant
        stats: dict[str, list[dict]] = defaultdict(list)
        slices = {(s.partition_path, s.file_id): s for s in self._latest_slices(state, view)} \
            if (plan.upserts or plan.deletes) else {}
        new_partitions = set()
        for part, rows in plan.new_groups:
            new_partitions.add(part)
        for part in sorted(new_partitions):
            write_partition_metadata(self.storage, part, instant_time, part.count("/") + 1 if part else 0)

        tasks = []
        compacting, _ = self._pending_service_groups(state)
        for key in sorted(set(plan.upserts) | set(plan.deletes)):
            part, fid = key
            fs = slices[key]
            up_rows = _rows(plan.upserts.get(key, []))
            upserts = table.take(up_rows) if len(up_rows) else full_schema.empty_table()
            up_keys = pc.take(keys, up_rows) if len(up_rows) else pa.array([], pa.string())
            dels = self._delete_keys(table, keys, _rows(plan.deletes.get(key, [])), part)
            if self.config.is_mor:
                tasks.append((part, handles.append, (ctx, fs, upserts, up_keys, dels, plan.updates.get(key, 0),
                                                     compacting.get(key) if self.config.version < 8 else None)))
            else:
                tasks.append((part, handles.merge, (ctx, fs, upserts, up_keys, dels)))
        for part, rows in plan.new_groups:
            tasks.append((part, handles.create, (ctx, part, table.take(rows), pc.take(keys, rows))))
        # File groups are independent; Arrow, Parquet and compression release the GIL.
        workers = min(len(tasks), os.cpu_count() or 1)
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(lambda t: t[1](*t[2]), tasks))
        else:
            results = [fn(*args) for _, fn, args in tasks]
        for (part, _, _), stat in zip(tasks, results):
            stats[part].append(stat)

        metadata = {"partitionToWriteStats": dict(stats), "compacted": False,
                    "extraMetadata": {"schema": _json(data_avro)},
                    "operationType": _OPERATION_TYPES[op]}
        if op in _REPLACE_OPS:
            metadata["partitionToReplaceFileIds"] = {p: list(f) for p, f in plan.replaced.items()}
        return metadata

    @staticmethod
    def _delete_keys(table, keys, rows, partition) -> pa.Table | None:
        """Delete markers as Hudi's delete operation writes them: the default ordering value 0,
        so the delete wins over every earlier write of the key whatever its ordering value."""
        if not len(rows):
            return None
        n = len(rows)
        return pa.table({"record_key": pc.cast(pc.take(keys, rows), pa.string()),
                         "partition_path": pa.repeat(pa.scalar(partition), n),
                         "ordering_value": pa.repeat(pa.scalar(0, pa.int32()), n)})

def _json(obj) -> str:
    import json
    return json.dumps(obj, separators=(",", ":"))
