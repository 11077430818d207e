"""Routes an automorphism of the whole fabric carries (scaleup.sim.route_symmetry).

A pattern's check skips routing the moved pairs of such routes. These tests hold the shortcut to
the comparison it replaces: wherever it says a route is carried, routing the moved pair and
comparing agrees; it says so only for moves that keep every channel, device and HBM, and never
for routes through the ECMP cap, a torus or host staging. Routes a pattern carries rather than
routes (carry_routes) are the routes routing gives.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_nvls_tree_pattern import _spec_params
from test_symmetry import _degraded

import scaleup.sim.pattern as pattern_module
from scaleup.collectives.op_table import OpKind
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import params as P
from scaleup.sim.network import Network
from scaleup.sim.nvls_tree_pattern import NvlsTreePattern
from scaleup.sim.pattern import RingPattern, routes_follow
from scaleup.sim.route_symmetry import carry_routes, fabric_automorphism, routes_carried
from scaleup.sim.symmetry import device_image, network_image
from scaleup.topology import resolve_topology
from scaleup.topology.torus import torus


def _routes(c):
    """Kind, source and destination rank of each distinct route's first op."""
    t = c.schedule.table
    _ids, first = np.unique(c.route, return_index=True)
    return t.kind[first], t.src_rank[t.src_ptr[first]], t.dst_rank[t.dst_ptr[first]]


def _none_carried(net, kind, *args):
    """routes_carried as if no route were: every moved pair routed and compared."""
    return np.zeros(len(kind), dtype=bool)


def _nvls_tree(name: str):
    topo = resolve_topology(name)
    spec, params = _spec_params(topo, 16, 2)
    pattern = NvlsTreePattern.of(spec, params, topo)
    assert pattern is not None
    return pattern


def _ring(name: str, channels: int = 2):
    topo = resolve_topology(name)
    spec = CollectiveSpec("all_reduce", len(topo.accelerators), 4096 * len(topo.accelerators))
    pattern = RingPattern.of("ring", spec, {"channels": channels}, topo)
    assert pattern is not None
    return pattern


@pytest.mark.parametrize(
    "make",
    [
        lambda: _nvls_tree("4xdgx-h100"),
        lambda: _nvls_tree("3xdgx-h100"),
        lambda: _ring("2xdgx-h100"),
        lambda: _ring("gb200-nvl72"),
    ],  # fmt: skip
    ids=["nvls-tree-4", "nvls-tree-3", "ring-2xdgx", "ring-nvl72"],
)
def test_carried_routes_are_the_routes_the_simulator_takes(make, monkeypatch):
    pattern = make()
    c = pattern.compiled
    kind, src, dst = _routes(c)
    carried_any = False
    for move in pattern.moves:
        automorphism = fabric_automorphism(c.net, move.sigma, move.con_image)
        carried = routes_carried(c.net, kind, src, dst, automorphism)
        carried_any |= bool(carried.any())
        assert routes_follow(c, move)
    assert carried_any  # the shortcut is taken on these fabrics
    # and the comparison it replaces agrees: every route routed between the moved ranks
    monkeypatch.setattr(pattern_module, "routes_carried", _none_carried)
    assert all(routes_follow(c, move) for move in pattern.moves)


def test_a_move_across_a_degraded_link_is_no_automorphism():
    good = resolve_topology("4xdgx-h100")
    pattern = _nvls_tree("4xdgx-h100")
    bad = _degraded(good, next(i for i, link in enumerate(good.links) if link.tech == "ib-ndr"))
    net_good, net_bad = Network(good), Network(bad)
    verdicts = []
    for move in pattern.moves:
        for net, topo in ((net_good, good), (net_bad, bad)):
            tau = device_image(net, topo, move.sigma)
            assert tau is not None
            verdicts.append(fabric_automorphism(net, move.sigma, network_image(net, tau)))
    good_verdicts, bad_verdicts = verdicts[0::2], verdicts[1::2]
    assert all(good_verdicts)
    assert not all(bad_verdicts)  # some move carries the slow link onto a fast one


def test_a_move_onto_a_switch_of_another_type_is_no_automorphism():
    topo = resolve_topology("4xdgx-h100")
    pattern = _nvls_tree("4xdgx-h100")
    net = Network(topo)
    images = []
    for move in pattern.moves:
        tau = device_image(net, topo, move.sigma)
        images.append((move.sigma, network_image(net, tau)))
    assert all(fabric_automorphism(net, sigma, image) for sigma, image in images)
    codes = net.device_type_code.copy()
    switch = next(i for i, d in enumerate(topo.devices) if d.kind.name == "SWITCH")
    codes[switch] = codes.max() + 1  # the same latencies and links, another part
    net.__dict__["device_type_code"] = codes
    assert not all(fabric_automorphism(net, sigma, image) for sigma, image in images)


def test_a_permutation_that_breaks_the_fabric_is_no_automorphism():
    topo = resolve_topology("2xdgx-h100")
    net = Network(topo)
    sigma = np.arange(16)
    sigma[[0, 8]] = sigma[[8, 0]]  # two GPUs of different servers swapped, nothing else
    tau = device_image(net, topo, sigma)
    image = None if tau is None else network_image(net, tau)
    assert image is None or not fabric_automorphism(net, sigma, image)


def test_no_transfer_is_carried_through_the_ecmp_cap_a_torus_or_host_staging(monkeypatch):
    topo = resolve_topology("dgx-h100")
    kind = np.full(2, int(OpKind.COPY))
    src, dst = np.array([0, 2]), np.array([1, 3])
    net = Network(topo)
    net.transfer_route(0, 1)
    assert routes_carried(net, kind, src, dst, True).all()
    assert not routes_carried(net, kind, src, dst, False).any()  # no automorphism: compare
    monkeypatch.setattr(P, "MAX_ECMP_FANOUT", 1)  # one next hop of the four NVSwitches: ties
    capped = Network(topo)
    capped.transfer_route(0, 1)
    assert (int(capped.acc_devices[0]), int(capped.acc_devices[1])) in capped.fabric.capped
    assert routes_carried(capped, kind, src, dst, True).tolist() == [False, True]
    monkeypatch.undo()
    staged = Network(topo.with_peer_access(False))
    assert not routes_carried(staged, kind, src, dst, True).any()
    ring = Network(torus((8,), "TPU-v5p"))
    assert ring.fabric.dimension_ordered
    assert not routes_carried(ring, kind, src, dst, True).any()
    switch = np.full(2, int(OpKind.SWITCH_REDUCE))  # no peer access, a torus: still carried
    assert routes_carried(staged, switch, src, dst, True).all()
    assert not routes_carried(net, switch, src, dst, False).any()


def _same_route(a, b) -> bool:
    """Two routes equal to rounding: constraints, coefficients, latency, class and inflation."""
    return (
        np.array_equal(a.net_rows, b.net_rows) and np.allclose(a.net_vals, b.net_vals, rtol=1e-12)
        and np.array_equal(a.mem_rows, b.mem_rows)
        and np.allclose(a.mem_vals, b.mem_vals, rtol=1e-12)
        and np.isclose(a.latency_s, b.latency_s, rtol=1e-12)
        and (a.link_class, a.inflate) == (b.link_class, b.inflate)
    )  # fmt: skip


def _carried_against_routed(pattern) -> int:
    """carry_routes on a fresh network of the pattern's fabric; every route it added compared
    with the route a second fresh network computes for the same pair. Returns how many were
    carried."""
    c = pattern.compiled
    topo = c.topology
    net, reference = Network(topo), Network(topo)
    carried = carry_routes(net, c.schedule.table, [(m.sigma, m.con_image) for m in pattern.moves])
    for key, rid in net._route_ids.items():
        _, s, d, reduce = key
        routed = reference.transfer_route(s, d, reduce=reduce)
        assert _same_route(net.routes[rid], reference.routes[routed])
    return carried


@pytest.mark.parametrize(
    ("make", "least"),
    [
        (lambda: _ring("ualink-pod:n=128"), 100),
        (lambda: _ring("2xdgx-h100"), 1),
        (lambda: _ring("gb200-nvl72"), 60),
    ],  # fmt: skip
    ids=["ring-ualink-128", "ring-2xdgx", "ring-nvl72"],
)
def test_routes_carried_along_orbits_are_the_routes_routing_gives(make, least):
    assert _carried_against_routed(make()) >= least


def test_no_route_is_carried_from_a_pair_the_ecmp_cap_pruned(monkeypatch):
    pattern = _ring("dgx-h100")
    monkeypatch.setattr(P, "MAX_ECMP_FANOUT", 1)  # every pair's four NVSwitch next hops: pruned
    assert _carried_against_routed(pattern) == 0


def test_no_route_is_carried_on_a_torus_or_without_peer_access():
    topo = resolve_topology("dgx-h100")
    pattern = _ring("dgx-h100")
    moves = [(m.sigma, m.con_image) for m in pattern.moves]
    table = pattern.compiled.schedule.table
    assert carry_routes(Network(topo), table, moves) > 0
    assert carry_routes(Network(topo.with_peer_access(False)), table, moves) == 0
    ring = torus((8,), "TPU-v5p")
    spec = CollectiveSpec("all_reduce", 8, 4096 * 8)
    on_torus = RingPattern.of("ring", spec, {"channels": 2}, ring)
    if on_torus is not None:
        moves = [(m.sigma, m.con_image) for m in on_torus.moves]
        assert carry_routes(Network(ring), on_torus.compiled.schedule.table, moves) == 0
