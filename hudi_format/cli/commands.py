"""``hudi-format <command> TABLE ...``: the command line of hudi_format.

Inspect: ``info``, ``timeline``, ``files``, ``show``, ``validate``. Move data: ``export``, ``write``.
Maintain: ``compact``, ``cluster``, ``clean``, ``archive``, ``rollback``, ``savepoint``,
``restore``. Every command takes ``--json`` for output a script can parse and
``--storage-option KEY=VALUE`` for fsspec (S3 credentials, endpoint...).

Exit codes: 0 done; 1 the work failed (a Hudi error, or ``validate`` found problems);
2 the command line is wrong (unknown option, bad filter, missing input).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from .output import (FORMATS, Exporter, Progress, UsageError, dumps, file_format, human_size, read_input,
                     text_table)

_FILTER = re.compile(r"^\s*([^\s=!<>]+)\s*(not in|in|!=|<=|>=|==|=|<|>)\s*([^\s=!<>].*?)\s*$", re.IGNORECASE)


# -- argument helpers --------------------------------------------------------------------------------
def _key_values(items: list[str] | None, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{what} {item!r} must be KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def _storage_options(args) -> dict | None:
    opts = _key_values(args.storage_option, "--storage-option")
    if not opts:
        return None
    out: dict[str, Any] = {}
    for k, v in opts.items():
        if k == "endpoint_url":  # s3fs wants it under client_kwargs
            out.setdefault("client_kwargs", {})["endpoint_url"] = v
            continue
        value = _option_value(k, v)
        if k in ("client_kwargs", "config_kwargs", "s3_additional_kwargs") and not isinstance(value, dict):
            raise UsageError(f"--storage-option {k} must be a JSON object, e.g. {k}='{{\"region_name\": \"x\"}}'")
        if isinstance(value, dict) and isinstance(out.get(k), dict):
            value = {**value, **out[k]}
        out[k] = value
    return out


def _option_value(key: str, text: str) -> Any:
    """true/false as booleans, JSON objects and lists (``client_kwargs={...}``) parsed; fsspec
    options such as ``client_kwargs`` are nested mappings, which KEY=VALUE can only spell as JSON."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if text.strip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--storage-option {key}: {text!r} is not valid JSON: {exc}") from None
    return text


def parse_filter(text: str) -> tuple[str, str, Any]:
    m = _FILTER.match(text)
    if not m:
        raise UsageError(f"bad filter {text!r}: write 'column op value' with op one of "
                         f"= != < <= > >= in 'not in' (e.g. 'fare > 20', 'city in sf,nyc')")
    col, op, value = m.group(1), m.group(2).lower(), m.group(3)
    op = "=" if op == "==" else op
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if op in ("in", "not in"):
        return col, op, [v.strip() for v in value.split(",") if v.strip()]
    return col, op, value


def _columns(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def _open(args):
    import hudi_format as hudi
    return hudi.open_table(args.table, _storage_options(args))


def _emit(args, obj: Any, text: str) -> None:
    print(dumps(obj) if args.json else text)


def _instant(i) -> dict:
    return {"timestamp": i.timestamp, "action": i.action, "state": i.state.name,
            "completion_time": i.completion_time}


# -- inspect ----------------------------------------------------------------------------------------
def cmd_info(args) -> int:
    table = _open(args)
    cfg = table.config
    slices = table.file_slices()
    tl = table.timeline
    latest = tl.latest_completed_write()
    base_bytes = sum(s.base_file_size for s in slices)
    log_bytes = sum(sum(s.log_file_sizes) for s in slices)
    data_bytes = hoodie_bytes = 0
    for f in table.storage.walk_files(""):
        if f.path.startswith(".hoodie/"):
            hoodie_bytes += f.size
        else:
            data_bytes += f.size
    info = {
        "path": table.path, "name": table.name, "table_type": table.table_type, "version": table.version,
        "record_key_fields": cfg.record_key_fields, "partition_fields": cfg.partition_fields,
        "ordering_fields": cfg.ordering_fields, "key_generator": cfg.keygen_type, "merge_mode": cfg.merge_mode,
        "populate_meta_fields": cfg.populate_meta_fields,
        "hive_style_partitioning": cfg.hive_style_partitioning,
        "metadata_partitions": cfg.metadata_partitions,
        "instants": len(tl.instants), "completed_writes": len(tl.write_instants()),
        "pending": [_instant(i) for i in tl.pending],
        "latest_commit": _instant(latest) if latest else None,
        "partitions": len({s.partition_path for s in slices}), "file_groups": len(slices),
        "base_files": sum(1 for s in slices if s.base_file), "log_files": sum(len(s.log_files) for s in slices),
        "latest_slices_bytes": base_bytes + log_bytes, "base_bytes": base_bytes, "log_bytes": log_bytes,
        "data_files_bytes": data_bytes, "hoodie_dir_bytes": hoodie_bytes,
        "schema": [{"name": f.name, "type": str(f.type)} for f in table.schema()],
        "properties": dict(cfg) if args.properties else None,
    }
    if not args.properties:
        del info["properties"]
    lines = [f"table      {info['name']} ({info['path']})",
             f"type       {info['table_type']}, table version {info['version']}",
             f"keys       record key {','.join(info['record_key_fields']) or '-'}; "
             f"partitioned by {','.join(info['partition_fields']) or '(none)'}; "
             f"ordering {','.join(info['ordering_fields']) or '-'}",
             f"keygen     {info['key_generator']}, merge mode {info['merge_mode']}",
             f"metadata   {', '.join(info['metadata_partitions']) or '(no metadata table)'}",
             f"timeline   {info['instants']} active instants, {info['completed_writes']} completed writes, "
             f"{len(info['pending'])} pending; latest commit "
             f"{latest.timestamp + ' (' + latest.action + ')' if latest else '-'}",
             f"files      {info['partitions']} partitions, {info['file_groups']} file groups, "
             f"{info['base_files']} base files ({human_size(base_bytes)}), "
             f"{info['log_files']} log files ({human_size(log_bytes)}) in the latest slices",
             f"storage    {human_size(data_bytes)} of data files (every version), "
             f"{human_size(hoodie_bytes)} in .hoodie/ (timeline, metadata table)",
             "schema     " + ", ".join(f"{f['name']}: {f['type']}" for f in info["schema"])]
    if args.properties:
        lines += ["properties"] + [f"  {k}={v}" for k, v in sorted(cfg.items())]
    _emit(args, info, "\n".join(lines))
    return 0


def cmd_timeline(args) -> int:
    table = _open(args)
    tl = table.timeline
    instants = list(tl.instants)
    if args.archived:
        archived = tl.archived().instants
        active = {(i.timestamp, i.action) for i in instants}
        instants = [i for i in archived if (i.timestamp, i.action) not in active] + instants
    if args.action:
        instants = [i for i in instants if i.action in args.action]
    instants.sort(key=lambda i: (i.timestamp, i.action))
    active_keys = {(i.timestamp, i.action) for i in tl.instants}
    rows = [{**_instant(i), "archived": (i.timestamp, i.action) not in active_keys} for i in instants]
    text = text_table([{k: (v if v is not None else "-") for k, v in r.items()} for r in rows],
                      ["timestamp", "action", "state", "completion_time", "archived"]) if rows else "(empty timeline)"
    _emit(args, rows, text)
    return 0


def cmd_files(args) -> int:
    table = _open(args)
    filters = [parse_filter(f) for f in args.filter or []] or None
    slices = table.file_slices(as_of=args.as_of, filters=filters)
    if args.partition is not None:
        slices = [s for s in slices if s.partition_path == args.partition]
    rows = [{"partition": s.partition_path, "file_id": s.file_id, "base_instant": s.base_instant,
             "base_file": s.base_file, "base_size": s.base_file_size, "log_files": list(s.log_files),
             "log_sizes": list(s.log_file_sizes), "total_size": s.total_size} for s in slices]
    text_rows = [{"partition": r["partition"] or "(root)", "file_id": r["file_id"],
                  "base_instant": r["base_instant"],
                  "base_file": (r["base_file"] or "-").rsplit("/", 1)[-1],
                  "logs": len(r["log_files"]), "size": human_size(r["total_size"])} for r in rows]
    total = sum(r["total_size"] for r in rows)
    text = (text_table(text_rows, max_width=60) if rows else "(no file slices)") + \
        f"\n{len(rows)} file slices, {human_size(total)}"
    _emit(args, rows, text)
    return 0


def _read_args(args):
    return dict(columns=_columns(args.columns), filters=[parse_filter(f) for f in args.filter or []] or None)


def cmd_show(args) -> int:
    table = _open(args)
    kw = _read_args(args)
    if args.incremental is not None:
        start, _, end = args.incremental.partition(":")
        data = table.read_incremental(start or None, end or None, **kw)
        data = data.slice(0, args.limit)
    else:
        batches, n = [], 0
        for batch in table.scan(as_of=args.as_of, read_optimized=args.read_optimized, **kw):
            batches.append(batch)
            n += batch.num_rows
            if n >= args.limit:
                break
        schema = batches[0].schema if batches else table.schema()
        import pyarrow as pa
        data = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
        data = data.slice(0, args.limit)
    rows = data.to_pylist()
    if args.json:
        print(dumps(rows))
    else:
        print(text_table(rows, data.column_names) if rows else "(no rows)")
        print(f"{len(rows)} rows")
    return 0


def cmd_validate(args) -> int:
    from .validate import ERROR, validate_table
    progress = Progress(not args.no_progress and not args.json)
    problems = validate_table(args.table, _storage_options(args), check_data=not args.no_data,
                              progress=lambda it, desc, total=None: progress.iterate(it, desc, total))
    errors = [p for p in problems if p.severity == ERROR or args.strict]
    if args.json:
        print(dumps({"ok": not errors, "errors": len(errors), "warnings": len(problems) - len(errors),
                     "problems": [p.to_json() for p in problems]}))
    else:
        for p in problems:
            print(p)
        print(f"{'OK' if not errors else 'FAILED'}: {len(errors)} errors, {len(problems) - len(errors)} warnings")
    return 1 if errors else 0


# -- move data --------------------------------------------------------------------------------------
def cmd_export(args) -> int:
    table = _open(args)
    fmt = file_format(args.output, args.format)
    kw = _read_args(args)
    progress = Progress(not args.no_progress and not args.json)
    if args.incremental is not None:
        start, _, end = args.incremental.partition(":")
        batches = iter(table.read_incremental(start or None, end or None, **kw).to_batches())
    else:
        batches = table.scan(as_of=args.as_of, read_optimized=args.read_optimized, **kw)
    first = next(batches, None)
    if first is None:
        schema = table.read(as_of=args.as_of, read_optimized=args.read_optimized, **kw).schema \
            if args.incremental is None else table.read_incremental(**kw).schema
    else:
        schema = first.schema
    out = Exporter(args.output, fmt, schema)
    try:
        with progress.bar("exporting", unit="rows") as bar:
            for batch in ([first] if first is not None else []):
                out.write(batch)
                bar.update(batch.num_rows)
            for batch in batches:
                out.write(batch)
                bar.update(batch.num_rows)
    finally:
        out.close()
    result = {"output": args.output, "format": fmt, "rows": out.rows}
    _emit(args, result, f"exported {out.rows} rows to {args.output} ({fmt})")
    return 0


def cmd_write(args) -> int:
    import hudi_format as hudi
    fmt = file_format(args.input, args.format)
    progress = Progress(not args.no_progress and not args.json)
    data = read_input(args.input, fmt)
    options = _key_values(args.option, "--option")
    from ..writer.job import resolve_operation
    operation = resolve_operation(args.operation, options)   # --operation, else the option, else upsert
    with progress.busy(f"{operation} {data.num_rows} rows"):
        instant = hudi.write(args.table, data, operation=operation, record_key=_columns(args.record_key),
                             ordering_field=_columns(args.ordering_field), partition_by=_columns(args.partition_by),
                             table_type=args.table_type, table_version=args.table_version,
                             table_name=args.table_name, options=options or None,
                             storage_options=_storage_options(args))
    result = {"instant": _instant(instant), "rows": data.num_rows, "operation": operation}
    _emit(args, result, f"{operation}: {data.num_rows} rows committed as {instant.action} {instant.timestamp}")
    return 0


# -- maintain ---------------------------------------------------------------------------------------
def _service(args, what: str, run) -> int:
    progress = Progress(not args.no_progress and not args.json)
    table = _open(args)
    with progress.busy(what):
        out = run(table)
    if isinstance(out, list):
        result = {"service": what, "instants": [_instant(i) for i in out]}
        text = f"{what}: {len(out)} instants" + (f" ({out[0].timestamp} .. {out[-1].timestamp})" if out else "")
    else:
        result = {"service": what, "instant": _instant(out) if out is not None else None}
        text = f"{what}: {out.action} {out.timestamp} completed" if out is not None else f"{what}: nothing to do"
    _emit(args, result, text)
    return 0


def cmd_compact(args) -> int:
    opts = _key_values(args.option, "--option") or None
    if args.log:
        return _service(args, "log compaction", lambda t: t.log_compact(opts))
    return _service(args, "compaction", lambda t: t.compact(opts))


def cmd_cluster(args) -> int:
    opts = _key_values(args.option, "--option") or None
    return _service(args, "clustering", lambda t: t.cluster(sort_by=_columns(args.sort_by), options=opts))


def cmd_clean(args) -> int:
    opts = _key_values(args.option, "--option") or None
    return _service(args, "clean", lambda t: t.clean(opts))


def cmd_archive(args) -> int:
    opts = _key_values(args.option, "--option") or None
    return _service(args, "archival", lambda t: t.archive(opts))


def cmd_rollback(args) -> int:
    return _service(args, "rollback", lambda t: t.rollback(args.instant))


def cmd_savepoint(args) -> int:
    if args.delete:
        return _service(args, "savepoint deletion", lambda t: t.delete_savepoint(args.instant))
    return _service(args, "savepoint", lambda t: t.savepoint(args.instant))


def cmd_restore(args) -> int:
    return _service(args, "restore", lambda t: t.restore(args.instant))


# -- the parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    common.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help="fsspec storage option (repeatable), e.g. key=..., secret=..., endpoint_url=...")
    common.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    common.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    table = argparse.ArgumentParser(add_help=False, parents=[common])
    table.add_argument("table", help="table base path or URL (s3://bucket/path, memory://...)")
    query = argparse.ArgumentParser(add_help=False)
    query.add_argument("--columns", help="comma-separated columns to read")
    query.add_argument("--filter", action="append", metavar="'COL OP VALUE'",
                       help="row filter, repeatable (ANDed): = != < <= > >= in 'not in'")
    query.add_argument("--as-of", help="time travel: instant yyyyMMddHHmmss[SSS] or ISO time")
    query.add_argument("--read-optimized", action="store_true", help="MOR: base files only")
    query.add_argument("--incremental", metavar="START[:END]", help="records changed in (START, END]")
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--option", action="append", metavar="KEY=VALUE", help="Hudi option hoodie.*=... (repeatable)")

    p = argparse.ArgumentParser(prog="hudi-format", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__
    p.add_argument("--version", action="version", version=f"hudi-format {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_, parents):
        sp = sub.add_parser(name, help=help_, description=help_, parents=parents)
        sp.set_defaults(func=func)
        return sp

    s = add("info", cmd_info, "table config, version, type, keys and sizes", [table])
    s.add_argument("--properties", action="store_true", help="also list hoodie.properties")
    s = add("timeline", cmd_timeline, "instants with their actions, states and completion times", [table])
    s.add_argument("--archived", action="store_true", help="include the archived timeline")
    s.add_argument("--action", action="append", help="only these actions (repeatable)")
    s = add("files", cmd_files, "file groups and their latest slices, with sizes (optionally as of an instant)",
            [table])
    s.add_argument("--as-of", help="file slices as of this instant")
    s.add_argument("--partition", help="only this partition path")
    s.add_argument("--filter", action="append", help="partition filters, as for show")
    s = add("show", cmd_show, "the first rows of a query", [table, query])
    s.add_argument("-n", "--limit", type=int, default=20, help="rows to show (default 20)")
    s = add("export", cmd_export, "write a query's rows to parquet, CSV or JSON lines", [table, query])
    s.add_argument("output", help="output file (format from the extension or --format)")
    s.add_argument("--format", choices=FORMATS)
    s = add("write", cmd_write, "write rows from parquet, CSV or JSON lines (creates the table if needed)",
            [table, options])
    s.add_argument("input", help="input file")
    s.add_argument("--format", choices=FORMATS)
    s.add_argument("--operation", default=None, help="default: option hoodie.datasource.write.operation, else upsert",
                   choices=["insert", "upsert", "bulk_insert", "delete", "insert_overwrite",
                            "insert_overwrite_table", "delete_partition"])
    s.add_argument("--record-key", help="record key field(s), comma-separated (needed to create a table)")
    s.add_argument("--ordering-field", help="ordering (precombine) field(s)")
    s.add_argument("--partition-by", help="partition field(s)")
    s.add_argument("--table-type", default=None, type=str.upper,
                   choices=["COPY_ON_WRITE", "MERGE_ON_READ", "COW", "MOR"],
                   help="type of a new table (default COPY_ON_WRITE); an existing table keeps its own")
    s.add_argument("--table-version", type=int, choices=[6, 8])
    s.add_argument("--table-name")
    s = add("compact", cmd_compact, "schedule and run a compaction (MOR)", [table, options])
    s.add_argument("--log", action="store_true", help="log compaction instead")
    s = add("cluster", cmd_cluster, "schedule and run a clustering", [table, options])
    s.add_argument("--sort-by", help="comma-separated sort columns")
    add("clean", cmd_clean, "remove file versions the cleaner policy no longer retains", [table, options])
    add("archive", cmd_archive, "move old instants to the archived timeline", [table, options])
    s = add("rollback", cmd_rollback, "roll back a pending instant or the latest completed write", [table])
    s.add_argument("instant")
    s = add("savepoint", cmd_savepoint, "savepoint a completed commit", [table])
    s.add_argument("instant")
    s.add_argument("--delete", action="store_true", help="delete the savepoint instead")
    s = add("restore", cmd_restore, "restore the table to a savepoint", [table])
    s.add_argument("instant")
    s = add("validate", cmd_validate, "check the table's invariants; exit code 1 when an error is found", [table])
    s.add_argument("--no-data", action="store_true", help="skip reading data (footers, log blocks, keys)")
    s.add_argument("--strict", action="store_true", help="warnings fail too (exit code 1)")
    return p


def main(argv: list[str] | None = None) -> int:
    import logging

    from ..errors import HudiError, InvalidOptionError
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"hudi-format {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except InvalidOptionError as exc:
        print(f"hudi-format {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except HudiError as exc:
        print(f"hudi-format {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except (OSError, ValueError) as exc:
        print(f"hudi-format {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        try:
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
