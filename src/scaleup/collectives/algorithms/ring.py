"""Ring algorithms (NCCL's ``ring``): all_reduce, reduce_scatter, all_gather, and pipelined chains.

Lanes
    The data is cut into ``chunks x channels x directions`` *lanes*. A lane is one ring (a rank
    order) carrying one piece of every block; the lane of chunk ``c``, channel ``k`` and direction
    ``d`` is ``(c * channels + k) * directions + d`` and its channel tag is ``k + d * channels``
    (so a bidirectional ring of ``channels=K`` has ``2K`` channel tags, the reverse rings last).
    ``orders=[[...], ...]`` gives one rank order per channel; ``bidirectional=True`` adds the
    reverse of every order and halves the data per direction.

all_reduce (reduce-scatter then all-gather, ``2(n-1)`` steps). Lane region split into n blocks;
block ``j`` starts at ring position ``j`` and is reduced hop by hop into the output of the next
rank; position ``j-1`` ends with the full sum and the all-gather passes it on::

    n=4, block 0 (R = reduce into the receiver's output, C = copy):
    step    0        1        2        3        4        5
    p0 ->R p1 ->R p2 ->R p3 ->C p0 ->C p1 ->C p2
    (blocks 1..3 do the same, rotated by one position each, at the same steps)

A reduce is ``dst = dst op src``, so before each receive the receiver copies its own input block
into the target, *just in time* (:func:`~scaleup.collectives.algorithms._common.reduce_chains`):
the copy for step ``t`` waits for that rank's reduce of step ``t - 2`` and overlaps step ``t - 1``'s
transfer. Every rank's ops in a step have one size and become ready together, as in NCCL's
dataflow (which reads its own input inside ``recvReduceSend`` and never copies up front).

Chains (broadcast, reduce): each lane's piece travels ``root -> p1 -> ... -> p(n-1)`` (reduce:
the other way round, accumulating in scratch). Chunk ``c`` at hop ``t`` has step tag ``c + t``::

    chunks=3, n=4 broadcast   step 0   1   2   3   4
    chunk 0                   r0->r1 r1->r2 r2->r3
    chunk 1                          r0->r1 r1->r2 r2->r3
    chunk 2                                 r0->r1 r1->r2 r2->r3
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    NONE,
    OUTPUT,
    SCRATCH,
    chains,
    check_int,
    graph_channels,
    local_copies,
    reduce_chains,
    split,
    table_builder,
)  # fmt: skip
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = [
    "BUILDERS", "PARAMS", "ROW_BUILDERS", "Built", "Lanes", "Rows", "chain_starts", "lanes",
    "normalise", "row_counts",
]  # fmt: skip

PARAMS: dict[str, Any] = {
    "channels": None, "chunks": 1, "bidirectional": False, "orders": None, "graph_channels": None,
}  # fmt: skip


class Lanes:
    """The rings of a schedule: ``orders`` (R, n) ranks by position, ``channel``, ``chunk`` (R,)."""

    def __init__(self, orders: np.ndarray, channel: np.ndarray, chunk: np.ndarray) -> None:
        self.orders = orders
        self.channel = channel
        self.chunk = chunk
        self.positions = np.argsort(orders, axis=1)  # positions[l, rank] = ring position

    def __len__(self) -> int:
        return len(self.orders)


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ring parameters; ``channels`` defaults to ``len(orders)`` or 1."""
    n = spec.nranks
    orders = params.get("orders")
    if orders is not None:
        try:
            orders = [[int(r) for r in order] for order in orders]
        except (TypeError, ValueError) as error:
            raise UsageError(
                "parameter orders must be a list of rank lists", source="orders"
            ) from error
        if not orders:
            raise UsageError("parameter orders must hold at least one rank order", source="orders")
        for order in orders:
            if sorted(order) != list(range(n)):
                raise UsageError(
                    f"parameter orders: {order} is not a permutation of 0..{n - 1}", source="orders"
                )
        if params.get("channels") not in (None, len(orders)):
            raise UsageError(
                f"parameter channels={params['channels']} contradicts {len(orders)} orders",
                source="channels",
            )
    channels = check_int("channels", params.get("channels") or (len(orders) if orders else 1))
    return {
        **params,
        "channels": channels,
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "bidirectional": bool(params.get("bidirectional", False)),
        "orders": orders,
        "graph_channels": graph_channels(params),
    }


def lanes(n: int, params: dict[str, Any]) -> Lanes:
    """The lanes (rings) for ``params`` over ``n`` ranks."""
    k, c = params["channels"], params["chunks"]
    base = np.asarray(params["orders"] or [list(range(n))] * k, dtype=np.int64)
    directions = 2 if params["bidirectional"] else 1
    orders, channel, chunk = [], [], []
    for ci in range(c):
        for ki in range(k):
            for d in range(directions):
                orders.append(base[ki] if d == 0 else base[ki][::-1])
                channel.append(ki + d * k)
                chunk.append(ci)
    return Lanes(np.asarray(orders, dtype=np.int64), np.asarray(channel), np.asarray(chunk))


@dataclass(frozen=True)
class Rows:
    """Which chains to build: ``kept`` row ids (``lane * n + block``, ascending), ``rep[r]`` the
    index in ``kept`` of the chain that stands for row ``r`` (what a dependency on row ``r``
    points at), and ``ranks``, whose per-rank ops are kept (all_gather's local copies)."""

    kept: np.ndarray
    rep: np.ndarray
    ranks: np.ndarray


@dataclass(frozen=True)
class Built:
    """A schedule and, when built for :class:`Rows`, every op's group: the index in
    ``rows.kept`` of its chain, or ``len(rows.kept) + i`` for the per-rank op of
    ``rows.ranks[i]`` (None for a whole schedule)."""

    schedule: Schedule
    op_group: np.ndarray | None


def chain_starts(collective: str, ln: Lanes, n: int) -> np.ndarray:
    """The ring position every row's chain starts at, (R * n,) in row order: all_reduce's block
    ``j`` at position ``j``; all_gather's at its owner; reduce_scatter's one after its owner. A
    rank permutation that moves lane ``l`` onto lane ``l'`` shifted by ``s`` moves row ``(l, p)``'s
    chain onto the chain starting at ``(l', p + s)``: that is how :mod:`scaleup.sim.lane_orbits`
    finds the rows that behave alike."""
    if collective == "all_reduce":
        return np.tile(np.arange(n), len(ln))
    shift = 0 if collective == "all_gather" else 1
    return ((ln.positions + shift) % n).ravel()


def row_counts(spec: CollectiveSpec, params: dict[str, Any]) -> np.ndarray:
    """Every row's element count (R * n,), in row order: the size of its chain's ops."""
    n, ln = spec.nranks, lanes(spec.nranks, params)
    if spec.collective == "all_reduce":
        reg_size = split(spec.count, len(ln))[1]
        return np.concatenate([split(int(s), n)[1] for s in reg_size])
    return np.repeat(split(spec.block_count, len(ln))[1], n)


ROW_BUILDERS: dict[str, Callable[[CollectiveSpec, dict[str, Any], Rows | None], Built]] = {}


def _kept(rows: Rows | None, total: int) -> np.ndarray:
    return np.arange(total) if rows is None else rows.kept


def _succ(rows: Rows | None, succ: np.ndarray) -> np.ndarray:
    """Row ids as indices of the built rows: themselves, or their representatives."""
    return succ if rows is None else rows.rep[succ]


def _built(
    b: ScheduleBuilder, rows: Rows | None, chain_ids: tuple[np.ndarray, ...],
    local: np.ndarray | None = None,
) -> Built:  # fmt: skip
    schedule = b.build()
    if rows is None:
        return Built(schedule, None)
    group = np.full(schedule.n_ops, -1, dtype=np.int64)
    for ids in chain_ids:
        owner = np.broadcast_to(np.arange(len(ids))[:, None], ids.shape)
        group[ids[ids >= 0]] = owner[ids >= 0]
    if local is not None:
        group[local[local >= 0]] = len(rows.kept) + np.flatnonzero(local >= 0)
    return Built(schedule, group)


def _builder(spec: CollectiveSpec, params: dict[str, Any], scratch: int = 0) -> ScheduleBuilder:
    return table_builder(spec, "ring", scratch_count=scratch, params=params)


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Ring all_reduce: reduce-scatter + all-gather over every lane (see module docstring)."""
    return all_reduce_rows(spec, params, None).schedule


def all_reduce_rows(spec: CollectiveSpec, params: dict[str, Any], rows: Rows | None) -> Built:
    """:func:`all_reduce` for the chains ``rows`` keeps (all of them when None)."""
    n, ln = spec.nranks, lanes(spec.nranks, params)
    b = _builder(spec, params)
    r_count = len(ln)
    reg_off, reg_size = split(spec.count, r_count)
    rel = np.array([split(int(s), n)[0] for s in reg_size])  # (R, n) block offsets in region
    bsize = np.array([split(int(s), n)[1] for s in reg_size])
    boff = reg_off[:, None] + rel  # (R, n)
    row = _kept(rows, r_count * n)
    lane_idx, block_idx = row // n, row % n  # block j starts at ring position j
    hop = np.arange(n)[None, :]
    rs_ranks = ln.orders[lane_idx[:, None], (block_idx[:, None] + hop) % n]  # (rows, n)
    off = boff[lane_idx, block_idx]
    cnt = bsize[lane_idx, block_idx]
    ch = ln.channel[lane_idx]
    hops = np.arange(n - 1)
    # block j+1's hop t-1 reaches the rank that block j's hop t reaches (same lane)
    succ = _succ(rows, lane_idx * n + (block_idx + 1) % n)
    rs, copies = reduce_chains(
        b, rs_ranks, np.where(hops == 0, INPUT, OUTPUT), OUTPUT, off[:, None], off[:, None],
        off[:, None], cnt, succ=succ, channel=ch, step=hops[None, :],
    )  # fmt: skip
    ag_ranks = ln.orders[lane_idx[:, None], (block_idx[:, None] - 1 + hop) % n]
    ag = chains(
        b,
        OpKind.COPY,
        ag_ranks,
        OUTPUT,
        OUTPUT,
        off[:, None],
        off[:, None],
        cnt,
        first_deps=rs[:, -1:],
        channel=ch,
        step=(n - 1 + hops)[None, :],
    )
    return _built(b, rows, (rs, copies, ag))


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Ring reduce_scatter: block j's pieces travel from the owner's successor round to rank j."""
    return reduce_scatter_rows(spec, params, None).schedule


def reduce_scatter_rows(spec: CollectiveSpec, params: dict[str, Any], rows: Rows | None) -> Built:
    """:func:`reduce_scatter` for the chains ``rows`` keeps (all of them when None)."""
    n, ln, blk = spec.nranks, lanes(spec.nranks, params), spec.block_count
    b = _builder(spec, params, scratch=spec.input_count)
    r_count = len(ln)
    poff, psize = split(blk, r_count)
    row = _kept(rows, r_count * n)
    lane_idx, block_idx = row // n, row % n  # block j is owned by rank j
    start = (ln.positions[lane_idx, block_idx] + 1) % n  # the chain starts after its owner
    ranks = ln.orders[lane_idx[:, None], (start[:, None] + np.arange(n)[None, :]) % n]
    hops = np.arange(n - 1)
    last = hops == n - 2
    src_buf = np.where(hops == 0, INPUT, SCRATCH)
    dst_buf = np.where(last, OUTPUT, SCRATCH)
    off = block_idx * blk + poff[lane_idx]
    dst_off = np.where(last[None, :], poff[lane_idx][:, None], off[:, None])
    # the block owned one position further on reaches the same receiver one hop earlier
    succ = _succ(rows, lane_idx * n + ln.orders[lane_idx, start])
    red, copies = reduce_chains(
        b, ranks, src_buf, dst_buf, off[:, None], dst_off, off[:, None], psize[lane_idx],
        succ=succ, channel=ln.channel[lane_idx], step=hops[None, :],
    )  # fmt: skip
    return _built(b, rows, (red, copies))


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Ring all_gather: each owner copies its block locally and sends it round the ring."""
    return all_gather_rows(spec, params, None).schedule


def all_gather_rows(spec: CollectiveSpec, params: dict[str, Any], rows: Rows | None) -> Built:
    """:func:`all_gather` for the chains (and owners' local copies) ``rows`` keeps."""
    n, ln, blk = spec.nranks, lanes(spec.nranks, params), spec.block_count
    b = _builder(spec, params)
    r_count = len(ln)
    poff, psize = split(blk, r_count)
    j = np.arange(n) if rows is None else rows.ranks
    local = local_copies(b, j, INPUT, 0, OUTPUT, j * blk, blk)
    row = _kept(rows, r_count * n)
    lane_idx, block_idx = row // n, row % n  # block j is owned by rank j
    start = ln.positions[lane_idx, block_idx]  # the chain starts at its owner
    ranks = ln.orders[lane_idx[:, None], (start[:, None] + np.arange(n)[None, :]) % n]
    hops = np.arange(n - 1)
    off = block_idx * blk + poff[lane_idx]
    src_off = np.where(hops[None, :] == 0, poff[lane_idx][:, None], off[:, None])
    ids = chains(
        b,
        OpKind.COPY,
        ranks,
        np.where(hops == 0, INPUT, OUTPUT),
        OUTPUT,
        src_off,
        off[:, None],
        psize[lane_idx],
        channel=ln.channel[lane_idx],
        step=hops[None, :],
    )
    return _built(b, rows, (ids,), local)


def broadcast(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Pipelined chain broadcast from the root along each lane's ring order."""
    n, ln, root = spec.nranks, lanes(spec.nranks, params), spec.root
    b = _builder(spec, params)
    reg_off, reg_size = split(spec.count, len(ln))
    local_copies(b, [root], INPUT, 0, OUTPUT, 0, spec.count)
    pos = (ln.positions[:, root][:, None] + np.arange(n)[None, :]) % n
    ranks = np.take_along_axis(ln.orders, pos, axis=1)
    hops = np.arange(n - 1)
    chains(
        b,
        OpKind.COPY,
        ranks,
        np.where(hops == 0, INPUT, OUTPUT),
        OUTPUT,
        reg_off[:, None],
        reg_off[:, None],
        reg_size,
        channel=ln.channel,
        step=ln.chunk[:, None] + hops[None, :],
    )
    return b.build()


def reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Pipelined chain reduce towards the root (partial sums in scratch, the root's in its output).

    Every receiver first copies its own input piece into the target, *just in time*: the copy
    of chunk ``c`` waits for the same receiver's reduce of chunk ``c - 2`` on the same channel,
    so it overlaps chunk ``c - 1``'s transfer, as the tree's copies do (NCCL's ``runRing`` in
    ``src/device/reduce.h`` reads its own input inside ``recvReduceSend`` / ``recvReduceCopy``
    and copies nothing up front). Copying every piece at time 0 made the first hop into each
    rank wait for the whole buffer's copy (the root's was one op of the whole count).
    """
    n, ln, root = spec.nranks, lanes(spec.nranks, params), spec.root
    r_count = len(ln)
    b = _builder(spec, params, scratch=spec.count)
    reg_off, reg_size = split(spec.count, r_count)
    pos = (ln.positions[:, root][:, None] + 1 + np.arange(n)[None, :]) % n
    ranks = np.take_along_axis(ln.orders, pos, axis=1)  # last = root
    hops = np.arange(n - 1)
    target = np.where(hops == n - 2, OUTPUT, SCRATCH)  # what hop t reduces into at its receiver
    per_chunk = r_count // params["chunks"]
    reduces = np.full((r_count, n - 1), NONE, dtype=np.int64)
    for c in range(params["chunks"]):
        rows = np.arange(c * per_chunk, (c + 1) * per_chunk)
        shape = (len(rows), n - 1)
        off = np.broadcast_to(reg_off[rows, None], shape)
        jit = reduces[rows - 2 * per_chunk] if c >= 2 else np.full(shape, NONE, dtype=np.int64)
        copies = local_copies(
            b, ranks[rows, 1:], INPUT, off, np.broadcast_to(target, shape), off,
            np.broadcast_to(reg_size[rows, None], shape), deps=jit,
            channel=np.broadcast_to(ln.channel[rows, None], shape),
            step=np.broadcast_to(ln.chunk[rows, None], shape),
        )  # fmt: skip
        reduces[rows] = chains(
            b,
            OpKind.REDUCE,
            ranks[rows],
            np.where(hops == 0, INPUT, SCRATCH),
            target,
            reg_off[rows, None],
            reg_off[rows, None],
            reg_size[rows],
            hop_deps=copies.reshape(shape),
            channel=ln.channel[rows],
            step=ln.chunk[rows, None] + hops[None, :],
        )
    return b.build()


def send_recv(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Every rank puts its buffer into rank + 1's output, split over lanes."""
    n, ln = spec.nranks, lanes(spec.nranks, params)
    b = _builder(spec, params)
    reg_off, reg_size = split(spec.count, len(ln))
    src = np.repeat(np.arange(n), len(ln))
    lane = np.tile(np.arange(len(ln)), n)
    local_copies(
        b,
        src,
        INPUT,
        reg_off[lane],
        OUTPUT,
        reg_off[lane],
        reg_size[lane],
        dst_rank=(src + 1) % n,
        channel=ln.channel[lane],
    )
    return b.build()


BUILDERS = {
    "all_reduce": all_reduce,
    "reduce_scatter": reduce_scatter,
    "all_gather": all_gather,
    "broadcast": broadcast,
    "reduce": reduce,
    "send_recv": send_recv,
}
ROW_BUILDERS.update(
    all_reduce=all_reduce_rows, reduce_scatter=reduce_scatter_rows, all_gather=all_gather_rows
)
