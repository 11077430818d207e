"""Hierarchical collectives (``hierarchical``): all_reduce, reduce_scatter, all_gather.

all_reduce: inside each node, across nodes, inside again (below); reduce_scatter (intra-node
ring reduce-scatter to the destination's local rank, then inter-node rings among the ranks of one
local index) and all_gather (inter-node rings among the ranks of one local index, then intra-node
rings) are documented at their builders: only ``(m-1)/n`` of the buffer crosses nodes per rank.

Ranks ``N * g .. N * g + g - 1`` form node ``N`` (``g = ranks_per_node``, default 8; the world size
must be a multiple of it). For each lane (``chunks x channels`` near-equal regions of the count,
channel tag = channel):

1. intra-node ring reduce-scatter: the region is cut into ``g`` blocks; block ``j`` is reduced
   round the node's ring and ends at ring position ``(j - 1) % g`` (its *owner*) in every node; each
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

``local_orders=[[...], ...]`` (all_reduce) gives the intra-node ring of each channel as an order
of the local ranks ``0 .. g-1`` (channel ``k`` uses order ``k % len(local_orders)``, the same in
every node, so block ``j``'s owners share a local rank and cross between nodes on one rail);
the default is ``0, 1, ..., g-1``. The tuner passes the channel search's rings of one server.

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
    SCRATCH,
    chains,
    check_int,
    local_copies,
    reduce_chains,
    split,
)
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "check", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "ranks_per_node": 8, "local_orders": None}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks``, ``ranks_per_node`` and ``local_orders``."""
    g = check_int("ranks_per_node", params.get("ranks_per_node", 8))
    orders = params.get("local_orders")
    if orders is not None:
        try:
            orders = [[int(r) for r in order] for order in orders]
        except (TypeError, ValueError):
            raise UsageError(
                "parameter local_orders must be a list of rank lists", source="local_orders"
            ) from None
        if not orders or any(sorted(o) != list(range(g)) for o in orders):
            raise UsageError(
                f"parameter local_orders: every order must be a permutation of 0..{g - 1}",
                source="local_orders",
            )
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "ranks_per_node": g,
        "local_orders": orders,
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


class _InOrder(ScheduleBuilder):
    """A builder (dependencies stated, not inferred) that makes op ``i`` also wait for op
    ``i - shift`` when ``shift`` is set: the same op of the previous chunk (same rank, role and
    channel), because a channel's thread block runs its chunks in order. That is what lets the
    phases pipeline: chunk ``c`` crosses the nodes while chunk ``c + 1`` is reduced inside them
    (NCCL's tree / NVLSTree)."""

    shift: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, infer_deps=False, **kwargs)

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
    orders = params.get("local_orders") or [list(range(g))]
    ring = np.asarray([orders[i % len(orders)] for i in range(k)], dtype=np.int64)  # (k, g)
    # Chunks are chained op for op only when every chunk has the same ops (no empty sub-block).
    _by_chunk(b, k, chunks, int(reg_size.min()) >= g * m, _lanes, ring, m, reg_off, reg_size)
    return b.build()


def _by_chunk(b: _InOrder, k: int, chunks: int, chained: bool, phases: Any, *args: Any) -> None:
    """Append ``phases(b, *args[:-2], off, size)`` chunk by chunk (``k`` lanes each; the last two
    ``args`` are the per-lane offsets and sizes), chunk ``c``'s ops in order after chunk ``c - 1``'s
    when ``chained`` (every chunk then has the same ops)."""
    *head, off, size = args
    prev_ops = 0
    for c in range(chunks):
        lanes = slice(c * k, (c + 1) * k)
        before = b.n_ops
        b.shift = prev_ops if chained else 0
        phases(b, *head, off[lanes], size[lanes])
        prev_ops = b.n_ops - before
    b.shift = 0


def _lanes(
    b: _InOrder, ring: np.ndarray, m: int, reg_off: np.ndarray, reg_size: np.ndarray
) -> None:
    """The three phases for ``len(reg_off)`` lanes, lane ``i`` on channel ``i`` and its
    intra-node ring ``ring[i]`` (local ranks by ring position)."""
    lanes = len(reg_off)
    g = ring.shape[1]
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
        pos = (blk[:, None] + np.arange(g)[None, :]) % g  # chain of block j: positions j, j+1, ...
        path = ring[lane[:, None], pos]
        off = boff[lane, blk][:, None]
        # block j+1's hop t-1 reaches the rank that block j's hop t reaches (same lane and node)
        succ = (lane * m + node) * g + (blk + 1) % g
        rs1, _ = reduce_chains(
            b, node[:, None] * g + path, np.where(hops_g == 0, INPUT, OUTPUT), OUTPUT, off, off,
            off, bsize[lane, blk], succ=succ, channel=channel_of[lane], step=hops_g[None, :],
        )  # fmt: skip
        final1 = rs1[:, -1].reshape(lanes, m, g)  # indexed by block j
    owner = ring[:, (np.arange(g) - 1) % g]  # (lane, j): local owner of block j
    # --- phase 2: inter-node ring all-reduce of each block among its owners (sub-block s)
    final2 = np.broadcast_to(final1[:, :, :, None], (lanes, m, g, m)).copy()  # (lane, node, j, s)
    if m > 1:
        rows = np.stack(
            np.meshgrid(np.arange(lanes), np.arange(g), np.arange(m), indexing="ij"), -1
        ).reshape(-1, 3)
        ln, j, s = rows[:, 0], rows[:, 1], rows[:, 2]
        npath = (s[:, None] + np.arange(m)[None, :]) % m  # nodes s, s+1, ...; the sum ends at s-1
        ranks = npath * g + owner[ln, j][:, None]
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
            apath * g + owner[ln, j][:, None],
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
        pos = ((blk - 1) % g)[:, None] + np.arange(g)[None, :]  # from the owner's position
        path = ring[lane[:, None], pos % g]
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


def _grid(lanes: int, *dims: int) -> list[np.ndarray]:
    """Row-major index columns of a (lanes, *dims) grid: lane first, the last dim fastest."""
    idx = np.meshgrid(np.arange(lanes), *(np.arange(d) for d in dims), indexing="ij")
    return [a.ravel() for a in idx]


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Inter-node ring all_gather among the ranks of one local index, then intra-node rings.

    Every lane carries one piece of every block. Phase 1: the block of rank ``(s, l)`` (node
    ``s``, local rank ``l``) goes round the ring of the ``m`` local-``l`` ranks (nodes ``s, s+1,
    ...``); phase 2: in every node ``N``, local rank ``l`` passes the ``m`` blocks it now holds
    (one per node) round the node's ring ``l, l+1, ...``. Each rank sends ``(m-1)/n x S`` across
    nodes and ``(g-1)/g x S`` inside its node (``S`` = output bytes): one block per peer
    node crosses the slow links, not ``g``.
    """
    n, g = spec.nranks, params["ranks_per_node"]
    m, blk = n // g, spec.block_count
    b = _InOrder(spec, "hierarchical", params=params)
    k, chunks = params["channels"], params["chunks"]
    poff, psize = split(blk, k * chunks)  # lane = chunk * k + channel
    ranks = np.arange(n)
    local_copies(b, ranks, INPUT, 0, OUTPUT, ranks * blk, blk)
    _by_chunk(b, k, chunks, int(psize.min()) >= 1, _all_gather_lanes, g, m, blk, poff, psize)
    return b.build()


def _all_gather_lanes(
    b: _InOrder, g: int, m: int, blk: int, poff: np.ndarray, psize: np.ndarray
) -> None:
    lanes = len(poff)
    hops_g, hops_m = np.arange(g - 1), np.arange(m - 1)
    # arrive[lane, N, loc, s]: the op that brought block (s, loc) to rank (N, loc); -1: own input
    arrive = np.full((lanes, m, g, m), -1, dtype=np.int64)
    # --- phase 1: rows (lane, loc, s), ring across nodes s, s+1, ... of local rank loc
    if m > 1:
        ln, loc, s = _grid(lanes, g, m)
        npath = (s[:, None] + np.arange(m)[None, :]) % m
        off = (s * g + loc) * blk + poff[ln]
        ag1 = chains(
            b, OpKind.COPY, npath * g + loc[:, None], np.where(hops_m == 0, INPUT, OUTPUT), OUTPUT,
            np.where(hops_m[None, :] == 0, poff[ln][:, None], off[:, None]), off[:, None],
            psize[ln], channel=ln, step=hops_m[None, :],
        )  # fmt: skip
        arrive[ln[:, None], npath[:, 1:], loc[:, None], s[:, None]] = ag1
    # --- phase 2: rows (lane, N, loc, s), ring inside node N from local rank loc
    if g > 1:
        ln, node, loc, s = _grid(lanes, m, g, m)
        path = node[:, None] * g + (loc[:, None] + np.arange(g)[None, :]) % g
        off = (s * g + loc) * blk + poff[ln]
        own = (s == node)[:, None] & (hops_g[None, :] == 0)  # hop 0 of the node's own block
        chains(
            b, OpKind.COPY, path, np.where(own, INPUT, OUTPUT), OUTPUT,
            np.where(own, poff[ln][:, None], off[:, None]), off[:, None], psize[ln],
            first_deps=arrive[ln, node, loc, s][:, None], channel=ln, step=m - 1 + hops_g[None, :],
        )  # fmt: skip


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Intra-node ring reduce-scatter to the local index of the destination, then inter-node rings.

    Block ``j`` of rank ``(N', l)`` (node ``N'``, local rank ``l``). Phase 1: in every node ``N``,
    block ``j`` is reduced round the node's ring ``l+1, l+2, ..., l`` (partial sums in scratch) and
    ends at local rank ``l``: the node's partial sum, in scratch (in the output when ``N = N'``);
    phase 2: the ``m`` partial sums of block ``j`` are reduced round the ring of the local-``l``
    ranks, nodes ``N'+1, ..., N'``, each hop into the receiver's partial sum, the last into rank
    ``j``'s output. Each rank sends ``(g-1)/g x S`` inside its node and ``(m-1)/n x S`` across
    nodes (``S`` = input bytes).
    """
    n, g = spec.nranks, params["ranks_per_node"]
    m, blk = n // g, spec.block_count
    b = _InOrder(spec, "hierarchical", scratch_count=spec.input_count, params=params)
    k, chunks = params["channels"], params["chunks"]
    poff, psize = split(blk, k * chunks)  # lane = chunk * k + channel
    _by_chunk(b, k, chunks, int(psize.min()) >= 1, _reduce_scatter_lanes, g, m, blk, poff, psize)
    return b.build()


def _reduce_scatter_lanes(
    b: _InOrder, g: int, m: int, blk: int, poff: np.ndarray, psize: np.ndarray
) -> None:
    lanes = len(poff)
    hops_g, hops_m = np.arange(g - 1), np.arange(m - 1)
    # --- phase 1: rows (lane, N, N', loc): block j = N' g + loc reduced inside node N, ends at loc
    ln, node, dnode, loc = _grid(lanes, m, m, g)
    off = (dnode * g + loc) * blk + poff[ln]
    own = dnode == node  # the node's partial sum is the final sum's start: keep it in the output
    target_buf = np.where(own, OUTPUT, SCRATCH)
    target_off = np.where(own, poff[ln], off)
    if g == 1:
        final1 = local_copies(b, node, INPUT, off, target_buf, target_off, psize[ln], channel=ln)
    else:
        path = node[:, None] * g + (loc[:, None] + 1 + np.arange(g)[None, :]) % g  # last = loc
        last = (hops_g == g - 2)[None, :]
        # the block of local rank loc+1 reaches the same receiver one hop earlier
        succ = ((ln * m + node) * m + dnode) * g + (loc + 1) % g
        rs1, _ = reduce_chains(
            b, path, np.where(hops_g == 0, INPUT, SCRATCH), np.where(last, target_buf[:, None],
            SCRATCH), off[:, None], np.where(last, target_off[:, None], off[:, None]),
            off[:, None], psize[ln], succ=succ, channel=ln, step=hops_g[None, :],
        )  # fmt: skip
        final1 = rs1[:, -1]
    final1 = final1.reshape(lanes, m, m, g)  # (lane, N, N', loc)
    # --- phase 2: rows (lane, N', loc): the partial sums of block j round nodes N'+1, ..., N'
    if m > 1:
        ln, dnode, loc = _grid(lanes, m, g)
        npath = (dnode[:, None] + 1 + np.arange(m)[None, :]) % m  # last = N'
        off = (dnode * g + loc) * blk + poff[ln]
        last = (hops_m == m - 2)[None, :]
        chains(
            b, OpKind.REDUCE, npath * g + loc[:, None], SCRATCH, np.where(last, OUTPUT, SCRATCH),
            off[:, None], np.where(last, poff[ln][:, None], off[:, None]), psize[ln],
            first_deps=final1[ln, npath[:, 0], dnode, loc][:, None],
            hop_deps=final1[ln[:, None], npath[:, 1:], dnode[:, None], loc[:, None]],
            channel=ln, step=g - 1 + hops_m[None, :],
        )  # fmt: skip


BUILDERS = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}
