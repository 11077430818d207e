"""Library constants by vendor: NCCL's tables on NVIDIA systems, RCCL's on AMD systems."""

from __future__ import annotations

import pytest
from helpers_sim import copies, pair

from scaleup import hardware
from scaleup.sim import compile_schedule, simulate
from scaleup.sim import params as P
from scaleup.sim.protocols import PROTOCOLS, for_topology, library_for, protocol
from scaleup.topology import resolve_topology

AMD_PRESETS = ("mi300x-8", "2xmi300x-8", "mi250x-8")
NVIDIA_PRESETS = ("dgx-h100", "hgx-b200", "dgx1-v100", "dgx-a100", "gb200-nvl72")
NVIDIA_MULTI_NODE = ("2xdgx-h100", "2xdgx-a100")


@pytest.mark.parametrize("preset", AMD_PRESETS)
def test_amd_presets_use_rccl_rows(preset: str) -> None:
    topo = resolve_topology(preset)
    assert library_for(topo) == "rccl"
    arch = str(hardware.accelerator(topo.accelerators[0].type).arch)
    multi = len({a.node for a in topo.accelerators}) > 1
    rows = P.RCCL_HW_LATENCY_S[P.RCCL_TUNING_SET[(arch, multi)]]
    for name in ("ll", "simple"):
        p = for_topology(protocol(name), topo)
        assert p.library == "rccl"
        assert p.launch_latency_s == P.RCCL_BASE_LATENCY_S["ring"][name]  # 12 / 17 us
        expected = rows["nvlink"]["ring"][name]
        if multi:  # RCCL's net overhead on every intra-node step of a multi-node ring
            expected = max(expected, P.RCCL_NET_OVERHEAD_S[name])
        assert p.step_latency_s["nvlink"] == pytest.approx(expected, rel=1e-12)
        assert p.step_latency_s["net"] == rows["net"]["tree"][name]  # RCCL's tree NET row


def test_rccl_figures_as_the_source_states_them() -> None:
    # ROCm/rccl @0cbce2a7 src/graph/tuning.cc lines 58 and 227-231 (tuning_model_5, MI300X)
    assert P.RCCL_BASE_LATENCY_S["ring"]["ll"] == 12.0e-6
    assert P.RCCL_BASE_LATENCY_S["ring"]["simple"] == 17.0e-6
    assert P.RCCL_HW_LATENCY_S[5]["nvlink"]["ring"]["ll"] == 0.8e-6
    assert P.RCCL_HW_LATENCY_S[5]["net"]["tree"]["simple"] == 25.0e-6
    assert P.RCCL_TUNING_SET[("cdna3", True)] == 5
    p = for_topology(protocol("ll128"), resolve_topology("mi300x-8"))
    # set 5 leaves LL128 at 0 (not tuned there): RCCL's generic set 0 stands in, never 0
    assert p.step_latency_s["nvlink"] == P.RCCL_HW_LATENCY_S[0]["nvlink"]["ring"]["ll128"] > 0


@pytest.mark.parametrize("preset", NVIDIA_PRESETS)
def test_nvidia_presets_unchanged(preset: str) -> None:
    topo = resolve_topology(preset)
    assert library_for(topo) == "nccl"
    for name in ("ll", "ll128", "simple"):
        assert for_topology(protocol(name), topo) is PROTOCOLS[name]
    # the NCCL Ring rows, as literals (NVIDIA/nccl @5067397c src/graph/tuning.cc lines 151-172)
    assert P.LAUNCH_LATENCY_S["ll"] == 6.6e-6
    assert P.LAUNCH_LATENCY_S["simple"] == 8.4e-6
    assert P.STEP_LATENCY_S["nvlink"]["ll"] == 0.6e-6
    assert P.STEP_LATENCY_S["nvlink"]["simple"] == 3.4e-6
    assert P.STEP_LATENCY_S["net"]["simple"] == 14.0e-6
    assert P.SWITCH_STEP_LATENCY_S == 25.0e-6


@pytest.mark.parametrize("preset", NVIDIA_MULTI_NODE)
def test_nccl_net_overhead_on_multi_node_steps(preset: str) -> None:
    """NCCL tuning.cc lines 404-412: a multi-node ring's intra-node step costs
    max(hwLat, netOverhead), netOverhead 1 us (non-AMD CPU, line 232), x3 for Simple (line 408).
    Worked by hand: NVLink LL max(0.6, 1.0) = 1.0 us; LL128 max(1.9, 1.0) = 1.9; Simple
    max(3.4, 3.0) = 3.4; the NET steps keep NCCL's Ring NET row (2.7 / 4.0 / 14 us)."""
    topo = resolve_topology(preset)
    got = {n: for_topology(protocol(n), topo).step_latency_s for n in ("ll", "ll128", "simple")}
    assert got["ll"]["nvlink"] == pytest.approx(1.0e-6, rel=1e-12)
    assert got["ll128"]["nvlink"] == pytest.approx(1.9e-6, rel=1e-12)
    assert got["simple"]["nvlink"] == pytest.approx(3.4e-6, rel=1e-12)
    assert [got[n]["net"] for n in ("ll", "ll128", "simple")] == [2.7e-6, 4.0e-6, 14.0e-6]
    assert for_topology(protocol("ll"), topo).launch_latency_s == 6.6e-6  # base unchanged
    # one node of the same machine: NCCL's tables as they are
    one = list(range(topo.ranks_per_node))
    assert for_topology(protocol("ll"), topo, one) is PROTOCOLS["ll"]


def test_known_answer_one_small_copy_on_mi300x_vs_h100() -> None:
    """One 4-byte copy g0 -> g1, LL, worked by hand.

    MI300X (RCCL, set 5): host launch 4 + baseLat LL 12 + xGMI ring LL step 0.8 + link 0.1 us
    = 16.9 us, plus the 4 B: 8 wire bytes under LL over the link's 48 GB/s (64 x 0.75), equal
    to 4 payload bytes at the AMD LL channel cap of 24 GB/s.
    H100 pair (NCCL): 4 + 6.6 + 0.6 + 0.1 = 11.3 us (8 wire bytes at 20.6 GB/s).
    """
    mi = resolve_topology("mi300x-8")
    r = simulate(copies(1, 1), mi, protocol="ll")
    wire = 8 / 48e9  # = 4 / 24e9
    assert r.time_s == pytest.approx(16.9e-6 + wire, rel=1e-9)
    h = simulate(copies(1, 1), pair(), protocol="ll")
    assert h.time_s == pytest.approx(11.3e-6 + 8 / 20.6e9, rel=1e-9)
    # the launch part alone, as the tuner's lower bound sees it
    assert compile_schedule(copies(1, 1), mi).start_s(protocol("ll")) == pytest.approx(16e-6)


def test_amd_per_channel_rate_is_amds_xgmi_figure() -> None:
    # rocm.blogs.amd.com mi300x-rccl-xgmi: ~48 of 64 GB/s per xGMI link
    assert protocol("simple").cta_bytes_per_s("cdna3") == 48e9
    assert protocol("ll").cta_bytes_per_s("cdna3") == 24e9
    assert protocol("simple").cta_bytes_per_s("hopper") == 60e9  # NVIDIA rows unchanged
