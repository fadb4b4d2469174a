"""An engine behind an external command, speaking JSON lines over stdin/stdout.

The suite starts the command once (a shell command line, e.g. ``cmd:java -jar my-engine.jar``)
and sends one JSON request per line on its stdin; the engine answers each with exactly one JSON
line on stdout (anything else it wants to say goes to stderr). Requests:

``{"op": "hello"}``
    -> ``{"ok": true, "engine": "<name>", "version": "<v>", "capabilities": ["read", "write"]}``
``{"op": "read", "path": "<table base path>", "query": {...}}``
    -> ``{"ok": true, "rows": [...]}`` with the rows canonical as conformance/fixtures/README.md
    says (decimals as strings, dates and times ISO 8601, bytes hex, maps as [key, value] pairs).
``{"op": "write", "path": ..., "step": {...}, "schema": [["col", "type"], ...], "rows": [...]}``
    -> ``{"ok": true, "instant": {"timestamp", "action", "completion_time"}}``; the rows are
    canonical JSON rows of ``schema`` (type names as in conformance/model.py).
``{"op": "service", "path": ..., "step": {...}}`` -> ``{"ok": true, "instant": {...} | null}``
``{"op": "bye"}`` -> the engine exits.

Queries and steps are described in ``base.py``. A request the engine does not support is
answered ``{"ok": false, "unsupported": true, "reason": "..."}`` (the case is skipped); a failure
``{"ok": false, "error": "..."}`` (the case fails). ``python -m conformance serve --engine X``
serves an in-process engine over this protocol, as a reference implementation.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from typing import IO

import pyarrow as pa

from ..canonical import canonical_rows
from .base import Engine, Unsupported

_TIMEOUT = 600


class EngineProtocolError(RuntimeError):
    pass


class CommandEngine(Engine):
    """Runs ``command`` once and talks to it for every case."""

    def __init__(self, command: str):
        self.command = command
        self.proc = subprocess.Popen(command if sys.platform == "win32" else shlex.split(command),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lock = threading.Lock()
        hello = self._call({"op": "hello"})
        self.name = str(hello.get("engine") or command)
        self._version = str(hello.get("version") or "")
        self.capabilities = frozenset(hello.get("capabilities") or ["read"])

    def version(self) -> str:
        return self._version

    def _call(self, request: dict) -> dict:
        with self._lock:
            if self.proc.poll() is not None:
                raise EngineProtocolError(f"engine command {self.command!r} exited with {self.proc.returncode}")
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise EngineProtocolError(f"engine command {self.command!r} closed its output")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EngineProtocolError(f"engine answered with a line that is not JSON: {line[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise EngineProtocolError(f"engine answered {answer!r}, expected an object")
        if answer.get("ok"):
            return answer
        if answer.get("unsupported"):
            raise Unsupported(answer.get("reason") or "unsupported")
        raise RuntimeError(answer.get("error") or f"engine failed: {answer}")

    def read(self, path: str, query: dict) -> list[dict]:
        return self._call({"op": "read", "path": path, "query": query})["rows"]

    def write(self, path: str, data: pa.Table, step: dict) -> dict | None:
        schema = [[f.name, _type_name(f.type)] for f in data.schema]
        return self._call({"op": "write", "path": path, "step": step, "schema": schema,
                           "rows": canonical_rows(data)})["instant"]

    def service(self, path: str, step: dict) -> dict | None:
        return self._call({"op": "service", "path": path, "step": step}).get("instant")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "bye"}) + "\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit},{t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    if pa.types.is_list(t):
        return f"list<{_type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{_type_name(f.type)}" for f in t) + ">"
    names = {pa.string(): "string", pa.int64(): "int64", pa.int32(): "int32", pa.float64(): "double",
             pa.float32(): "float", pa.bool_(): "bool", pa.date32(): "date32", pa.binary(): "binary"}
    if t in names:
        return names[t]
    raise ValueError(f"type {t} has no conformance type name")


def serve(engine: Engine, stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
    """Answer protocol requests with ``engine`` until ``bye`` or end of input."""
    from ..model import arrow_schema, rows_to_arrow

    def answer(obj: dict) -> None:
        stdout.write(json.dumps(obj) + "\n")
        stdout.flush()

    for line in stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "bye":
                return
            if op == "hello":
                answer({"ok": True, "engine": engine.name, "version": engine.version(),
                        "capabilities": sorted(engine.capabilities)})
            elif op == "read":
                result = engine.read(req["path"], req["query"])
                answer({"ok": True, "rows": canonical_rows(result)})
            elif op == "write":
                data = rows_to_arrow(req["rows"], arrow_schema(req["schema"]))
                answer({"ok": True, "instant": engine.write(req["path"], data, req["step"])})
            elif op == "service":
                answer({"ok": True, "instant": engine.service(req["path"], req["step"])})
            else:
                answer({"ok": False, "error": f"unknown op {op!r}"})
        except Unsupported as exc:
            answer({"ok": False, "unsupported": True, "reason": str(exc)})
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the suite
            answer({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
