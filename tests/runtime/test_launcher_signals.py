"""SIGINT, SIGTERM and SIGKILL to a launcher: no rank survives it, no segment outlives the run.

The launcher is a real process here (``scaleup run``, or a program calling ``launch``), since it
is the one that gets the signal. Rank 1 spins in Python outside the runtime (it never checks an
abort word: what a dead launcher used to orphan) while rank 0 waits for it in all_reduce. The
ranks' timeout is far longer than these tests wait, so only the launcher's own handling can pass
them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fault_script import gone, read_ranks, wait_until
from typer.testing import CliRunner

import scaleup
from scaleup.cli import app
from scaleup.runtime.shm import list_segments

SCRIPT = Path(__file__).resolve().parent / "fault_script.py"
TIMEOUT_S = 60.0  # the ranks' --timeout: never reached here
STOP_S = 10.0  # every rank gone this long after the signal (a generous bound: it takes ~2 s)
START_S = 120.0  # ranks have written their pid files (a loaded 2-core machine is slow)


def kill_all(proc: subprocess.Popen[str], pids: list[int]) -> None:
    """Whatever a failed test left running."""
    proc.kill()
    proc.wait()
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def default_sigint() -> None:
    """In the child before exec: SIGINT as a terminal delivers it.

    A shell starts background jobs (``cmd &``, nohup) with SIGINT ignored; the launcher keeps an
    ignored SIGINT ignored, as it should, so a suite started that way would test nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(launcher: str, piddir: Path, transport: str = "shm") -> subprocess.Popen[str]:
    """The launcher in its own session (a signal to its group does not reach pytest)."""
    src = str(Path(scaleup.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    if launcher == "run":
        cmd = [sys.executable, "-c", "from scaleup.cli import main; main()", "run", "-n", "2"]
        cmd += ["-t", transport, "--timeout", str(TIMEOUT_S), str(SCRIPT)]
    else:
        cmd = [sys.executable, str(SCRIPT), "--launch", "2", transport]
    cmd += ["busy", "1", str(piddir)]
    return subprocess.Popen(
        cmd,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,  # noqa: PLW1509 (no threads hold locks here)
    )


@pytest.mark.parametrize(
    ("launcher", "signum", "group"),
    [
        ("run", signal.SIGTERM, False),
        ("run", signal.SIGINT, True),  # Ctrl-C at a terminal: every process of the group
        ("launch", signal.SIGTERM, False),
        ("launch", signal.SIGINT, False),
    ],
)
def test_sigint_sigterm_stop_every_rank_and_remove_segments(
    launcher: str, signum: signal.Signals, group: bool, tmp_path: Path
) -> None:
    proc = start(launcher, tmp_path)
    pids: list[int] = []
    try:
        pids, prefix = read_ranks(tmp_path, 2, START_S)
        assert list_segments(prefix), "the run has segments while it runs"
        os.killpg(proc.pid, signum) if group else proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=STOP_S)
        assert wait_until(lambda: all(gone(pid) for pid in pids), STOP_S), "orphaned ranks"
    finally:
        kill_all(proc, pids)
    assert proc.returncode == 128 + signum, stderr
    assert f"interrupted by {signum.name}" in stderr
    assert "rank 0" not in stderr.splitlines()[-1]  # nobody is blamed for an interruption
    assert list_segments(prefix) == []


@pytest.mark.parametrize("launcher", ["run", "launch"])
def test_sigkill_of_the_launcher_kills_ranks_and_cleanup_reclaims(
    launcher: str, tmp_path: Path
) -> None:
    proc = start(launcher, tmp_path)
    pids: list[int] = []
    try:
        pids, prefix = read_ranks(tmp_path, 2, START_S)
        proc.kill()
        proc.wait(timeout=STOP_S)
        assert wait_until(lambda: all(gone(pid) for pid in pids), STOP_S), "orphaned ranks"
    finally:
        kill_all(proc, pids)
    assert list_segments(prefix), "a SIGKILLed launcher cannot clean up by itself"
    result = CliRunner().invoke(app, ["run", "--cleanup"])
    assert result.exit_code == 0, result.output
    assert "removed" in result.output
    assert list_segments(prefix) == []
