"""The sweep package's layout: no import cycle inside it; rendering and tooling outside the library.

Imports are read from the source (every ``import``, at any depth, so a function-level import
cannot hide an arrow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "scaleup"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _library_modules() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_sweep_package_has_no_import_cycle() -> None:
    modules = _library_modules()
    sweep = {name for name in modules if name.startswith("scaleup.sweep.")}
    assert {"scaleup.sweep.spec", "scaleup.sweep.run", "scaleup.sweep.kinds"} <= sweep
    graph = nx.DiGraph()
    graph.add_nodes_from(sweep)
    graph.add_edges_from((name, target) for name in sweep for target in modules[name] & sweep)
    assert nx.is_directed_acyclic_graph(graph), nx.find_cycle(graph)
    # The package's own __init__ re-exports; nothing inside the package imports it back.
    assert not any("scaleup.sweep" in modules[name] for name in sweep)


def test_only_the_command_line_renders() -> None:
    """matplotlib only in ``cli/`` and ``topology/draw.py``; typer and rich only in ``cli/``."""
    for name, imported in _library_modules().items():
        roots = {module.split(".")[0] for module in imported}
        if name.startswith("scaleup.cli"):
            continue
        assert not roots & {"typer", "rich"}, name
        if name != "scaleup.topology.draw":
            assert "matplotlib" not in roots, name


def test_calibration_tooling_is_outside_the_library() -> None:
    assert not (PACKAGE / "calibration.py").exists()
    for name, imported in _library_modules().items():
        assert not {m for m in imported if m.split(".")[-1] == "calibration"}, name
