"""Pipelined connections (``run(step_bytes=q)``, scaleup.sim.pipeline) and NCCL's p2p batches."""

from __future__ import annotations

import numpy as np
import pytest
from tests.sim.helpers_sim import alpha_beta, uniform_switch

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.schedule import OpKind
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim import params as P
from scaleup.sim.pipeline import NCCL_STEPS, window_covers_latency
from scaleup.topology import resolve_topology
from scaleup.tune.rules import CHUNK_BYTES

S = 64 << 20  # bytes
CHUNKS = (16, 64, 256)
#: Large enough that 256 chunks of a lane are still at least one step (512 KiB) each: below a
#: step, a chunk is the whole message of its hop and the fill shrinks with it, as in NCCL.
S_BIG = 1 << 30


def _time(
    topo, algo: str, coll: str, n: int, chunks: int, proto: str, size: int = S, **kw
) -> float:  # type: ignore[no-untyped-def]
    count = n * chunks * 1024
    schedule = build_schedule(
        algo, CollectiveSpec(coll, nranks=n, count=count), chunks=chunks, **kw
    )
    compiled = compile_schedule(schedule, topo)
    return compiled.run(proto, scale=size / 4 / count, step_bytes=CHUNK_BYTES[proto]).time_s


@pytest.mark.parametrize(
    ("algo", "coll", "proto"),
    [("ring", "broadcast", "simple"), ("tree", "broadcast", "ll"), ("ring", "reduce", "simple")],
)
def test_chunk_count_does_not_change_the_time(algo: str, coll: str, proto: str) -> None:
    """16, 64 and 256 chunks agree within 1%: the chunk cap only bounds simulation cost."""
    topo = resolve_topology("dgx-h100")
    times = [_time(topo, algo, coll, 4, c, proto, S_BIG, channels=2) for c in CHUNKS]
    assert max(times) / min(times) - 1 < 0.01, times


def test_tree_all_reduce_converges() -> None:
    topo = resolve_topology("dgx-h100")
    times = [_time(topo, "tree", "all_reduce", 4, c, "simple", S_BIG, channels=1) for c in (16, 64)]
    assert max(times) / min(times) - 1 < 0.01, times


@pytest.mark.parametrize("coll", ["broadcast", "reduce"])
def test_chain_hand_worked(coll: str) -> None:
    """Chain broadcast (and reduce towards the root) on a line of k ranks (a contention-free
    switch, one channel).

    Hop 0 streams the S bytes from the root at B (one thread block or the GPU's links, whichever
    is less) after its latency ``lat``: it ends at ``start + lat + S/B``. Each further hop starts
    once the previous one has moved one step of q bytes and has paid its own latency, then streams
    at B behind it, so it ends ``lat + q/B`` after the previous hop. With k ranks (k - 1 hops)::

        T = start + (k-1) lat + S/B + (k-2) q/B

    k = 4, Simple, q = 512 KiB, S = 64 MiB: about start + 3 lat + 1.03 S/B, whatever the chunks
    (before: with every chunk sharing each link fairly, 3 S/B, no pipelining at all).

    The reduce takes the same time: each receiver reads its own input inline, as NCCL's
    ``recvReduceSend`` / ``recvReduceCopy`` do (``src/device/reduce.h``), so the simulator's
    just-in-time copy of that input streams into the reduce and nothing is copied up front.
    Before, every rank copied its input at time 0 (the root one op of the whole count) and the
    first hop into a rank waited for it: 1726 us here against 1678 (+2.9%).
    """
    k, proto = 4, "simple"
    topo = uniform_switch(k)
    ab = alpha_beta(topo, protocol=proto)
    q = CHUNK_BYTES[proto]
    want = ab.launch_s + (k - 1) * ab.alpha_s + S / ab.beta_bytes_per_s
    want += (k - 2) * q / ab.beta_bytes_per_s
    for chunks in (1, 16, 64):
        got = _time(topo, "ring", coll, k, chunks, proto, channels=1)
        assert got == pytest.approx(want, rel=1e-3), (chunks, got, want)


def test_reduce_runs_at_the_broadcast_rate_on_a_dgx_h100() -> None:
    """Reduce and broadcast move the same bytes over the same chains (every rank but the last
    sends S once): on 8 H100s at 1 GiB, 16 chunks, their times agree within 3%. Before the
    reduce's copies were just in time, 3843 against 3070 us (-20% of busbw)."""
    topo = resolve_topology("dgx-h100")
    times = {
        coll: _time(topo, "ring", coll, 8, 16, "simple", S_BIG, channels=16)
        for coll in ("reduce", "broadcast")
    }
    assert times["reduce"] == pytest.approx(times["broadcast"], rel=0.03), times


def test_without_step_bytes_nothing_pipelines() -> None:
    """The default run waits for every predecessor's end: a chain of k-1 hops costs k-1 S/B."""
    k = 4
    topo = uniform_switch(k)
    ab = alpha_beta(topo)
    count = k * 16 * 1024
    schedule = build_schedule("ring", CollectiveSpec("broadcast", nranks=k, count=count), chunks=16)
    t = compile_schedule(schedule, topo).run("simple", scale=S / 4 / count).time_s
    assert t > (k - 1) * S / ab.beta_bytes_per_s


@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
def test_window_covers_every_step_latency(proto: str) -> None:
    """NCCL_STEPS slots outlast a round trip of the slowest step latency at every thread-block
    rate: the window never stalls a sender, so it adds no rate limit to the model."""
    assert NCCL_STEPS == 8
    worst = max(row[proto] for row in P.STEP_LATENCY_S.values())
    for caps in P.CTA_BYTES_PER_S.values():
        assert window_covers_latency(CHUNK_BYTES[proto], caps[proto], worst)


def _a2a(topo, n: int, channels: int, p2p: str, p2p_channels: int = 32) -> float:  # type: ignore[no-untyped-def]
    count = n * channels * 1024
    spec = CollectiveSpec("all_to_all", nranks=n, count=count)
    schedule = build_schedule("direct", spec, channels=channels, p2p=p2p, p2p_channels=p2p_channels)
    return compile_schedule(schedule, topo).run("simple", scale=(1 << 30) / 4 / count).time_s


def test_two_node_all_to_all_reaches_twice_the_nic() -> None:
    """2 x DGX H100: half of each rank's bytes cross its NIC; NCCL >= 2.19 runs the two p2p groups
    (own node, other node) on their own channels at once, so busbw = 2 x NIC x (n-1)/n as the
    NCCL maintainer states for two nodes (NVIDIA/nccl-tests #130), the fluid bound."""
    topo = resolve_topology("2xdgx-h100")
    batched = _a2a(topo, 16, 8, "batched")
    assert batched == pytest.approx(_a2a(topo, 16, 8, "all"), rel=0.02)
    busbw = (1 << 30) / batched * 15 / 16 / 1e9
    assert 80 < busbw < 95  # 2 x ~47.5 GB/s x 15/16


def test_batches_beyond_the_p2p_channels_run_in_turn() -> None:
    """72 ranks, one channel per peer: 9 groups of 8 rounds. With 32 p2p channels all 9 run at
    once (9 thread blocks); with 2, two at a time (5 waves of at most 2 thread blocks, each
    below the GPU's NVLink rate), so it takes longer. (With 8 channels per peer and 32 p2p
    channels the 3 waves each saturate NVLink: no slower than all at once.)"""
    topo = resolve_topology("gb200-nvl72")
    assert _a2a(topo, 72, 1, "batched", 2) > 1.5 * _a2a(topo, 72, 1, "batched", 32)


CONNECTION_CASES = [("tree", 16, 4, 4), ("ring", 8, 2, 1), ("hierarchical", 16, 2, 2)]


@pytest.mark.parametrize(("algorithm", "ranks", "channels", "chunks"), CONNECTION_CASES)
def test_connection_order_by_one_key_is_the_column_sort(
    monkeypatch, algorithm, ranks, channels, chunks
):
    """A connection's previous op found by one int64 key equals the five-column lexsort's."""
    import numpy as np

    from scaleup.sim import pipeline

    params = {"ranks_per_node": 8} if algorithm == "hierarchical" else {}
    spec = CollectiveSpec("all_reduce", ranks, ranks * channels * chunks * 64)
    table = build_schedule(algorithm, spec, channels=channels, chunks=chunks, **params).table
    keyed = pipeline.stream_parts(table)
    monkeypatch.setattr(pipeline, "_one_key", lambda cols: None)
    sorted_ = pipeline.stream_parts(table)
    assert (keyed[2] >= 0).any()
    for a, b in zip(keyed, sorted_, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("size", [1 << 30, 8 << 30])
def test_nvls_tree_chunk_count_does_not_change_the_time(size: int) -> None:
    """NVLS-Tree on 2 x 8 H100 stepping NCCL's NVLS-Tree chunk: 16 and 64 chunks agree within
    1%, 4 within 3%. A chunk's ops wait for the previous chunk's on their connection (a channel
    runs its chunks in order), but that wait orders bytes only, so each chunk's in-switch step
    and network latency overlap the previous chunk's transfer, as NCCL_STEPS slots let them; when
    the wait also held the latency, 64 chunks took twice as long as 16. With the tree leg at
    NCCL's per-head rate (params.NVLS_TREE_BUS_BYTES_PER_S: one leg thread block carries a
    channel's up and down ops of every chunk) a residue per chunk remains: 4 chunks run 2.3%
    faster than 64 at 1 GiB."""
    from scaleup.tune.size_channels import nvls_tree_chunk_bytes

    topo = resolve_topology("2xdgx-h100")
    step = nvls_tree_chunk_bytes(topo)
    times = []
    for chunks in (4, 16, 64):
        count = 16 * 16 * chunks * 1024
        spec = CollectiveSpec("all_reduce", nranks=16, count=count)
        schedule = build_schedule(
            "nvls_tree", spec, chunks=chunks, channels=16, ranks_per_node=8, heads=tuple(range(8))
        )
        run = compile_schedule(schedule, topo).run(
            "simple", scale=size / 4 / count, step_bytes=step
        )
        times.append(run.time_s)
    assert max(times[1:]) / min(times[1:]) - 1 < 0.01, times
    assert max(times) / min(times) - 1 < 0.03, times


def test_a_wait_on_the_connection_predecessor_orders_bytes_only() -> None:
    """Every dependency of an NVLS-Tree op on the same op of the previous chunk is on its own
    connection (``dep_order``), and none of those streams: it is an order, not a release."""
    from scaleup.sim.pipeline import stream_parts

    spec = CollectiveSpec("all_reduce", nranks=16, count=16 * 2 * 4 * 64)
    table = build_schedule(
        "nvls_tree", spec, chunks=4, channels=2, ranks_per_node=8, heads=(0, 4)
    ).table
    dep_stream, _, conn_pred, dep_order = stream_parts(table)
    owner = np.repeat(np.arange(table.n_ops), np.diff(table.dep_ptr))
    assert dep_order.any()
    assert not (dep_stream & dep_order).any()
    np.testing.assert_array_equal(dep_order, conn_pred[owner] == table.dep_idx)
    switch = table.kind == int(OpKind.SWITCH_REDUCE)
    assert (conn_pred[switch] >= 0).any()  # in-switch ops have connections too
