"""``scaleup run -n N script.py`` (in-process CliRunner; the ranks are real processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "runtime_allreduce.py"


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_run_example(transport: str, capfd: pytest.CaptureFixture[str]) -> None:
    result = CliRunner().invoke(app, ["run", "-n", "2", "-t", transport, str(EXAMPLE), "33"])
    assert result.exit_code == 0, result.output
    assert "world_size=2 count=33 sum=3 ok=True" in capfd.readouterr().out


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
