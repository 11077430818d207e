"""The checked set: the structure that is timed is the structure that is verified."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms import ALGORITHMS, build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScheduleError, UnsupportedCollective, UsageError
from scaleup.tune import checks
from scaleup.tune.checks import REFERENCE_BLOCKS, CheckedSet, is_scaled_copy, reduced_copy

PAIRS = [(name, c) for name, a in ALGORITHMS.items() for c in a.collectives]


def _reference(name: str, collective: str, n: int, channels: int, chunks: int):
    """The schedule the search times: built at n x channels x chunks x REFERENCE_BLOCKS."""
    params = {"ranks_per_node": 2} if name == "hierarchical" else {}
    spec = CollectiveSpec(collective, n, n * channels * chunks * REFERENCE_BLOCKS, root=n - 1)
    return build_schedule(name, spec, channels=channels, chunks=chunks, **params)


@settings(max_examples=40, deadline=None)
@given(
    pair=st.sampled_from(PAIRS),
    n=st.sampled_from([2, 3, 4, 5, 6, 7, 8, 12]),
    channels=st.integers(1, 4),
    chunks=st.sampled_from([1, 2, 4]),
)
def test_every_timed_structure_has_a_small_scaled_twin(pair, n, channels, chunks):
    """For every builder the reference schedule is a small one scaled (at most 8 elements per
    block), so verifying the small one verifies the timed structure."""
    name, collective = pair
    try:
        timed = _reference(name, collective, n, channels, chunks)
    except (UnsupportedCollective, UsageError):
        return
    reduced, factor = reduced_copy(timed)
    assert factor >= REFERENCE_BLOCKS // 8
    assert is_scaled_copy(reduced, timed, factor)
    assert reduced.params == timed.params  # same channels, chunks, orders, shot


def test_scaled_copy_is_exact():
    ring = _reference("ring", "all_reduce", 4, 2, 1)
    small = build_schedule("ring", CollectiveSpec("all_reduce", 4, 8), channels=2)
    other = build_schedule("ring", CollectiveSpec("all_reduce", 4, 8), channels=1)
    assert is_scaled_copy(small, ring, REFERENCE_BLOCKS)
    assert not is_scaled_copy(other, ring, REFERENCE_BLOCKS)
    assert not is_scaled_copy(small, ring, REFERENCE_BLOCKS // 2)


def test_verdicts_are_kept_per_structure():
    checked = CheckedSet()
    timed = _reference("tree", "all_reduce", 8, 4, 4)
    assert checked.check_exact(timed) == "exact"
    assert checked.check_exact(_reference("tree", "all_reduce", 8, 4, 4)) == "exact"
    assert len(checked) == 1
    assert checked.check_exact(_reference("tree", "all_reduce", 8, 4, 2)) == "exact"
    assert len(checked) == 2  # another chunk count is another structure
    assert checked.check_lanes(_reference("tree", "all_reduce", 8, 4, 4)) == "lanes"
    assert checked.check_lanes(_reference("tree", "all_reduce", 8, 16, 8)) == "lanes"
    assert len(checked) == 3  # one lanes check (2 channels, 2 chunks) serves both


def test_a_wrong_timed_structure_is_refused():
    """Mutation: drop an op from the timed structure. It is no scaled copy of the builder's
    output any more, so the exact check replays it as it is and the replay catches it."""
    timed = _reference("ring", "all_reduce", 4, 2, 1).without_op(3)
    with pytest.raises(ScheduleError):
        CheckedSet().check_exact(timed)


def test_large_structures_are_checked_in_lanes(monkeypatch):
    timed = _reference("ring", "all_reduce", 8, 16, 1)
    monkeypatch.setattr(checks, "VERIFY_MAX_OPERANDS", checks.operands(timed) - 1)
    assert CheckedSet().check_exact(timed) == "lanes"
    monkeypatch.setattr(checks, "VERIFY_MAX_OPS", 10)  # the lanes' budget
    assert CheckedSet().check_exact(timed) == "unchecked"


def test_the_replay_budget_counts_operands_not_ops(monkeypatch):
    """An in-switch op reads every rank and writes every rank: a structure of few but wide ops
    costs its operands to replay, and is judged by them."""
    timed = _reference("nvls", "all_reduce", 8, 4, 1)
    budget = checks.operands(timed) - 1
    assert 4 * timed.n_ops < budget  # 8 sources or 8 destinations an op: the ops would fit
    monkeypatch.setattr(checks, "VERIFY_MAX_OPERANDS", budget)
    assert CheckedSet().check_exact(timed) == "lanes"  # the lanes (2 channels) do
    monkeypatch.setattr(checks, "VERIFY_MAX_OPERANDS", checks.operands(timed))
    assert CheckedSet().check_exact(timed) == "exact"
