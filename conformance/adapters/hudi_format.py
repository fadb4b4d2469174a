"""The conformance adapter of this project's engine, ``hudi_format`` (reads and writes)."""

from __future__ import annotations

import pyarrow as pa

from .base import Engine, Unsupported, instant_dict


def _filters(query: dict):
    return [tuple(f) for f in query.get("filters") or []] or None


class HudiFormatEngine(Engine):
    name = "hudi_format"
    capabilities = frozenset({"read", "write"})

    def version(self) -> str:
        import hudi_format
        return hudi_format.__version__

    def read(self, path: str, query: dict) -> pa.Table:
        import hudi_format as hudi
        table = hudi.open_table(path)
        kind = query["kind"]
        columns, filters = query.get("columns"), _filters(query)
        if kind == "snapshot":
            return table.read(columns=columns, filters=filters)
        if kind == "read_optimized":
            return table.read(columns=columns, filters=filters, read_optimized=True)
        if kind == "time_travel":
            return table.read(columns=columns, filters=filters, as_of=query["as_of"])
        if kind == "incremental":
            return table.read_incremental(query.get("start"), query.get("end"), columns=columns, filters=filters)
        if kind == "lookup":
            return table.lookup(query["keys"], columns=columns)
        raise Unsupported(f"query kind {kind!r}")

    def write(self, path: str, data: pa.Table, step: dict) -> dict | None:
        import hudi_format as hudi
        spec = step.get("table") or {}
        options = {**(spec.get("options") or {}), **(step.get("options") or {})}
        if step["operation"] == "delete_partition" and data is not None and data.num_rows == 0:
            data = None  # the partitions come from hoodie.datasource.write.partitions.to.delete
        instant = hudi.write(path, data, operation=step["operation"], record_key=spec.get("record_key"),
                             ordering_field=spec.get("ordering_field"), partition_by=spec.get("partition_by"),
                             table_type=spec.get("table_type", "COPY_ON_WRITE"),
                             table_version=spec.get("table_version"), options=options or None)
        return instant_dict(instant)

    def service(self, path: str, step: dict) -> dict | None:
        import hudi_format as hudi
        table = hudi.open_table(path)
        name, options = step["service"], step.get("options") or None
        if name == "compact":
            out = table.compact(options)
        elif name == "log_compact":
            out = table.log_compact(options)
        elif name == "cluster":
            out = table.cluster(sort_by=step.get("sort_by"), options=options)
        elif name == "clean":
            out = table.clean(options)
        elif name == "archive":
            out = table.archive(options)
            out = out[-1] if out else None
        elif name == "rollback":
            out = table.rollback(step["instant"])
        elif name == "savepoint":
            out = table.savepoint(step["instant"])
        elif name == "restore":
            out = table.restore(step["instant"])
        else:
            raise Unsupported(f"table service {name!r}")
        return instant_dict(out)
