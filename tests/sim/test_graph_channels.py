"""NCCL's LL128 caps shared per graph channel across nodes (scaleup.sim.graph_channels): shares
worked by hand, where they apply and where not, the weight on network transfers, the builders'
parameter, and the p5 ring LL128 plateau they give against the cap worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError
from scaleup.sim import compile_schedule
from scaleup.sim.graph_channels import graph_channel_caps, network_cta_use
from scaleup.sim.network import LINK_CLASSES
from scaleup.sim.protocols import protocol
from scaleup.topology import resolve_topology

HOPPER_RING_LL128 = 36.7e9
HOPPER_TREE_LL128_N4 = 29.0e9
P5_4 = "4xdgx-h100:nic=efa-400g"
runner = CliRunner()


def _ring_caps(lanes: int, g: int | None, proto: str = "ll128", library: str = "nccl",
               spec: str = P5_4) -> np.ndarray:  # fmt: skip
    topo = resolve_topology(spec)
    params = {"channels": lanes, "graph_channels": g}
    return graph_channel_caps(
        "ring", params, proto, library, topo, np.arange(len(topo.accelerators)),
        np.zeros(lanes, dtype=np.int64), np.arange(lanes),
    )  # fmt: skip


def test_sixteen_lanes_on_eight_graph_channels_take_half_each() -> None:
    """p5: NCCL's graph has 8 channels (one per NIC) and runs them on 16 thread blocks; each
    block gets 36.7 / 2 GB/s, so the ring's 16 blocks move 8 x 36.7 = 293.6 GB/s of bus
    bandwidth at most, NCCL's own cap (tuning.cc line 305)."""
    caps = _ring_caps(16, 8)
    assert caps == pytest.approx(np.full(16, HOPPER_RING_LL128 / 2))
    assert caps.sum() == pytest.approx(8 * HOPPER_RING_LL128)


def test_uneven_counts_share_evenly() -> None:
    """12 lanes on 8 graph channels: 8 caps over 12 lanes, 2/3 of one each (not half for the
    four copied channels and whole for the rest, which would hold every lane to the slowest)."""
    assert _ring_caps(12, 8) == pytest.approx(np.full(12, HOPPER_RING_LL128 * 8 / 12))


def test_fewer_lanes_than_graph_channels_keep_the_whole_cap() -> None:
    assert _ring_caps(4, 8) == pytest.approx(np.full(4, HOPPER_RING_LL128))


@pytest.mark.parametrize(
    ("g", "proto", "library", "spec"),
    [
        (None, "ll128", "nccl", P5_4),
        (8, "simple", "nccl", P5_4),
        (8, "ll", "nccl", P5_4),
        (8, "ll128", "rccl", P5_4),
        (12, "ll128", "nccl", "dgx-h100"),
    ],
)
def test_no_cap_where_it_does_not_apply(g: int | None, proto: str, library: str, spec: str) -> None:
    """No graph, another protocol (ring Simple and LL have no per-channel cap in NCCL's model),
    RCCL, or one node (LL128 runs near Simple inside a node): nothing shared."""
    assert np.isinf(_ring_caps(16, g, proto, library, spec)).all()


@given(lanes=st.integers(1, 64), g=st.integers(1, 64))
def test_shares_add_up_to_the_graph_channels_in_use(lanes: int, g: int) -> None:
    """Whatever the lane and graph channel counts, the lanes' shares sum to min(g, lanes)
    whole caps: NCCL's model's ``nChannels x perChMaxRingLL128Bw``."""
    caps = _ring_caps(lanes, g)
    assert caps.sum() == pytest.approx(min(g, lanes) * HOPPER_RING_LL128)


def _tree_caps(spec: str, parents: list, lanes: int, g: int, ranks: list[int],
               tags: list[int]) -> np.ndarray:  # fmt: skip
    topo = resolve_topology(spec)
    params = {"channels": lanes, "graph_channels": g, "parents": parents}
    return graph_channel_caps(
        "tree", params, "ll128", "nccl", topo, np.arange(len(topo.accelerators)),
        np.array(ranks), np.array(tags),
    )  # fmt: skip


def test_tree_cap_counts_the_network_sends_by_hand() -> None:
    """4 p5 nodes (ranks 8i..8i+7 on node i). Tree 0: 0 is the root of 1-8; 8 the parent of
    9-16; 16 of 17-24; 24 of 25-31. Over the network rank 0 sends its slice once (to 8), rank 8
    twice (to 0 and 16), rank 16 twice (to 8 and 24), rank 24 once (to 16), ranks 1 and 9
    never (NVLink only: their transfers are not weighed; the cap shown is a single send's).
    Caps: F w s / 4 with F = 29 (Hopper tree LL128 beyond two nodes), w = 1 (one lane, one
    graph channel)."""
    n = 32
    tree0 = [-1] + [0] + [0] * 6 + [0] + [8] * 7 + [8] + [16] * 7 + [16] + [24] * 7
    tree1 = [1] + [-1] + [1] * 30
    caps = _tree_caps(P5_4, [[tree0, tree1]], 1, 1, [0, 8, 16, 24, 1, 9], [0] * 6)
    assert len(tree0) == n
    sends = np.array([1, 2, 2, 1, 1, 1])  # at least 1: a block with no network send is unweighed
    assert caps == pytest.approx(HOPPER_TREE_LL128_N4 * sends / 4)


def test_two_nodes_take_the_two_node_column() -> None:
    """Hopper tree LL128: 36.7 on two nodes, 29 beyond (tuning.cc perChMaxTreeLL128Bws)."""
    n = 16
    tree0 = [-1] + [0] * 7 + [0] + [8] * 7
    tree1 = [1] + [-1] + [1] * 14
    caps = _tree_caps("2xdgx-h100", [[tree0, tree1]], 2, 1, [0], [0])
    assert len(tree0) == n
    assert caps == pytest.approx([36.7e9 * 0.5 / 4])  # two lanes on one graph channel


def test_tree_simple_is_not_capped() -> None:
    """NCCL's tree cap at every protocol (perChMaxTreeBws) is left out: the GB200 rows run
    tree Simple at 2-3x it (docs/models.md section 2)."""
    topo = resolve_topology(P5_4)
    caps = graph_channel_caps(
        "tree", {"channels": 1, "graph_channels": 1}, "simple", "nccl", topo, np.arange(32),
        np.zeros(2, dtype=np.int64), np.array([0, 1]),
    )  # fmt: skip
    assert np.isinf(caps).all()


class _Route:
    def __init__(self, cls: str) -> None:
        self.link_class = LINK_CLASSES.index(cls)


def test_only_network_transfers_are_weighed() -> None:
    """A block with its own 36.7 GB/s and a shared 18.35: its network transfer uses 2 of its
    capacity per byte/s (so it alone moves at most 18.35), its NVLink transfer 1; a block with
    no shared cap is untouched."""
    routes = [_Route("nvlink"), _Route("net")]
    use = network_cta_use(
        np.array([18.35e9, np.inf]), np.array([36.7e9, 36.7e9]), np.array([0, 0, 1]),
        np.array([0, 1, 1]), routes,
    )  # fmt: skip
    assert use is not None
    assert use.tolist() == pytest.approx([1.0, 2.0, 1.0])
    assert network_cta_use(np.full(2, np.inf), np.ones(2), np.zeros(1, int), np.zeros(1, int),
                           routes) is None  # fmt: skip


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", True])
def test_bad_graph_channels_is_refused(algorithm: str, bad: object) -> None:
    spec = CollectiveSpec("all_reduce", 8, 64)
    with pytest.raises(UsageError, match="graph_channels"):
        build_schedule(algorithm, spec, channels=2, graph_channels=bad)


def test_the_parameter_does_not_change_the_schedule() -> None:
    spec = CollectiveSpec("all_reduce", 8, 1024)
    plain = build_schedule("ring", spec, channels=4)
    shared = build_schedule("ring", spec, channels=4, graph_channels=2)
    assert shared.params["graph_channels"] == 2
    assert np.array_equal(plain.table.count, shared.table.count)
    assert np.array_equal(plain.table.channel, shared.table.channel)


def test_one_node_times_are_unchanged() -> None:
    """dgx-h100 ring LL128 with and without NCCL's graph: the same time to the bit."""
    topo = resolve_topology("dgx-h100")
    spec = CollectiveSpec("all_reduce", 8, 1 << 22)
    times = [
        compile_schedule(build_schedule("ring", spec, channels=16, **extra), topo)
        .run("ll128")
        .time_s
        for extra in ({}, {"graph_channels": 12})
    ]
    assert times[0] == times[1]


def test_p5_ring_ll128_plateau_is_nccls_cap() -> None:
    """4 p5 nodes, ring LL128 on 16 channels at 2 GiB: within 3% under 8 graph channels x
    36.7 GB/s = 293.6 GB/s busbw (measured 269-280 at 512 MiB-1 GiB; before the share the
    simulator gave 338-348, bound by the NICs)."""
    result = runner.invoke(app, [
        "bench", "--topology", P5_4, "--algo", "ring", "--proto", "ll128", "--channels", "16",
        "-b", "2G", "-e", "2G", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    busbw = json.loads(result.output)[0]["busbw_gb_per_s"]
    assert 0.97 * 293.6 <= busbw <= 293.6 * 1.001


def test_blocks_sending_over_the_network_are_named_for_the_shared_cap() -> None:
    """On 4 p5 nodes the ring LL128 blocks that run a transfer across a node boundary (ranks
    7|8, 15|16, 23|24, 31|0 of the ring 0..31) are ``r<k>.graph-channel`` (what ``--explain``
    prints when one binds); under Simple none is."""
    topo = resolve_topology(P5_4)
    spec = CollectiveSpec("all_reduce", 32, 1 << 20)
    orders = [list(range(32))]
    sched = build_schedule("ring", spec, channels=2, orders=orders * 2, graph_channels=1)
    compiled = compile_schedule(sched, topo)
    names = compiled.cta_names(protocol("ll128"))
    shared = {name for name in names if name.endswith(".graph-channel")}
    assert shared == {f"r{r}.graph-channel" for r in (7, 8, 15, 16, 23, 24, 31, 0)}
    assert not any(n.endswith(".graph-channel") for n in compiled.cta_names(protocol("simple")))
