"""Known answers of the tuner once its channels come from the channel search (issue 12, item 1).

The tuner's ring orders, tree parents, intra-node rings and channel counts are the channel
search's (:class:`scaleup.tune.channels.GroupShape`); these tests check the figures that follow
from that on fabrics where one fixed ring order was far from what NCCL and RCCL build.
"""

from __future__ import annotations

from collections import Counter

import pytest

from scaleup.bench import busbw_gb_per_s
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import simulate
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.channels import GroupShape

GIB = 1 << 30


def _busbw(choice, nranks: int) -> float:
    return busbw_gb_per_s("all_reduce", GIB, choice.time_s, nranks)[1]


def test_dgx1_ring_at_nccl_channel_count_is_five_times_one_channel():
    """DGX-1 V100, ring all_reduce, 1 GiB, Simple: the searched 6 channels vs one channel.

    By hand. Every V100 has 6 NVLink2 links at 25 GB/s per direction (the catalog's raw rate;
    the simulator carries NCCL's SM70 figure, 20 GB/s, i.e. 0.8 of it). The search's 6 rings are
    link-disjoint, each hop one link, so every GPU sends on all 6 links at once: a ring
    all_reduce's busbw is what one rank sends per second, at most 6 x 25 x 0.8 = 120 GB/s, and
    the time at least 1 GiB x 2(n-1)/n / 120 GB/s = 1.0737e9 x 14/8 / 120e9 = 15.66 ms (plus
    2(n-1) = 14 Simple steps of a few us). One channel on one NVLink2 link (the ring 0, 1, ...,
    7 that every channel used before; its hop 3 -> 4 has no direct link) is bounded by
    25 x 0.8 = 20 GB/s. So the ratio is at most 120 / 20 = 6, and reaching 5 needs all six
    links busy. Simulated: 116.9 GB/s at 6 channels (16.08 ms), 19.9 GB/s on the old ring.
    """
    dgx1 = resolve_topology("dgx1-v100")
    session = TuneSession()
    shape = session.shape(dgx1, None)
    assert shape.rings.n_channels == 6
    assert 6 in shape.counts
    assert 12 in shape.counts
    request = BenchRequest(sizes_bytes=(GIB,), algorithm="ring", protocol="simple", channels=6)
    six = _busbw(session.sweep(dgx1, request)[0], 8)
    old = simulate(
        build_schedule("ring", CollectiveSpec("all_reduce", 8, GIB // 4), channels=1), dgx1
    )
    one = busbw_gb_per_s("all_reduce", GIB, old.time_s, 8)[1]
    assert one == pytest.approx(19.9, abs=0.5)
    assert six >= 5 * one
    assert six <= 6 * 25 * 0.8 * 1.001  # never above the six links' budget
    tuned = session.sweep(dgx1, BenchRequest(sizes_bytes=(GIB,)))[0]
    assert _busbw(tuned, 8) >= six * 0.999  # the tuner's own choice is at least as fast


def test_2xmi300x_every_xgmi_arc_carries_one_ring_channel():
    """2 x MI300X (8 GPUs, 7 xGMI links each, a NIC per GPU): the searched 8 channels are
    NIC -> GPU ... GPU -> NIC paths per server that together use each of the 56 directed xGMI
    arcs of a server exactly once (RCCL's model 81), chained into rings across the servers.
    Checked twice: from the ring orders the tuner builds, and from the bytes the timed schedule
    put on every xGMI channel (all equal, none idle)."""
    topo = resolve_topology("2xmi300x-8")
    session = TuneSession()
    shape = session.shape(topo, None)
    assert shape.rings.n_channels == 8
    orders = shape.params("ring", 8)["orders"]
    arcs: Counter[tuple[int, int]] = Counter()
    for order in orders:
        for a, b in zip(order, order[1:] + order[:1], strict=True):
            if a // 8 == b // 8:
                arcs[(a, b)] += 1
    every = {(a, b) for s in (0, 8) for a in range(s, s + 8) for b in range(s, s + 8) if a != b}
    assert set(arcs) == every
    assert set(arcs.values()) == {1}
    request = BenchRequest(sizes_bytes=(GIB,), algorithm="ring", protocol="simple", channels=8)
    result = session.sweep(topo, request)[0].result
    xgmi = [
        float(b)
        for c, b in zip(topo.channels, result.channel_bytes, strict=True)
        if c.tech.startswith("xgmi")
    ]
    assert len(xgmi) == 112
    assert min(xgmi) > 0
    assert max(xgmi) == pytest.approx(min(xgmi), rel=1e-6)
    # busbw: 8 NICs x 50 GB/s per server bound it (each channel crosses once each way per NIC)
    tuned = session.sweep(topo, BenchRequest(sizes_bytes=(GIB,)))[0]
    assert 250 < _busbw(tuned, 16) <= 8 * 50


@pytest.mark.parametrize("algorithm", [None, "ring", "tree"])
def test_mesh_subset_uses_links_among_its_ranks_only(algorithm):
    """``--ranks 4`` of mi300x-8: the ranks are GPUs 0..3, and every byte of the timed schedule
    moves on an xGMI link between two of them (the 12 arcs among four GPUs); the other four
    GPUs' links stay idle."""
    topo = resolve_topology("mi300x-8")
    request = BenchRequest(sizes_bytes=(GIB,), ranks=4, algorithm=algorithm)
    choice = TuneSession().sweep(topo, request)[0]
    ids = {a.id for a in topo.accelerators[:4]}
    used = {
        (c.src, c.dst)
        for c, b in zip(topo.channels, choice.result.channel_bytes, strict=True)
        if b > 0
    }
    assert used
    assert all(src in ids and dst in ids for src, dst in used)
    if choice.algorithm == "ring":
        assert len(used) == 12  # the searched rings use every arc among the four


def test_session_searches_each_group_once():
    """Plans live in the session, one search per (topology, ranks)."""
    topo = resolve_topology("mi300x-8")
    session = TuneSession()
    assert session.shape(topo, None) is session.shape(topo, None)
    assert session.shape(topo, (0, 1, 2, 3)) is not session.shape(topo, None)
    assert isinstance(session.shape(topo, None), GroupShape)


def test_multi_node_tree_and_hierarchical_use_searched_channels():
    """2 x DGX H100: tree channel k is the searched chain in each server under the double
    binary tree over the servers; hierarchical's intra-node rings are a server's searched
    rings, the same local order in both servers."""
    shape = GroupShape.of(resolve_topology("2xdgx-h100"))
    assert shape.trees is not None
    assert shape.local_rings is not None
    pairs = shape.params("tree", 2)["parents"]
    assert pairs[0] == [list(shape.trees.tree_parents(0, t)) for t in (0, 1)]
    for tree in pairs[1]:
        assert tree.count(-1) == 1
        heads = [r for r in range(16) if tree[r] < 0 or tree[r] // 8 != r // 8]
        assert len(heads) == 2  # one head per server, the rest a chain inside it
    local = shape.params("hierarchical", 3)["local_orders"]
    assert len(local) == 3
    assert all(sorted(o) == list(range(8)) for o in local)


def test_ring_across_two_dgx_a100_with_four_hdr_nics_is_bounded_by_the_nic_cut():
    """2 x DGX A100 with 4 HDR NICs per server (one per GPU pair), ring all_reduce, 1 GiB.

    By hand. Every ring channel crosses between the two servers once in each direction, and it
    carries busbw bytes per second over each of its hops (a ring all_reduce sends
    2(n-1)/n x S per rank), so the channels' busbw summed over the cut is at most what the cut
    carries per direction: 4 NICs x 200 Gb/s = 4 x 25 = 100 GB/s per server. Half the DGX
    A100's own eight NICs (200 GB/s). A channel search that gave each NIC's second GPU no
    NIC, or put every channel on one NIC, would stop at 75 or 25 GB/s; all four NICs busy at
    NCCL's Simple efficiency come to ~94 (simulated 93.7).
    """
    session = TuneSession()
    request = BenchRequest(sizes_bytes=(GIB,), ranks=16, algorithm="ring")
    four = _busbw(session.sweep(resolve_topology("2xdgx-a100:nic=ib-hdr,nics=4"), request)[0], 16)
    eight = _busbw(session.sweep(resolve_topology("2xdgx-a100:nic=ib-hdr"), request)[0], 16)
    assert four <= 4 * 25 * 1.001
    assert four >= 0.85 * 4 * 25
    assert eight <= 8 * 25 * 1.001
    assert four == pytest.approx(eight / 2, rel=0.05)
