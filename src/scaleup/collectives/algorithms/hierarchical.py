"""Hierarchical all_reduce (``hierarchical``): inside each node, across nodes, inside again.

Ranks ``N * g .. N * g + g - 1`` form node ``N`` (``g = ranks_per_node``, default 8; the world size
must be a multiple of it). For each lane (``chunks x channels`` near-equal regions of the count,
channel tag = channel):

1. intra-node ring reduce-scatter: the region is cut into ``g`` blocks; block ``j`` is reduced
   round the node's ring and ends at local rank ``(j - 1) % g`` (its *owner*) in every node; each
   receiver copies its own input block into the target just in time (``reduce_chains``), so
   every rank's ops in a step have one size and start together;
2. inter-node ring all-reduce of block ``j`` among the ``m = n / g`` owners of ``j`` (one per node),
   the block cut into ``m`` sub-blocks (reduce-scatter + all-gather across nodes, in the output
   buffer that already holds each node's partial sum, so no extra copies);
3. intra-node ring all-gather of block ``j`` from its owner.

::

    2 nodes x 4 ranks, block 0 (owner: local rank 3)
    steps 0..2  intra-node RS   node N: l0 -R-> l1 -R-> l2 -R-> l3
    steps 3..4  inter-node AR   n0.l3 <-> n1.l3 (sub-block RS, then AG)
    steps 5..7  intra-node AG   node N: l3 -C-> l0 -C-> l1 -C-> l2

Each rank sends ``2(g-1)/g * S`` inside its node and ``2(m-1)/m * S/g`` across nodes.

Pipelining: with ``chunks > 1`` every op of chunk ``c`` also waits for the same op of chunk
``c - 1`` (same rank, role and channel: a channel's thread block runs its chunks in order), so
chunk ``c``'s inter-node phase depends only on chunk ``c``'s own reduce-scatter and overlaps chunk
``c + 1``'s, as NCCL's tree / NVLSTree pipeline intra-node reduce, inter-node exchange and
intra-node broadcast. The time tends to the slowest phase's, not the sum of the three.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    OUTPUT,
    TableBuilder,
    chains,
    check_int,
    local_copies,
    reduce_chains,
    split,
)
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec

__all__ = ["BUILDERS", "PARAMS", "check", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "ranks_per_node": 8}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks`` and ``ranks_per_node``."""
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "ranks_per_node": check_int("ranks_per_node", params.get("ranks_per_node", 8)),
    }


def check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    """The world size must be a multiple of ``ranks_per_node`` (or 1)."""
    g = params["ranks_per_node"]
    if spec.nranks > 1 and spec.nranks % g:
        return f"world size {spec.nranks} is not a multiple of ranks_per_node={g}"
    return None


def _sub_splits(sizes: np.ndarray, parts: int) -> tuple[np.ndarray, np.ndarray]:
    """Split every entry of ``sizes`` into ``parts``: (relative offsets, sizes), (..., parts)."""
    flat = sizes.ravel()
    q, r = flat // parts, flat % parts
    sub = q[:, None] + (np.arange(parts)[None, :] < r[:, None])
    rel = np.cumsum(sub, axis=1) - sub
    return rel.reshape(*sizes.shape, parts), sub.reshape(*sizes.shape, parts)


class _InOrder(TableBuilder):
    """A :class:`TableBuilder` that makes op ``i`` also wait for op ``i - shift`` when ``shift``
    is set: the same op of the previous chunk (same rank, role and channel), because a channel's
    thread block runs its chunks in order. That is what lets the phases pipeline: chunk ``c``
    crosses the nodes while chunk ``c + 1`` is reduced inside them (NCCL's tree / NVLSTree)."""

    shift: int = 0

    def add_batch(self, kind: Any, **cols: Any) -> np.ndarray:  # type: ignore[override]
        if self.shift:
            n = len(np.asarray(cols["src_rank"]).ravel())
            deps = cols.pop("deps", None)
            dep = np.zeros((n, 0), np.int64) if deps is None else np.asarray(deps, np.int64)
            prev = np.arange(self.n_ops, self.n_ops + n, dtype=np.int64) - self.shift
            cols["deps"] = np.concatenate([dep.reshape(n, -1), prev[:, None]], axis=1)
        return super().add_batch(kind, **cols)


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, g = spec.nranks, params["ranks_per_node"]
    m = n // g
    b = _InOrder(spec, "hierarchical", params=params)
    k, chunks = params["channels"], params["chunks"]
    reg_off, reg_size = split(spec.count, k * chunks)  # lane = chunk * k + channel
    # Chunks are chained op for op only when every chunk has the same ops (no empty sub-block).
    chained = int(reg_size.min()) >= g * m
    prev_ops = None
    for c in range(chunks):
        lanes = slice(c * k, (c + 1) * k)
        before = b.n_ops
        b.shift = prev_ops if (chained and prev_ops) else 0
        _lanes(b, g, m, reg_off[lanes], reg_size[lanes])
        prev_ops = b.n_ops - before
    b.shift = 0
    return b.build()


def _lanes(b: _InOrder, g: int, m: int, reg_off: np.ndarray, reg_size: np.ndarray) -> None:
    """The three phases for ``len(reg_off)`` lanes, lane ``i`` on channel ``i``."""
    lanes = len(reg_off)
    channel_of = np.arange(lanes)
    rel, bsize = _sub_splits(reg_size, g)  # (R, g)
    boff = reg_off[:, None] + rel
    srel, ssize = _sub_splits(bsize, m)  # (R, g, m)
    soff = boff[:, :, None] + srel
    lane_n_j = np.stack(
        np.meshgrid(np.arange(lanes), np.arange(m), np.arange(g), indexing="ij"), -1
    ).reshape(-1, 3)
    lane, node, blk = (
        lane_n_j[:, 0],
        lane_n_j[:, 1],
        lane_n_j[:, 2],
    )  # rows (R*m*g): lane, node, block|pos
    hops_g, hops_m = np.arange(g - 1), np.arange(m - 1)
    # --- phase 1: intra-node ring reduce-scatter (pos = local rank), init copies per rank
    if g == 1:
        init = local_copies(b, node, INPUT, reg_off[lane], OUTPUT, reg_off[lane], reg_size[lane])
        final1 = init.reshape(lanes, m, g)
    else:
        path = (blk[:, None] + np.arange(g)[None, :]) % g  # chain of block j: positions j, j+1, ...
        off = boff[lane, blk][:, None]
        # block j+1's hop t-1 reaches the rank that block j's hop t reaches (same lane and node)
        succ = (lane * m + node) * g + (blk + 1) % g
        rs1, _ = reduce_chains(
            b, node[:, None] * g + path, np.where(hops_g == 0, INPUT, OUTPUT), OUTPUT, off, off,
            off, bsize[lane, blk], succ=succ, channel=channel_of[lane], step=hops_g[None, :],
        )  # fmt: skip
        final1 = rs1[:, -1].reshape(lanes, m, g)  # indexed by block j
    owner = (np.arange(g) - 1) % g  # local owner of block j
    # --- phase 2: inter-node ring all-reduce of each block among its owners (sub-block s)
    final2 = np.broadcast_to(final1[:, :, :, None], (lanes, m, g, m)).copy()  # (lane, node, j, s)
    if m > 1:
        rows = np.stack(
            np.meshgrid(np.arange(lanes), np.arange(g), np.arange(m), indexing="ij"), -1
        ).reshape(-1, 3)
        ln, j, s = rows[:, 0], rows[:, 1], rows[:, 2]
        npath = (s[:, None] + np.arange(m)[None, :]) % m  # nodes s, s+1, ...; the sum ends at s-1
        ranks = npath * g + owner[j][:, None]
        off = soff[ln, j, s][:, None]
        cnt = ssize[ln, j, s]
        ch = channel_of[ln]
        rs2 = chains(
            b,
            OpKind.REDUCE,
            ranks,
            OUTPUT,
            OUTPUT,
            off,
            off,
            cnt,
            first_deps=final1[ln, s, j][:, None],
            hop_deps=final1[ln[:, None], npath[:, 1:], j[:, None]],
            channel=ch,
            step=g - 1 + hops_m[None, :],
        )
        apath = (s[:, None] - 1 + np.arange(m)[None, :]) % m
        ag2 = chains(
            b,
            OpKind.COPY,
            apath * g + owner[j][:, None],
            OUTPUT,
            OUTPUT,
            off,
            off,
            cnt,
            first_deps=rs2[:, -1:],
            channel=ch,
            step=g - 1 + m - 1 + hops_m[None, :],
        )
        final2[ln, (s - 1) % m, j, s] = rs2[:, -1]
        final2[ln[:, None], apath[:, 1:], j[:, None], s[:, None]] = ag2
    # --- phase 3: intra-node ring all-gather of block j from its owner
    if g > 1:
        path = (owner[blk][:, None] + np.arange(g)[None, :]) % g
        off = boff[lane, blk][:, None]
        chains(
            b,
            OpKind.COPY,
            node[:, None] * g + path,
            OUTPUT,
            OUTPUT,
            off,
            off,
            bsize[lane, blk],
            first_deps=final2[lane, node, blk],
            channel=channel_of[lane],
            step=g - 1 + 2 * (m - 1) + hops_g[None, :],
        )


BUILDERS = {"all_reduce": all_reduce}
