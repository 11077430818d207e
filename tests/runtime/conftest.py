"""Runtime test fixtures: no shared-memory segment may outlive the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaleup.runtime.shm import PREFIX, list_segments


@pytest.fixture(scope="session", autouse=True)
def no_leftover_segments() -> Iterator[None]:
    """Compare /dev/shm before and after the whole runtime suite (only scaleup's prefix)."""
    before = set(list_segments(PREFIX))
    yield
    left = set(list_segments(PREFIX)) - before
    assert not left, f"shared-memory segments left behind: {sorted(left)}"
