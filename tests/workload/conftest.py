"""Planner tests: the local stand-in for the simulator's collective timer, as a fixture."""

from __future__ import annotations

import pytest
from workload_fake_timer import fake_collective_time_s


@pytest.fixture
def fake_timer():
    """The closed-form stand-in for ``scaleup.tune.collective_time_s``."""
    return fake_collective_time_s
