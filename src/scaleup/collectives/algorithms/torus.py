"""Multi-dimensional ring all_reduce for tori (``torus``): a ring per dimension, as JAX/XLA
runs all-reduce on TPU slices and ASTRA-sim's multi-dimensional collectives model it.

``dims = (k0, k1, ...)`` with ``prod(dims) == nranks`` lays the ranks on a grid, dimension 0
fastest (rank ``x + k0 * (y + k1 * z)``, the convention of
:func:`scaleup.topology.torus.torus_coords`). Every rank first copies its input into its output;
then

1. **reduce-scatter along dimension 0, then 1, ...**: the ranks that differ only in dimension
   ``d`` form a ring of ``k_d`` (position = coordinate ``d``, next = ``+1`` with wraparound).
   Each rank's *active region* (the whole buffer at first) is cut into ``k_d`` blocks; at step
   ``t`` the rank at position ``p`` reduces block ``(p - t) mod k_d`` of its output into the
   next rank's output; after ``k_d - 1`` steps position ``p`` holds block ``(p + 1) mod k_d``
   reduced over the ring, which becomes its active region for dimension ``d + 1``;
2. **all-gather in reverse order** (last dimension first): along dimension ``d`` position ``p``
   passes its finished block ``(p + 1 - t) mod k_d`` on at step ``t``, rebuilding the active
   region it had before dimension ``d``.

Each dimension moves ``(k_d - 1) / k_d`` of a region ``prod(k_0..k_{d-1})`` times smaller than
the last, so the bytes each rank sends total ``2 (n - 1) / n`` of the buffer, as a flat ring's,
in ``2 sum(k_d - 1)`` steps instead of ``2 (n - 1)``; every step is a neighbour hop on a torus.

``dims`` defaults to ``(nranks,)`` (one ring). ``channels x chunks`` lanes split the buffer, as
in :mod:`~scaleup.collectives.algorithms.ring`; lane ``l`` has channel tag ``l mod channels``.
Dependencies are inferred by the builder from the buffers each op touches.

>>> from scaleup.collectives.spec import CollectiveSpec
>>> s = all_reduce(CollectiveSpec("all_reduce", 4, 8), normalise(
...     CollectiveSpec("all_reduce", 4, 8), {"dims": "2x2", "channels": 1, "chunks": 1}))
>>> s.n_steps
5
"""

from __future__ import annotations

import math
from typing import Any

from scaleup.collectives.algorithms._common import check_int, split
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "all_reduce", "check", "normalise"]

PARAMS: dict[str, Any] = {"dims": None, "channels": 1, "chunks": 1}


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
    """Validate ``dims`` (a list of sizes or ``"4x4x4"``), ``channels`` and ``chunks``."""
    return {
        **params,
        "dims": list(_dims(params.get("dims"), spec.nranks)),
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
    }


def check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    """Why ``dims`` cannot hold ``spec.nranks`` ranks, or None."""
    if math.prod(params["dims"]) != spec.nranks:
        return f"dims={params['dims']} holds {math.prod(params['dims'])} ranks, not {spec.nranks}"
    return None


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """The per-dimension ring all_reduce of ``spec`` (module docstring)."""
    n, dims = spec.nranks, tuple(params["dims"])
    channels, chunks = params["channels"], params["chunks"]
    b = ScheduleBuilder(spec, "torus", params=params)
    lanes = channels * chunks
    reg_off, reg_size = split(spec.count, lanes)
    strides = [math.prod(dims[:d]) for d in range(len(dims))]
    for lane in range(lanes):
        channel, chunk = lane % channels, lane // channels
        off, size = int(reg_off[lane]), int(reg_size[lane])
        if size == 0:
            continue
        for r in range(n):
            b.copy(b.input(r, off, size), b.output(r, off, size), channel=channel, step=chunk)
        region = [(off, size)] * n  # each rank's active region
        history: list[list[tuple[int, int]]] = []
        step = chunk + 1
        for d, k in enumerate(dims):  # reduce-scatter, dimension 0 first
            history.append(region)
            if k > 1:
                region = _ring_pass(b, region, d, k, strides[d], channel, step, reduce=True)
                step += k - 1
        for d in reversed(range(len(dims))):  # all-gather, last dimension first
            k = dims[d]
            if k > 1:
                _ring_pass(b, history[d], d, k, strides[d], channel, step, reduce=False)
                step += k - 1
    return b.build()


def _ring_pass(
    b: ScheduleBuilder,
    region: list[tuple[int, int]],
    d: int,
    k: int,
    stride: int,
    channel: int,
    step: int,
    *,
    reduce: bool,
) -> list[tuple[int, int]]:
    """One ring along dimension ``d`` over every rank's ``region``: reduce-scatter (``reduce``)
    or all-gather of its ``k`` blocks. Returns each rank's owned block (its region for the next
    dimension of a reduce-scatter)."""
    n = len(region)
    owned: list[tuple[int, int]] = []
    for r in range(n):
        p = (r // stride) % k
        offsets, sizes = split(region[r][1], k)
        j = (p + 1) % k
        owned.append((region[r][0] + int(offsets[j]), int(sizes[j])))
    for t in range(k - 1):
        for r in range(n):
            p = (r // stride) % k
            nxt = r + ((p + 1) % k - p) * stride
            offsets, sizes = split(region[r][1], k)
            j = (p - t) % k if reduce else (p + 1 - t) % k
            count = int(sizes[j])
            if count == 0:
                continue
            at = region[r][0] + int(offsets[j])
            src, dst = b.output(r, at, count), b.output(nxt, at, count)
            if reduce:
                b.reduce(src, dst, channel=channel, step=step + t)
            else:
                b.copy(src, dst, channel=channel, step=step + t)
    return owned


BUILDERS = {"all_reduce": all_reduce}
