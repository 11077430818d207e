"""Multi-node rings cross between servers on one rail, a new rail per channel (as NCCL's do)."""

from __future__ import annotations

from collections import Counter

import pytest

from scaleup.bench import bench_rows
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest
from scaleup.tune.channels import GroupShape


@pytest.mark.parametrize("servers", [2, 3, 4])
def test_tuner_rings_are_permutations_crossing_on_one_rail(servers):
    """The tuner's ring orders (the channel search's, :class:`GroupShape`) on N x DGX H100."""
    per_server = 8
    shape = GroupShape.of(resolve_topology(f"{servers}xdgx-h100"))
    nodes = [r // per_server for r in range(servers * per_server)]
    orders = shape.params("ring", shape.rings.n_channels)["orders"]
    rails: Counter[int] = Counter()
    for order in orders:
        assert sorted(order) == list(range(len(nodes)))
        hops = list(zip(order, order[1:] + order[:1], strict=False))
        crossings = [(a, b) for a, b in hops if nodes[a] != nodes[b]]
        assert len(crossings) == servers
        # with an odd number of servers the ring's closing crossing changes rail
        checked = crossings if servers % 2 == 0 else crossings[:-1]
        assert all(a % per_server == b % per_server for a, b in checked)  # same rail
        rails.update(a % per_server for a, _ in checked)
    if servers == 2:  # every rail carries one channel each way
        assert set(rails.values()) == {2}


def test_two_server_all_gather_uses_every_nic():
    """2 x DGX H100, 8 x 400 Gb/s NICs per server: a ring's busbw is bounded by the NICs'
    aggregate (~8 x 47.5 GB/s) and, with a rail per channel, reaches most of it."""
    row = bench_rows("2xdgx-h100", BenchRequest(op="all_gather", sizes_bytes=(1 << 30,)))[0]
    assert row.algo == "ring"
    assert 4 * 47.5 < row.busbw_gb_per_s <= 8 * 50.0
