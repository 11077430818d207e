"""NCCL's p2p rule (tune/p2p_rule.py) and the channel bases of the direct all_to_all builder.

Known answers are worked from NCCL's source by hand (src/graph/paths.cc, src/enqueue.cc,
src/include/channel.h); properties hold for every size.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.algorithms.direct import _p2p_channels, _reverse_bits
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.p2p_rule import P2pRule
from scaleup.tune.rules import Candidate
from scaleup.tune.size_channels import ChannelTrim


def test_dgx_h100_rule_by_hand() -> None:
    """18 NVLinks through the NVSwitches: 2 x 18 = 36 -> pow2 64 -> min(32 p2p channels) = 32
    per peer (NCCL prints "32 p2p channels per peer" on DGX H100); nChannelsMin: 32 x 8 > 32
    halves to 4. 1 GiB all_to_all: 128 MiB per peer, 4 parts of 32 MiB > 16 MiB (512 KiB x 32)
    -> 8 parts of 16 MiB."""
    rule = P2pRule.of(resolve_topology("dgx-h100"))
    assert (rule.library, rule.per_peer_max, rule.per_peer_min) == ("nccl", 32, 4)
    assert rule.chunk_bytes == 512 * 1024
    assert rule.channels(128 << 20) == 8
    assert rule.channels(64 << 10) == 1  # one part of the 64 KiB minimum
    assert rule.channels(256 << 10) == 4
    cand = rule.pick("all_to_all", Candidate("direct", "ll128", 16), 1 << 30)
    assert cand == Candidate("direct", "simple", 8)


def test_protocol_threshold_by_hand() -> None:
    """LL while bytes <= channels x 16 KiB (NCCL); one part <= 16 KiB (RCCL)."""
    rule = P2pRule.of(resolve_topology("dgx-h100"))
    assert rule.pick("send_recv", Candidate("direct", "simple", 1), 16384).protocol == "ll"
    assert rule.pick("send_recv", Candidate("direct", "ll", 1), 16385).protocol == "simple"
    rccl = P2pRule.of(resolve_topology("mi300x-8"))
    assert rccl.library == "rccl"
    assert rccl.protocol(16384, 1) == "ll"
    assert rccl.protocol(16385, 1) == "simple"


def test_multi_node_rule_by_hand() -> None:
    """2 x DGX H100: a 400G NIC per GPU: max(1 NIC, ceil(50 / 14) = 4) = 4 channels per network
    peer, below the 36 of an NVLink peer; 4 x ceil(16 / 8) = 8 <= 32 keeps 4; nChannelsMin:
    4 x 16 > 32 halves to 2; the chunk is the network's 128 KiB."""
    rule = P2pRule.of(resolve_topology("2xdgx-h100"))
    assert (rule.multi_node, rule.per_peer_max, rule.per_peer_min) == (True, 4, 2)
    assert rule.chunk_bytes == 128 * 1024


def test_grace_blackwell_doubles_the_network_chunk() -> None:
    """NCCL 2.30.7 init.cc lines 831-834: across nodes of Grace-hosted Blackwell (GB200: four
    GPUs a host) the p2p chunk is twice NCCL_P2P_NET_CHUNKSIZE; x86 B200 nodes keep 128 KiB;
    RCCL and one node are not affected."""
    assert P2pRule.of(resolve_topology("3xgb200-nvl72:gpus=4,nic=ib-ndr")).chunk_bytes == 256 << 10
    assert P2pRule.of(resolve_topology("2xhgx-b200:nic=ib-ndr")).chunk_bytes == 128 << 10
    assert P2pRule.of(resolve_topology("2xmi300x-8")).chunk_bytes == 128 << 10


def test_mesh_rules() -> None:
    """DGX-1: a pair joined through a third GPU (NVB) over one link: 2 channels. MI300X (RCCL,
    gfx94): 4 x 1 xGMI link = 4, doubled on one node: 8. PCIe box: 2."""
    assert P2pRule.of(resolve_topology("dgx1-v100")).per_peer_max == 2
    assert P2pRule.of(resolve_topology("mi300x-8")).per_peer_max == 8
    assert P2pRule.of(resolve_topology("pcie-8")).per_peer_max == 2


def test_72_ranks_one_channel_per_peer() -> None:
    """An NVL72 rack: nChannelsMin halves to 1 (72 peers share 32 p2p channels), and a peer's
    block of a 1 GiB all_to_all (14.9 MB) is below the 16 MiB part: one channel."""
    rule = P2pRule.of(resolve_topology("gb200-nvl72"))
    assert rule.per_peer_min == 1
    assert rule.pick("all_to_all", Candidate("direct", "ll", 8), 1 << 30) == Candidate(
        "direct", "simple", 1
    )


def test_other_algorithms_untouched() -> None:
    rule = P2pRule.of(resolve_topology("dgx-h100"))
    cand = Candidate("ring", "ll", 8)
    assert rule.pick("all_reduce", cand, 1 << 20) == cand
    assert rule.pick("all_to_all", cand, 1 << 20) == cand


@given(st.integers(min_value=0, max_value=1 << 34))
def test_channels_within_the_per_peer_bounds(nbytes: int) -> None:
    for rule in (
        P2pRule.of(resolve_topology("dgx-h100")),
        P2pRule("rccl", 8, False, 1 << 19, 8, 4, 32),
    ):
        nc = rule.channels(nbytes)
        assert 1 <= nc <= rule.per_peer_max
        assert rule.protocol(nbytes, nc) in ("ll", "simple")


def test_tuner_simulates_one_candidate_per_size() -> None:
    """The tuner times NCCL's one p2p candidate, not every (protocol, channels) pair."""
    seen: list[Candidate] = []
    session = TuneSession()
    session.observer = lambda outcome: seen.append(outcome.candidate)
    request = BenchRequest(op="all_to_all", sizes_bytes=(1 << 20, 1 << 30))
    choices = session.sweep(resolve_topology("dgx-h100"), request)
    assert [(c.protocol, c.channels) for c in choices] == [("simple", 2), ("simple", 8)]
    assert len(set(seen)) == 2


def test_pinned_protocol_keeps_the_tuner() -> None:
    """--proto (or --channels) leaves the p2p rule out: the user's pick is timed."""
    request = BenchRequest(op="all_to_all", sizes_bytes=(1 << 20,), protocol="ll")
    choice = TuneSession().sweep(resolve_topology("dgx-h100"), request)[0]
    assert choice.protocol == "ll"


def test_reverse_bits_like_nccl() -> None:
    """NCCL's reverseBits keeps the low bits: rounds 0..7 over 32 channels start at
    0, 16, 8, 24, 4, 20, 12, 28; round 32 shares round 0's base."""
    rounds = np.arange(9)
    assert _reverse_bits(rounds, 5).tolist() == [0, 16, 8, 24, 4, 20, 12, 28, 2]
    assert _reverse_bits(np.array([32, 33]), 5).tolist() == [0, 16]


def test_one_node_rounds_get_their_own_channels() -> None:
    """One node (base per round): 8 ranks, 4 parts per peer, 32 p2p channels: the 7 peers' parts
    land on 28 distinct channels, all in one wave; across nodes (base per group of 8) they
    share the same 4 channels."""
    params = {"p2p": "batched", "p2p_channels": 32, "p2p_base": "round"}
    tag, wave = _p2p_channels(8, np.arange(4), params)
    assert len(set(tag[1:].ravel().tolist())) == 28
    assert wave.max() == 0
    tag, wave = _p2p_channels(8, np.arange(4), {**params, "p2p_base": "group"})
    assert set(tag.ravel().tolist()) == {0, 1, 2, 3}


def test_batches_of_later_groups_wait_on_their_channel() -> None:
    """72 ranks, one part per peer, 2 p2p channels, bases per group: 9 groups alternate over the
    2 channels, 5 batches in turn on channel 0."""
    params = {"p2p": "batched", "p2p_channels": 2, "p2p_base": "group"}
    tag, wave = _p2p_channels(72, np.arange(1), params)
    assert wave.max() == 4
    assert sorted(set(tag.ravel().tolist())) == [0, 1]


@pytest.mark.parametrize("base", ["round", "group"])
def test_all_to_all_bases_verify(base: str) -> None:
    from scaleup.collectives.verify import verify

    spec = CollectiveSpec("all_to_all", 11, 11 * 7)
    verify(build_schedule("direct", spec, channels=2, p2p_channels=4, p2p_base=base))


def test_bad_p2p_base() -> None:
    with pytest.raises(UsageError, match="p2p_base"):
        build_schedule("direct", CollectiveSpec("all_to_all", 4, 16), p2p_base="node")


def test_nvls_channels_like_nccl() -> None:
    """ncclNvlsTuning: 16 on Hopper, 24 in one Blackwell NVLink domain, whatever was asked."""
    h100 = ChannelTrim.of(resolve_topology("dgx-h100"))
    gb200 = ChannelTrim.of(resolve_topology("gb200-nvl72"))
    assert h100.channels("nvls", "simple", 1 << 30, 4) == 16
    assert gb200.channels("nvls", "simple", 8, 2) == 24
    assert gb200.channels("ring", "simple", 1 << 30, 30) == 30
