"""The import graph points one way (docs/architecture.md):

    hardware -> topology -> collectives -> sim | runtime -> tune -> workload -> bench | sweep -> cli

A module may import its own layer and the layers before it, never one after it; ``sim`` and
``runtime`` are siblings (neither imports the other), as are ``bench`` and ``sweep``. ``errors``,
``units``, ``limits``, ``files`` (reading users' TOML), ``report`` (result rows, shared by the
simulator and the runtime) and ``arrays`` (numpy helpers) are base modules every layer may import.
Every import counts: top-level, inside a function, and under ``TYPE_CHECKING``. No module hides an
arrow behind ``importlib.import_module`` (the sweep's kind registry, which loads user-named
``module:function`` targets, excepted) or a lazy module-level ``__getattr__``. The package root is
the one exception to both: it is the curated public API, above every layer (it may import anything,
so a lazy lookup there hides no arrow), and it stays lazy so that ``import scaleup.runtime`` in
every worker process does not pay for the simulator, NetworkX and Dask.

The rules are by top-level package name (``scaleup.<name>...``, with ``sweep_*.py`` modules
counted as ``sweep``), so modules moving inside a package do not need this test to change.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scaleup"

#: Layer of each top-level name; equal layers may import each other only where listed below.
LAYERS: dict[str, int] = {
    "errors": 0,
    "units": 0,
    "limits": 0,
    "report": 0,
    "files": 0,
    "arrays": 0,
    "hardware": 1,
    "topology": 2,
    "collectives": 3,
    "sim": 4,
    "runtime": 4,
    "tune": 5,
    "workload": 6,
    "bench": 7,
    "sweep": 7,
    "compare": 7,
    "calibrate": 7,
    "cli": 8,
    "__main__": 9,  # python -m scaleup: the command line, above everything
}
#: Pairs of different names in one layer that may import each other (a -> b).
SAME_LAYER_ALLOWED = {
    ("sweep", "bench"),
    ("calibrate", "bench"),
    ("compare", "bench"),
    ("sweep", "calibrate"),  # a block's profile (scaleup.calibrate.profile)
    ("compare", "calibrate"),  # --profile on every fabric
}
#: Modules allowed to call importlib.import_module (they load targets named in data, not ours).
DYNAMIC_IMPORT_ALLOWED = ("sweep",)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _top_name(module: str) -> str | None:
    """``scaleup.sim.network`` -> ``sim``; ``scaleup.sweep_eval`` -> ``sweep``; root -> None."""
    parts = module.split(".")
    if parts[0] != "scaleup" or len(parts) < 2:
        return None
    name = parts[1]
    return "sweep" if name.startswith("sweep_") else name


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file."""
    return _imports_of(path.read_text(), _module_name(path), path.name == "__init__.py")


def _imports_of(code: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``code``, resolving relative ones."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if node.module is None:  # from . import x, y: each name may be a module
                out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, target))
    return out


def _arrow_allowed(src: str, dst: str) -> bool:
    if src == dst or LAYERS[dst] < LAYERS[src] or LAYERS[dst] == 0:
        return True
    return LAYERS[dst] == LAYERS[src] and (src, dst) in SAME_LAYER_ALLOWED


def test_every_top_level_name_has_a_layer():
    names = {_top_name(_module_name(p)) for p in _modules()} - {None}
    assert names <= set(LAYERS), f"give these a layer: {sorted(names - set(LAYERS))}"


def test_imports_point_one_way():
    wrong = []
    for path in _modules():
        src = _top_name(_module_name(path))
        if src is None:  # the package root re-exports the public API from every layer
            continue
        for line, module in _imports(path):
            dst = _top_name(module)
            if dst is not None and dst in LAYERS and not _arrow_allowed(src, dst):
                wrong.append(f"{path.relative_to(SRC)}:{line}: {src} imports {module}")
    assert not wrong, "\n".join(wrong)


def _dynamic_imports(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                lines.append(node.lineno)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "importlib"
            and any(alias.name == "import_module" for alias in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_no_importlib_hides_an_arrow():
    wrong = []
    for path in _modules():
        src = _top_name(_module_name(path))
        if src is None or src in DYNAMIC_IMPORT_ALLOWED:  # the root: see the module docstring
            continue
        tree = ast.parse(path.read_text(), str(path))
        wrong += [f"{path.relative_to(SRC)}:{line}" for line in _dynamic_imports(tree)]
    assert not wrong, "importlib.import_module used in:\n" + "\n".join(wrong)


def test_no_lazy_module_getattr():
    wrong = []
    for path in _modules():
        if path == SRC / "__init__.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:  # module level only: a class's __getattr__ is not a re-export
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not wrong, "module-level __getattr__ in:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("src", "dst", "allowed"),
    [
        ("sim", "collectives", True),
        ("sim", "runtime", False),
        ("runtime", "sim", False),
        ("collectives", "sim", False),
        ("sim", "tune", False),
        ("tune", "sim", True),
        ("workload", "tune", True),
        ("bench", "sweep", False),
        ("sweep", "bench", True),
        ("cli", "bench", True),
        ("report", "sim", False),
    ],
)
def test_the_rule_itself(src, dst, allowed):
    assert _arrow_allowed(src, dst) is allowed


def test_relative_and_nested_imports_are_seen():
    """The parser sees imports inside functions and resolves ``from ..x import y``."""
    code = "def f():\n    from ..sim import simulate\n    import scaleup.tune.search\n"
    found = _imports_of(code, "scaleup.collectives.probe", is_package=False)
    assert (2, "scaleup.sim") in found
    assert (3, "scaleup.tune.search") in found
    assert _top_name("scaleup.sweep_eval") == "sweep"
