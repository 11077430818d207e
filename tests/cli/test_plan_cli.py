"""``scaleup plan`` in-process (typer's CliRunner): tables, --json keys, sweeps, plots, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import scaleup.workload.step as step_module
from scaleup.cli import app

runner = CliRunner()


def _fake_time_s(topology, collective, nbytes, ranks, dtype) -> float:
    """Closed-form stand-in for the simulator (these tests check the command, not the sim)."""
    nodes = {topology.accelerators[r].node for r in ranks}
    return 0.0 if len(ranks) < 2 else 5e-6 + nbytes / (400e9 if len(nodes) == 1 else 50e9)


@pytest.fixture(autouse=True)
def _fake_sim(monkeypatch):
    monkeypatch.setattr(step_module, "default_comm_timer", lambda: _fake_time_s)


def _run(*args: str):
    return runner.invoke(app, ["plan", *args])


def test_issue_example_prints_memory_and_step() -> None:
    result = _run(
        "--model",
        "llama-70b",
        "--topology",
        "gb200-nvl72",
        "--tp",
        "8",
        "--pp",
        "1",
        "--dp",
        "9",
        "--seq",
        "8192",
        "--mbs",
        "1",
    )
    assert result.exit_code == 0, result.output
    for text in (
        "memory per device",
        "optimizer state",
        "step time",
        "TP communication",
        "MFU",
        "fits",
    ):
        assert text in result.output


def test_json_keys() -> None:
    result = _run(
        "--model", "llama-70b", "--topology", "gb200-nvl72", "--tp", "8", "--dp", "9", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in (
        "params",
        "memory_per_device_bytes",
        "fits",
        "step_time_s",
        "comm_exposed_s",
        "mfu",
    ):
        assert key in data
    assert data["fits"] is True
    assert data["params"] == 70_553_706_496


def test_not_fitting_is_reported_not_an_error() -> None:
    result = _run("--model", "llama-405b", "--topology", "dgx-h100", "--tp", "8", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["fits"] is False
    assert data["shortfall_bytes"] > 0


def test_bad_model_is_one_line_exit_2() -> None:
    result = _run("--model", "llama-7000b")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert lines[0].startswith("error: --model: unknown model")


def test_bad_model_file_is_one_line_exit_2(tmp_path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("[models.x]\nlayers = 2\nhidden = 10\nheads = 3\nffn = 4\nvocab = 5\n")
    result = _run("--model", "x", "--model-file", str(path))
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "models.x" in lines[0]
    assert "heads" in lines[0]


def test_user_model_file_plans(tmp_path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        "[models.mine]\nlayers = 4\nhidden = 512\nheads = 8\nffn = 2048\nvocab = 1000\n"
    )
    result = _run("--model", "mine", "--model-file", str(path), "--tp", "2", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["model"] == "mine"


def test_too_many_devices_exit_2() -> None:
    result = _run("--model", "llama-8b", "--topology", "dgx-h100", "--tp", "8", "--dp", "4")
    assert result.exit_code == 2
    assert "exceeds the 8 accelerators" in result.output


def test_sweep_tp_side_by_side_and_plot(tmp_path) -> None:
    out = tmp_path / "sweep.png"
    result = _run(
        "--model", "llama-8b", "--topology", "pcie-8,dgx-h100", "--sweep-tp", "--plot", str(out)
    )
    assert result.exit_code == 0, result.output
    assert "TP sweep" in result.output
    assert "pcie-8" in result.output
    assert "dgx-h100" in result.output
    assert out.stat().st_size > 1000
    data = json.loads(
        _run("--model", "llama-8b", "--topology", "pcie-8,dgx-h100", "--sweep-tp", "--json").output
    )
    assert set(data) == {"pcie-8", "dgx-h100"}
    assert [r["tp"] for r in data["dgx-h100"]] == [
        1,
        2,
        4,
        8,
    ]


def test_plan_plot(tmp_path) -> None:
    out = tmp_path / "plan.png"
    result = _run("--model", "llama-8b", "--tp", "8", "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000
