"""Known answers of the simulator, each worked from the model's parameters."""

from __future__ import annotations

import numpy as np
import pytest
from helpers_sim import copies, pair, ring_all_reduce, uniform_switch

from scaleup import hardware
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import SimulationError, UsageError
from scaleup.sim import compile_schedule, simulate, simulate_many
from scaleup.sim import params as P
from scaleup.sim import run as sim_run
from scaleup.sim.paths import link_efficiency
from scaleup.topology import resolve_topology

NVLINK4_ONE_LINK = 25e9 * link_efficiency("nvlink4")  # 20.6 GB/s: NCCL's SM90 per-link figure
SIMPLE_FIXED = (
    P.KERNEL_LAUNCH_S + P.LAUNCH_LATENCY_S["simple"] + P.STEP_LATENCY_S["nvlink"]["simple"]
)


def test_one_transfer_on_one_link_takes_latency_plus_bytes_over_bandwidth() -> None:
    topo = pair()
    count = 2**24
    r = simulate(copies(1, count), topo)
    link_latency = hardware.link_tech("nvlink4").latency_s
    expected = SIMPLE_FIXED + link_latency + 4 * count / NVLINK4_ONE_LINK
    assert r.time_s == pytest.approx(expected, rel=1e-12)
    assert r.busiest_channel_bytes == pytest.approx(4 * count)
    assert pytest.approx(20.6e9) == NVLINK4_ONE_LINK


def test_two_transfers_on_one_channel_get_half_each() -> None:
    one = simulate(copies(1, 2**24), pair())
    two = simulate(copies(2, 2**24), pair())
    fixed = SIMPLE_FIXED + hardware.link_tech("nvlink4").latency_s
    assert two.time_s - fixed == pytest.approx(2 * (one.time_s - fixed), rel=1e-12)
    assert two.op_end_s[0] == two.op_end_s[1]  # symmetric flows finish in the same batch


def test_one_channel_thread_block_caps_a_wide_link() -> None:
    # 18 links (370 GB/s) but one NCCL channel moves at most 60 GB/s on Hopper (search.cc)
    r = simulate(copies(1, 2**26), pair(links=18))
    assert 4 * 2**26 / (r.time_s - SIMPLE_FIXED - 1e-7) == pytest.approx(60e9, rel=1e-6)


def test_ring_all_reduce_approaches_bus_bandwidth_bound() -> None:
    n, count = 8, 2**28
    topo = uniform_switch(n)
    per_gpu = 2 * NVLINK4_ONE_LINK  # 2 links per GPU into the switch
    r = simulate(ring_all_reduce(n, count), topo)
    bound = 2 * (n - 1) / n * 4 * count / per_gpu
    assert bound < r.time_s < 1.02 * bound
    busbw = 4 * count / r.time_s * 2 * (n - 1) / n
    assert busbw == pytest.approx(per_gpu, rel=0.02)


def test_dgx_h100_ring_busbw_is_the_nccl_ceiling() -> None:
    r = simulate(ring_all_reduce(8, 2**28, channels=8), resolve_topology("dgx-h100"))
    busbw = 2**30 / r.time_s * 2 * 7 / 8 / 1e9
    assert 355 < busbw < 371  # measured 365-370 (NVIDIA/nccl #1455); 18 x 20.6 = 370.8 ceiling


def test_dgx1_v100_beats_pcie_8() -> None:
    # same GPU generation on both: V100 over NVLink2 cube-mesh vs V100 cards on PCIe Gen3
    spec = CollectiveSpec("all_reduce", nranks=8, count=2**26)
    pcie = simulate(
        build_schedule("ring", spec, channels=4),
        resolve_topology("pcie-8:accelerator=V100,tech=pcie3"),
    )
    mesh = resolve_topology("dgx1-v100")
    naive = simulate(build_schedule("ring", spec, channels=4), mesh)  # 3-4 and 7-0 cross a GPU
    nvlink_ring = [[0, 3, 2, 1, 5, 6, 7, 4]] * 4  # a ring along direct NVLinks only
    direct = simulate(build_schedule("ring", spec, orders=nvlink_ring), mesh)
    assert max(direct.time_s, naive.time_s) < pcie.time_s / 1.25


def test_nvls_beats_ring_at_large_all_reduce_and_loses_at_small() -> None:
    topo = resolve_topology("dgx-h100")

    def best_ring(count: int) -> float:
        s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=8, count=count), channels=8)
        return min(simulate(s, topo, protocol=p).time_s for p in ("simple", "ll", "ll128"))

    def nvls(count: int) -> float:
        return simulate(
            build_schedule(
                "nvls", CollectiveSpec("all_reduce", nranks=8, count=count), channels=16
            ),
            topo,
        ).time_s

    assert nvls(2**28) < best_ring(2**28)
    assert nvls(2) > best_ring(2)
    busbw = 2**30 / nvls(2**28) * 2 * 7 / 8 / 1e9
    assert 450 < busbw < 520  # measured ~480 (nccl-tests #212): via-issuer traffic x nvlsEfficiency


def test_nvls_needs_in_switch_reduction() -> None:
    s = build_schedule("nvls", CollectiveSpec("all_reduce", nranks=8, count=1024))
    with pytest.raises(SimulationError, match="in-switch reduction"):
        simulate(s, resolve_topology("dgx-a100"))
    with pytest.raises(SimulationError, match="simple protocol only"):
        simulate(s, resolve_topology("dgx-h100"), protocol="ll")


def test_host_staged_is_slower_than_peer_by_the_pcie_to_peer_ratio() -> None:
    topo = resolve_topology("dgx-h100")
    s = copies(8, 2**25)  # 8 channels: peer rate = g0's 18 links (370 GB/s), not a thread-block cap
    peer = simulate(s, topo)
    staged = simulate(s, topo.with_peer_access(False))
    fixed_peer = peer.op_start_s[0] + 0.5e-6
    pcie = 64e9 * link_efficiency("pcie5")
    nvlink = 18 * NVLINK4_ONE_LINK
    ratio = (staged.time_s - staged.op_start_s[0]) / (peer.time_s - fixed_peer)
    assert ratio == pytest.approx(nvlink / pcie, rel=0.05)
    assert staged.channel_bytes.sum() == 0  # the NVLink fabric carried nothing
    hostmem = [i for i, name in enumerate(staged.constraint_names) if name.endswith(".memory")]
    assert staged.constraint_bytes[hostmem].sum() == pytest.approx(
        2 * 8 * 4 * 2**25
    )  # written + read


def test_pcie_8_without_p2p_uses_host_memory() -> None:
    topo = resolve_topology("pcie-8")
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=8, count=2**24), channels=2)
    staged = simulate(s, topo.with_peer_access(False))
    hostmem = [i for i, name in enumerate(staged.constraint_names) if name.endswith(".memory")]
    assert staged.constraint_bytes[hostmem].sum() > 0
    # all 8: both bound by the 32 GB/s socket link the ring crosses twice (peer ~= staged);
    # one socket's 4 GPUs: peer stays on the PCIe switches, staged crosses host memory twice
    four = build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=2**24), channels=2)
    peer4 = simulate(four, topo, ranks=[0, 1, 2, 3]).time_s
    assert simulate(four, topo.with_peer_access(False), ranks=[0, 1, 2, 3]).time_s > 1.5 * peer4


def test_mesh_pair_without_direct_link_routes_through_a_gpu() -> None:
    topo = resolve_topology("dgx1-v100")  # 0 and 5 have no link
    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=8, count=2**20), "one")
    b.copy(b.input(0, 0, 2**20), b.output(5, 0, 2**20))
    r = simulate(b.build(), topo)
    hbm = {
        name: r.constraint_bytes[i]
        for i, name in enumerate(r.constraint_names)
        if name.endswith(".hbm")
    }
    forwarded = sum(v for k, v in hbm.items() if k not in ("g0.hbm", "g5.hbm"))
    assert forwarded == pytest.approx(2 * 4 * 2**20)  # stored and re-sent by intermediate GPUs
    assert r.busiest_channel_bytes < 4 * 2**20  # split over several 2-hop paths


@pytest.mark.parametrize(("src", "dst"), [(35, 71), (0, 36), (17, 53)])
def test_a_transfer_between_racks_leaves_through_its_own_nic_not_a_peer_gpu(src, dst) -> None:
    """Two 36-GPU partitions: rack 0's NICs 32-35 share a leaf with rack 1's first NICs, so a
    path through a peer GPU and its NIC has the hop count of the one through the spines. The
    transfer still goes out through the source GPU's own NIC and in through the
    destination's, and no other GPU stores and forwards it (before: 47% of 35 -> 71 went
    through peer GPUs' HBM and NICs, and a ring over both partitions ran 3.8x slower)."""
    topo = resolve_topology("2xgb200-nvl72:gpus=36,nic=ib-ndr")
    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=72, count=2**20), "one")
    b.copy(b.input(src, 0, 2**20), b.output(dst, 0, 2**20))
    r = simulate(b.build(), topo)
    moved = {n: r.constraint_bytes[i] for i, n in enumerate(r.constraint_names)}
    nbytes = 4 * 2**20
    own_out = f"n0.g{src}->n0.nic{src}"  # src on rack 0, dst on rack 1
    own_in = f"n1.nic{dst - 36}->n1.g{dst - 36}"
    assert moved[own_out] == pytest.approx(nbytes)
    assert moved[own_in] == pytest.approx(nbytes)
    nics = {n: v for n, v in moved.items() if ".nic" in n and v > 0 and "net." not in n}
    assert set(nics) == {own_out, own_in}
    relayed = [n for n, v in moved.items() if n.endswith(".hbm") and v > 0]
    assert sorted(relayed) == sorted([f"n0.g{src}.hbm", f"n1.g{dst - 36}.hbm"])


@pytest.mark.parametrize(
    ("spec", "nranks", "src", "dst"), [("2xtrn2-16", 32, 0, 10), ("2xmi250x-8", 32, 0, 9)]
)
def test_inside_a_server_a_transfer_stays_off_the_network(spec, nranks, src, dst) -> None:
    """A pair four scale-up hops apart inside one server (a Trainium2 torus, MI250X's xGMI)
    ties with chip -> NIC -> switch -> NIC -> chip. The libraries use the network only between
    servers: the transfer stays on the scale-up links, relayed by the chips between (before,
    part of its bytes went out through the NICs)."""
    topo = resolve_topology(spec)
    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=nranks, count=2**20), "one")
    b.copy(b.input(src, 0, 2**20), b.output(dst, 0, 2**20))
    r = simulate(b.build(), topo)
    moved = {n: r.constraint_bytes[i] for i, n in enumerate(r.constraint_names)}
    assert not any(v > 0 for n, v in moved.items() if "nic" in n)
    relayed = [n for n, v in moved.items() if n.endswith(".hbm") and v > 0]
    assert len(relayed) > 2  # intermediate chips store and forward


def test_determinism_bit_for_bit() -> None:
    topo = resolve_topology("dgx-h100")
    s = build_schedule(
        "ring", CollectiveSpec("all_reduce", nranks=8, count=3 * 2**20 + 7), channels=3
    )
    a, b = simulate(s, topo), simulate(s, topo)
    assert a.time_s == b.time_s
    assert np.array_equal(a.op_end_s, b.op_end_s)
    assert np.array_equal(a.channel_bytes, b.channel_bytes)
    assert a.to_dict() == b.to_dict()


def test_ranks_mapping_and_compiled_rescaling() -> None:
    topo = resolve_topology("dgx-h100")
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=2**20))
    moved = simulate(s, topo, ranks=[4, 5, 6, 7])
    assert moved.channel_bytes[topo.channel_index[("g0", "sw0")]] == 0
    assert moved.time_s == pytest.approx(simulate(s, topo).time_s)
    with pytest.raises(UsageError):
        simulate(s, topo, ranks=[0, 0, 1, 2])
    c = compile_schedule(s, topo)
    assert c.run(scale=2.0).time_s == pytest.approx(
        simulate(
            build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=2**21)), topo
        ).time_s
    )
    many = simulate_many(s, topo, [4 * 2**20, 4 * 2**21])
    assert many[1].nbytes == 4 * 2**21
    assert many[1].time_s > many[0].time_s


def test_result_dict_and_timeline() -> None:
    r = simulate(
        build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=4096)),
        resolve_topology("dgx-h100"),
    )
    d = r.to_dict()
    assert d["time_us"] == pytest.approx(r.time_s * 1e6)
    assert d["channels"]
    assert r.linkbw_gb_per_s > 0
    text = r.timeline(width=30)
    assert text.count("\n") == 4
    assert "r0" in text


def test_host_launch_and_nvls_base_latency() -> None:
    topo = resolve_topology("dgx-h100")
    empty = build_schedule("ring", CollectiveSpec("all_reduce", nranks=8, count=0))
    assert simulate(empty, topo, protocol="ll").time_s == pytest.approx(
        P.KERNEL_LAUNCH_S + P.LAUNCH_LATENCY_S["ll"]
    )
    # NVLS: NCCL's baseLatencies NVLS = 0; its latency is the switch step (25 us) and the route
    r = simulate(
        build_schedule("nvls", CollectiveSpec("all_reduce", nranks=8, count=8), channels=2), topo
    )
    fixed = P.KERNEL_LAUNCH_S + P.SWITCH_STEP_LATENCY_S
    assert fixed < r.time_s < fixed + 2e-6


def test_a_network_serves_only_its_own_topology() -> None:
    """Routes are shared only between schedules on one topology (a tuning session's network)."""
    from scaleup.errors import UsageError
    from scaleup.sim import Network

    dgx = resolve_topology("dgx-h100")
    ring = build_schedule("ring", CollectiveSpec("all_reduce", nranks=8, count=64))
    with pytest.raises(UsageError, match="another topology"):
        compile_schedule(ring, dgx, network=Network(resolve_topology("dgx-h200")))
    net = Network(dgx)
    compile_schedule(ring, dgx, network=net)
    routes = len(net.routes)
    compile_schedule(ring, resolve_topology("dgx-h100"), network=net)  # an equal topology
    assert len(net.routes) == routes > 0


@pytest.mark.parametrize("dense_from", [0, 1 << 30])
def test_dense_and_sparse_accounting_give_the_same_bytes_and_busy_time(monkeypatch, dense_from):
    """A rate solution kept dense (every merged constraint, unused ones adding 0) accounts the
    same floats as one kept as its used constraints: both agree with the default's choice."""
    topo = resolve_topology("2xdgx-h100")
    spec = CollectiveSpec("all_reduce", 16, 16 * 4 * 1024)
    compiled = compile_schedule(build_schedule("ring", spec, channels=4), topo)
    reference = compiled.run("simple", scale=1.0)
    compiled = compile_schedule(build_schedule("ring", spec, channels=4), topo)  # fresh memo
    monkeypatch.setattr(sim_run, "_DENSE_FROM", dense_from)
    forced = compiled.run("simple", scale=1.0)
    assert forced.time_s == reference.time_s
    np.testing.assert_array_equal(forced.constraint_bytes, reference.constraint_bytes)
    np.testing.assert_array_equal(forced.constraint_busy_s, reference.constraint_busy_s)
    assert reference.constraint_bytes.sum() > 0
