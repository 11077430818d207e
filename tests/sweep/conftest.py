"""Fixtures for the sweep tests: kind registries with the cheap fake kinds."""

from __future__ import annotations

import pytest
import sweep_fake_kinds

from scaleup.sweep import KINDS

FAKE = sweep_fake_kinds.__name__


@pytest.fixture
def fake_kinds() -> dict[str, str]:
    """The default registry plus ``square``/``failing``; ``bench``/``plan`` replaced by fakes."""
    return {
        **KINDS,
        "square": f"{FAKE}:square",
        "failing": f"{FAKE}:failing",
        "slow_failing": f"{FAKE}:slow_failing",
        "bench": f"{FAKE}:fake_bench",
        "plan": f"{FAKE}:fake_plan",
    }
