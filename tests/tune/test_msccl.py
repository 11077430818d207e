"""RCCL's MSCCL all-pairs all_reduce on one 8 x MI300X node (scaleup.tune.msccl), and the
all-pairs schedule itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.sim import params as P
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.msccl import ALLREDUCE_PAIRS, msccl_candidate, msccl_rule


def _choices(
    topology: str, sizes: tuple[int, ...], **request: object
) -> list[tuple[str, str, int]]:
    topo = resolve_topology(topology)
    req = BenchRequest(sizes_bytes=sizes, **request)  # type: ignore[arg-type]
    return [(c.algorithm, c.protocol, c.channels) for c in TuneSession().sweep(topo, req)]


def test_mi300x_node_runs_msccl_in_its_byte_ranges() -> None:
    sizes = (8, 1024, 65536, 262144, 1 << 20, 16 << 20, 32 << 20)
    got = _choices("mi300x-8", sizes)
    assert got[0][0] != "allpairs"  # 2 float32 elements: not a multiple of nchunksperloop 256
    assert got[1] == ("allpairs", "ll", 4)
    assert got[2] == ("allpairs", "ll", 4)
    assert got[3] == ("allpairs", "ll", 8)
    assert got[4] == ("allpairs", "simple", 8)
    assert got[5] == ("allpairs", "simple", 8)
    assert got[6][0] != "allpairs"  # above the last file's maxBytes (16 MiB)


@pytest.mark.parametrize(
    ("topology", "request_args"),
    [
        ("mi300x-8", {"ranks": 4}),  # a subset of the node matches no MSCCL node model
        ("2xmi300x-8", {}),  # 16 ranks: RCCL ships 8-rank algorithms only
        ("dgx-h100", {}),  # NCCL has no MSCCL
        ("mi250x-8", {}),  # 16 GCDs
        ("mi300x-8", {"op": "all_gather"}),
        ("mi300x-8", {"algorithm": "ring"}),  # what the user pinned stands
        ("mi300x-8", {"algorithms": frozenset({"ring", "tree"})}),  # NCCL_ALGO likewise
    ],
)
def test_msccl_applies_nowhere_else(topology: str, request_args: dict[str, object]) -> None:
    got = _choices(topology, (1024, 1 << 20), **request_args)
    assert all(algo != "allpairs" for algo, _, _ in got)


def test_rule_needs_the_whole_node_and_rccl() -> None:
    assert msccl_rule(resolve_topology("mi300x-8"), "all_reduce") == ALLREDUCE_PAIRS
    assert msccl_rule(resolve_topology("mi300x-8"), "all_reduce", range(4)) == ()
    assert msccl_rule(resolve_topology("dgx-h100"), "all_reduce") == ()
    assert msccl_candidate(ALLREDUCE_PAIRS, 1 << 24, 1 << 22) is not None
    assert msccl_candidate(ALLREDUCE_PAIRS, (1 << 24) + 2048, (1 << 22) + 512) is None
    assert msccl_candidate(ALLREDUCE_PAIRS, 0, 0) is None


def test_one_kib_by_hand() -> None:
    # two rounds of pushes over the full mesh, each one LL step on xGMI (RCCL set 5: 0.8 us) plus
    # its route, after the host launch and RCCL's LL base latency; 1 KiB moves in nanoseconds
    topo = resolve_topology("mi300x-8")
    (choice,) = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(1024,)))
    start = P.KERNEL_LAUNCH_S + P.RCCL_BASE_LATENCY_S["ring"]["ll"]
    two_steps = 2 * P.RCCL_HW_LATENCY_S[5]["nvlink"]["ring"]["ll"]
    assert start + two_steps <= choice.time_s <= start + two_steps + 1.0e-6


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 9),
    count=st.integers(0, 300),
    channels=st.integers(1, 3),
    chunks=st.integers(1, 2),
    redop=st.sampled_from(["sum", "prod", "max", "min"]),
)
def test_allpairs_schedule_is_correct(n: int, count: int, channels: int, chunks: int, redop: str):
    spec = CollectiveSpec("all_reduce", n, count, redop=redop)
    schedule = build_schedule("allpairs", spec, channels=channels, chunks=chunks)
    verify(schedule)  # raises on a wrong result or a race
