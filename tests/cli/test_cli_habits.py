"""What users check by hand on the command line: --version, python -m scaleup, completion,
--csv wherever --json is, tables that never truncate when piped, bfloat16 without ml_dtypes,
progress only on a terminal."""

from __future__ import annotations

import csv
import io
import runpy
import sys
from typing import Any

import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from scaleup import __version__
from scaleup.cli import app, render

runner = CliRunner()


def _commands() -> list[tuple[str, Any]]:
    """Every leaf command of the app, with its full name."""
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        if hasattr(command, "commands"):  # duck-typed: typer may not use click's classes
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            out.append((prefix, command))

    walk("", typer.main.get_command(app))
    return out


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"scaleup {__version__}"


def test_python_dash_m_scaleup(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["scaleup", "--version"])
    # as in a fresh `python -m scaleup`: another test in this worker may have imported it
    monkeypatch.delitem(sys.modules, "scaleup.__main__", raising=False)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("scaleup", run_name="__main__", alter_sys=True)
    assert info.value.code in (0, None)
    assert capsys.readouterr().out.strip() == f"scaleup {__version__}"


def test_completion_options_are_offered():
    result = runner.invoke(app, ["--help"])
    assert "--install-completion" in result.output
    assert "--show-completion" in result.output


def test_every_command_with_json_has_csv():
    with_json = [(n, c) for n, c in _commands() if any(p.name == "json_out" for p in c.params)]
    assert len(with_json) >= 7
    for name, command in with_json:
        assert any("--csv" in getattr(p, "opts", ()) for p in command.params), name


@pytest.mark.parametrize(
    "args",
    [
        ["topo", "list"],
        ["topo", "show", "dgx-h100"],
        ["schedule", "show", "ring", "all_reduce", "--ranks", "2", "--count", "4"],
        ["plan", "-m", "llama-70b"],
        ["bench", "-b", "8", "-e", "8"],
    ],
)
def test_json_with_csv_is_one_line(args):
    result = runner.invoke(app, [*args, "--json", "--csv"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --json/--csv: choose one of --json and --csv"


def _csv(output: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(output)))


def test_csv_outputs_parse():
    presets = _csv(runner.invoke(app, ["topo", "list", "--csv"]).output)
    assert {"name", "description"} == set(presets[0])
    facts = _csv(runner.invoke(app, ["topo", "show", "dgx-h100", "--csv"]).output)
    assert len(facts) == 1
    assert facts[0]["accelerators"] == "8"
    pairs = _csv(runner.invoke(app, ["topo", "show", "dgx-h100", "--pairs", "--csv"]).output)
    assert len(pairs) == 8 * 7 // 2 or len(pairs) == 8 * 7
    ops = _csv(
        runner.invoke(
            app, ["schedule", "show", "ring", "all_reduce", "--ranks", "2", "--count", "4", "--csv"]
        ).output
    )
    assert ops[0]["kind"] == "copy"
    plan = _csv(runner.invoke(app, ["plan", "-m", "llama-70b", "--csv"]).output)
    assert plan[0]["topology"] == "dgx-h100"
    assert "config.tp" in plan[0]
    sweep = _csv(runner.invoke(app, ["plan", "-m", "llama-70b", "--sweep-tp", "--csv"]).output)
    assert [r["tp"] for r in sweep] == ["1", "2", "4", "8"]


def test_flatten_nests_and_encodes_lists():
    assert render.flatten({"a": {"b": 1, "c": {}}, "d": [1]}) == {"a.b": 1, "a.c": "{}", "d": "[1]"}


def test_tables_do_not_truncate_when_piped(capsys):
    long = "x" * 150
    render.print_table(["name", "value"], [("a", long), ("b", "17.5")])
    out = capsys.readouterr().out
    assert long in out
    assert "…" not in out


def test_plan_sweep_is_not_truncated_when_piped():
    result = runner.invoke(
        app, ["plan", "-m", "llama-70b", "--sweep-tp", "-t", "dgx-h100,dgx-a100"]
    )
    assert result.exit_code == 0, result.output
    assert "…" not in result.output


def test_bfloat16_needs_no_ml_dtypes_in_the_simulator(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now fails
    bench = runner.invoke(app, ["bench", "-b", "1M", "-e", "1M", "-d", "bfloat16"])
    assert bench.exit_code == 0, bench.output
    assert "bfloat16" in bench.output
    show = runner.invoke(
        app, ["schedule", "show", "ring", "all_reduce", "--ranks", "2", "--count", "4", "-d",
              "bfloat16"]
    )  # fmt: skip
    assert show.exit_code == 0, show.output
    assert "8B" in show.output  # 2 elements x 2 bytes per rank


def test_progress_only_on_a_terminal(monkeypatch):
    assert render.progress_bar() is None  # pytest's stderr is not a terminal
    with render.activity("quiet") as step:
        step("renamed")
    terminal = Console(file=io.StringIO(), force_terminal=True, width=80)
    monkeypatch.setattr(render, "err_console", terminal)
    assert render.progress_bar() is not None
    with render.activity("working") as step:
        step("still working")
    assert "working" in terminal.file.getvalue()
