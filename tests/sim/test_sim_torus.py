"""Known answers on a torus: a ring all_reduce on a 1-D ICI ring reaches links x rate; routes
follow dimension order."""

from __future__ import annotations

import pytest

from scaleup import hardware
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import simulate
from scaleup.sim.paths import FabricPaths, link_efficiency
from scaleup.topology.model import Topology
from scaleup.topology.torus import torus

#: ICI: 100 GB/s per link per direction (catalog ``ici``); no payload efficiency published, so
#: the simulator's factor is 1 and a link carries its raw rate.
ICI_BYTES_PER_S = hardware.link_tech("ici").bandwidth_bytes_per_s * link_efficiency("ici")


@pytest.mark.parametrize(("bidirectional", "links"), [(False, 1), (True, 2)])
def test_ring_all_reduce_busbw_on_a_1d_slice(bidirectional: bool, links: int) -> None:
    """Hand check: 8 TPU v5p chips on one wrapped dimension, each with 2 ICI links (one per
    neighbour). A ring uses one direction of one link per chip (busbw -> 100 GB/s); the
    bidirectional ring also the reverse one (-> 2 x 100 GB/s). Enough channels (4 per
    direction) that the 40 GB/s per-channel cap of the generic vendor row is not the limit.
    busbw = bytes / time x 2 (n - 1) / n (nccl-tests); the fixed latencies cancel in the slope
    between two sizes, which must be links x rate to within 1.5 % (the per-step latencies of
    the pipelined slices grow with the size: 99.4 and 197.5 GB/s); busbw stays below it."""
    assert pytest.approx(100e9) == ICI_BYTES_PER_S
    n = 8
    t = torus((8,), "TPU-v5p")
    factor = 2 * (n - 1) / n
    times = {}
    for count in (2**24, 2**26):
        spec = CollectiveSpec("all_reduce", nranks=n, count=count)
        schedule = build_schedule("ring", spec, channels=4, bidirectional=bidirectional)
        times[count] = simulate(schedule, t).time_s
        assert 4 * count / times[count] * factor < links * ICI_BYTES_PER_S
    slope = 4 * (2**26 - 2**24) / (times[2**26] - times[2**24]) * factor
    assert slope == pytest.approx(links * ICI_BYTES_PER_S, rel=0.015)


def test_torus_all_reduce_drives_all_six_links_of_a_3d_torus() -> None:
    """Hand bound: on a wrapped 4x4x4 torus every chip sends 2 (n - 1) / n of the buffer over
    its 6 ICI links, so busbw <= 6 x 100 GB/s (the bisection, 2 k^2 links, allows ten times
    that). 24 channels (4 per (order, direction) lane pair, over the 40 GB/s per-channel cap's
    600/40 = 15): the slope between two sizes is within 3 % of 600 GB/s (TPU7x's HBM does not
    bind; TPU v5p's does), and busbw stays below it. The single-order schedule, one directed
    link per chip at a time, stays below 100 GB/s."""
    t = torus((4, 4, 4), "TPU7x")
    n, factor = 64, 2 * 63 / 64
    times = {}
    for count in (2**24, 2**26):
        spec = CollectiveSpec("all_reduce", nranks=n, count=count)
        schedule = build_schedule("torus", spec, dims="4x4x4", channels=24)
        times[count] = simulate(schedule, t).time_s
        assert 4 * count / times[count] * factor < 6 * ICI_BYTES_PER_S
    slope = 4 * (2**26 - 2**24) / (times[2**26] - times[2**24]) * factor
    assert slope == pytest.approx(6 * ICI_BYTES_PER_S, rel=0.03)
    spec = CollectiveSpec("all_reduce", nranks=n, count=2**24)
    old = build_schedule("torus", spec, dims="4x4x4", channels=24, rotate=False,
                         bidirectional=False)  # fmt: skip
    assert 4 * 2**24 / simulate(old, t).time_s * factor < ICI_BYTES_PER_S


def test_routes_follow_dimension_order() -> None:
    """(0,0) -> (1,1) on a 4x4 torus: x first, then y, all bytes on one route (the same links
    as a plain Topology spreads over both shortest paths)."""
    t = torus((4, 4), "TPU-v5p")
    ids = [d.id for d in t.devices]
    index = t.channel_index
    fabric = FabricPaths(t)
    edges, frac, inflow, latency, _ = fabric.path(0, 5)
    assert [tuple(ids[i] for i in pair) for pair in _ends(t, edges)] == [("g0", "g1"), ("g1", "g5")]
    assert list(frac) == [1.0, 1.0]
    assert inflow[1] == 1.0
    assert inflow.sum() == 1.0
    assert latency == pytest.approx(2 * hardware.link_tech("ici").latency_s)
    # wraparound and the shorter way round: (0,0) -> (3,3) is one hop back in x, one in y
    edges, *_ = fabric.path(0, 15)
    assert [c for c in edges] == [index[("g0", "g3")], index[("g3", "g15")]]
    plain = Topology(t.name, t.devices, t.links, description=t.description)
    edges, frac, *_ = FabricPaths(plain).path(0, 5)
    assert len(edges) == 4  # both shortest paths, bytes split (ECMP)
    assert list(frac) == [0.5] * 4


def test_dor_does_not_change_neighbour_rings() -> None:
    """A ring along dimension 0 only crosses neighbour links: DOR and shortest paths agree."""
    t = torus((4, 4), "TPU-v5p")
    plain = Topology(t.name, t.devices, t.links, description=t.description)
    spec = CollectiveSpec("all_reduce", nranks=16, count=2**20)
    s = build_schedule("torus", spec, dims="4x4", channels=2)
    assert simulate(s, t).time_s == simulate(s, plain).time_s


def _ends(t: Topology, edges: object) -> list[tuple[int, int]]:
    by_id = {d.id: i for i, d in enumerate(t.devices)}
    return [(by_id[t.channels[e].src], by_id[t.channels[e].dst]) for e in edges]  # type: ignore[attr-defined]
