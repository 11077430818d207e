"""``scaleup run -n N script.py`` (in-process CliRunner; the ranks are real processes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_script import gone, read_ranks
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.runtime.shm import list_segments

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "runtime_allreduce.py"
SCRIPT = Path(__file__).resolve().parent / "fault_script.py"


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_run_example(transport: str) -> None:
    result = CliRunner().invoke(app, ["run", "-n", "2", "-t", transport, str(EXAMPLE), "33"])
    assert result.exit_code == 0, result.output
    assert "world_size=2 count=33 sum=3 ok=True" in result.output  # relayed, [rank0]: prefixed


def test_run_failing_script_names_rank(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nfrom scaleup import runtime as rt\nrt.init()\n"
        "if rt.rank() == 1:\n    sys.exit(3)\nrt.barrier()\n"
    )
    result = CliRunner().invoke(app, ["run", "-n", "2", "--timeout", "5", str(script)])
    assert result.exit_code == 2
    assert "rank 1 failed (exit code 3)" in result.output


def test_run_missing_script() -> None:
    result = CliRunner().invoke(app, ["run", "-n", "2", "no_such_script.py"])
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("mode", "transport", "expected"),
    [
        ("die", "shm", "rank 1 died (signal 9, SIGKILL)"),
        ("die", "pipe", "rank 1 died (signal 9, SIGKILL)"),
        ("hang", "shm", "rank 1 made no progress for 2 s"),
        ("hang", "pipe", "rank 1 made no progress for 2 s"),
    ],
)
def test_run_names_the_rank_that_died_or_hung(
    mode: str, transport: str, expected: str, tmp_path: Path
) -> None:
    timeout_s = 2.0
    args = ["run", "-n", "3", "-t", transport, "--timeout", str(timeout_s), str(SCRIPT)]
    result = CliRunner().invoke(app, [*args, mode, "1", str(tmp_path)])
    ended = time.time()
    assert result.exit_code == 2, result.output
    assert expected in result.output  # not rank 0, the first to notice and exit
    pids, prefix = read_ranks(tmp_path, 3, 0.0)
    started = max((tmp_path / f"rank{r}").stat().st_mtime for r in range(3))
    assert ended - started < timeout_s + 5.0
    assert all(gone(pid) for pid in pids)
    assert list_segments(prefix) == []
