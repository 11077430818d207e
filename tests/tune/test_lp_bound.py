"""``tune.lp_bound``: the collective's LP lower bound on a fabric, worked by hand, never above
a simulated time, and refusing what it cannot bound."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleup.errors import ScaleupError, UsageError
from scaleup.sim.paths import link_efficiency
from scaleup.topology import resolve_topology
from scaleup.topology.generators import switched
from scaleup.topology.model import Device, Link, Topology
from scaleup.tune import BenchRequest
from scaleup.tune import lp_bound as lp
from scaleup.tune.explain import explain_sweep
from scaleup.tune.lp_bound import cut_need, lp_lower_bound

GIB = 1 << 30
#: One NVLink4 link per direction as the simulator runs it: 25 GB/s x 20.6/25 = 20.6 GB/s.
B4 = 25e9 * link_efficiency("nvlink4")


def _ring4() -> Topology:
    """4 H100 in a ring g0-g1-g2-g3-g0, one NVLink4 link (B4 each way) per hop, no switch."""
    g = [Device.of(f"g{i}", "H100") for i in range(4)]
    return Topology("ring4", g, [Link(f"g{i}", f"g{(i + 1) % 4}", "nvlink4", 1) for i in range(4)])


def test_ring_of_four_by_hand():
    """Each GPU imports through 2 links (both directions of the ring used), so 2 B4 in.

    all_gather: each rank imports (n-1)/n S = 3/4 S over 2 B4: T = 3 S / (8 B4).
    all_reduce (no switch, so no in-network reduction): the ranks receive 2(n-1) S = 6 S in all
    over 4 x 2 B4 of import capacity: T = 6 S / (8 B4) = 2(n-1)/n S / (2 B4) = 3 S / (4 B4).
    all_to_all (multicommodity): per source, S/4 to each neighbour (1 hop) and S/4 to the
    opposite rank (2 hops) = S channel-bytes; 4 S over 8 channels of B4: T = S / (2 B4).
    broadcast: every non-root imports S over 2 B4: T = S / (2 B4).
    """
    t = _ring4()
    assert lp_lower_bound(t, "all_gather").time_s(GIB) == pytest.approx(3 * GIB / (8 * B4))
    reduce = lp_lower_bound(t, "all_reduce")
    assert not reduce.in_network_reduction
    assert reduce.time_s(GIB) == pytest.approx(3 * GIB / (4 * B4))
    a2a = lp_lower_bound(t, "all_to_all")
    assert a2a.formulation == "multicommodity"
    assert a2a.time_s(GIB) == pytest.approx(GIB / (2 * B4))
    assert lp_lower_bound(t, "broadcast", root=2).time_s(GIB) == pytest.approx(GIB / (2 * B4))


@pytest.mark.parametrize("n", [2, 4, 8])
def test_single_switch_by_hand(n):
    """n A100 behind one NVSwitch gen2 (no in-switch reduction), 12 NVLink3 links each: B =
    12 x 25 GB/s x 0.8 = 240 GB/s per direction per GPU. all_gather: (n-1)/n S / B (each rank
    imports the others' blocks); all_reduce: 2(n-1)/n S / B (the switch only forwards, so the
    total count 2(n-1) S over n B); reduce_scatter mirrors all_gather."""
    t = switched(n, "A100", "nvswitch2", links_per_plane=12)
    b = 12 * 25e9 * link_efficiency("nvlink3")
    s = (n - 1) / n * GIB
    assert lp_lower_bound(t, "all_gather").time_s(GIB) == pytest.approx(s / b)
    assert lp_lower_bound(t, "reduce_scatter").time_s(GIB) == pytest.approx(s / b)
    reduce = lp_lower_bound(t, "all_reduce")
    assert (reduce.formulation, reduce.in_network_reduction) == ("terminal flow", False)
    assert reduce.time_s(GIB) == pytest.approx(2 * s / b)


def test_in_switch_reduction_weakens_all_reduce_to_s_over_b():
    """The same single switch but NVSwitch gen3 (NVLink SHARP): a rank still imports S, but the
    switch may reduce, so the Patarasuk-Yuan count no longer holds: S / B, not 2(n-1)/n S / B."""
    t = switched(8, "H100", "nvswitch3", links_per_plane=18)
    reduce = lp_lower_bound(t, "all_reduce")
    assert reduce.in_network_reduction
    assert reduce.time_s(GIB) == pytest.approx(GIB / (18 * B4))


def test_dgx_h100_1gib_all_reduce_by_hand():
    """docs/models.md: 18 NVLink4 links x 20.6 GB/s = 370.8 GB/s per GPU per direction; NVLS
    switches, so the bound is S / 370.8 GB/s = 2895.7 us (busbw 2 x 7/8 x 370.8 = 648.9 GB/s);
    the tuner's nvls takes S (1 + 1/8) / (370.8 x 0.85) = 3832.6 us of link time plus latency."""
    dgx = resolve_topology("dgx-h100")
    _, (e,) = explain_sweep(dgx, BenchRequest(sizes_bytes=(GIB,)))
    bound = e.lp_bound
    assert bound.time_s == pytest.approx(GIB / 370.8e9, rel=1e-5)
    assert bound.time_s * 1e6 == pytest.approx(2895.7, abs=0.1)
    assert bound.busbw_gb_per_s == pytest.approx(2 * 7 / 8 * 370.8, rel=1e-5)
    assert e.algorithm == "nvls"
    assert bound.time_over_bound == pytest.approx(e.time_s / bound.time_s)
    assert bound.efficiency == pytest.approx(1 / bound.time_over_bound)
    assert 1.3 < bound.time_over_bound < 1.4  # 1/(0.85 x 8/9) = 1.32, plus latency


def test_cut_needs_by_hand():
    assert cut_need("reduce_scatter", [0], 4) == (0.75, 0.25)
    assert cut_need("all_to_all", [0, 1], 4) == (1.0, 1.0)  # 2 x 2 pairs x S/4 each way
    assert cut_need("broadcast", [1], 4, root=1) == (1.0, 0.0)
    assert cut_need("reduce", [1], 4, root=0) == (1.0, 0.0)
    assert cut_need("send_recv", [0, 1], 4) == (1.0, 1.0)  # 1 -> 2 out, 3 -> 0 in
    assert cut_need("all_reduce", [0, 1, 2, 3], 4) == (0.0, 0.0)  # nothing to cross


def test_over_the_size_limit_the_cut_bound_stands_with_a_note(monkeypatch):
    """With the LP capped away the cut bound (no routing) is used and says so; here it is the
    same number: on one switch tier each rank's import is the binding cut."""
    t = resolve_topology("dgx-h100")
    exact = lp_lower_bound(t, "all_gather")
    monkeypatch.setattr(lp, "MAX_LP_VARIABLES", 10)
    capped = lp_lower_bound(t, "all_gather")
    a2a = lp_lower_bound(t, "all_to_all")
    assert capped.formulation == "cut"
    assert "over 10" in capped.note
    assert capped.seconds_per_byte == pytest.approx(exact.seconds_per_byte)
    assert a2a.formulation == "cut"
    assert "hop-distance" in a2a.note


def test_two_servers_cut_binds_all_to_all():
    """2xdgx-h100: half of every rank's all_to_all data leaves its server, through 8 NICs:
    8 x 8 pairs x S/16 = 4 S each way over the server's NIC capacity."""
    t = resolve_topology("2xdgx-h100")
    m = lp_lower_bound(t, "all_to_all")
    nics = [c for c in t.channels if t.device(c.src).node == 0 and t.device(c.dst).node != 0]
    out_bytes_per_s = sum(c.bandwidth_bytes_per_s * link_efficiency(c.tech) for c in nics)
    assert m.time_s(GIB) >= 4 * GIB / out_bytes_per_s * (1 - 1e-6)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("all_scatter",), {}),
        (("all_reduce",), {"ranks": [0, 0]}),
        (("all_reduce",), {"ranks": [99]}),
        (("broadcast",), {"ranks": [0, 1], "root": 2}),
    ],
)
def test_bad_input_is_a_scaleup_error(args, kwargs):
    with pytest.raises(UsageError) as info:
        lp_lower_bound(resolve_topology("dgx-h100"), *args, **kwargs)
    assert isinstance(info.value, ScaleupError)


#: Small presets (each sweep simulates every surviving candidate).
_SMALL = ("dgx-h100", "mi300x-8", "h100-nvl-pair", "dgx1-v100", "trn2-16")
_TUNED = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    preset=st.sampled_from(_SMALL),
    collective=st.sampled_from(_TUNED),
    ranks=st.integers(2, 8),
    size_bytes=st.sampled_from([1 << 16, 1 << 22, 1 << 28]),
)
def test_the_bound_never_exceeds_a_simulated_time(preset, collective, ranks, size_bytes):
    """Every candidate the tuner simulated, of every algorithm, takes at least the LP bound."""
    t = resolve_topology(preset)
    n = min(ranks, len(t.accelerators))
    request = BenchRequest(op=collective, sizes_bytes=(size_bytes,), ranks=n)
    _, explained = explain_sweep(t, request)
    for e in explained:
        assert e.lp_bound is not None
        simulated = [c.time_s for c in e.candidates if c.time_s is not None]
        assert simulated
        assert all(e.lp_bound.time_s <= time_s for time_s in simulated)
        assert e.lp_bound.efficiency <= 1.0


def test_one_rank_moves_nothing():
    m = lp_lower_bound(resolve_topology("dgx-h100"), "all_reduce", ranks=[3])
    assert (m.formulation, m.time_s(GIB)) == ("none", 0.0)
    at = m.at(GIB, 1e-5)
    assert (at.time_over_bound, at.efficiency, at.busbw_gb_per_s) == (None, None, 0.0)
