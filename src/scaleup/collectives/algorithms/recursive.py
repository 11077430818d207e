"""Recursive halving-doubling (``recursive``, Rabenseifner): all_reduce, reduce_scatter, all_gather.

With ``p`` the largest power of two <= n and ``rem = n - p``, the extra ranks are folded in first,
as MPICH does: for ``i < rem`` rank ``2i`` sends its buffer to rank ``2i+1`` (reduce) and sits out;
the ``p`` remaining ranks are *virtual ranks* ``v`` (real rank ``2v+1`` for ``v < rem``, else
``v + rem``). The data is cut into ``p`` virtual blocks (all_reduce: near-equal blocks of the
count; reduce_scatter/all_gather: the real blocks of the real ranks a virtual rank stands for).

Reduce-scatter by recursive halving, masks ``p/2, p/4, ..., 1``: virtual rank ``v`` and partner
``v ^ m`` split their current range in two; each reduces the half the other keeps into it. After
``log2 p`` steps ``v`` holds virtual block ``v`` reduced over all ranks. All-gather by recursive
doubling, masks ``1, 2, ..., p/2``: ``v`` copies everything it holds to ``v ^ m``. Finally the
folded ranks get their result from their partner::

    n=6 (p=4, rem=2)  step 0      1 (m=2)         2 (m=1)        3 (m=1)      4 (m=2)       5
    rank 0 -> 1       fold in     v0<->v2 halves  v0<->v1 quarters  v0<->v1     v0<->v2       1 -> 0
    rank 2 -> 3       fold in     ...                                                         3 -> 2

``chunks`` x ``channels`` split every transfer into that many pieces (channel tag:
piece % channels);
each step waits for the whole previous exchange (ranges change size every step, so pieces of
consecutive steps do not line up and there is no pipelining).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    NONE,
    OUTPUT,
    SCRATCH,
    local_copies,
    normalise_lanes,
    split,
)  # fmt: skip
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec

__all__ = ["BUILDERS", "PARAMS", "normalise", "virtual_ranks"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1}


normalise = normalise_lanes


def virtual_ranks(n: int) -> tuple[int, int, np.ndarray]:
    """(p, rem, real rank of each virtual rank)."""
    p = 1 << (n.bit_length() - 1)
    rem = n - p
    v = np.arange(p)
    return p, rem, np.where(v < rem, 2 * v + 1, v + rem)


class _Engine:
    """Emits the transfers of one schedule; every transfer is split into ``pieces`` ops."""

    def __init__(self, spec: CollectiveSpec, params: dict[str, Any], scratch: int = 0) -> None:
        self.b = ScheduleBuilder(spec, "recursive", scratch_count=scratch, params=params)
        self.channels = params["channels"]
        self.pieces = params["channels"] * params["chunks"]
        self.p, self.rem, self.real = virtual_ranks(spec.nranks)
        self.levels = self.p.bit_length() - 1

    def xfer(
        self,
        kind: OpKind,
        src_rank: Any,
        src_buffer: int,
        src_start: Any,
        dst_rank: Any,
        dst_buffer: int,
        dst_start: Any,
        size: Any,
        deps: np.ndarray | None,
        step: int,
    ) -> np.ndarray:
        """Transfers (M,) split into pieces; returns ids (M, pieces), -1 where empty."""
        size = np.asarray(size, dtype=np.int64).ravel()
        m, pc = len(size), self.pieces
        piece = np.tile(np.arange(pc), m)
        row = np.repeat(np.arange(m), pc)
        psize = size[row] // pc + (piece < size[row] % pc)
        poff = np.zeros(m * pc, dtype=np.int64)
        if pc > 1:
            ps = psize.reshape(m, pc)
            poff = (np.cumsum(ps, axis=1) - ps).ravel()

        def col(v: Any) -> np.ndarray:
            return np.broadcast_to(np.asarray(v, dtype=np.int64).ravel(), (m,))[row]

        d = (
            None
            if deps is None
            else np.repeat(np.asarray(deps, dtype=np.int64).reshape(m, -1), pc, axis=0)
        )
        ids = local_copies(
            self.b,
            col(src_rank),
            src_buffer,
            col(src_start) + poff,
            dst_buffer,
            col(dst_start) + poff,
            psize,
            deps=d,
            dst_rank=col(dst_rank),
            kind=kind,
            channel=piece % self.channels,
            step=step,
        )
        return ids.reshape(m, pc)

    def halving(self, buffer: int, bounds: np.ndarray, last_into: np.ndarray) -> np.ndarray:
        """Recursive halving in ``buffer``; ``bounds`` (p+1) element bounds of virtual blocks."""
        v = np.arange(self.p)
        m, step = self.p // 2, 1
        while m:
            w = v ^ m
            lo = w & ~(m - 1)
            ids = self.xfer(
                OpKind.REDUCE,
                self.real[v],
                buffer,
                bounds[lo],
                self.real[w],
                buffer,
                bounds[lo],
                bounds[lo + m] - bounds[lo],
                np.concatenate([last_into, last_into[w]], axis=1),
                step,
            )
            last_into = ids[w]  # what v receives comes from its partner
            m, step = m // 2, step + 1
        return last_into

    def doubling(self, bounds: np.ndarray, last_into: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Recursive doubling in the output buffer; returns (last_into, last_from)."""
        v = np.arange(self.p)
        last_from = np.full_like(last_into, NONE)
        m, step = 1, self.levels + 1
        while m < self.p:
            w = v ^ m
            lo = v & ~(m - 1)
            ids = self.xfer(
                OpKind.COPY,
                self.real[v],
                OUTPUT,
                bounds[lo],
                self.real[w],
                OUTPUT,
                bounds[lo],
                bounds[lo + m] - bounds[lo],
                np.concatenate([last_into, last_from], axis=1),
                step,
            )
            width = max(last_into.shape[1], ids.shape[1])
            last_into, last_from = _pad(ids[w], width), _pad(ids, width)
            m, step = m * 2, step + 1
        return last_into, last_from


def _pad(ids: np.ndarray, width: int) -> np.ndarray:
    out = np.full((len(ids), width), NONE, dtype=np.int64)
    out[:, : ids.shape[1]] = ids
    return out


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    e = _Engine(spec, params)
    count, rem = spec.count, e.rem
    offs, sizes = split(count, e.p)
    bounds = np.append(offs, count)
    init = local_copies(e.b, e.real, INPUT, 0, OUTPUT, 0, count)[:, None]
    i = np.arange(rem)
    last_into = np.full((e.p, e.pieces), NONE, dtype=np.int64)
    last_into[:, :1] = init
    if rem:
        last_into[:rem] = e.xfer(
            OpKind.REDUCE, 2 * i, INPUT, 0, 2 * i + 1, OUTPUT, 0, np.full(rem, count), init[:rem], 0
        )
    last_into = e.halving(OUTPUT, bounds, last_into)
    last_into, last_from = e.doubling(bounds, last_into)
    if rem:
        e.xfer(
            OpKind.COPY,
            2 * i + 1,
            OUTPUT,
            0,
            2 * i,
            OUTPUT,
            0,
            np.full(rem, count),
            np.concatenate([last_into[:rem], last_from[:rem]], axis=1),
            2 * e.levels + 1,
        )
    return e.b.build()


def _virtual_bounds(spec: CollectiveSpec, e: _Engine) -> np.ndarray:
    """Element bounds of the virtual blocks: the real blocks of the ranks each stands for."""
    v = np.arange(e.p)
    first_real = np.where(v < e.rem, 2 * v, v + e.rem)
    return np.append(first_real * spec.block_count, spec.nranks * spec.block_count)


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    e = _Engine(spec, params, scratch=spec.input_count)
    blk, rem = spec.block_count, e.rem
    bounds = _virtual_bounds(spec, e)
    total = spec.input_count
    init = local_copies(e.b, e.real, INPUT, 0, SCRATCH, 0, total)[:, None]
    i = np.arange(rem)
    last_into = np.full((e.p, e.pieces), NONE, dtype=np.int64)
    last_into[:, :1] = init
    if rem:
        last_into[:rem] = e.xfer(
            OpKind.REDUCE,
            2 * i,
            INPUT,
            0,
            2 * i + 1,
            SCRATCH,
            0,
            np.full(rem, total),
            init[:rem],
            0,
        )
    last_into = e.halving(SCRATCH, bounds, last_into)
    # each virtual rank hands out its real blocks: its own locally, its folded partner's remotely
    step = e.levels + 1
    e.xfer(
        OpKind.COPY,
        e.real,
        SCRATCH,
        e.real * blk,
        e.real,
        OUTPUT,
        0,
        np.full(e.p, blk),
        last_into,
        step,
    )
    if rem:
        e.xfer(
            OpKind.COPY,
            2 * i + 1,
            SCRATCH,
            2 * i * blk,
            2 * i,
            OUTPUT,
            0,
            np.full(rem, blk),
            last_into[:rem],
            step,
        )
    return e.b.build()


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    e = _Engine(spec, params)
    blk, rem = spec.block_count, e.rem
    bounds = _virtual_bounds(spec, e)
    own = local_copies(e.b, e.real, INPUT, 0, OUTPUT, e.real * blk, blk)[:, None]
    i = np.arange(rem)
    last_into = np.full((e.p, e.pieces + 1), NONE, dtype=np.int64)
    last_into[:, :1] = own
    if rem:
        last_into[:rem, 1:] = e.xfer(
            OpKind.COPY, 2 * i, INPUT, 0, 2 * i + 1, OUTPUT, 2 * i * blk, np.full(rem, blk), None, 0
        )
    last_into, last_from = e.doubling(bounds, last_into)
    if rem:
        e.xfer(
            OpKind.COPY,
            2 * i + 1,
            OUTPUT,
            0,
            2 * i,
            OUTPUT,
            0,
            np.full(rem, spec.output_count),
            np.concatenate([last_into[:rem], last_from[:rem]], axis=1),
            2 * e.levels + 1,
        )
    return e.b.build()


BUILDERS = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}
