"""No import cycle in hudi_format, deferred imports included (``tests/import_graph.py`` builds the
graph from every module's AST, so an import inside a function counts as much as one at the top).

import-linter (``make test`` runs ``lint-imports``) holds the layers and the cycles between the
modules of one package; this test names the cycles module by module, across packages too."""

from __future__ import annotations

import ast


from import_graph import cycles, graph, imports_of, modules

def test_graph_sees_deferred_and_submodule_imports(tmp_path):
    """The graph builder itself: a function-level import, a relative ``from . import sub`` and
    a TYPE_CHECKING import are all edges, so a cycle cannot hide behind any of them."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import X\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    g = graph("pkg", tmp_path)
    assert g["pkg.a"] == {"pkg.b"} and g["pkg.b"] == {"pkg.c"} and g["pkg.c"] == {"pkg.a"}
    assert cycles(g) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_no_import_cycle_anywhere():
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_method_attached_to_table_outside_its_class():
    """``Table.x = ...`` anywhere in the package hides ``x`` from IDEs, ``help()`` and
    ``inspect.signature``: every method is defined in the class body."""
    offenders = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "Table":
                    offenders.append(f"{name}:{node.lineno} Table.{t.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "Table":
                offenders.append(f"{name}:{node.lineno} setattr(Table, ...)")
    assert offenders == []


def test_every_module_is_parsed():
    mods = modules()
    assert "hudi_format.table" in mods and "hudi_format.log.block" in mods
    assert imports_of("hudi_format.log.block", mods["hudi_format.log.block"], set(mods)) >= \
        {"hudi_format.log.data", "hudi_format.log.delete", "hudi_format.errors"}
