"""``scaleup bench --straggler RANK=F`` and ``--skew-us RANK=US``: applied, named in the header,
bad input refused in one line with exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()
_RING = ["bench", "-b", "64M", "-e", "64M", "--algo", "ring", "--json"]


def _time_us(args: list[str]) -> float:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return float(json.loads(result.output)[0]["time_us"])


def test_straggler_slows_and_is_named_in_the_header():
    base = _time_us(_RING)
    slow = _time_us([*_RING, "--straggler", "1=1.3"])
    assert slow > base
    table = runner.invoke(app, ["bench", "-b", "1M", "-e", "1M", "--straggler", "1=1.3",
                                "--skew-us", "2=5"])  # fmt: skip
    assert table.exit_code == 0, table.output
    assert "# Stragglers applied: straggler rank 1 x1.3; skew rank 2 +5 us" in table.output


def test_factor_one_and_zero_skew_change_nothing():
    assert _time_us([*_RING, "--straggler", "1=1", "--skew-us", "0=0"]) == _time_us(_RING)


def test_skew_delays_by_at_least_itself():
    base = _time_us(_RING)
    assert _time_us([*_RING, "--skew-us", "3=1000"]) >= base + 1000 - 1e-6


def test_json_rows_carry_the_stragglers():
    result = runner.invoke(app, [*_RING, "--straggler", "0=2"])
    assert json.loads(result.output)[0]["stragglers"] == "straggler rank 0 x2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--straggler", "1=0.5"], "--straggler: a straggler factor F must be a number >= 1"),
        (["--straggler", "1=fast"], "--straggler: a straggler factor F must be a number >= 1"),
        (["--straggler", "1.3"], "--straggler: expected RANK=VALUE"),
        (["--straggler", "9=1.3"], "--straggler: rank 9 is out of range"),
        (["--straggler", "1=1.3", "--straggler", "1=2"], "--straggler: rank 1 is given twice"),
        (["--skew-us", "1=-3"], "--skew-us: a start skew must be a number of microseconds >= 0"),
        (["--skew-us", "x=3"], "--skew-us: expected RANK=VALUE"),
        (["--skew-us", "8=3"], "--skew-us: rank 8 is out of range"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str):
    result = runner.invoke(app, ["bench", "-b", "1M", "-e", "1M", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_runtime_refuses_the_simulator_flags():
    result = runner.invoke(app, ["bench", "--runtime", "shm", "-g", "2", "--straggler", "1=2"])
    assert result.exit_code == 2
    assert "--straggler applies to the simulator" in result.output
