"""NCCL's per-size channel trim (scaleup.tune.size_channels; enqueue.cc lines 2091-2097)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scaleup.topology import resolve_topology
from scaleup.topology.model import Topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.rules import Candidate
from scaleup.tune.size_channels import ChannelTrim


def test_known_answers_by_hand() -> None:
    nccl8 = ChannelTrim.of(resolve_topology("dgx-h100"))
    # ring LL: 512 threads x 8 bytes x 8 ranks = 32 KiB per channel
    assert nccl8.channels("ring", "ll", 64 << 10, 16) == 2
    assert nccl8.channels("ring", "ll", (64 << 10) - 1, 16) == 1
    # tree LL: 512 x 8 = 4 KiB per channel; LL128: 640 x 8 = 5 KiB; Simple: 512 x 64 = 32 KiB
    assert nccl8.channels("tree", "ll", 64 << 10, 32) == 16
    assert nccl8.channels("ring", "ll128", 64 << 10, 32) == 12
    assert nccl8.channels("ring", "simple", 1 << 20, 64) == 32
    assert nccl8.channels("nvls", "simple", 8, 16) == 16  # NVLS keeps its own count
    assert nccl8.channels("direct", "ll", 8, 16) == 16  # not one of NCCL's algorithms
    # RCCL: 256 threads for every protocol
    rccl = ChannelTrim.of(resolve_topology("mi300x-8"))
    assert rccl.channels("ring", "ll", 64 << 10, 16) == 4
    # 72 ranks of an NVL72 rack: the LL ring needs 288 KiB per channel
    assert (
        ChannelTrim.of(resolve_topology("gb200-nvl72")).channels("ring", "ll", 256 << 10, 16) == 1
    )


@given(
    nbytes=st.integers(0, 1 << 34),
    channels=st.integers(1, 64),
    algorithm=st.sampled_from(["ring", "tree", "hierarchical"]),
    protocol=st.sampled_from(["ll", "ll128", "simple"]),
)
def test_trim_is_nccl_loop(nbytes: int, channels: int, algorithm: str, protocol: str) -> None:
    rule = ChannelTrim.of(resolve_topology("dgx-h100"))
    nc = rule.channels(algorithm, protocol, nbytes, channels)
    threads = {"ll": 512, "ll128": 640, "simple": 512}[protocol]
    threshold = {"ll": 8, "ll128": 8, "simple": 64}[protocol] * (
        8 if (algorithm, protocol) == ("ring", "ll") else 1
    )
    want = channels
    while nbytes < want * threads * threshold and want >= 2:  # enqueue.cc, as written there
        want -= 1
    assert nc == want
    assert rule.trim(Candidate(algorithm, protocol, channels), nbytes).channels == want


def test_the_tuner_reports_the_trimmed_count_and_a_pin_stands() -> None:
    topo = resolve_topology("dgx-h100")
    (small,) = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(8,), algorithm="ring"))
    assert small.channels == 1
    pinned = BenchRequest(sizes_bytes=(8,), algorithm="ring", protocol="ll", channels=8)
    (kept,) = TuneSession().sweep(topo, pinned)
    assert kept.channels == 8


def test_nvls_tree_channels_follow_ncclnvlstreesm100tuning() -> None:
    """nvls.cc lines 164-199, worked by hand: two NVL72 racks of 400G NDR NICs (48 GB/s and
    more, two nodes) run NVLS-Tree on 32 channels, four racks on 24; NCCL's own model reads the
    same count (``ModelInputs.nvls_channels``)."""
    from scaleup.tune.nccl_inputs import model_inputs, nvls_channels

    session = TuneSession()
    for racks, expected in ((2, 32), (4, 24)):
        topo = resolve_topology(f"{racks}xgb200-nvl72")
        [choice] = session.sweep(topo, BenchRequest(sizes_bytes=(1 << 30,)))
        assert (choice.algorithm, choice.channels) == ("nvls_tree", expected)
        inputs = model_inputs(topo)
        assert inputs is not None
        assert nvls_channels(inputs, "nvls_tree") == expected


def test_nvls_tree_chunks_follow_calccollchunking() -> None:
    """NVLS-Tree's chunk (enqueue.cc lines 2276-2286) by hand on 2 x DGX H100 (16 channels x 8
    heads = 128 concurrent ops, 128 KiB from ncclNvlsTuning). 128 MiB is not under 4 x 128 x
    128 KiB = 64 MiB, so the chunk stays 128 KiB (the 16x rule only cuts chunks above 128 KiB):
    each head and channel moves 128 MiB / 128 / 128 KiB = 8 chunks. 16 MiB is under 64 MiB, so
    the chunk halves to 64 KiB: 2 chunks. 1 MiB is under 1 x 128 x 64 KiB: 32 KiB. 1 GiB: 64
    chunks of 128 KiB, capped at 16."""
    from scaleup.tune.size_channels import nvls_tree_chunk_bytes

    topo = resolve_topology("2xdgx-h100")
    assert nvls_tree_chunk_bytes(topo, None, 128 << 20, 128) == 128 << 10
    assert nvls_tree_chunk_bytes(topo, None, 16 << 20, 128) == 64 << 10
    assert nvls_tree_chunk_bytes(topo, None, 1 << 20, 128) == 32 << 10
    session = TuneSession()
    for nbytes, chunks in ((16 << 20, 2), (128 << 20, 8), (1 << 30, 16)):
        [choice] = session.sweep(topo, BenchRequest(sizes_bytes=(nbytes,)))
        assert (choice.algorithm, choice.chunks) == ("nvls_tree", chunks), nbytes
    # four nodes and more: 64 KiB (nvlsTreeMaxChunkSize); NVL72 racks of 400G: 64 KiB
    assert nvls_tree_chunk_bytes(resolve_topology("4xdgx-h100")) == 64 << 10
    assert nvls_tree_chunk_bytes(resolve_topology("2xgb200-nvl72")) == 64 << 10


def test_tree_ll128_chunks_follow_calccollchunking_by_hand() -> None:
    """Tree LL128's chunk (enqueue.cc lines 2069-2077) by hand. One LL128 slot holds 4,915,200 /
    8 x 15/16 = 576,000 B of data; the grain is 1,920 B. 2 x DGX H100 (ppn 8): s = 1 + 1 + 0.8
    = 2.8, so the first loop wants 2.8 x 64 / 8 = 22.4 chunks a channel (down to 128 KiB) and
    the second 5.6 (down to 32 KiB). 1 MiB on 16 channels: 0 chunks of 576,000, 288,000, 144,000
    and 72,000 (the first loop stops at 72,000 <= 131,072); the second halves 72,000 -> 36,000
    (1 chunk) -> 18,000 (3 chunks: below 5.6, but 18,000 <= 32,768 ends it); aligned down to the
    grain, 9 x 1,920 = 17,280. 1 GiB: 1 GiB / (16 x 576,000) = 116 >= 22.4: one whole slot."""
    from scaleup.tune.size_channels import LL128_GRAIN_BYTES, tree_ll128_chunk_bytes

    assert LL128_GRAIN_BYTES == 1920
    two = resolve_topology("2xdgx-h100")
    assert tree_ll128_chunk_bytes(two, None, 1 << 20, 16) == 17_280
    assert tree_ll128_chunk_bytes(two, None, 1 << 30, 16) == 576_000
    # one node: the protocol's default step; RCCL: not this rule
    assert tree_ll128_chunk_bytes(resolve_topology("dgx-h100"), None, 1 << 30, 16) is None
    assert tree_ll128_chunk_bytes(resolve_topology("2xmi300x-8"), None, 1 << 30, 16) is None


@given(
    nodes=st.integers(2, 64),
    nbytes=st.integers(1, 1 << 34),
    smaller=st.integers(1, 1 << 34),
    channels=st.integers(1, 32),
)
def test_tree_ll128_chunk_is_a_grain_multiple_that_grows_with_the_message(
    nodes: int, nbytes: int, smaller: int, channels: int
) -> None:
    """Within [grain x 9, one slot], a multiple of the grain, never larger for a smaller
    message (the loops only halve, and stop later for fewer bytes)."""
    from scaleup.tune.size_channels import (
        LL128_GRAIN_BYTES,
        LL128_STEP_DATA_BYTES,
        tree_ll128_chunk_bytes,
    )

    topo = _nodes_of_dgx_h100(nodes)
    chunk = tree_ll128_chunk_bytes(topo, None, nbytes, channels)
    assert chunk is not None
    assert chunk % LL128_GRAIN_BYTES == 0
    assert 17_280 <= chunk <= LL128_STEP_DATA_BYTES
    low = tree_ll128_chunk_bytes(topo, None, min(smaller, nbytes), channels)
    assert low is not None
    assert low <= chunk


_TOPOLOGIES: dict[int, Topology] = {}


def _nodes_of_dgx_h100(nodes: int) -> Topology:
    if nodes not in _TOPOLOGIES:
        _TOPOLOGIES[nodes] = resolve_topology(f"{nodes}xdgx-h100")
    return _TOPOLOGIES[nodes]


def test_the_tuner_runs_tree_ll128_on_nccls_chunk_across_nodes_only() -> None:
    """The step a tree LL128 candidate runs with: NCCL's chunk across nodes, the protocol's
    default on one node; the lower bound is taken at the same step (it must stay below the
    simulated time)."""
    from scaleup.tune.question import Question
    from scaleup.tune.rules import CHUNK_BYTES

    cand = Candidate("tree", "ll128", 16)
    for topo, nbytes, step in (
        (resolve_topology("2xdgx-h100"), 1 << 20, 17_280.0),
        (resolve_topology("2xdgx-h100"), 1 << 30, 576_000.0),
        (resolve_topology("dgx-h100"), 1 << 30, float(CHUNK_BYTES["ll128"])),
    ):
        question = Question(TuneSession(), topo, ("all_reduce", None, "float32", "sum", 0))
        assert question.step_bytes(cand, nbytes) == step
        timed = question.simulate(cand, nbytes, nbytes // 4)
        assert timed is not None
        assert question.lower_bound_s(cand, nbytes // 4) <= timed.time_s
