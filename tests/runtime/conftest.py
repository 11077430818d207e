"""Runtime test fixtures: no shared-memory segment may outlive the suite; mpiexec or a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import scaleup
from scaleup.runtime.measure import mpiexec_path
from scaleup.runtime.shm import PREFIX, list_segments


@pytest.fixture(scope="session", autouse=True)
def no_leftover_segments() -> Iterator[None]:
    """Compare /dev/shm before and after the suite: the runs this process launched.

    Only names carrying this process's pid: other suites may run at the same time on the same
    machine. Tests that start a launcher process check that run's own prefix.
    """
    mine = f"{PREFIX}{os.getpid()}-"
    before = set(list_segments(mine))
    yield
    left = set(list_segments(mine)) - before
    assert not left, f"shared-memory segments left behind: {sorted(left)}"


@pytest.fixture(scope="session")
def mpiexec() -> str:
    """The path of a working mpiexec (mpi4py importable, one rank starts), else skip."""
    pytest.importorskip("mpi4py")
    path = mpiexec_path()
    if path is None:
        pytest.skip("no mpiexec")
    probe = subprocess.run(
        [path, "-n", "1", sys.executable, "-c", "pass"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("mpiexec does not run here")
    return path


@pytest.fixture
def run_mpi(mpiexec: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_mpi(ranks, script, *args)``: a script of this folder under mpiexec.

    The ranks import the scaleup under test (this checkout), not whichever one is installed.
    """
    here = Path(__file__).resolve().parent
    package_root = str(Path(scaleup.__file__).resolve().parents[1])
    path = os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}

    def run(ranks: int, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [mpiexec, "-n", str(ranks), sys.executable, str(here / script), *args],
            cwd=here, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    return run
