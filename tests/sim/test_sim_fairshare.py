"""Max-min fair sharing: a hand-worked case and the properties every solution must have."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from scaleup.errors import UsageError
from scaleup.sim.fairshare import (
    SOLVERS,
    equal_share,
    get_solver,
    maxmin,
    maxmin_columns,
    maxmin_entries,
    sparse_matvec,
)


def test_three_flows_by_hand() -> None:
    # Channels A (cap 10) and B (cap 4). Flow 0 crosses A, flow 1 crosses A and B, flow 2 B.
    # Filling: all rise to 2, B saturates (2 + 2 = 4), flows 1 and 2 freeze at 2;
    # flow 0 rises alone until A saturates: 10 - 2 = 8.
    usage = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    assert maxmin(usage, np.array([10.0, 4.0])).tolist() == [8.0, 2.0, 2.0]


def test_two_flows_on_one_channel_get_half_each() -> None:
    assert maxmin(np.ones((1, 2)), np.array([10.0])).tolist() == [5.0, 5.0]


def test_counts_bounds_and_fractional_coefficients() -> None:
    # var 0 = 1 flow bounded at 1; var 1 = 3 identical flows: (10 - 1) / 3 each
    assert maxmin(
        np.ones((1, 2)), np.array([10.0]), count=np.array([1, 3]), bound=np.array([1.0, np.inf])
    ).tolist() == [1.0, 3.0]
    # one transfer split over 18 planes (1/18 each), 18 channels of capacity 1: rate 18
    split = np.full((18, 1), 1.0 / 18.0)
    assert maxmin(split, np.ones(18))[0] == pytest.approx(18.0)


def test_sparse_and_dense_agree() -> None:
    rng = np.random.default_rng(1)
    dense = (rng.random((30, 40)) < 0.2) * rng.random((30, 40))
    dense[0, :] += 0.01  # every variable crosses a constraint
    cap = rng.random(30) + 0.5
    assert np.allclose(maxmin(sp.csr_matrix(dense), cap), maxmin(dense, cap), rtol=1e-12)


@st.composite
def systems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n_c = draw(st.integers(1, 6))
    n_v = draw(st.integers(1, 8))
    cells = draw(
        st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0]), min_size=n_c * n_v, max_size=n_c * n_v)
    )
    usage = np.array(cells).reshape(n_c, n_v)
    usage[draw(st.integers(0, n_c - 1)), :] = np.maximum(
        usage[0, :], 0.25
    )  # every flow constrained
    cap = np.array(draw(st.lists(st.floats(0.5, 100.0), min_size=n_c, max_size=n_c)))
    return usage, cap


@given(systems())
def test_properties(system: tuple[np.ndarray, np.ndarray]) -> None:
    usage, cap = system
    rates = maxmin(usage, cap)
    load = usage @ rates
    assert np.all(rates > 0)
    assert np.all(load <= cap * (1 + 1e-9))  # no constraint over capacity
    saturated = load >= cap * (1 - 1e-9)
    for v in range(usage.shape[1]):  # work-conserving: a saturated bottleneck where v is max
        on = np.flatnonzero((usage[:, v] > 0) & saturated)
        assert any(rates[v] >= rates[usage[c] > 0].max() * (1 - 1e-9) for c in on)
    perm = np.random.default_rng(0).permutation(usage.shape[1])  # order-independent
    assert np.allclose(maxmin(usage[:, perm], cap)[np.argsort(perm)], rates, rtol=1e-12)


@given(systems(), st.data())
def test_columns_solver_is_the_entries_solver_bit_for_bit(
    system: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    usage, cap = system
    n_c, n_v = usage.shape
    count = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n_v, max_size=n_v)))
    csc = sp.csc_array(usage)
    col = np.repeat(np.arange(n_v), np.diff(csc.indptr))
    want = maxmin_entries(csc.indices, col, csc.data, cap, count)
    got = maxmin_columns(csc.indptr, csc.indices, csc.data, cap, count)
    assert np.array_equal(got, want)  # the same floats, not merely close
    assert np.array_equal(maxmin_columns(csc.indptr, csc.indices, csc.data, cap, count * 0),
                          np.zeros(n_v))  # fmt: skip


def test_columns_solver_leaves_a_variable_crossing_nothing_unbounded() -> None:
    # variable 1 has no entries: inf, as maxmin_entries says (the run then raises)
    rates = maxmin_columns(np.array([0, 1, 1]), np.array([0]), np.array([1.0]), np.array([4.0]),
                           np.array([2, 1]))  # fmt: skip
    assert rates.tolist() == [2.0, np.inf]


def test_a_drained_unloaded_constraint_does_not_stop_the_filling() -> None:
    """By hand: cap 10 and 2; flow 0 on constraint 0, flow 1 on both. Round 1 rises by 2
    (constraint 1: 2 / 1 before constraint 0: 10 / 2), flow 1 freezes at 2, 6 is left on
    constraint 0. Round 2: constraint 1 is drained and unloaded (its step 0 / 0 is no step),
    flow 0 rises by 6 to 8. No warning leaks out of the solvers."""
    usage = np.array([[1.0, 1.0], [0.0, 1.0]])
    cap, count = np.array([10.0, 2.0]), np.array([1, 1])
    csc = sp.csc_array(usage)
    col = np.repeat(np.arange(2), np.diff(csc.indptr))
    with np.errstate(all="raise"):
        entries = maxmin_entries(csc.indices, col, csc.data, cap, count)
        columns = maxmin_columns(csc.indptr, csc.indices, csc.data, cap, count)
    assert entries.tolist() == columns.tolist() == [8.0, 2.0]
    assert maxmin(usage, cap).tolist() == [8.0, 2.0]


def test_sparse_matvec_adds_in_entry_order_as_bincount_does() -> None:
    rng = np.random.default_rng(3)
    a = sp.csc_array((rng.random((40, 25)) < 0.3) * rng.random((40, 25)))
    x = rng.random(25)
    col = np.repeat(np.arange(25), np.diff(a.indptr))
    want = np.bincount(a.indices, weights=a.data * x[col], minlength=40)
    assert np.array_equal(sparse_matvec("csc", a.indptr, a.indices, a.data, x, 40), want)
    y = rng.random(40)  # the same arrays read as CSR are the transpose
    got = sparse_matvec("csr", a.indptr, a.indices, a.data, y, 25)
    assert np.allclose(got, a.T @ y, rtol=1e-12)


def test_registry() -> None:
    assert get_solver("maxmin") is maxmin
    assert SOLVERS["equal_share"] is equal_share
    with pytest.raises(UsageError, match="unknown solver"):
        get_solver("nope")
    # equal_share is not work-conserving: flow 0 leaves channel A partly idle
    usage = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    assert equal_share(usage, np.array([10.0, 4.0])).tolist() == [5.0, 2.0, 2.0]
