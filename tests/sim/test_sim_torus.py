"""Known answers on a torus: a ring all_reduce on a 1-D ICI ring reaches links x rate."""

from __future__ import annotations

import pytest

from scaleup import hardware
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import simulate
from scaleup.sim.paths import link_efficiency
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
