"""Runtime test fixtures: no shared-memory segment may outlive the suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

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
