"""NVLS as NCCL enables it: by dtype and reduction, collective, channels, and across servers
(NVLS-Tree). Rules of NCCL 2.30.7 (src/include/device.h ncclNvlsSupported, src/device/generate.py,
src/graph/tuning.cc); see scaleup.tune.nvls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.spec import DTYPES, REDOPS
from scaleup.errors import UsageError
from scaleup.sim import params as P
from scaleup.topology import analysis, resolve_topology
from scaleup.tune import BenchRequest, TuneSession, candidates, enabled_algorithms
from scaleup.tune.nvls import nvls_disabled, nvls_reduces, nvls_tree_params, server_block
from scaleup.units import GIB

DGX = resolve_topology("dgx-h100")
TWO = resolve_topology("2xdgx-h100")
NVLS = {"nvls", "nvls_tree"}

#: ncclNvlsSupported, written out: (dtype, redop) pairs the switch reduces.
SWITCH_REDUCES = {("float32", "sum"), ("float64", "sum")} | {
    (t, op)
    for t in ("float16", "bfloat16", "int32", "uint32", "int64", "uint64")
    for op in ("sum", "min", "max")
}


def _nvls_candidates(topology, collective, **kw):
    return {c for c in candidates(topology, collective, **kw) if c.algorithm in NVLS}


@pytest.mark.parametrize("dtype", sorted(set(DTYPES.values())))
@pytest.mark.parametrize("redop", REDOPS)
def test_switch_reduces_what_ncclnvlssupported_says(dtype: str, redop: str) -> None:
    """Every (dtype, redop): the rule is the table; never prod, never 8-bit types; and on
    dgx-h100 an NVLS candidate exists exactly then, for every size (candidates do not depend on
    the size)."""
    allowed = (dtype, redop) in SWITCH_REDUCES
    assert nvls_reduces(dtype, redop) is allowed
    assert bool(_nvls_candidates(DGX, "all_reduce", dtype=dtype, redop=redop)) is allowed
    if redop == "prod" or dtype in ("int8", "uint8"):
        assert not allowed
    # all_gather does not reduce: NVLS whatever the type (enqueue.cc)
    assert _nvls_candidates(DGX, "all_gather", dtype=dtype, redop=redop)


def test_known_answers_prod_int8_max() -> None:
    """The issue's cases, as the tuner answers them at 1 GiB on dgx-h100."""
    session = TuneSession()
    sizes = (GIB,)
    chosen = {
        (d, o): session.sweep(DGX, BenchRequest(sizes_bytes=sizes, dtype=d, redop=o))[0].algorithm
        for d, o in [("float32", "prod"), ("int8", "sum"), ("float32", "max"), ("bfloat16", "max")]
    }
    assert chosen[("float32", "prod")] not in NVLS  # it was nvls before the rule
    assert chosen[("int8", "sum")] not in NVLS
    assert chosen[("float32", "max")] not in NVLS
    assert chosen[("bfloat16", "max")] == "nvls"  # may: the switch reduces max on bfloat16


def test_nvls_needs_two_channels_and_nccl_kernels() -> None:
    assert all(c.channels >= 2 for c in _nvls_candidates(DGX, "all_reduce"))
    assert {c.channels for c in _nvls_candidates(DGX, "all_reduce")} == {2, 4, 8, 16}
    # NCCL has no NVLS broadcast/reduce kernel; ours stays in the "all" family
    for op in ("broadcast", "reduce"):
        assert not _nvls_candidates(DGX, op)
        assert _nvls_candidates(DGX, op, family="all")
    assert "nvls_tree" not in enabled_algorithms(DGX, "all_reduce")  # one node: NVLS only


def test_an_override_nccl_cannot_run_is_one_clear_error() -> None:
    with pytest.raises(UsageError, match="does not reduce prod on float32") as info:
        candidates(DGX, "all_reduce", algo="nvls", redop="prod")
    assert info.value.source == "algorithm"
    with pytest.raises(UsageError, match="at least 2 channels"):
        candidates(DGX, "all_reduce", algo="nvls", channels=1)
    assert candidates(DGX, "all_reduce", algo="nvls", channels=2)


def test_across_servers_only_nvls_tree_and_only_for_all_reduce() -> None:
    """tuning.cc: NVLS across nodes needs CollNet (not modelled), NVLS all_gather/reduce_scatter
    across nodes get busBw 0 without it; NVLS_TREE is all_reduce only, never on one node."""
    assert analysis.nvls_tree_capable(TWO)
    assert not analysis.nvls_tree_capable(DGX)
    assert "nvls_tree" in enabled_algorithms(TWO, "all_reduce")
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        assert "nvls" not in enabled_algorithms(TWO, op)
        assert nvls_disabled("nvls", op, multi_node=True) is not None
        if op != "all_reduce":
            assert "nvls_tree" not in enabled_algorithms(TWO, op)
    assert "nvls_tree" not in enabled_algorithms(TWO, "all_reduce", redop="prod")
    assert "nvls_tree" not in enabled_algorithms(TWO, "all_reduce", dtype="int8")
    # no in-switch reduction (NVSwitch gen2, xGMI meshes), or servers unevenly filled: none
    assert "nvls_tree" not in enabled_algorithms(resolve_topology("2xmi300x-8"), "all_reduce")
    assert "nvls_tree" not in enabled_algorithms(TWO, "all_reduce", ranks=range(12))
    assert server_block(TWO, [0, 1, 2, 3, 8, 9, 10, 11]) == 4
    assert "nvls_tree" in enabled_algorithms(TWO, "all_reduce", ranks=[0, 1, 2, 3, 8, 9, 10, 11])
    assert nvls_tree_params(TWO) == {"ranks_per_node": 8, "heads": tuple(range(8))}


def _cut_bound_busbw(topology) -> float:
    """Per-GPU egress of the simulator's links: NVLink at NCCL's 20.6 of 25 GB/s per link plus
    the GPU's NIC at 0.95 of its port (sim.params.LINK_EFFICIENCY), GB/s."""
    gpu, out = topology.accelerators[0].id, 0.0
    for c in topology.channels:
        if c.src == gpu and c.tech.startswith("nvlink"):
            out += c.bandwidth_bytes_per_s * P.LINK_EFFICIENCY[c.tech]
    nic = next(c.dst for c in topology.channels if c.src == gpu and "nic" in c.dst)
    port = next(c for c in topology.channels if c.src == nic and c.dst.startswith("net."))
    return (out + port.bandwidth_bytes_per_s * P.LINK_EFFICIENCY["infiniband"]) / 1e9


def test_nvls_tree_beats_the_cut_bound_of_every_algorithm_without_in_network_reduction() -> None:
    """2 x DGX H100 all_reduce of 8 GiB exceeds what any algorithm without in-network reduction
    can reach, because NVLS-Tree reduces in the NVSwitches.

    The bound. Without in-network reduction every reduction happens in a GPU, and a GPU only
    learns a value by receiving it: for each element, the n = 16 ranks need at least 2(n - 1)
    messages of one element each (n - 1 to combine n contributions into one sum somewhere, at
    least n - 1 more for the other ranks to learn it; one-way gossip needs 2n - 2 calls). So all
    GPUs together send at least 2(n - 1) S bytes for an S-byte all_reduce, and each byte leaves a
    GPU over its NVLinks or its NIC. Per GPU that egress is 18 NVLinks x 25 GB/s x 0.824 (NCCL's
    20.6 GB/s per link) = 370.8 GB/s plus one NDR NIC, 50 GB/s x 0.95 = 47.5 GB/s; per server
    8 NICs x 47.5 = 380 GB/s leave through the NICs and 8 x 370.8 through NVLink. So
    time >= 2(n - 1) S / (n x 418.3 GB/s), i.e. busbw = S / time x 2(n - 1) / n <= 418.3 GB/s.
    The cut across the NICs alone allows far more (each server must send only S: 380 GB/s of
    algbw, busbw 712), so the GPUs' egress, not the NICs, is the binding cut.

    In-switch reduction breaks the message count: a switch sums 8 GPUs' data in one read, and
    its multicast delivers the sum to 8 GPUs from one write, so a GPU sends S (1 + 1/8) through
    NVLink and S / 8 through its NIC: busbw up to 370.8 x 0.85 (NVLS efficiency) x 8/9 x 2 x
    15/16 ~ 525 GB/s before latencies. Measured: ~470-480 GB/s busbw at 2 nodes
    (NVIDIA/nccl-tests #319, #309).
    """
    bound = _cut_bound_busbw(TWO)
    assert bound == pytest.approx(18 * 20.6 + 50 * 0.95)  # 418.3 GB/s
    session = TuneSession()
    [choice] = session.sweep(TWO, BenchRequest(sizes_bytes=(8 * GIB,)))
    busbw = 8 * GIB / choice.time_s * 2 * 15 / 16 / 1e9
    assert choice.algorithm == "nvls_tree"
    assert busbw > bound
    # and the best algorithm without in-network reduction stays under the bound
    [flat] = session.sweep(TWO, BenchRequest(sizes_bytes=(8 * GIB,), algorithm="hierarchical"))
    assert 8 * GIB / flat.time_s * 2 * 15 / 16 / 1e9 < bound


NVL72 = resolve_topology("gb200-nvl72")


def test_nvls_all_gather_and_reduce_scatter_need_at_most_32_ranks_per_domain() -> None:
    """enqueue.cc lines 2004-2006: NVLS all_gather / reduce_scatter are skipped when localRanks
    > NCCL_MAX_NVLS_ARITY (32); all_reduce keeps NVLS (its graph has 32 heads). An NVL72 rack is
    one NVLink domain (one NCCL node), so its 72 ranks lose NVLS all_gather, and 32 of them keep
    it; the 72 MI455X of helios-72 (no NCCL: the cap is NCCL's kernels') keep it."""
    for op in ("all_gather", "reduce_scatter"):
        assert "nvls" not in enabled_algorithms(NVL72, op)
        assert "nvls" in enabled_algorithms(NVL72, op, ranks=range(32))
        assert "nvls" not in enabled_algorithms(NVL72, op, ranks=range(33))
        with pytest.raises(UsageError, match="at most 32 ranks per NVLink domain, not 72"):
            candidates(NVL72, op, algo="nvls")
    assert "nvls" in enabled_algorithms(NVL72, "all_reduce")
    assert "nvls" in enabled_algorithms(resolve_topology("helios-72"), "all_gather")


def test_nvls_all_reduce_on_72_ranks_has_32_heads() -> None:
    """search.cc lines 1125-1128: the NVLS graph has min(32, ngpus) channels, GPU c heading
    channel c; the builder's slices are owned by ranks 0..31 only (the others scatter and
    gather). Worked by hand: a head's links carry S (1 + 1/32) each way, a rank of a 72-head
    schedule S (1 + 1/72), so the 32-head all_reduce is slower by (1 + 1/32) / (1 + 1/72) =
    1.0170 on a bandwidth-bound size (the 25 us NVLS latency is ~0.3% of 4 GiB's ~8 ms)."""
    from scaleup.collectives.algorithms import build_schedule
    from scaleup.collectives.spec import CollectiveSpec
    from scaleup.sim.simulate import simulate
    from scaleup.tune.channel_search import nvls_heads
    from scaleup.tune.channels import GroupShape

    plan = nvls_heads(NVL72)
    assert [ch.segments[0].ranks[0] for ch in plan.channels] == list(range(32))
    assert GroupShape.of(NVL72).params("nvls", 24) == {"heads": 32}
    assert GroupShape.of(DGX).params("nvls", 16) == {}
    assert GroupShape.of(resolve_topology("helios-72")).params("nvls", 16) == {}
    assert len(nvls_heads(resolve_topology("helios-72")).channels) == 72  # NCCL's cap only
    assert len(nvls_heads(resolve_topology("2xgb200-nvl72")).channels) == 32  # 32 of 72 NICs
    spec = CollectiveSpec("all_reduce", 72, GIB)  # 4 GiB of float32
    heads32 = build_schedule("nvls", spec, channels=2, heads=32)
    every = build_schedule("nvls", spec, channels=2)
    assert set(heads32.table.rank.tolist()) == set(range(32))
    assert set(every.table.rank.tolist()) == set(range(72))
    ratio = simulate(heads32, NVL72).time_s / simulate(every, NVL72).time_s
    assert ratio == pytest.approx((1 + 1 / 32) / (1 + 1 / 72), rel=0.005)
    # other collectives ignore the heads (a group's parameters carry them whatever the op)
    gather = build_schedule("nvls", CollectiveSpec("all_gather", 72, 72 * 64), heads=32)
    assert set(gather.table.rank.tolist()) == set(range(72))
    with pytest.raises(UsageError, match="heads"):
        build_schedule("nvls", spec, heads=73)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40),
    data=st.data(),
    channels=st.integers(1, 3),
    count=st.integers(0, 300),
    dtype=st.sampled_from(["int32", "float32", "float16", "float64"]),
)
def test_nvls_all_reduce_with_fewer_heads_than_ranks_is_correct(n, data, channels, count, dtype):
    """Any head count 1..n, odd sizes and dtypes: the schedule computes the all_reduce (every
    element summed once over every rank, delivered to every rank), and only heads issue ops."""
    from scaleup.collectives.algorithms import build_schedule
    from scaleup.collectives.spec import CollectiveSpec
    from scaleup.collectives.verify import verify

    heads = data.draw(st.integers(1, n))
    schedule = build_schedule(
        "nvls", CollectiveSpec("all_reduce", n, count), channels=channels, heads=heads
    )
    verify(schedule, dtype)
    assert set(schedule.table.rank.tolist()) <= set(range(heads))
