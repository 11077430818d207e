"""Group rows (scaleup.sim.factored): the same rates and flows as the plain merged system."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_nvls_tree_pattern import _spec_params

from scaleup.collectives.algorithms import build_schedule
from scaleup.sim import compile_schedule
from scaleup.sim.factored import MIN_GROUP, factor_groups, onto_members
from scaleup.sim.fairshare import maxmin_columns, maxmin_entries, sparse_matvec
from scaleup.sim.protocols import protocol
from scaleup.topology import resolve_topology

RTOL = 1e-9  # the same sums in another order
#: the module (``scaleup.sim.simulate`` the attribute is the function of that name)
sim_simulate = importlib.import_module("scaleup.sim.simulate")


def _csc(columns: list[dict[int, tuple[float, float]]]) -> tuple[np.ndarray, ...]:
    """``(col_ptr, row, use, carried)`` of columns given as {row: (use, carried)}."""
    ptr, row, use, car = [0], [], [], []
    for col in columns:
        for r in sorted(col):
            row.append(r)
            use.append(col[r][0])
            car.append(col[r][1])
        ptr.append(len(row))
    return (np.array(ptr), np.array(row, dtype=np.int64), np.array(use), np.array(car))


def _merged(columns: list[dict[int, tuple[float, float]]], n_c: int) -> tuple[np.ndarray, ...]:
    ptr, row, use, car = _csc(columns)
    return ptr, row, use, np.ones(n_c), car, np.arange(n_c)


def _rack_columns(racks: int, size: int, rng: np.random.Generator) -> list[dict]:
    """NVLS-like columns: per rack, blocks of HBMs (rows 0..size-1 of the rack), legs up and
    legs down; a reduction by GPU g loads every HBM (its own twice), every leg up, and its own
    leg down; a multicast loads every HBM, every leg down and its own leg up. Plus short
    columns (a ring step) on single legs."""
    cols: list[dict] = []
    for k in range(racks):
        hbm, up, down = (k * 3 * size + j * size for j in range(3))
        u, w = float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.5, 2.0))
        for g in range(size):
            reduce = {hbm + i: (u, u) for i in range(size)}
            reduce[hbm + g] = (2 * u, 2 * u)
            reduce.update({up + i: (w, w * 0.5) for i in range(size)})
            reduce[down + g] = (w, w * 0.5)
            multicast = {hbm + i: (u, u) for i in range(size)}
            multicast.update({down + i: (w, w) for i in range(size)})
            multicast[up + g] = (w, w)
            cols += [reduce, multicast]
        cols += [{up + g: (1.0, 1.0), down + (g + 1) % size: (1.0, 1.0)} for g in range(size)]
    return cols


def _rates_and_flow(merged, f, active, cnt):
    """Rates and payload flow per constraint, plain and factored, on the active columns."""
    ptr, row, use, cap, car, _ = merged
    idx = np.concatenate([np.arange(ptr[v], ptr[v + 1]) for v in active])
    col = np.repeat(np.arange(len(active)), np.diff(ptr)[active])
    plain = maxmin_entries(row[idx], col, use[idx], cap, cnt)
    plain_flow = np.bincount(row[idx], weights=car[idx] * (plain * cnt)[col], minlength=len(cap))
    f_idx = np.concatenate([np.arange(f.col_ptr[v], f.col_ptr[v + 1]) for v in active])
    f_ptr = np.r_[0, np.cumsum(np.diff(f.col_ptr)[active])]
    members = (f.member_ptr, f.member_row, f.member_group)
    rates = maxmin_columns(f_ptr, f.row[f_idx], f.use[f_idx], cap, cnt, members)
    n_rows = f.n_c + len(f.member_ptr) - 1
    flow = sparse_matvec("csc", f_ptr, f.row[f_idx], f.carried[f_idx], rates * cnt, n_rows)
    return plain, plain_flow, rates, onto_members(flow, f)


def test_nvls_columns_fold_into_three_blocks_per_rack() -> None:
    rng = np.random.default_rng(1)
    size = 12
    cols = _rack_columns(2, size, rng)
    merged = _merged(cols, 2 * 3 * size)
    f = factor_groups(merged)
    assert f is not None
    assert len(f.member_ptr) - 1 == 6  # HBMs, legs up, legs down of each rack
    assert sorted(np.diff(f.member_ptr)) == [size] * 6
    # a reduction: 3 entries (HBM and legs-up groups, its leg down) and its own HBM's residual
    assert np.diff(f.col_ptr)[0] == 4
    assert len(f.row) < len(merged[1]) / 5
    active = np.arange(len(cols))
    cnt = rng.integers(1, 5, len(active)).astype(float)
    plain, plain_flow, rates, flow = _rates_and_flow(merged, f, active, cnt)
    np.testing.assert_allclose(rates, plain, rtol=RTOL)
    np.testing.assert_allclose(flow, plain_flow, rtol=RTOL, atol=1e-12 * plain_flow.max())


@settings(max_examples=30, deadline=None)
@given(
    racks=st.integers(1, 3),
    size=st.integers(MIN_GROUP, 20),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_factored_rates_and_flows_are_the_plain_ones(racks, size, seed, data) -> None:
    rng = np.random.default_rng(seed)
    cols = _rack_columns(racks, size, rng)
    n_c = racks * 3 * size
    merged = _merged(cols, n_c)
    merged = (*merged[:3], rng.uniform(0.5, 3.0, n_c), *merged[4:])  # uneven capacities
    f = factor_groups(merged)
    assert f is not None
    picked = data.draw(st.lists(st.integers(0, len(cols) - 1), min_size=1, unique=True))
    active = np.array(sorted(picked))
    cnt = np.array(data.draw(st.lists(st.integers(1, 6), min_size=len(active),
                                      max_size=len(active))), dtype=float)  # fmt: skip
    plain, plain_flow, rates, flow = _rates_and_flow(merged, f, active, cnt)
    np.testing.assert_allclose(rates, plain, rtol=RTOL)
    np.testing.assert_allclose(flow, plain_flow, rtol=RTOL, atol=1e-12 * plain_flow.max())


def test_systems_without_wide_columns_are_left_alone() -> None:
    ring = [{i: (1.0, 1.0), (i + 1) % 20: (1.0, 1.0)} for i in range(20)]
    assert factor_groups(_merged(ring, 20)) is None
    rng = np.random.default_rng(2)
    wide = _rack_columns(1, 10, rng)[:2]  # two wide columns among many short ones: too few
    assert factor_groups(_merged(wide + ring * 10, 30)) is None
    assert factor_groups(_merged([], 4)) is None


def test_nvl72_racks_run_the_same_with_group_rows(monkeypatch) -> None:
    """Two NVL72 racks' NVLS-Tree: the run on group rows is the plain run, to rounding."""
    topo = resolve_topology("2xgb200-nvl72")
    spec, params = _spec_params(topo, 2, 1)
    schedule = build_schedule("nvls_tree", spec, **params)
    grouped = compile_schedule(schedule, topo)
    assert grouped.factored_system(protocol("simple")) is not None
    fast = grouped.run("simple", scale=1.0, exact=True)
    monkeypatch.setattr(sim_simulate, "factor_groups", lambda merged: None)
    plain_compiled = compile_schedule(schedule, topo)
    assert plain_compiled.factored_system(protocol("simple")) is None
    plain = plain_compiled.run("simple", scale=1.0, exact=True)
    assert fast.time_s == pytest.approx(plain.time_s, rel=RTOL)
    np.testing.assert_allclose(fast.op_end_s, plain.op_end_s, rtol=RTOL)
    scale = plain.constraint_bytes.max()
    np.testing.assert_allclose(fast.constraint_bytes, plain.constraint_bytes, rtol=RTOL,
                               atol=RTOL * scale)  # fmt: skip
