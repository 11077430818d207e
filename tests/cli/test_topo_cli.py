"""``scaleup topo`` through typer's CliRunner: exit codes, tables, JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_list() -> None:
    result = runner.invoke(app, ["topo", "list"])
    assert result.exit_code == 0
    assert "dgx-h100" in result.stdout
    assert "gb200-nvl72" in result.stdout
    rows = json.loads(runner.invoke(app, ["topo", "list", "--json"]).stdout)
    assert {"name", "description"} <= set(rows[0])


def test_show_table_and_json() -> None:
    result = runner.invoke(app, ["topo", "show", "dgx-h100"])
    assert result.exit_code == 0
    assert "450.0" in result.stdout
    result = runner.invoke(app, ["topo", "show", "dgx-h100", "--json"])
    assert result.exit_code == 0
    facts = json.loads(result.stdout)
    assert facts["name"] == "dgx-h100"
    assert facts["accelerators"] == 8
    assert facts["switches"] == 4
    assert facts["per_accelerator_gb_per_s"] == pytest.approx(450.0)
    assert facts["uniform"] is True
    for key in ("links", "bisection_gb_per_s", "max_hops", "pooled_memory_bytes"):
        assert key in facts


def test_show_file_and_pairs() -> None:
    result = runner.invoke(
        app, ["topo", "show", str(EXAMPLES / "two-h100.toml"), "--json", "--pairs"]
    )
    assert result.exit_code == 0
    facts = json.loads(result.stdout)
    assert facts["pairs"] == [{"a": "g0", "b": "g1", "hops": 1, "bottleneck_gb_per_s": 450.0}]


def test_show_nx_preset() -> None:
    facts = json.loads(runner.invoke(app, ["topo", "show", "2xdgx-h100", "--json"]).stdout)
    assert facts["accelerators"] == 16
    assert facts["nodes"] == 2
    assert facts["nics"] == 16


@pytest.mark.parametrize(
    ("argument", "words"),
    [
        ("nope", "no preset named 'nope'"),
        ("dgx-h100:bogus=1", "unknown parameter 'bogus'"),
        ("missing.toml", "cannot read"),
    ],
)
def test_bad_input_one_line_exit_2(argument: str, words: str) -> None:
    result = runner.invoke(app, ["topo", "show", argument])
    assert result.exit_code == 2
    assert words in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_file_names_file_entry_and_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text((EXAMPLES / "two-h100.toml").read_text().replace('b = "g1"', 'b = "g7"'))
    result = runner.invoke(app, ["topo", "show", str(bad)])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert str(bad) in line
    assert "links[0]" in line
    assert "'g7'" in line


def test_draw(tmp_path: Path) -> None:
    out = tmp_path / "nvl72.png"
    result = runner.invoke(app, ["topo", "draw", "gb200-nvl72", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000


def test_draw_requires_output() -> None:
    assert runner.invoke(app, ["topo", "draw", "dgx-h100"]).exit_code == 2
