"""Groups timed on their sub-fabric, once per class: exact against the whole fabric, and
equivalent groups of a regular layout get identical times."""

from __future__ import annotations

import pytest

from scaleup import hardware
from scaleup.topology import resolve_topology
from scaleup.topology.fabric import build_fat_tree, plan_fat_tree
from scaleup.topology.model import Device, Link, NodeKind, Topology
from scaleup.tune import CollectiveTimer
from scaleup.workload import ParallelConfig, get_model, plan, step_traffic
from scaleup.workload.groups import GroupTimer, group_fabric
from scaleup.workload.traffic import groups


def _k4_three_tiers() -> Topology:
    """8 servers of 2 H100 (NVLink pair), one ib-ndr NIC per GPU, on the k=4 three-tier fat tree
    of Al-Fares et al.: 8 leaves of 2 NICs (leaf j: server j), 4 pods of 2 leaves, 2 spines per
    pod, 4 cores."""
    nic = hardware.nic_spec("ib-ndr")
    devices, links, groups_ = [], [], []
    for i in range(8):
        g = [Device.of(f"n{i}.g{r}", "H100", i) for r in range(2)]
        nics = [Device(f"n{i}.nic{r}", "ib-ndr", NodeKind.NIC, i) for r in range(2)]
        devices += g + nics
        links += [Link(g[0].id, g[1].id, "nvlink4", 18)]
        links += [Link(a.id, x.id, str(nic.host_link_tech)) for a, x in zip(g, nics, strict=True)]
        groups_ += [[(x.id, 1)] for x in nics]
    leaves = [[groups_[2 * j][0], groups_[2 * j + 1][0]] for j in range(8)]
    tree = plan_fat_tree([2] * 8, radix=4)
    assert tree.tiers == 3
    fabric, fabric_links = build_fat_tree(
        leaves, [f"net.leaf{j}" for j in range(8)], tree, "ib-switch", "ib-ndr", "net."
    )
    return Topology("k4x2xh100", (*devices, *fabric), (*links, *fabric_links))


def test_sub_fabric_keeps_the_shortest_paths_only():
    topo = _k4_three_tiers()
    # servers 0 and 1 share pod 0: their leaves and the pod's two spines, no core
    sub = group_fabric(topo, [0, 2])
    assert sub.reduced
    kept = sorted(d.type for d in sub.topology.switches)
    assert kept == ["ib-switch"] * 4
    # servers 0 and 4 are in pods 0 and 2: their leaves, both pods' spines and every core
    far = group_fabric(topo, [0, 8])
    assert len(far.topology.switches) == 2 + 2 + 2 + 4
    assert far.ranks == (0, 2)


@pytest.mark.parametrize(
    ("collective", "nbytes", "ranks"),
    [
        ("send_recv", 1 << 24, (0, 8)),  # across pods: through the cores
        ("send_recv", 1 << 24, (1, 3)),  # inside pod 0
        ("all_reduce", 1 << 26, (0, 4, 8, 12)),  # one GPU of every other server
        ("all_gather", 1 << 22, (0, 1, 2, 3)),  # two whole servers
    ],
)
def test_sub_fabric_times_as_the_whole_fabric(collective, nbytes, ranks):
    topo = _k4_three_tiers()
    whole = CollectiveTimer()(topo, collective, nbytes, ranks=list(ranks), dtype="float16")
    assert GroupTimer()(topo, collective, nbytes, ranks=ranks, dtype="float16") == whole


def test_sub_fabric_on_a_two_tier_nx_preset():
    topo = resolve_topology("16xdgx-h100")  # 128 NICs: 4 leaves of 32 under spines
    for ranks in ((0, 32), (0, 8, 16, 24), tuple(range(8))):
        whole = CollectiveTimer()(topo, "all_reduce", 1 << 26, ranks=list(ranks), dtype="float16")
        assert GroupTimer()(topo, "all_reduce", 1 << 26, ranks=ranks, dtype="float16") == whole


def test_equivalent_groups_share_a_class():
    topo = resolve_topology("16xdgx-h100")
    tp = [group_fabric(topo, range(8 * s, 8 * s + 8)).key for s in range(16)]
    assert len(set(tp)) == 1
    pairs = [group_fabric(topo, (r, r + 8)).key for r in (0, 8, 16, 32, 40)]
    assert len(set(pairs)) == 1  # servers s, s+1 under one leaf
    assert group_fabric(topo, (24, 32)).key != pairs[0]  # servers 3, 4: across the spines


def test_a_single_server_is_not_reduced():
    topo = resolve_topology("dgx-h100")
    assert not group_fabric(topo, range(4)).reduced


@pytest.mark.slow
def test_405b_layout_plans_and_equivalent_groups_time_the_same():
    """The Llama 3 405B layout (TP 8 inside a server, DP one rank per server, PP between
    servers) at 1/32 scale: 512 H100, TP 8, PP 4, DP 16. The plan completes; every TP group,
    DP group and pipeline pair of the job gets the same time as rank 0's for each call."""
    topo = resolve_topology("64xdgx-h100")
    cfg = ParallelConfig(tp=8, pp=4, dp=16, seq=8192)
    timer = GroupTimer()
    result = plan("llama-405b", topo, cfg, comm_time=timer)
    assert result.step.step_time_s > 0
    assert {t.call.kind for t in result.step.calls} == {"tp", "pp", "dp"}
    model = get_model("llama-405b")
    for call in step_traffic(model, cfg):
        every = groups(cfg, call.kind)
        assert call.ranks == every[0]
        times = {timer(topo, call.collective, call.nbytes, ranks=g, dtype="float16") for g in every}
        assert len(times) == 1, (call.kind, call.collective, sorted(times))
    # 64 TP groups, 32 DP groups, 48 pipeline pairs, timed as a handful of classes
    assert timer.classes < 20
