"""Multi-dimensional rings for tori (``torus``): all_reduce, reduce_scatter and all_gather as a
ring per dimension, as JAX/XLA runs them on TPU slices and ASTRA-sim's multi-dimensional
collectives model them.

``dims = (k0, k1, ...)`` with ``prod(dims) == nranks`` lays the ranks on a grid, dimension 0
fastest (rank ``x + k0 * (y + k1 * z)``, the convention of
:func:`scaleup.topology.torus.torus_coords`). Then

1. **reduce-scatter along dimension 0, then 1, ...**: the ranks that differ only in dimension
   ``d`` form a ring of ``k_d`` (position = coordinate ``d``, next = ``+1`` with wraparound).
   Each rank's *active region* (the whole buffer at first) is cut into ``k_d`` blocks; at step
   ``t`` the rank at position ``p`` reduces block ``(p - t) mod k_d`` of its output into the
   next rank's output; after ``k_d - 1`` steps position ``p`` holds block ``(p + 1) mod k_d``
   reduced over the ring, which becomes its active region for dimension ``d + 1``. In the first
   dimension step 0 sends from the input, and each block a rank receives is first initialised
   with its own input by a local copy issued just in time (as the ring's), so the copies
   overlap the transfers instead of delaying the first one;
2. **all-gather in reverse order** (last dimension first): along dimension ``d`` position ``p``
   passes its finished block ``(p + 1 - t) mod k_d`` on at step ``t``, rebuilding the active
   region it had before dimension ``d``.

Each dimension moves ``(k_d - 1) / k_d`` of a region ``prod(k_0..k_{d-1})`` times smaller than
the last, so the bytes each rank sends total ``2 (n - 1) / n`` of the buffer, as a flat ring's,
in ``2 sum(k_d - 1)`` steps instead of ``2 (n - 1)``; every step is a neighbour hop on a torus.

``dims`` defaults to ``(nranks,)`` (one ring). ``channels x chunks`` lanes split the buffer, as
in :mod:`~scaleup.collectives.algorithms.ring`; lane ``l`` (chunk ``l // channels``, channel tag
``l mod channels``) runs the steps above on its own piece.

**Lanes drive every link at once** (as XLA splits an all-reduce on a TPU torus). With ``D`` the
dimensions of size > 1, in order, lane ``l`` visits them in that order rotated by ``l mod D``
(``rotate=True``, default): lane 1 of a 3-D torus reduce-scatters along y, z, x and
all-gathers along x, z, y. With ``bidirectional=True`` (default) the lanes with ``l // D`` odd
run every ring the other way round (next = ``-1``, blocks numbered by the mirrored position
``(k - p) mod k``). So ``2 D`` lanes (``channels = 6`` on a 3-D torus) are, at every step, on
``2 D`` different directed links of each rank: all of them when the sizes are equal. The sum
is the same whatever the order (each element is reduced over every rank once), only the
rounding of floating-point sums differs between lanes. ``rotate=False, bidirectional=False``
is the earlier single-order schedule (every lane on dimension 0 first, ``+1`` direction: one
directed link per rank busy at a time; only the input copies are now just in time); with one
lane (the default ``channels=1, chunks=1``) all settings give that schedule.

**reduce_scatter and all_gather** are the two halves on their own (:func:`reduce_scatter`,
:func:`all_gather`). Their blocks are fixed by the collective (rank ``j``'s block is block
``j`` of the input, or of the output), so a ring along dimension ``d`` passes *groups* of
blocks: the blocks whose owners share a coordinate ``d``. Reduce-scatter keeps, after each
dimension, the group of its own coordinate (rank ``j``'s own block is in it every time), so
after the last dimension rank ``j`` holds block ``j`` reduced over every rank; all-gather
starts from each rank's own block and, dimension after dimension, gathers its ring's groups.
Each rank sends ``(n - 1) / n`` of the buffer in ``sum(k_d - 1)`` steps, as the all_reduce's
halves, with lanes rotated and in both directions as above (all_gather runs a lane's
dimensions in the reverse of its reduce-scatter order, as the all_reduce's second half does).
A group is one op per block piece, since a lane carries its own piece of every block (as the
flat ring's lanes do): the op count is the flat ring's.

>>> from scaleup.collectives.spec import CollectiveSpec
>>> s = all_reduce(CollectiveSpec("all_reduce", 4, 8), normalise(
...     CollectiveSpec("all_reduce", 4, 8), {"dims": "2x2", "channels": 1, "chunks": 1}))
>>> s.n_steps
4
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from scaleup.collectives.algorithms._common import check_int, split
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = [
    "BUILDERS", "PARAMS", "all_gather", "all_reduce", "check", "lane_plan", "normalise",
    "reduce_scatter",
]  # fmt: skip

PARAMS: dict[str, Any] = {
    "dims": None, "channels": 1, "chunks": 1, "rotate": True, "bidirectional": True,
}  # fmt: skip


def _dims(value: Any, nranks: int) -> tuple[int, ...]:
    if value is None:
        return (nranks,)
    if isinstance(value, str):
        parts = value.lower().split("x")
        if not all(p.strip().isdigit() for p in parts):
            raise UsageError(f"parameter dims={value!r} is not sizes joined by 'x'", source="dims")
        value = [int(p) for p in parts]
    elif isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    try:
        dims = tuple(check_int("dims", k) for k in value)
    except TypeError as error:
        raise UsageError(
            f"parameter dims={value!r} is not a list of sizes", source="dims"
        ) from error
    if not dims:
        raise UsageError("parameter dims needs at least one size", source="dims")
    return dims


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``dims`` (a list of sizes or ``"4x4x4"``), ``channels``, ``chunks``, ``rotate``
    and ``bidirectional``."""
    return {
        **params,
        "dims": list(_dims(params.get("dims"), spec.nranks)),
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "rotate": bool(params.get("rotate", True)),
        "bidirectional": bool(params.get("bidirectional", True)),
    }


def check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    """Why ``dims`` cannot hold ``spec.nranks`` ranks, or None."""
    if math.prod(params["dims"]) != spec.nranks:
        return f"dims={params['dims']} holds {math.prod(params['dims'])} ranks, not {spec.nranks}"
    return None


def lane_plan(
    dims: tuple[int, ...], lane: int, *, rotate: bool = True, bidirectional: bool = True
) -> tuple[tuple[int, ...], int]:
    """Lane ``lane``'s reduce-scatter order of the dimensions of size > 1 and its ring
    direction (``+1`` or ``-1``; module docstring).

    >>> [lane_plan((4, 4, 4), lane) for lane in (0, 1, 3, 5)]
    [((0, 1, 2), 1), ((1, 2, 0), 1), ((0, 1, 2), -1), ((2, 0, 1), -1)]
    >>> lane_plan((4, 1, 2), 1), lane_plan((4, 4), 3, rotate=False, bidirectional=False)
    (((2, 0), 1), ((0, 1), 1))
    """
    active = tuple(d for d, k in enumerate(dims) if k > 1)
    n_active = max(1, len(active))
    shift = lane % n_active if rotate else 0
    direction = -1 if bidirectional and (lane // n_active) % 2 else 1
    return active[shift:] + active[:shift], direction


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """The per-dimension ring all_reduce of ``spec`` (module docstring). Built as numpy
    batches, one per ring step, with every dependency stated (a 512-chip torus has millions
    of ops)."""
    n, dims, channels = spec.nranks, tuple(params["dims"]), params["channels"]
    b = ScheduleBuilder(spec, "torus", params=params, infer_deps=False)
    lanes = channels * params["chunks"]
    reg_off, reg_size = split(spec.count, lanes)
    strides = [math.prod(dims[:d]) for d in range(len(dims))]
    ranks = np.arange(n)
    for lane in range(lanes):
        channel, chunk = lane % channels, lane // channels
        off, size = int(reg_off[lane]), int(reg_size[lane])
        if size == 0:
            continue
        order, sign = lane_plan(dims, lane, rotate=params.get("rotate", True),
                                bidirectional=params.get("bidirectional", True))  # fmt: skip
        if not order:  # one rank
            b.copy(b.input(0, off, size), b.output(0, off, size), deps=[], channel=channel,
                   step=chunk)  # fmt: skip
            continue
        rings = [_Ring(d, dims[d], strides[d], sign, channel) for d in order]
        region = (np.full(n, off), np.full(n, size))  # each rank's active region
        region_writers = np.full((n, 1), -1, dtype=np.int64)  # the ops that wrote it
        history = []
        step = chunk + 1
        for i, ring in enumerate(rings):  # reduce-scatter along the lane's order
            cut = _cut(*region, ring.k)
            writers = _region_pass(b, cut, region_writers, ring, step, reduce=True,
                                   first=i == 0)  # fmt: skip
            history.append((cut, writers))
            own = (ring.position(ranks) + 1) % ring.k  # the block each rank keeps
            region = (cut[0][ranks, own], cut[1][ranks, own])
            region_writers = writers[ranks, own][:, None]
            step += ring.k - 1
        for ring, (cut, rs_writers) in zip(rings[::-1], history[::-1], strict=True):
            writers = _region_pass(b, cut, region_writers, ring, step, reduce=False,
                                   overwritten=rs_writers)  # fmt: skip
            # the whole region now: every block's delivery, and the block it kept
            region_writers = np.concatenate((writers, region_writers), axis=1)
            step += ring.k - 1
    return b.build()


def _cut(offset: np.ndarray, size: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each rank's region cut into ``k`` near-equal blocks, as :func:`split` cuts one:
    (rank, block) offsets and sizes."""
    j = np.arange(k)[None, :]
    q, rem = np.divmod(size, k)
    sizes = q[:, None] + (j < rem[:, None])
    return offset[:, None] + j * q[:, None] + np.minimum(j, rem[:, None]), sizes


def _region_pass(
    b: ScheduleBuilder,
    cut: tuple[np.ndarray, np.ndarray],
    region_writers: np.ndarray,
    ring: _Ring,
    step: int,
    *,
    reduce: bool,
    first: bool = False,
    overwritten: np.ndarray | None = None,
) -> np.ndarray:
    """One ring along ``ring``'s dimension over every rank's region (cut into ``ring.k``
    blocks): the all_reduce's reduce-scatter (``reduce``) or all-gather of them. Returns the
    (rank, block) op that last wrote each block.

    ``region_writers`` (rank, i): the ops that wrote a rank's region before this pass (-1:
    none). ``first`` (the lane's first reduce-scatter): step 0 sends from the input, and each
    block a rank receives is initialised with its input just in time, as the ring's: the copy
    for step ``t`` waits for the rank's receive of step ``t - 2`` (step 1's for its copy of
    step 0), so it overlaps step ``t - 1``. ``overwritten`` (all-gather): the reduce-scatter's
    last writers of the blocks it overwrites, which its copies order after."""
    offsets, sizes = cut
    n, k = sizes.shape
    ranks = np.arange(n)
    pos, nxt = ring.position(ranks), ring.next_rank(ranks)
    writers = np.full((n, k), -1, dtype=np.int64)
    before = np.full(n, -1, dtype=np.int64)  # a rank's receive two steps back (or copy)
    received: list[np.ndarray] = []
    for t in range(k - 1):
        if first:  # the receivers' input copies, just in time
            j = (pos - 1 - t) % k
            live = sizes[ranks, j] > 0
            at = offsets[ranks, j][live]
            ids = _batch(
                b, OpKind.COPY, src_rank=ranks[live], src_buffer=Buffer.INPUT, src_offset=at,
                dst_rank=ranks[live], dst_buffer=Buffer.OUTPUT, dst_offset=at,
                count=sizes[ranks, j][live], deps=before[live][:, None], channel=ring.channel,
                step=step + t,
            )  # fmt: skip
            writers[ranks[live], j[live]] = ids
            if t == 0:
                before = np.where(live, writers[ranks, j], -1)
        j = (pos - t) % k if reduce else (pos + 1 - t) % k  # the block each rank sends
        live = sizes[ranks, j] > 0
        src, dst, jl = ranks[live], nxt[live], j[live]
        at, count = offsets[src, jl], sizes[src, jl]
        # step 0 sends a rank's own block: its region as it stood before this pass
        src_deps = region_writers[src] if t == 0 else writers[src, jl][:, None]
        deps = [src_deps, writers[dst, jl][:, None]]  # (the receiver's input copy, if any)
        if reduce and not first:
            deps.append(region_writers[dst])  # the receiver's partial sum of this region
        if overwritten is not None:
            deps.append(overwritten[dst, jl][:, None])
        ids = _batch(
            b, OpKind.REDUCE if reduce else OpKind.COPY, src_rank=src,
            src_buffer=Buffer.INPUT if first and t == 0 else Buffer.OUTPUT, src_offset=at,
            dst_rank=dst, dst_buffer=Buffer.OUTPUT, dst_offset=at, count=count,
            deps=np.concatenate(deps, axis=1), channel=ring.channel, step=step + t,
        )  # fmt: skip
        writers[dst, jl] = ids
        full = np.full(n, -1, dtype=np.int64)
        full[dst] = ids
        received.append(full)
        if first and t >= 1:
            before = received[t - 1]
    return writers


class _Ring:
    """The rings along dimension ``d`` (size ``k``, rank stride ``stride``) in direction
    ``sign``: a rank's ring position is its coordinate ``p`` (``+1``) or ``(k - p) mod k``
    (``-1``), and its next rank is the neighbour ``p + sign``. The methods take a rank or an
    array of them."""

    def __init__(self, d: int, k: int, stride: int, sign: int, channel: int) -> None:
        self.d, self.k, self.stride, self.sign, self.channel = d, k, stride, sign, channel

    def position(self, r: Any) -> Any:
        return (self.sign * ((r // self.stride) % self.k)) % self.k

    def next_rank(self, r: Any) -> Any:
        p = (r // self.stride) % self.k
        return r + ((p + self.sign) % self.k - p) * self.stride

    def previous_rank(self, r: Any) -> Any:
        p = (r // self.stride) % self.k
        return r + ((p - self.sign) % self.k - p) * self.stride

    def members(self, r: np.ndarray) -> np.ndarray:
        """(len(r), k): the ranks of each one's ring, by coordinate."""
        base = r - ((r // self.stride) % self.k) * self.stride
        return base[:, None] + np.arange(self.k)[None, :] * self.stride


class _BlockLane(NamedTuple):
    """One lane of a reduce_scatter or all_gather: its channel tag, first step tag, its piece
    of every block (``off``, ``size``) and its rings, in reduce-scatter order."""

    channel: int
    step: int
    off: int
    size: int
    rings: list[_Ring]


def _block_lanes(spec: CollectiveSpec, params: dict[str, Any]) -> Iterator[_BlockLane]:
    """The lanes of a blocked collective that carry elements (module docstring)."""
    dims, channels = tuple(params["dims"]), params["channels"]
    strides = [math.prod(dims[:d]) for d in range(len(dims))]
    lanes = channels * params["chunks"]
    poff, psize = split(spec.block_count, lanes)
    for lane in range(lanes):
        if psize[lane] == 0:
            continue
        channel = lane % channels
        order, sign = lane_plan(dims, lane, rotate=params.get("rotate", True),
                                bidirectional=params.get("bidirectional", True))  # fmt: skip
        rings = [_Ring(d, dims[d], strides[d], sign, channel) for d in order]
        yield _BlockLane(channel, lane // channels + 1, int(poff[lane]), int(psize[lane]), rings)


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """The per-dimension ring reduce_scatter of ``spec`` (module docstring): rank ``j`` ends
    with block ``j`` of the input reduced over every rank."""
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "torus", scratch_count=spec.input_count, params=params,
                        infer_deps=False)  # fmt: skip
    ranks = np.arange(n)
    for lane in _block_lanes(spec, params):
        off, size = lane.off, lane.size
        if not lane.rings:  # one rank
            b.copy(b.input(0, off, size), b.output(0, off, size), deps=[],
                   channel=lane.channel, step=lane.step)  # fmt: skip
            continue
        active = np.tile(ranks, (n, 1))  # (rank, i): the blocks each rank still accumulates
        writer = np.full((n, n), -1, dtype=np.int64)  # (rank, block): last op writing its acc
        step = lane.step
        for i, ring in enumerate(lane.rings):
            k, pos, nxt = ring.k, ring.position(ranks), ring.next_rank(ranks)
            # each rank's blocks by their owner's position on this ring: (rank, group, i)
            order = np.argsort(ring.position(active), axis=1, kind="stable")
            groups = np.take_along_axis(active, order, axis=1).reshape(n, k, -1)
            received = np.full((k - 1, n), -1, dtype=np.int64)  # a receive into each rank
            for t in range(k - 1):
                blocks = groups[ranks, (pos - 1 - t) % k]  # (rank, i): what it sends now
                to = np.broadcast_to(nxt[:, None], blocks.shape)
                if i == 0:  # the receiver starts from its input, copied just in time
                    before = received[t - 2][nxt] if t >= 2 else np.full(n, -1)
                    writer[to, blocks] = _batch(
                        b, OpKind.COPY, src_rank=to, src_buffer=Buffer.INPUT,
                        src_offset=blocks * blk + off, dst_rank=to, **_acc(to, blocks, blk, off),
                        count=size, deps=np.broadcast_to(before[:, None], blocks.shape),
                        channel=lane.channel, step=step + t,
                    )  # fmt: skip
                first = i == 0 and t == 0
                src = (
                    {"src_buffer": Buffer.INPUT, "src_offset": blocks * blk + off}
                    if first else _acc(ranks[:, None], blocks, blk, off, "src")
                )  # fmt: skip
                mine = np.full(blocks.shape, -1) if first else writer[ranks[:, None], blocks]
                ids = _batch(
                    b, OpKind.REDUCE, src_rank=np.broadcast_to(ranks[:, None], blocks.shape),
                    dst_rank=to, **src, **_acc(to, blocks, blk, off), count=size,
                    deps=np.stack((writer[to, blocks], mine), axis=-1), channel=lane.channel,
                    step=step + t,
                )  # fmt: skip
                writer[to, blocks] = ids
                received[t, nxt] = ids[:, -1]
            active = groups[ranks, pos]
            step += k - 1
    return b.build()


def _batch(b: ScheduleBuilder, kind: OpKind, **columns: Any) -> np.ndarray:
    """``b.add_batch`` of ops given as equal-shaped arrays (or scalars); ids in that shape."""
    shape = np.shape(columns["src_rank"])
    flat = {k: np.ravel(np.broadcast_to(v, shape)) if np.ndim(v) else v
            for k, v in columns.items() if k != "deps"}  # fmt: skip
    deps = np.asarray(columns.get("deps", np.full(shape, -1)))
    deps = deps.reshape(math.prod(shape), -1)
    return b.add_batch(kind, deps=deps, **flat).reshape(shape)


def _acc(rank: np.ndarray, block: np.ndarray, blk: int, off: int, side: str = "dst") -> dict:
    """Where ``rank`` accumulates ``block``'s piece (scratch; its output for its own block),
    as ``add_batch``'s buffer and offset columns of ``side``."""
    own = rank == block
    return {
        f"{side}_buffer": np.where(own, int(Buffer.OUTPUT), int(Buffer.SCRATCH)),
        f"{side}_offset": np.where(own, off, block * blk + off),
    }


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """The per-dimension ring all_gather of ``spec`` (module docstring): every rank ends with
    every rank's input, block ``j`` from rank ``j``."""
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "torus", params=params, infer_deps=False)
    ranks = np.arange(n)
    if blk:  # each rank's own block, once (as the ring's owners do)
        _batch(b, OpKind.COPY, src_rank=ranks, src_buffer=Buffer.INPUT, src_offset=0,
               dst_rank=ranks, dst_buffer=Buffer.OUTPUT, dst_offset=ranks * blk,
               count=blk)  # fmt: skip
    for lane in _block_lanes(spec, params):
        off, size = lane.off, lane.size
        held = ranks[:, None]  # (rank, i): the blocks each rank holds, in its output
        writer = np.full((n, n), -1, dtype=np.int64)  # (rank, block): the op that delivered it
        step = lane.step
        for ring in reversed(lane.rings):
            nxt, origin = ring.next_rank(ranks), ranks
            for t in range(ring.k - 1):  # the group that started t positions back moves on
                blocks = held[origin]  # (rank, i)
                frm = np.broadcast_to(ranks[:, None], blocks.shape)
                own = blocks == frm
                writer[nxt[:, None], blocks] = _batch(
                    b, OpKind.COPY, src_rank=frm,
                    src_buffer=np.where(own, int(Buffer.INPUT), int(Buffer.OUTPUT)),
                    src_offset=np.where(own, off, blocks * blk + off),
                    dst_rank=np.broadcast_to(nxt[:, None], blocks.shape),
                    dst_buffer=Buffer.OUTPUT, dst_offset=blocks * blk + off, count=size,
                    deps=writer[frm, blocks], channel=lane.channel, step=step + t,
                )  # fmt: skip
                origin = ring.previous_rank(origin)
            held = held[ring.members(ranks)].reshape(n, -1)
            step += ring.k - 1
    return b.build()


BUILDERS = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}
