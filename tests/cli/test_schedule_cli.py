"""``scaleup schedule`` in-process (typer's CliRunner): exit codes 0/1/2, JSON round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["schedule", *args])


def test_show_lists_ops_traffic_and_steps() -> None:
    result = _run("show", "ring", "all_reduce", "--ranks", "4", "--count", "1K", "--chunks", "2")
    assert result.exit_code == 0, result.output
    assert "6 steps" in result.output
    assert "op     0" in result.output
    assert "more ops" in result.output  # only the first 50 are listed
    assert "6144" in result.output  # 2(n-1)/n x 4 KiB sent per rank


def test_show_json_round_trips_through_verify_file(tmp_path: Path) -> None:
    result = _run(
        "show",
        "hierarchical",
        "all_reduce",
        "--ranks",
        "8",
        "--count",
        "37",
        "--ranks-per-node",
        "4",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["algorithm"] == "hierarchical"
    assert isinstance(data["ops"], list)
    assert data["ops"]
    path = tmp_path / "s.json"
    path.write_text(result.output)
    checked = _run("verify", "--file", str(path), "--dtype", "int32")
    assert checked.exit_code == 0, checked.output
    assert checked.output.startswith("ok: hierarchical")


@pytest.mark.parametrize(
    "args",
    [
        ("ring", "all_reduce", "--ranks", "7", "--count", "101"),
        ("tree", "broadcast", "--ranks", "5", "--count", "13", "--root", "3", "--chunks", "3"),
        (
            "direct",
            "all_reduce",
            "--ranks",
            "4",
            "--count",
            "64",
            "--shot",
            "2",
            "--dtype",
            "float16",
        ),
        ("nvls", "reduce_scatter", "--ranks", "3", "--count", "10"),
        ("recursive", "all_gather", "--ranks", "6", "--count", "18"),
        (
            "ring",
            "all_reduce",
            "--ranks",
            "4",
            "--count",
            "16",
            "--bidirectional",
            "--channels",
            "2",
        ),
    ],
)
def test_verify_ok(args: tuple[str, ...]) -> None:
    result = _run("verify", *args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ")
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ring", "all_to_all", "--ranks", "4", "--count", "8"), "does not implement all_to_all"),
        (("nope", "all_reduce", "--ranks", "4", "--count", "8"), "unknown algorithm"),
        (("ring", "allreduce", "--ranks", "4", "--count", "8"), "unknown collective"),
        (
            ("ring", "all_reduce", "--ranks", "4", "--count", "8", "--dtype", "complex"),
            "unknown dtype",
        ),
        (
            ("ring", "all_reduce", "--ranks", "4", "--count", "8", "--ranks-per-node", "2"),
            "ranks_per_node",
        ),
        (("hierarchical", "all_reduce", "--ranks", "6", "--count", "8"), "not a multiple"),
        (("ring", "all_reduce", "--ranks", "4"), "--count"),
        (("--file", "/nonexistent/s.json"), "cannot read"),
    ],
)
def test_bad_input_exits_2(args: tuple[str, ...], message: str) -> None:
    result = _run("verify", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_json_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert _run("verify", "--file", str(path)).exit_code == 2
    path.write_text(json.dumps({"ops": []}))
    result = _run("verify", "--file", str(path))
    assert result.exit_code == 2
    assert "spec" in result.output


def test_failing_schedule_exits_1_naming_the_op(tmp_path: Path) -> None:
    shown = _run("show", "ring", "all_gather", "--ranks", "3", "--count", "9", "--json")
    data = json.loads(shown.output)
    dropped = [op for op in data["ops"] if op["deps"]][0]
    dropped["deps"] = []
    path = tmp_path / "racy.json"
    path.write_text(json.dumps(data))
    result = _run("verify", "--file", str(path))
    assert result.exit_code == 1, result.output
    assert f"op {dropped['id']}" in result.output
    assert "FAIL" in result.output


def test_verify_in_place_nvls_reduce_to_a_non_zero_root() -> None:
    """Issue 10: an op whose destination aliases a source; --in-place replays it as the runtime."""
    args = ("nvls", "reduce", "-n", "3", "-c", "7", "--root", "2", "--dtype", "int64")
    result = _run("verify", *args, "--in-place")
    assert result.exit_code == 0, result.output
    assert "output aliased to input" in result.output


def test_verify_in_place_reports_the_race_aliasing_creates() -> None:
    """One-shot direct all_reduce is correct apart, racy aliased (a peer still reads the input)."""
    args = ("direct", "all_reduce", "-n", "3", "-c", "7", "--shot", "1")
    assert _run("verify", *args).exit_code == 0
    result = _run("verify", *args, "--in-place")
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.output
    assert "output aliased to input" in result.output


def test_verify_in_place_needs_one_buffer_size() -> None:
    result = _run("verify", "ring", "all_gather", "-n", "3", "-c", "9", "--in-place")
    assert result.exit_code == 2, result.output
    assert "in place needs input and output of one size" in result.output
    assert len(result.output.strip().splitlines()) == 1
