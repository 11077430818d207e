"""Pipelined connections: what ``CompiledSchedule.run(..., step_bytes=q)`` changes.

NCCL moves data through a connection (one sender, one receiver, one channel) in *steps* of a
fixed slot size ``q`` (Simple 512 KiB, LL128 ~64 KiB, LL 32 KiB of data per slot), and keeps
``NCCL_STEPS`` = 8 slots per connection (NVIDIA/nccl ``src/include/device.h``). A sender may
therefore run up to 8 steps ahead of its receiver: while step ``i``'s flag is still on its way,
steps ``i+1 .. i+7`` are being written. Two consequences, which is all this module models:

1. **Cut-through between hops.** A rank forwards (or reduces and forwards) a step as soon as that
   step has arrived, not when the whole message has: the next hop of a chain can start once the
   previous hop has moved ``q`` bytes, so a chain of ``h`` hops costs ``S/B + (h-1)(q/B + lat)``
   instead of ``h (S/B + lat)``. In the simulator a dependency between two *fabric* ops (the
   successor forwards or accumulates what the predecessor moved) is released when the
   predecessor has moved ``min(q, its bytes)``; the successor then pays its own latency, and it
   cannot finish before the predecessor has (it cannot forward bytes it has not received).
   A *local* reduce next to a fabric op streams the same way: it folds in, step by step, what
   a peer is still delivering (a tree parent's later children land in scratch and are folded
   into its sum, NCCL's one ``FanAsymmetric`` pass over every source), and its successor may
   forward the folded steps. So does an *in-switch* op next to a fabric op (NVLS-Tree: a
   head's ``ld_reduce`` of a chunk goes to the network step by step, and what arrives from the
   network is multicast step by step, as NCCL's reduce and broadcast warps move it). And so
   does a *local copy* next to a fabric op: a receiver's just-in-time copy of its own input into
   a reduce's target stands for NCCL reading that input inline (``recvReduceSend``), step by
   step.
2. **Latency hidden behind the window.** The ops of one connection (same kind, issuing rank,
   channel tag, source and destination ranks; for an in-switch op its first source and
   destination and how many of each) run in op order, each op's bytes after the previous op's
   bytes, but an op's *latency* runs while its predecessor is still moving bytes: with 8 slots
   in flight the per-step flag/fence latency overlaps the transfer and is paid once per hop,
   not once per chunk. A dependency of an op on its own connection predecessor (a builder's
   "chunk ``c`` after chunk ``c - 1``", NVLS-Tree's) is that order and nothing more: it holds
   the op's bytes, not its release, so its latency still overlaps. So cutting a message into
   more chunks (the ``chunks`` of a pipelined schedule) no longer adds a latency per chunk, and
   the simulated time converges as the chunk count grows: the schedule's chunks only split the
   bytes; the step size ``q`` sets the pipeline fill (NVLS-Tree steps NCCL's NVLS-Tree chunk,
   :func:`scaleup.tune.size_channels.nvls_tree_chunk_bytes`).

The window itself never binds in the modelled range: 8 slots of ``q`` bytes at a thread block's
full rate last longer than a round trip of the slowest step latency for every protocol
(Simple 8 x 512 KiB / 60 GB/s = 70 us against 2 x 14 us over a NIC; LL 8 x 32 KiB / 30 GB/s =
8.7 us against 2 x 2.7 us; :func:`window_covers_latency` checks it), so no extra rate limit is
applied: this is stated, and tested, rather than simulated. It holds for the default steps over
NVLink, PCIe and InfiniBand, not over EFA with NCCL's smaller network chunks (a ~48 us round
trip caps 8 slots of tree LL128's 71,040 B at 11.8 GB/s a connection): there the cap is an
approximation left out (docs/models.md section 13, "The window").

Without ``step_bytes`` (the default) nothing changes: every dependency waits for its
predecessor's end and then pays the successor's latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaleup.collectives.schedule import OpKind, OpTable

__all__ = [
    "NCCL_STEPS", "Pipeline", "pipeline_structure", "stream_parts", "window_covers_latency",
]  # fmt: skip

#: Slots per connection (NVIDIA/nccl ``src/include/device.h``: ``#define NCCL_STEPS 8``).
NCCL_STEPS = 8


@dataclass(frozen=True)
class Pipeline:
    """The pipelining structure of a compiled schedule (independent of protocol and size).

    ``succ_stream[e]``: successor entry ``e`` (in the compiled successor CSR) is a cut-through
    edge; ``dep_stream[e]``: dependency entry ``e`` (in the table's dependency CSR) is one;
    ``streams_out[i]``: op ``i`` has a cut-through successor; ``conn_pred[i]``: the previous op
    of ``i``'s connection, or -1; ``dep_order[e]`` / ``succ_order[e]``: the entry is an op's
    dependency on its own connection predecessor, an order (its bytes follow the
    predecessor's) that does not hold back its latency.
    """

    succ_stream: np.ndarray
    dep_stream: np.ndarray
    streams_out: np.ndarray
    conn_pred: np.ndarray
    dep_order: np.ndarray
    succ_order: np.ndarray


def pipeline_structure(t: OpTable) -> Pipeline:
    """Cut-through edges (between two fabric ops, or a fabric op and a local reduce, a local
    copy or an in-switch op), connection order and the dependencies that are only that order."""
    dep_stream, streams_out, conn_pred, dep_order = stream_parts(t)
    order = np.argsort(t.dep_idx, kind="stable")  # the compiled successor CSR's order
    return Pipeline(
        dep_stream[order], dep_stream, streams_out, conn_pred, dep_order, dep_order[order]
    )


def stream_parts(t: OpTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:class:`Pipeline`'s ``dep_stream``, ``streams_out``, ``conn_pred`` and ``dep_order``
    (everything but the successor order, which a caller timing representatives does not
    need)."""
    n = t.n_ops
    kind = t.kind.astype(np.int64)
    src = t.src_rank[t.src_ptr[:-1]] if n else np.zeros(0, dtype=np.int64)
    dst = t.dst_rank[t.dst_ptr[:-1]] if n else np.zeros(0, dtype=np.int64)
    switch = kind == int(OpKind.SWITCH_REDUCE)
    p2p = ~switch & (src != dst)
    fold = (kind == int(OpKind.REDUCE)) & (src == dst)  # a local reduce of what arrives
    own = (kind == int(OpKind.COPY)) & (src == dst)  # a local copy: an input read inline
    n_deps = np.diff(t.dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), n_deps)
    conn_pred = _connection_predecessors(t, kind, src, dst, p2p | switch)
    pred = t.dep_idx
    dep_order = conn_pred[owner] == pred
    flows = p2p | fold | switch | own
    dep_stream = flows[pred] & flows[owner] & (p2p[pred] | p2p[owner]) & ~dep_order
    streams_out = np.bincount(t.dep_idx[dep_stream], minlength=n) > 0
    return dep_stream, streams_out, conn_pred, dep_order


def _connection_predecessors(
    t: OpTable, kind: np.ndarray, src: np.ndarray, dst: np.ndarray, wired: np.ndarray
) -> np.ndarray:
    """Each op's previous op on its connection (kind, issuing rank, channel tag, sources and
    destinations; an in-switch op's first source and destination and their counts), or -1."""
    conn_pred = np.full(t.n_ops, -1, dtype=np.int64)
    ops = np.flatnonzero(wired)
    if len(ops):
        n_src, n_dst = np.diff(t.src_ptr), np.diff(t.dst_ptr)
        cols = [
            np.asarray(c, dtype=np.int64)[ops]
            for c in (kind, t.rank, t.channel, src, dst, n_src, n_dst)
        ]
        key = _one_key(cols)
        if key is None:  # too wide for one int64: sort the columns
            srt = np.lexsort((ops, *reversed(cols)))  # by the columns, then op
            same = np.ones(len(ops) - 1, dtype=bool)
            for c in cols:
                same &= c[srt][1:] == c[srt][:-1]
        else:  # a stable sort of the key keeps op order within a connection
            srt = np.argsort(key, kind="stable")
            same = key[srt][1:] == key[srt][:-1]
        conn_pred[ops[srt][1:][same]] = ops[srt][:-1][same]
    return conn_pred


def _one_key(cols: list[np.ndarray]) -> np.ndarray | None:
    """The columns (non-negative) as one int64 in their lexicographic order, or None when their
    ranges multiply past 2^62."""
    key = np.zeros(len(cols[0]), dtype=np.int64)
    span = 1
    for c in cols:
        width = int(c.max()) + 1
        span *= width
        if span >= 1 << 62:
            return None
        key = key * width + c
    return key


def window_covers_latency(step_bytes: float, cta_bytes_per_s: float, step_latency_s: float) -> bool:
    """Whether ``NCCL_STEPS`` slots of ``step_bytes`` at a thread block's rate outlast a round
    trip (data flag there, credit back) of ``step_latency_s``: then the window never stalls the
    sender and the per-step latency is fully overlapped.

    >>> window_covers_latency(512 * 1024, 60e9, 14e-6)
    True
    """
    return NCCL_STEPS * step_bytes / cta_bytes_per_s >= 2.0 * step_latency_s
