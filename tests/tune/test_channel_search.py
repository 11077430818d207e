"""Channel search: hand-worked answers on the vendor machines, and properties on every preset.

Capacities are checked independently of the search's own routing wherever the hops are direct
links: a ring hop between linked accelerators loads exactly that link, so counting hops per
directed link is the load.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.errors import UsageError
from scaleup.topology.analysis import per_accelerator_gb_per_s
from scaleup.topology.presets import resolve_topology
from scaleup.tune import channel_search as cs
from scaleup.tune import channel_seeds as cs_seeds
from scaleup.tune.channel_search import (
    ChannelPlan,
    Wiring,
    double_binary_tree,
    link_loads,
    nvls_heads,
    search_rings,
    search_trees,
)
from strategies import rank_subsets

GB = 1e9


def _ids(plan: ChannelPlan, topology, ranks) -> list[str]:
    return [topology.accelerators[plan.ranks[r]].id for r in ranks]


def _capacity(topology) -> dict[tuple[str, str], float]:
    return {(c.src, c.dst): c.bandwidth_bytes_per_s for c in topology.channels}


def _direct_hops(plan: ChannelPlan, topology) -> Counter:
    """Rings on one server: every hop (closing one included) per directed link; asserts that
    each hop is a link."""
    cap = _capacity(topology)
    hops: Counter = Counter()
    for channel in plan.channels:
        ids = _ids(plan, topology, channel.order)
        for a, b in zip(ids, ids[1:] + ids[:1], strict=True):
            assert (a, b) in cap, f"{a} -> {b} is not a link"
            hops[(a, b)] += 1
    return hops


def _segment_hops(plan: ChannelPlan, topology, node: int) -> list[list[tuple[str, str]]]:
    """The hops of every channel's segment on one server (open paths)."""
    out = []
    for channel in plan.channels:
        seg = next(s for s in channel.segments if s.node == node)
        ids = _ids(plan, topology, seg.ranks)
        out.append(list(itertools.pairwise(ids)))
    return out


# -- known answers -----------------------------------------------------------------------------
def test_dgx1_v100_six_link_disjoint_rings_fill_the_nvlink_budget():
    """Hybrid cube-mesh, 6 NVLink2 (25 GB/s) per V100, pairs 0-1, 0-4, 1-3, 2-3, 2-6, 4-5, 5-7,
    6-7 doubled. The doubled pairs form one Hamiltonian cycle (0 1 3 2 6 7 5 4), so at 50 GB/s
    only it fits, both ways round: 2 x 50 = 100. At 25 GB/s the 24 link pairs split into three
    edge-disjoint Hamiltonian cycles (e.g. 0 1 3 2 6 7 5 4, 0 1 3 7 5 4 6 2, 0 3 2 1 5 6 7 4),
    each run both ways: 6 rings x 25 = 150 GB/s, every link of every GPU busy in both
    directions. The GPU's NVLink budget, not one link, bounds the aggregate."""
    t = resolve_topology("dgx1-v100")
    plan = search_rings(t)
    assert plan.n_channels == 6
    assert plan.bandwidth_bytes_per_s == pytest.approx(25 * GB)
    assert plan.total_bandwidth_bytes_per_s == pytest.approx(per_accelerator_gb_per_s(t) * GB)
    assert plan.n_channels >= 5  # NCCL's channel count: >= 5x one channel's bandwidth
    hops = _direct_hops(plan, t)
    cap = _capacity(t)
    assert set(hops) == set(cap)  # every directed link carries rings ...
    assert all(hops[a] * 25 * GB == pytest.approx(cap[a]) for a in cap)  # ... to capacity


def test_dgx1_p100_four_rings():
    """4 NVLink1 (20 GB/s) per P100, no doubled pair: two edge-disjoint Hamiltonian cycles
    (0 1 2 3 7 6 5 4 and 0 2 6 4 7 5 1 3), each both ways: 4 rings x 20 = 80 GB/s."""
    t = resolve_topology("dgx1-p100")
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (4, pytest.approx(20 * GB))
    assert set(_direct_hops(plan, t).values()) == {1}


def test_mi300x_mesh_seven_rings_cover_every_arc_once():
    """K8 complete digraph of 64 GB/s xGMI links: 7 arc-disjoint directed Hamiltonian cycles."""
    t = resolve_topology("mi300x-8")
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (7, pytest.approx(64 * GB))
    hops = _direct_hops(plan, t)
    assert len(hops) == 56
    assert set(hops.values()) == {1}


@pytest.mark.parametrize("shape", ["4x4x4", "8x8x8"])
def test_tpu_slice_rings_are_the_grid_snake_both_ways_over_direct_links(shape: str):
    """A whole TPU slice (3-D torus, one 100 GB/s ICI link per neighbour): the boustrophedon
    visits every chip moving one coordinate at a time and, the slowest dimension being even,
    ends next to chip 0 across the wraparound: a Hamiltonian ring over direct links, run both
    ways round without sharing an arc. So at least 2 rings at a link's full 100 GB/s. Before
    the grid seed, 4x4x4 gave one ring and 8x8x8 none over direct links within the budget (one
    ring routed through other chips instead)."""
    t = resolve_topology(f"tpu-v5p:shape={shape}")
    plan = search_rings(t)
    assert plan.n_channels >= 2
    assert plan.bandwidth_bytes_per_s == pytest.approx(100 * GB)
    assert set(_direct_hops(plan, t).values()) == {1}  # direct links, no arc used twice


def test_grid_snake_is_a_hamiltonian_path_of_unit_steps():
    dims = (3, 4, 2)
    path = cs_seeds.snake(dims)
    assert sorted(path) == list(range(24))

    def coords(r: int) -> tuple[int, int, int]:
        return r % 3, (r // 3) % 4, r // 12

    for a, b in itertools.pairwise(path):
        assert sorted(abs(x - y) for x, y in zip(coords(a), coords(b), strict=True)) == [0, 0, 1]


def test_mesh_subset_uses_the_links_among_its_ranks_only():
    """--ranks 4 of mi300x-8: the induced K4 has 3 links per GPU. K4* has no 3 arc-disjoint
    Hamiltonian cycles (Tillson), so at 64 GB/s only 2 fit (128); at 32 GB/s all 6 directed
    Hamiltonian cycles of K4 fit, each arc in two of them: 6 x 32 = 192 = 3 links x 64."""
    t = resolve_topology("mi300x-8")
    plan = search_rings(t, range(4))
    assert plan.total_bandwidth_bytes_per_s == pytest.approx(192 * GB)
    loads = link_loads(plan, t)
    inside = {f"g{i}" for i in range(4)}
    assert {a for a, load in loads.items() if load > 0} == {
        (a, b) for a in inside for b in inside if a != b
    }
    assert all(load == pytest.approx(64 * GB) for load in loads.values())
    assert all(set(_ids(plan, t, c.order)) == inside for c in plan.channels)


def test_dgx1_quad_is_searched_on_its_induced_links():
    t = resolve_topology("dgx1-v100")
    plan = search_rings(t, [0, 1, 2, 3])
    loads = link_loads(plan, t)
    quad = {"g0", "g1", "g2", "g3"}
    assert all(a in quad and b in quad for (a, b), load in loads.items() if load > 0)
    cap = _capacity(t)
    # inside the quad g0 and g2 keep 4 of their 6 links (g1, g3 keep 5): 4 x 25 = 100 GB/s
    assert plan.total_bandwidth_bytes_per_s == pytest.approx(100 * GB)
    assert all(load <= cap[a] * (1 + 1e-9) for a, load in loads.items())


def test_mi250x_sixteen_gcds_six_rings():
    """16 GCDs, 7 xGMI links each (4 to the package partner, 1 or 2 out). A ring enters and
    leaves the package {0, 1} at least once; its links out are 0-2 (50), 0-4 (2 x 50), 1-2,
    1-3, 1-5 (50 each): 300 GB/s, so at most 6 rings at 50 GB/s. The search finds all 6."""
    t = resolve_topology("mi250x-8")
    cut = sum(
        c.bandwidth_bytes_per_s
        for c in t.channels
        if c.src in ("g0", "g1") and c.dst not in ("g0", "g1")
    )
    assert cut == pytest.approx(300 * GB)
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (6, pytest.approx(50 * GB))
    assert plan.total_bandwidth_bytes_per_s == pytest.approx(cut)
    hops = _direct_hops(plan, t)
    assert all(hops[a] * 50 * GB <= cap * (1 + 1e-9) for a, cap in _capacity(t).items())


def test_switched_node_any_order_port_bound():
    """DGX H100: 18 NVLink4 per GPU spread 5/4/4/5 over 4 NVSwitches (450 GB/s). One ring in
    rank order already fills every port; capped at 60 GB/s per channel, 8 channels of
    56.25 GB/s give the same 450 GB/s."""
    t = resolve_topology("dgx-h100")
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (1, pytest.approx(450 * GB))
    assert plan.orders() == [list(range(8))]
    capped = search_rings(t, max_channel_bw_bytes_per_s=60 * GB)
    assert capped.n_channels == 8
    assert capped.total_bandwidth_bytes_per_s == pytest.approx(450 * GB)
    loads = link_loads(capped, t)
    cap = _capacity(t)
    assert max(load / cap[a] for a, load in loads.items()) == pytest.approx(1.0)


@pytest.mark.parametrize("spec", ["2xdgx-h100", "2xdgx-h100:rail_optimized=true"])
def test_two_dgx_h100_one_channel_per_nic_on_one_rail(spec):
    """8 x 400 Gb/s NICs per server: 8 channels at the NIC's 50 GB/s; channel c enters server 0
    through NIC c, leaves it through NIC c-1 and enters server 1 through NIC c-1 (the same
    rail), so every NIC sends once and receives once and every crossing stays on its rail."""
    t = resolve_topology(spec)
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (8, pytest.approx(50 * GB))
    rails = [(s.nic_in.split(".")[1], s.nic_out.split(".")[1]) for c in plan.channels
             for s in c.segments]  # fmt: skip
    assert Counter(r for r, _ in rails) == Counter(r for _, r in rails)
    assert all(v == 2 for v in Counter(r for r, _ in rails).values())
    for channel in plan.channels:
        a, b = channel.segments
        assert a.nic_out.split(".")[1] == b.nic_in.split(".")[1]  # 0 -> 1 on one rail
        assert b.nic_out.split(".")[1] == a.nic_in.split(".")[1]  # 1 -> 0 on one rail
    loads = link_loads(plan, t)
    cap = _capacity(t)
    assert all(load <= cap[a] * (1 + 1e-9) for a, load in loads.items())


def test_two_mi300x_eight_paths_cover_all_56_arcs_on_each_server():
    """RCCL's model for 8 MI300X with 8 NICs: 8 paths NIC -> GPU ... GPU -> NIC per server that
    share no xGMI arc and cover all 56; every GPU starts one and ends one, so every NIC sends
    once and receives once; every xGMI arc carries exactly one ring channel."""
    t = resolve_topology("2xmi300x-8")
    plan = search_rings(t)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (8, pytest.approx(50 * GB))
    for node in (0, 1):
        hops = [h for path in _segment_hops(plan, t, node) for h in path]
        assert len(hops) == len(set(hops)) == 56
        assert all(t.device(a).node == node for a, _ in hops)
        segs = [next(s for s in c.segments if s.node == node) for c in plan.channels]
        assert sorted(s.ranks[0] for s in segs) == sorted(s.ranks[-1] for s in segs)
        assert len({s.ranks[0] for s in segs}) == 8
        assert len({s.nic_in for s in segs}) == len({s.nic_out for s in segs}) == 8
        for s in segs:  # each segment enters and leaves through its end GPUs' own NICs
            first, last = _ids(plan, t, (s.ranks[0], s.ranks[-1]))
            assert (s.nic_in, s.nic_out) == (first.replace("g", "nic"), last.replace("g", "nic"))
    tech = {(c.src, c.dst): c.tech for c in t.channels}
    xgmi = {a: load for a, load in link_loads(plan, t).items() if tech[a] == "xgmi-mi300x"}
    assert len(xgmi) == 112
    assert all(load == pytest.approx(50 * GB) for load in xgmi.values())


def test_identical_servers_are_searched_once(monkeypatch):
    built = []
    real = cs.Shape

    def counting(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(cs, "Shape", counting)
    plan = search_rings(resolve_topology("4xmi300x-8"))
    assert plan.n_channels == 8
    assert len(built) == 1


# -- trees and NVLS --------------------------------------------------------------------------
def test_double_binary_tree_is_nccls():
    for m in range(1, 40):
        tree0, tree1 = dtree_parents(m)
        assert double_binary_tree(m) == (tuple(tree0), tuple(tree1))


def _check_tree(parents: tuple[int, ...]) -> None:
    roots = [r for r, p in enumerate(parents) if p < 0]
    assert len(roots) == 1
    for r in range(len(parents)):
        seen = set()
        while parents[r] >= 0:
            assert r not in seen
            seen.add(r)
            r = parents[r]
        assert r == roots[0]


@pytest.mark.parametrize("spec", ["2xdgx-h100", "3xmi300x-8", "dgx1-v100"])
def test_trees_are_chains_under_the_double_binary_tree(spec):
    t = resolve_topology(spec)
    plan = search_trees(t)
    assert plan.kind == "tree"
    servers = len(t.nodes)
    assert plan.node_trees == double_binary_tree(servers)
    for c, channel in enumerate(plan.channels):
        for tree in (0, 1):
            parents = plan.tree_parents(c, tree)
            _check_tree(parents)
            for seg in channel.segments:  # inside a server: a chain from its head
                assert [parents[r] for r in seg.ranks[1:]] == list(seg.ranks[:-1])
                if servers > 1:
                    assert seg.nic_in == seg.nic_out is not None
    loads = link_loads(plan, t)
    cap = _capacity(t)
    assert all(load <= cap[a] * (1 + 1e-9) for a, load in loads.items())


def test_nvls_heads():
    one = nvls_heads(resolve_topology("dgx-h100"))
    assert [c.order for c in one.channels] == [(r,) for r in range(8)]
    assert one.total_bandwidth_bytes_per_s == pytest.approx(450 * GB)
    two = nvls_heads(resolve_topology("2xdgx-h100"))
    assert two.n_channels == 8
    for c, channel in enumerate(two.channels):
        assert [s.nic_in for s in channel.segments] == [f"n0.nic{c}", f"n1.nic{c}"]
        assert channel.order == (c, 8 + c)
    assert two.node_trees == double_binary_tree(2)


# -- properties ----------------------------------------------------------------------------------
PRESETS = ["dgx1-v100", "dgx1-p100", "mi300x-8", "mi250x-8", "dgx-h100", "pcie-8",
           "2xdgx-h100", "2xmi300x-8", "2xdgx1-v100"]  # fmt: skip


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, list[int], str]:
    spec = draw(st.sampled_from(PRESETS))
    n = len(resolve_topology(spec).accelerators)
    return spec, draw(rank_subsets(n)), draw(st.sampled_from(("ring", "tree")))


@settings(max_examples=30)
@given(_cases())
def test_every_plan_visits_each_rank_once_within_capacity(case):
    spec, ranks, kind = case
    t = resolve_topology(spec)
    plan = (search_rings if kind == "ring" else search_trees)(t, ranks)
    assert plan.ranks == tuple(ranks)
    assert plan.n_channels >= 1
    for channel in plan.channels:
        assert sorted(channel.order) == list(range(len(ranks)))
        for seg in channel.segments:
            assert {t.accelerators[plan.ranks[r]].node for r in seg.ranks} == {seg.node}
    loads = link_loads(plan, t)
    cap = _capacity(t)
    assert all(load <= cap[a] * (1 + 1e-9) for a, load in loads.items())  # only real links
    if plan.bound:
        assert max(load / cap[a] for a, load in loads.items()) == pytest.approx(1.0)


@settings(max_examples=10)
@given(_cases())
def test_search_is_deterministic(case):
    spec, ranks, kind = case
    t = resolve_topology(spec)
    search = search_rings if kind == "ring" else search_trees
    first = search(t, ranks)
    assert search(t, ranks) == first


def test_bad_arguments_are_usage_errors():
    t = resolve_topology("mi300x-8")
    for kwargs in ({"max_channels": 0}, {"budget": -1}, {"max_channel_bw_bytes_per_s": -5.0}):
        with pytest.raises(UsageError):
            search_rings(t, **kwargs)
    for ranks in ([0, 0], [8], []):
        with pytest.raises(UsageError, match="ranks"):
            search_rings(t, ranks)
    with pytest.raises(UsageError, match="nvls"):
        link_loads(nvls_heads(t), t)


def test_one_rank_is_one_channel():
    plan = search_rings(resolve_topology("dgx-h100"), [3])
    assert plan.orders() == [[0]]


def test_no_ring_within_the_budget_falls_back_to_rank_order_as_nccl_does():
    """12 of mi250x-8's 16 GCDs: no ring on their direct links, and the routed search spends its
    budget without one. NCCL then runs one channel in rank order ("falling back to simple
    order", src/graph/search.cc); so does the search, instead of refusing the group."""
    t = resolve_topology("mi250x-8")
    ranks = [0, 1, 2, 12, 3, 4, 5, 6, 7, 8, 9, 10]
    plan = search_rings(t, ranks)
    assert plan.n_channels == 1
    assert plan.channels[0].order == tuple(range(len(ranks)))


def test_searches_sharing_one_wiring_find_what_each_finds_alone():
    """A :class:`Wiring` only keeps what every search reads (channels by device, servers and
    their classes): the plans are the same, and another topology's wiring is refused."""
    topo = resolve_topology("4xdgx-h100")
    wiring = Wiring(topo)
    assert search_rings(topo, wiring=wiring) == search_rings(topo)
    assert search_trees(topo, wiring=wiring) == search_trees(topo)
    assert nvls_heads(topo, wiring=wiring) == nvls_heads(topo)
    assert search_rings(topo, range(8), wiring=wiring) == search_rings(topo, range(8))
    first = wiring.layout(tuple(range(32)))
    assert wiring.layout(tuple(range(32))) is first  # kept, not searched again
    assert len({wiring.server_class(srv) for srv in first}) == 1  # four copies of one server
    with pytest.raises(UsageError, match="wiring"):
        search_rings(resolve_topology("dgx-h100"), wiring=wiring)
    again = resolve_topology("4xdgx-h100:nics=8")  # an equal topology, another object
    assert again is not topo
    assert again == topo
    assert search_rings(again, wiring=wiring) == search_rings(topo)
