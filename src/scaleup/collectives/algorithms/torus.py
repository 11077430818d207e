"""Multi-dimensional ring all_reduce for tori (``torus``): a ring per dimension, as JAX/XLA
runs all-reduce on TPU slices and ASTRA-sim's multi-dimensional collectives model it.

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

>>> from scaleup.collectives.spec import CollectiveSpec
>>> s = all_reduce(CollectiveSpec("all_reduce", 4, 8), normalise(
...     CollectiveSpec("all_reduce", 4, 8), {"dims": "2x2", "channels": 1, "chunks": 1}))
>>> s.n_steps
4
"""

from __future__ import annotations

import math
from typing import Any

from scaleup.collectives.algorithms._common import check_int, split
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "all_reduce", "check", "lane_plan", "normalise"]

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
    """The per-dimension ring all_reduce of ``spec`` (module docstring)."""
    n, dims = spec.nranks, tuple(params["dims"])
    channels, chunks = params["channels"], params["chunks"]
    rotate, bidirectional = params.get("rotate", True), params.get("bidirectional", True)
    b = ScheduleBuilder(spec, "torus", params=params)
    lanes = channels * chunks
    reg_off, reg_size = split(spec.count, lanes)
    strides = [math.prod(dims[:d]) for d in range(len(dims))]
    for lane in range(lanes):
        channel, chunk = lane % channels, lane // channels
        off, size = int(reg_off[lane]), int(reg_size[lane])
        if size == 0:
            continue
        order, sign = lane_plan(dims, lane, rotate=rotate, bidirectional=bidirectional)
        if not order:  # one rank
            for r in range(n):
                b.copy(b.input(r, off, size), b.output(r, off, size), channel=channel, step=chunk)
        region = [(off, size)] * n  # each rank's active region
        history: list[list[tuple[int, int]]] = []
        step = chunk + 1
        for i, d in enumerate(order):  # reduce-scatter along the lane's order
            history.append(region)
            ring = _Ring(d, dims[d], strides[d], sign, channel)
            region = _ring_pass(b, region, ring, step, reduce=True, first=i == 0)
            step += dims[d] - 1
        for i in reversed(range(len(order))):  # all-gather in the reverse order
            d = order[i]
            _ring_pass(b, history[i], _Ring(d, dims[d], strides[d], sign, channel), step,
                       reduce=False)  # fmt: skip
            step += dims[d] - 1
    return b.build()


class _Ring:
    """The rings along dimension ``d`` (size ``k``, rank stride ``stride``) in direction
    ``sign``: a rank's ring position is its coordinate ``p`` (``+1``) or ``(k - p) mod k``
    (``-1``), and its next rank is the neighbour ``p + sign``."""

    def __init__(self, d: int, k: int, stride: int, sign: int, channel: int) -> None:
        self.d, self.k, self.stride, self.sign, self.channel = d, k, stride, sign, channel

    def position(self, r: int) -> int:
        return (self.sign * ((r // self.stride) % self.k)) % self.k

    def next_rank(self, r: int) -> int:
        p = (r // self.stride) % self.k
        return r + ((p + self.sign) % self.k - p) * self.stride


def _ring_pass(
    b: ScheduleBuilder,
    region: list[tuple[int, int]],
    ring: _Ring,
    step: int,
    *,
    reduce: bool,
    first: bool = False,
) -> list[tuple[int, int]]:
    """One ring along ``ring``'s dimension over every rank's ``region``: reduce-scatter
    (``reduce``) or all-gather of its ``k`` blocks. Returns each rank's owned block (its region
    for the next dimension of a reduce-scatter).

    ``first`` (the lane's first reduce-scatter, over its whole piece): step 0 sends from the
    input, and each block a rank receives is initialised with its input just in time, as the
    ring's (:func:`~scaleup.collectives.algorithms._common.reduce_chains`): the copy for step
    ``t`` waits for the rank's receive of step ``t - 2`` (step 1's for its copy of step 0), so it
    overlaps step ``t - 1``. A rank's own block (``p``) is sent at step 0 and rebuilt by the
    all-gather, so it is never copied."""
    n, k = len(region), ring.k
    cuts = [split(region[r][1], k) for r in range(n)]
    owned: list[tuple[int, int]] = []
    for r in range(n):
        offsets, sizes = cuts[r]
        j = (ring.position(r) + 1) % k
        owned.append((region[r][0] + int(offsets[j]), int(sizes[j])))
    received: dict[tuple[int, int], int] = {}  # (step, rank) -> the reduce into rank, or copy
    for t in range(k - 1):
        if first:
            for r in range(n):
                offsets, sizes = cuts[r]
                j, count = (
                    (ring.position(r) - 1 - t) % k,
                    int(sizes[(ring.position(r) - 1 - t) % k]),
                )
                if count == 0:
                    continue
                at = region[r][0] + int(offsets[j])
                before = received.get((t - 2, r)) if t >= 2 else received.get((-1, r))
                op = b.copy(b.input(r, at, count), b.output(r, at, count), channel=ring.channel,
                            step=step + t, deps=[] if before is None else [before])  # fmt: skip
                if t == 0:
                    received[(-1, r)] = op
        for r in range(n):
            p = ring.position(r)
            offsets, sizes = cuts[r]
            j = (p - t) % k if reduce else (p + 1 - t) % k
            count = int(sizes[j])
            if count == 0:
                continue
            at = region[r][0] + int(offsets[j])
            nxt = ring.next_rank(r)
            src = (b.input if first and t == 0 else b.output)(r, at, count)
            dst = b.output(nxt, at, count)
            if reduce:
                received[(t, nxt)] = b.reduce(src, dst, channel=ring.channel, step=step + t)
            else:
                b.copy(src, dst, channel=ring.channel, step=step + t)
    return owned


BUILDERS = {"all_reduce": all_reduce}
