"""The conformance adapter of hudi-rs (``pip install hudi``), the Apache Hudi Rust reader.

Read cases only. Queries map onto hudi-rs's read options one to one; what hudi-rs has no
option for (lookup by key) is reported as unsupported, never emulated.
"""

from __future__ import annotations

import pyarrow as pa

from .base import Engine, Unsupported

_OPS = {"=", "!=", "<", "<=", ">", ">=", "in", "not in"}


class HudiRsEngine(Engine):
    name = "hudi-rs"
    capabilities = frozenset({"read"})

    def __init__(self):
        try:
            import hudi  # noqa: F401
        except ImportError as exc:  # pragma: no cover - environment
            raise RuntimeError("hudi-rs is not installed: pip install hudi") from exc

    def version(self) -> str:
        import hudi
        return getattr(hudi, "__version__", "")

    def read(self, path: str, query: dict) -> pa.Table:
        from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder
        kind = query["kind"]
        options = HudiReadOptions()
        if kind == "snapshot":
            pass
        elif kind == "read_optimized":
            options = options.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
        elif kind == "time_travel":
            options = options.with_as_of_timestamp(str(query["as_of"]))
        elif kind == "incremental":
            options = options.with_query_type(HudiQueryType.Incremental)
            if query.get("start") is not None:
                options = options.with_start_timestamp(str(query["start"]))
            if query.get("end") is not None:
                options = options.with_end_timestamp(str(query["end"]))
        else:
            raise Unsupported(f"hudi-rs has no {kind} query")
        filters = []
        for col, op, value in query.get("filters") or []:
            if op not in _OPS:
                raise Unsupported(f"filter operator {op!r}")
            if isinstance(value, (list, tuple)):
                raise Unsupported("hudi-rs filters take one value per filter")
            filters.append((col, op, str(value).lower() if isinstance(value, bool) else str(value)))
        if filters:
            options = options.with_filters(filters)
        if query.get("columns"):
            options = options.with_projection(list(query["columns"]))
        table = HudiTableBuilder.from_base_uri(path).build()
        batches = table.read(options)
        if not batches:
            schema = table.get_schema_with_meta_fields()
            if query.get("columns"):
                schema = pa.schema([schema.field(c) for c in query["columns"]])
            return schema.empty_table()
        return pa.Table.from_batches(batches)
