"""The module import graph of ``hudi_format``, deferred imports included.

import-linter (grimp) sees imports inside functions too, but only as edges between modules; this
walks every module's AST itself so a cycle is reported as the chain of modules that makes it,
and so ``python -m tests.support.import_graph`` can print the cycles while one is being removed.

An edge ``a -> b`` is any ``import b`` / ``from b import x`` anywhere in ``a`` (module level,
inside a function, under ``TYPE_CHECKING``: a type-only import is still a dependency of the
design); ``from pkg import sub`` where ``sub`` is a submodule is an edge to ``pkg.sub`` (not to
``pkg``, whose ``__init__`` has run already), as import-linter's grimp counts it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(package: str = "hudi_format", root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its own name, for ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a relative ``from`` refers to (level 1 = this module's package)."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        # ``import a.b.c`` runs a, a.b and a.b.c; the edge that matters is the deepest known one.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if sub in known:
                    found.add(sub)      # ``from pkg import sub``: the submodule, as grimp counts it
                else:
                    add(base)
    found.discard(module)
    return found


def graph(package: str = "hudi_format", root: Path = ROOT) -> dict[str, set[str]]:
    mods = modules(package, root)
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through every strongly connected component of more than one module
    (Tarjan), each as ``[a, b, ..., a]``; empty when the graph is acyclic."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(g):
        if v not in index:
            strong(v)
    return [_shortest_cycle(g, comp) for comp in comps]


def _shortest_cycle(g: dict[str, set[str]], comp: set[str]) -> list[str]:
    best: list[str] | None = None
    for start in sorted(comp):
        prev: dict[str, str] = {}
        frontier = [start]
        seen = {start}
        found = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in sorted(g[v] & comp):
                    if w == start:
                        found = v
                        break
                    if w not in seen:
                        seen.add(w)
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        if found is None:
            continue
        path = [found]
        while path[-1] != start:
            path.append(prev[path[-1]])
        cyc = list(reversed(path)) + [start]
        if best is None or len(cyc) < len(best):
            best = cyc
    assert best is not None
    return best


def components(g: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module."""
    out = []
    for cyc in cycles(g):
        # Grow the shortest cycle's component back: all nodes reachable both ways from its start.
        start = cyc[0]
        fwd = _reach(g, start)
        rev = _reach({v: {u for u in g if v in g[u]} for v in g}, start)
        out.append(fwd & rev)
    return out


def _reach(g: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for w in g.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def main() -> int:
    g = graph()
    found = components(g)
    for comp, cyc in zip(found, cycles(g)):
        print(f"{len(comp)} modules: {' -> '.join(cyc)}")
        print("   ", ", ".join(sorted(comp)))
    print(f"{len(found)} import cycle(s) in {len(g)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
