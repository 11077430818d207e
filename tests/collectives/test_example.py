"""The user-written 2D-ring example builds in a few lines and verifies."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from scaleup.collectives.verify import verify

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_algorithm_2d_ring.py"


@pytest.mark.parametrize(("rows", "cols", "count"), [(2, 4, 1000), (3, 3, 7), (1, 5, 0), (4, 2, 1)])
def test_2d_ring_example_verifies(rows: int, cols: int, count: int) -> None:
    spec = importlib.util.spec_from_file_location("user_algorithm_2d_ring", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    schedule = module.two_d_ring(rows, cols, count)
    for dtype in ("int32", "float16"):
        verify(schedule, dtype)
