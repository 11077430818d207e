"""Point kinds come from a registry: a spec names a kind, it never names code to import."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.errors import UsageError
from scaleup.sweep import evaluate_point, read_rows, run_sweep
from scaleup.sweep.kinds import (
    BUILTIN_KINDS,
    ENTRY_POINT_GROUP,
    _plugins,
    get_kind,
    kind_names,
    register_kind,
    unregister_kind,
)

#: The exploit of issue 10: a handler whose factory is os.system, built by logging's dictConfig.
DICTCONFIG_SPEC = """
[[grid]]
kind = "logging.config:dictConfig"
[grid.params]
version = 1
[grid.params.handlers.h]
"()" = "os.system"
command = "touch {marker}"
"""


def _invoke(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_a_spec_naming_a_function_runs_nothing_and_exits_2(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    spec = tmp_path / "evil.toml"
    spec.write_text(DICTCONFIG_SPEC.format(marker=marker))
    out = tmp_path / "r.parquet"
    result = _invoke("sweep", str(spec), "-o", str(out), "--serial", "-q")
    assert not marker.exists(), "the spec ran a shell command"
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert "grid[0].kind: unknown point kind 'logging.config:dictConfig'" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("kind", ["os:system", "math:sqrt", "scaleup.sweep.kinds:bench_point"])
def test_module_function_is_not_a_kind(tmp_path: Path, kind: str) -> None:
    row = evaluate_point({"kind": kind, "x": 4.0})
    assert (row["status"], row["error_type"]) == ("error", "UsageError")
    assert f"unknown point kind {kind!r}" in row["error"]
    with pytest.raises(UsageError, match="unknown point kind"):
        run_sweep([{"kind": kind, "x": 4.0}], tmp_path / "r.parquet", serial=True)
    assert not (tmp_path / "r.parquet").exists(), "refused before the output is touched"


def test_a_param_may_not_override_the_kind(tmp_path: Path, registered_fakes: object) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[[grid]]\nkind = "square"\nparams = { x = [1], kind = "os:system" }\n')
    result = _invoke("sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "--serial")
    assert result.exit_code == 2
    assert "grid[0].params.kind: 'kind' is a column of every result row" in result.stderr


def test_register_replace_and_unregister() -> None:
    def double(point: dict[str, object]) -> dict[str, object]:
        return {"y": 2 * point["x"]}  # type: ignore[operator]

    register_kind("double", double)
    try:
        assert "double" in kind_names()
        assert evaluate_point({"kind": "double", "x": 3})["y"] == 6
        with pytest.raises(UsageError, match="exists already"):
            register_kind("double", double)
        with pytest.raises(UsageError, match="exists already"):
            register_kind("bench", double)
        with pytest.raises(UsageError, match="needs a function"):
            register_kind("other", "math:sqrt")  # type: ignore[arg-type]
        register_kind("bench", double, replace=True)
        assert get_kind("bench") is double
    finally:
        unregister_kind("double")
        unregister_kind("bench")
    assert get_kind("bench") is BUILTIN_KINDS["bench"]
    assert "double" not in kind_names()


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed distribution declaring two kinds in the entry-point group: one that works,
    one whose module fails to import, and one that tries to shadow a built-in."""
    (tmp_path / "fake_plugin_kinds.py").write_text(
        "def cube(point):\n    return {'y': point['x'] ** 3}\n"
    )
    info = tmp_path / "fake_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""\
            [{ENTRY_POINT_GROUP}]
            cube = fake_plugin_kinds:cube
            broken = no_such_module_here:evaluate
            bench = fake_plugin_kinds:cube
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _plugins.cache_clear()
    yield tmp_path
    _plugins.cache_clear()


def test_installed_entry_points_are_kinds(plugin: Path, tmp_path: Path) -> None:
    assert {"cube", "broken"} <= set(kind_names())
    assert get_kind("bench") is BUILTIN_KINDS["bench"], "a plugin cannot shadow a built-in"
    spec = tmp_path / "s.toml"
    spec.write_text('[[grid]]\nkind = "cube"\nparams = { x = [1, 2, 3] }\n')
    out = tmp_path / "r.parquet"
    result = _invoke("sweep", str(spec), "-o", str(out), "--serial", "-q")
    assert result.exit_code == 0, result.output
    assert sorted(r["y"] for r in read_rows(out)) == [1, 8, 27]
    spec.write_text('[[grid]]\nkind = "broken"\nparams = { x = 1 }\n')
    broken = _invoke("sweep", str(spec), "-o", str(tmp_path / "b.parquet"), "--serial")
    assert broken.exit_code == 2
    assert broken.stderr.count("\n") == 1
    assert "kind 'broken' (no_such_module_here:evaluate) failed to load" in broken.stderr
