"""Output helpers of the CLI: JSON-safe values, text tables, progress, file readers and writers.

JSON output renders values as the conformance suite's canonical rows do: decimals as strings,
dates and times in ISO 8601, binary as hex, maps as lists of ``[key, value]`` pairs."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa

FORMATS = ("parquet", "csv", "jsonl")
_EXT = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl",
        ".ndjson": "jsonl"}


class UsageError(Exception):
    """A command line that cannot work (exit code 2)."""


def json_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def dumps(obj: Any) -> str:
    return json.dumps(json_value(obj), indent=2, default=str)


def human_size(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def text_table(rows: list[dict], columns: list[str] | None = None, max_width: int = 40) -> str:
    """A plain, aligned text table."""
    if columns is None:
        columns = list(dict.fromkeys(c for r in rows for c in r))
    if not columns:
        return "(no columns)"

    def cell(v: Any) -> str:
        if v is None:
            return "null"
        text = v if isinstance(v, str) else json.dumps(json_value(v), default=str)
        text = text.replace("\n", " ")
        return text if len(text) <= max_width else text[:max_width - 1] + "…"

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in body]) for i, c in enumerate(columns)]
    sep = "  "
    lines = [sep.join(c.ljust(w) for c, w in zip(columns, widths)),
             sep.join("-" * w for w in widths)]
    lines += [sep.join(v.ljust(w) for v, w in zip(row, widths)) for row in body]
    return "\n".join(line.rstrip() for line in lines)


# -- progress --------------------------------------------------------------------------------------
class Progress:
    """tqdm when it is installed and stderr is a terminal (and not switched off), else silent."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self._tqdm = None
        if self.enabled:
            try:
                from tqdm import tqdm
                self._tqdm = tqdm
            except ImportError:
                self.enabled = False

    def iterate(self, it: Iterable, desc: str, total: int | None = None, unit: str = "it") -> Iterable:
        if not self.enabled:
            return it
        return self._tqdm(it, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False)

    def bar(self, desc: str, total: int | None = None, unit: str = "it"):
        if not self.enabled:
            return contextlib.nullcontext(_NullBar())
        return self._tqdm(desc=desc, total=total, unit=unit, unit_scale=True, file=sys.stderr, leave=False)

    @contextlib.contextmanager
    def busy(self, desc: str) -> Iterator[None]:
        """An elapsed-time spinner while one long library call runs."""
        if not self.enabled:
            yield
            return
        bar = self._tqdm(desc=desc, total=None, bar_format="{desc}: {elapsed}", file=sys.stderr, leave=False)
        stop = threading.Event()

        def tick():
            while not stop.wait(0.5):
                bar.refresh()

        t = threading.Thread(target=tick, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()
            bar.close()


class _NullBar:
    def update(self, n: int = 1) -> None:
        pass


# -- files in and out ------------------------------------------------------------------------------
def file_format(path: str, given: str | None) -> str:
    if given:
        return given
    fmt = _EXT.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {path} from its extension; pass --format ({', '.join(FORMATS)})")
    return fmt


def read_input(path: str, fmt: str) -> pa.Table:
    if not Path(path).exists():
        raise UsageError(f"input file {path} does not exist")
    from ..errors import SchemaError
    from ..writer.input import check_names
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq
            table = pq.read_table(path)
        elif fmt == "csv":
            import pyarrow.csv as pcsv
            table = pcsv.read_csv(path)
        else:
            import pyarrow.json as pjson
            table = pjson.read_json(path)
        check_names(table.schema)     # a damaged file's column name that is not UTF-8
    except (pa.ArrowException, OSError, ValueError, SchemaError) as exc:
        raise UsageError(f"cannot read {path} as {fmt}: {exc}") from exc
    return table


class Exporter:
    """Writes record batches to parquet, CSV or JSON lines."""

    def __init__(self, path: str, fmt: str, schema: pa.Schema):
        self.path, self.fmt, self.schema = path, fmt, schema
        self.rows = 0
        if fmt == "csv":
            nested = [f.name for f in schema if pa.types.is_nested(f.type)]
            if nested:
                raise UsageError(f"CSV cannot hold the nested columns {nested}; pick --columns or export "
                                 f"parquet/jsonl")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            import pyarrow.parquet as pq
            self._writer = pq.ParquetWriter(path, schema)
        elif fmt == "csv":
            import pyarrow.csv as pcsv
            self._writer = pcsv.CSVWriter(path, schema)
        else:
            self._file = open(path, "w", encoding="utf-8")

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.schema != self.schema:
            batch = pa.Table.from_batches([batch]).cast(self.schema).to_batches()[0] if batch.num_rows else None
            if batch is None:
                return
        self.rows += batch.num_rows
        if self.fmt == "jsonl":
            for row in batch.to_pylist():
                self._file.write(json.dumps(json_value(row), default=str) + "\n")
        else:
            self._writer.write_batch(batch) if self.fmt == "parquet" else self._writer.write(batch)

    def close(self) -> None:
        if self.fmt == "jsonl":
            self._file.close()
        else:
            self._writer.close()
