"""simulate() == the closed-form alpha-beta oracle on contention-free fabrics."""

from __future__ import annotations

import pytest
from helpers_sim import alpha_beta, ring_all_reduce, uniform_switch
from hypothesis import given
from hypothesis import strategies as st

from scaleup import hardware
from scaleup.collectives import cost
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UnsupportedCollective
from scaleup.sim import params as P
from scaleup.sim import simulate


@given(
    n=st.integers(2, 8),
    blocks=st.integers(1, 2**22),
    protocol=st.sampled_from(["simple", "ll", "ll128"]),
)
def test_ring_all_gather_matches_cost(n: int, blocks: int, protocol: str) -> None:
    topo = uniform_switch(n)
    spec = CollectiveSpec("all_gather", nranks=n, count=n * blocks)
    r = simulate(build_schedule("ring", spec), topo, protocol=protocol)
    ab = alpha_beta(topo, protocol=protocol)
    expected = cost.time_s(
        "ring",
        "all_gather",
        n,
        4 * n * blocks,
        alpha_s=ab.alpha_s,
        beta_bytes_per_s=ab.beta_bytes_per_s,
        launch_s=ab.launch_s,
    )
    assert r.time_s == pytest.approx(expected, rel=1e-9)


@given(n=st.integers(2, 8), per=st.integers(1, 2**20))
def test_ring_all_reduce_dataflow_matches_cost(n: int, per: int) -> None:
    topo = uniform_switch(n)
    r = simulate(ring_all_reduce(n, n * per), topo)
    ab = alpha_beta(topo)
    expected = cost.time_s(
        "ring",
        "all_reduce",
        n,
        4 * n * per,
        alpha_s=ab.alpha_s,
        beta_bytes_per_s=ab.beta_bytes_per_s,
        launch_s=ab.launch_s,
    )
    # + the receiver's one-block copy of its own input before step 0 (the IR's reduce is
    # dst = dst op src; later copies overlap the previous step): a local op, HBM-bound
    hbm = hardware.accelerator("H100").hbm_bytes_per_s * P.HBM_EFFICIENCY
    first_copy = 4 * per * P.LOCAL_COPY_HBM_ACCESSES / hbm
    assert r.time_s == pytest.approx(expected + first_copy, rel=1e-9)


def test_closed_forms() -> None:
    assert (
        cost.time_s("ring", "all_reduce", 1, 1e9, alpha_s=1.0, beta_bytes_per_s=1.0, launch_s=2.0)
        == 2.0
    )
    assert cost.time_s("any", "send_recv", 2, 10.0, alpha_s=1.0, beta_bytes_per_s=5.0) == 3.0
    nvls = cost.time_s("nvls", "all_reduce", 8, 9e9, alpha_s=0.0, beta_bytes_per_s=1e9)
    assert nvls == pytest.approx(9 * 9 / 8)  # S(1 + 1/n)/beta
    with pytest.raises(UnsupportedCollective):
        cost.time_s("nvls", "all_to_all", 8, 1.0, alpha_s=0.0, beta_bytes_per_s=1.0)
