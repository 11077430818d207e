""".ci/run runs the README's test command verbatim, and a failure anywhere in it fails CI."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quickstart() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def test_ci_runs_the_second_quickstart_command_verbatim_and_stops_when_it_fails():
    commands = _quickstart()
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    lines = [line for line in ci if commands[1] in line]
    assert len(lines) == 1, "the README's test command must appear once, verbatim"
    assert lines[0].rstrip().endswith("|| exit 1")  # set -e alone ignores a failed install


def test_set_e_alone_would_carry_on_past_a_failed_install():
    """Why the ``|| exit 1``: under ``set -e`` a failure inside an && list that is not its last
    command does not stop the script."""
    script = "set -euo pipefail; false && true; echo carried-on"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "carried-on"
    guarded = "set -euo pipefail; false && true || exit 1; echo carried-on"
    out = subprocess.run(["bash", "-c", guarded], capture_output=True, text=True, check=False)
    assert out.returncode == 1
    assert out.stdout == ""
