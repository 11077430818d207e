"""The flow-class fast path against the per-flow reference (``scaleup bench --exact``).

The golden tables (test_bench_golden.py) were stored by the per-flow simulator and are compared
bit for bit with the default (fast) path on every preset; this file compares the two modes
directly, in one process, on multi-server fabrics where the symmetry spans servers and channels,
within the 0.5 % the issue allows (in practice they agree exactly).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

CASES = [
    ("2xdgx-h100", "all_reduce"),
    ("4xdgx-h100", "all_reduce"),
    ("2xmi300x-8", "all_reduce"),
    ("2xdgx-h100", "all_gather"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("topology", "op"), CASES)
def test_fast_path_matches_exact(topology: str, op: str) -> None:
    args = ["bench", "--topology", topology, "--op", op, "-b", "8", "-e", "8G", "-f", "1024"]
    fast = CliRunner().invoke(app, [*args, "--json"])
    exact = CliRunner().invoke(app, [*args, "--json", "--exact"])
    assert fast.exit_code == 0, fast.output
    assert exact.exit_code == 0, exact.output
    for a, b in zip(json.loads(fast.output), json.loads(exact.output), strict=True):
        assert (a["algo"], a["proto"], a["channels"]) == (
            b["algo"],
            b["proto"],
            b["channels"],
        )
        assert a["time_us"] == pytest.approx(b["time_us"], rel=5e-3)
