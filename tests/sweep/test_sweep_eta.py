"""The ETA by cost class (issue item 4): a pure function, and what a sweep reports with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup.sweep import SweepProgress, run_sweep
from scaleup.sweep.progress import cost_class, estimate_remaining_s


def test_dear_points_after_cheap_ones_are_not_seconds_away() -> None:
    """100 cheap points (10 ms) done in 1 s, one dear point (5 s) done; four dear ones left.
    Counting points says 4 x 6 s / 101 = 0.24 s; by class it is 4 x 5 s of work at the rate
    seen (6 s of wall time for 6 s of work): 20 s."""
    done = {"bench|ualink-pod:n=1024": (1, 5.0), "bench|dgx-h100": (100, 1.0)}
    eta = estimate_remaining_s(6.0, done, {"bench|ualink-pod:n=1024": 4})
    assert eta == pytest.approx(20.0)


def test_parallel_workers_shorten_the_eta() -> None:
    """Four workers: 8 s of work in 2 s of wall time; 8 s of work left is 2 s away."""
    assert estimate_remaining_s(2.0, {"a": (8, 8.0)}, {"a": 8}) == pytest.approx(2.0)


def test_a_class_not_seen_yet_costs_the_mean_of_all() -> None:
    done = {"a": (3, 3.0), "b": (1, 5.0)}  # mean 2 s
    assert estimate_remaining_s(8.0, done, {"c": 2}) == pytest.approx(4.0)


def test_before_any_point_or_after_the_last() -> None:
    assert estimate_remaining_s(5.0, {}, {"a": 3}) is None
    assert estimate_remaining_s(5.0, {"a": (2, 0.0)}, {"a": 3}) is None
    assert estimate_remaining_s(5.0, {"a": (2, 1.0)}, {}) == 0.0
    assert estimate_remaining_s(5.0, {}, {"a": 0}) == 0.0


def test_cost_class_is_kind_and_topology() -> None:
    bench = {"kind": "bench", "topology": "dgx-h100", "bytes": 8}
    assert cost_class(bench) == cost_class({**bench, "bytes": 1 << 30})
    assert cost_class(bench) != cost_class({**bench, "topology": "2xdgx-h100"})
    assert cost_class(bench) != cost_class({**bench, "kind": "plan"})


_classes = st.sampled_from("abcd")
_done = st.dictionaries(_classes, st.tuples(st.integers(1, 1000), st.floats(1e-3, 1e4)), min_size=1)
_left = st.dictionaries(_classes, st.integers(0, 1000))


@given(st.floats(1e-3, 1e5), _done, _left, _classes)
def test_eta_properties(elapsed: float, done: Any, left: Any, extra: str) -> None:
    """Non-negative; linear in the wall time seen; one more point left never shortens it;
    with one class, the classic count-based ETA."""
    eta = estimate_remaining_s(elapsed, done, left)
    assert eta is not None
    assert eta >= 0
    assert estimate_remaining_s(2 * elapsed, done, left) == pytest.approx(2 * eta)
    more = {**left, extra: left.get(extra, 0) + 1}
    assert estimate_remaining_s(elapsed, done, more) >= eta * (1 - 1e-9)  # type: ignore[operator]
    n, seconds = next(iter(done.values()))
    single = estimate_remaining_s(elapsed, {"a": (n, seconds)}, {"a": 7})
    assert single == pytest.approx(elapsed / n * 7)


def test_a_sweep_reports_its_eta(tmp_path: Path, fake_kinds: Any) -> None:
    seen: list[SweepProgress] = []
    points = [{"kind": "slow_failing", "x": x} for x in range(6)]
    out = tmp_path / "r.parquet"
    run_sweep(points, out, serial=True, batch_size=2, progress=seen.append, kinds=fake_kinds)
    assert seen[0].eta_s is None, "nothing finished yet"
    assert all(p.eta_s is not None for p in seen[1:])
    assert seen[-1].eta_s == 0.0
    assert 0 < seen[1].eta_s < 60  # type: ignore[operator]
