"""Straggler ranks and start skew (:mod:`scaleup.sim.straggler`): hand-worked known answers on a
2-rank ring, identities, and properties (a straggler never speeds anything up, time grows with F).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError
from scaleup.sim import compile_schedule
from scaleup.sim.protocols import protocol
from scaleup.sim.simulate import CompiledSchedule
from scaleup.sim.straggler import Stragglers
from scaleup.topology import resolve_topology
from scaleup.topology.generators import full_mesh

# Hand-worked figures of a ring all_reduce of 2^24 float32 (S = 64 MiB) on full_mesh(2, "H100"),
# one NVLink4 per direction, simple protocol, one channel. Each rank first copies its half into
# its output (local copy), then step 0 reduces a half across (each rank's receive), step 1
# copies the reduced half back.
START_US = 12.4  # host launch 4 us + NCCL ring base latency 8.4 us
HALF_B = 2**25  # bytes of one half, moved by each op
LINK_B_PER_US = 20.6e3  # nvlink4 channel at its payload efficiency: 20.6 GB/s
HBM_B_PER_US = 2780.5e3  # H100 HBM at HBM_EFFICIENCY
STEP_US = 3.4  # NCCL simple step latency on NVLink (scaled by F)
ROUTE_US = 0.1  # NVLink wire latency (not scaled: the accelerator does not clock it)
COPY_US = HALF_B / (HBM_B_PER_US / 2)  # local copy: a read and a write of HBM, 24.136 us
LINK_US = HALF_B / LINK_B_PER_US  # 1628.856 us


def _ring(n: int = 2, count: int = 2**24, channels: int = 1, topo=None) -> CompiledSchedule:
    topology = full_mesh(n, "H100") if topo is None else topo
    spec = CollectiveSpec("all_reduce", n, count)
    return compile_schedule(build_schedule("ring", spec, channels=channels), topology)


def test_hand_figures_match_the_unperturbed_run():
    # T = start + copy + 2 x (step + wire + bytes / link) = 3301.247 us
    t_us = START_US + COPY_US + 2 * (STEP_US + ROUTE_US + LINK_US)
    assert _ring().run("simple").time_us == pytest.approx(t_us, rel=1e-12)


def test_straggler_1_3_on_a_2_rank_ring_worked_by_hand():
    """Rank 1 x1.3: both links touch it, so every fabric op runs at 1/1.3 of the link and pays
    1.3 x the step latency; rank 1's local copy runs at 1/1.3 of its HBM. The bandwidth term is
    x1.3 and the step latencies x1.3; the wire latency is not. One second-order term: rank 0's
    receive (1->0) starts first (its copy is not slowed), so rank 0's step-1 copy (0->1) begins
    while rank 1's step-0 receive (0->1) still has bytes left, and the two share the link."""
    f = 1.3
    lat = f * STEP_US + ROUTE_US  # 4.52 us per fabric op
    slow_link = LINK_B_PER_US / f  # 15.846 GB/s
    # rank 1's copy (its HBM / 1.3) overlaps the end of op 1->0's latency: from t_op3 it shares
    # rank 1's HBM with op 1->0's read (one access per byte)
    t_op3 = START_US + COPY_US + lat  # 1->0 moves bytes from here (rank 0 copied at full rate)
    hbm1 = HBM_B_PER_US / f
    moved = (t_op3 - START_US) * hbm1 / 2
    copy1_end = t_op3 + (HALF_B - moved) / ((hbm1 - slow_link) / 2)
    t_op2 = copy1_end + lat  # 0->1 (step 0) moves bytes from here
    t_op5 = t_op3 + HALF_B / slow_link + lat  # 0->1 (step 1) follows 1->0 and joins the link
    alone_end = t_op2 + HALF_B / slow_link  # where 0->1 (step 0) would end alone
    op2_end = t_op5 + 2 * (alone_end - t_op5)  # its remaining bytes at half the link
    t_us = op2_end + lat + HALF_B / slow_link  # then 1->0 (step 1) alone
    assert t_us == pytest.approx(4290.603, abs=1e-3)
    result = _ring().run("simple", stragglers=Stragglers(factors={1: f}))
    assert result.time_us == pytest.approx(t_us, rel=1e-9)
    # the first-order answer: bandwidth and step latencies x1.3, the rest unchanged
    first_order = START_US + f * COPY_US + 2 * (f * STEP_US + ROUTE_US + f * LINK_US)
    assert result.time_us == pytest.approx(first_order, rel=1e-3)


def test_every_rank_slowed_dilates_everything_but_the_wire():
    """All ranks x F: the run is the unperturbed one with every rate / F and every step latency
    x F, exactly (launch and wire latency unchanged)."""
    f = 1.3
    t_us = START_US + f * COPY_US + 2 * (f * STEP_US + ROUTE_US + f * LINK_US)
    result = _ring().run("simple", stragglers=Stragglers(factors={0: f, 1: f}))
    assert result.time_us == pytest.approx(t_us, rel=1e-12)


def test_one_late_rank_on_a_2_rank_ring_worked_by_hand():
    """Rank 1 late by d = 10 ms: every fabric op touches it, so nothing crosses before
    start + d; rank 0's copy is done by then. After d, op 1->0 starts at once while rank 1 still
    copies (sharing its HBM with that op's read), then the same overlap of 0->1 steps as above:
    T + d + 20.94 us."""
    d_us = 1e4
    lat = STEP_US + ROUTE_US
    t0 = START_US + d_us  # rank 1 arrives
    t_op3 = t0 + lat  # 1->0 (step 0) moves bytes from here
    moved = lat * HBM_B_PER_US / 2  # rank 1's copy alone until then
    copy1_end = t_op3 + (HALF_B - moved) / ((HBM_B_PER_US - LINK_B_PER_US) / 2)
    t_op2 = copy1_end + lat
    t_op5 = t_op3 + LINK_US + lat
    alone_end = t_op2 + LINK_US
    op2_end = t_op5 + 2 * (alone_end - t_op5)
    t_us = op2_end + lat + LINK_US
    c = _ring()
    base_us = c.run("simple").time_us
    result = c.run("simple", stragglers=Stragglers(skew_s={1: d_us * 1e-6}))
    assert result.time_us == pytest.approx(t_us, rel=1e-9)
    assert result.time_us - base_us - d_us == pytest.approx(20.944, abs=1e-3)


def test_every_rank_late_by_d_shifts_the_run_by_d():
    c = _ring(n=4, count=2**20)
    base_s = c.run("simple").time_s
    late = c.run("simple", stragglers=Stragglers(skew_s=dict.fromkeys(range(4), 1e-3)))
    assert late.time_s == pytest.approx(base_s + 1e-3, rel=1e-12)


def test_identity_is_the_unperturbed_run_bit_for_bit():
    c = _ring(n=4, count=2**20)
    base = c.run("simple")
    same = c.run("simple", stragglers=Stragglers(factors={2: 1.0}, skew_s={1: 0.0}))
    assert same.time_s == base.time_s
    np.testing.assert_array_equal(same.op_end_s, base.op_end_s)


def test_straggler_runs_exact_and_symmetric_fast_path_is_not_used():
    """dgx-h100 ring: the unperturbed run uses flow classes; a straggler run must equal its
    exact run (it never takes the quotient)."""
    c = _ring(n=8, count=2**22, channels=8, topo=resolve_topology("dgx-h100"))
    s = Stragglers(factors={3: 1.3})
    fast = c.run("simple", stragglers=s)
    assert c.quotient(protocol("simple"))
    exact = c.run("simple", stragglers=s, exact=True)
    assert fast.time_s == exact.time_s
    assert fast.time_s > c.run("simple").time_s


def test_bad_stragglers_raise_usage_errors_naming_the_flag():
    with pytest.raises(UsageError, match="--straggler.*>= 1"):
        Stragglers(factors={1: 0.5})
    with pytest.raises(UsageError, match="--straggler.*>= 1"):
        Stragglers(factors={1: float("nan")})
    with pytest.raises(UsageError, match="--skew-us.*>= 0"):
        Stragglers(skew_s={1: -1e-6})
    with pytest.raises(UsageError, match="--straggler.*rank 2 is out of range"):
        _ring().run("simple", stragglers=Stragglers(factors={2: 1.3}))


_RING4 = _ring(n=4, count=2**18)
_BASE4 = _RING4.run("simple").time_s


@settings(max_examples=25, deadline=None)
@given(rank=st.integers(0, 3), f=st.floats(1.0, 3.0), g=st.floats(1.0, 3.0))
def test_a_straggler_never_speeds_up_and_time_grows_with_f(rank: int, f: float, g: float):
    lo, hi = min(f, g), max(f, g)
    t_lo = _RING4.run("simple", stragglers=Stragglers(factors={rank: lo})).time_s
    t_hi = _RING4.run("simple", stragglers=Stragglers(factors={rank: hi})).time_s
    assert t_lo * (1 + 1e-12) >= _BASE4
    assert t_lo <= t_hi * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(rank=st.integers(0, 3), d=st.floats(0.0, 1e-3))
def test_a_late_rank_never_speeds_up_and_waits_for_itself(rank: int, d: float):
    t = _RING4.run("simple", stragglers=Stragglers(skew_s={rank: d})).time_s
    assert t >= _BASE4 * (1 - 1e-12)
    assert t >= d + _RING4.start_s(protocol("simple"))


def test_connections_stay_in_order_so_an_8_rank_ring_slows_by_about_f():
    """dgx-h100, ring all_reduce of 256 MiB, one channel: rank 1 x1.3 slows the time above launch
    by ~1.3 (the bandwidth term by F, wire latencies not), never more; rank 1 late by 10 ms ends
    at T + d (connections first in, first out: no op overtakes a late one)."""
    c = _ring(8, 2**26, topo=resolve_topology("dgx-h100"))
    start = c.start_s(protocol("simple"))
    plain = c.run("simple").time_s
    slow = c.run("simple", stragglers=Stragglers(factors={1: 1.3})).time_s
    assert 1.28 < (slow - start) / (plain - start) <= 1.3
    late = c.run("simple", stragglers=Stragglers(skew_s={1: 10e-3})).time_s
    assert 0.0 <= late - (plain + 10e-3) < 2e-6
