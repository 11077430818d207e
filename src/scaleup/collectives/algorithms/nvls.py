"""NVLS (``nvls``): in-switch reduction and multicast with ``switch_reduce`` ops.

An NVLink SHARP switch reads the same chunk from many ranks, reduces it in the switch and
multicasts the result (``multimem.ld_reduce`` + ``multimem.st``). Each rank drives the slice it
owns, as NCCL's NVLS kernels do; ``chunks x channels`` lanes pipeline independently (step tag =
chunk index, channel tag = channel)::

    all_reduce, n=4, chunks=2    step 0                       step 1
    rank r (r = 0..3)            sw-reduce slice r of chunk 0  sw-reduce slice r of chunk 1
                                 -> multicast to all 4        -> multicast to all 4

all_reduce: slice r of every lane: sources = every rank's input, destinations = every rank's
output (each rank sends and receives ``count`` elements in all). ``heads`` (all_reduce only,
the others ignore it; default 0: every rank) lets only ranks ``0 .. heads-1`` own slices, as
NCCL's NVLS graph has at most ``NCCL_MAX_NVLS_ARITY`` = 32 heads (``src/graph/search.cc``
lines 1125-1128, channel ``c`` headed by GPU ``c``; the other ranks only scatter and gather,
``src/device/all_reduce.h`` line 451: ``nvls->headRank != -1``). reduce_scatter: block r from
every rank, written to rank r only. all_gather: one source (rank r's input), n destinations (pure
multicast). broadcast and reduce: one multicast from the root / one reduction into the root.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import INPUT, OUTPUT, check_int, op_table, split
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "heads": 0}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks`` and ``heads`` (0 or 1..nranks). Only all_reduce's NVLS
    kernel has non-head ranks; the other collectives ignore ``heads`` (a group's parameters
    carry it whatever the collective: NCCL runs their NVLS only where every rank heads)."""
    heads = check_int("heads", params.get("heads", 0), minimum=0)
    if heads > spec.nranks:
        raise UsageError(
            f"parameter heads must be 0 or 1..{spec.nranks}, got {heads}", source="heads"
        )
    if spec.collective != "all_reduce":
        heads = 0
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "heads": heads,
    }


def _lanes(params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    k, c = params["channels"], params["chunks"]
    lane = np.arange(k * c)
    return lane % k, lane // k


def _rows(ranks: np.ndarray, buffer: int, offsets: np.ndarray) -> np.ndarray:
    """(ops * len(ranks), 3) rows: every op's chunks on ``ranks`` at that op's offset."""
    ops = len(offsets)
    return np.stack(
        [np.tile(ranks, ops), np.full(ops * len(ranks), buffer), np.repeat(offsets, len(ranks))],
        axis=1,
    )


def _schedule(
    spec: CollectiveSpec,
    params: dict[str, Any],
    count: np.ndarray,
    issuer: np.ndarray,
    src_ranks: np.ndarray | None,
    src_off: np.ndarray,
    dst_ranks: np.ndarray | None,
    dst_off: np.ndarray,
    channel: np.ndarray,
    step: np.ndarray,
) -> Schedule:
    """Ops i with count > 0: sources on ``src_ranks`` (None: the issuer alone), likewise dsts."""
    keep = np.flatnonzero(count > 0)
    n_ops = len(keep)

    def side(
        ranks: np.ndarray | None, buffer: int, offsets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        if ranks is None:
            rows = np.stack([issuer[keep], np.full(n_ops, buffer), offsets[keep]], axis=1)
            return np.ones(n_ops, dtype=np.int64), rows
        return np.full(n_ops, len(ranks), dtype=np.int64), _rows(ranks, buffer, offsets[keep])

    n_src, src_rows = side(src_ranks, INPUT, src_off)
    n_dst, dst_rows = side(dst_ranks, OUTPUT, dst_off)
    kind = np.full(n_ops, int(OpKind.SWITCH_REDUCE))
    table = op_table(
        kind, n_src, src_rows, n_dst, dst_rows, count[keep], issuer[keep], channel[keep],
        step[keep],
    )  # fmt: skip
    return Schedule(spec, "nvls", table, 0, params)


def _slices(spec: CollectiveSpec, params: dict[str, Any], total: int) -> tuple[np.ndarray, ...]:
    """Per (lane, head) slice of ``total`` elements: (owner, offset, size, channel, step)."""
    n = int(params.get("heads") or spec.nranks)
    channel, chunk = _lanes(params)
    reg_off, reg_size = split(total, len(channel))
    rel = np.array([split(int(s), n)[0] for s in reg_size])
    size = np.array([split(int(s), n)[1] for s in reg_size])
    lane = np.repeat(np.arange(len(channel)), n)
    return (
        np.tile(np.arange(n), len(channel)),
        (reg_off[:, None] + rel).ravel(),
        size.ravel(),
        channel[lane],
        chunk[lane],
    )


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    owner, off, size, ch, step = _slices(spec, params, spec.count)
    every = np.arange(spec.nranks)
    return _schedule(spec, params, size, owner, every, off, every, off, ch, step)


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, blk = spec.nranks, spec.block_count
    channel, chunk = _lanes(params)
    poff, psize = split(blk, len(channel))
    owner = np.repeat(np.arange(n), len(channel))
    lane = np.tile(np.arange(len(channel)), n)
    return _schedule(
        spec,
        params,
        psize[lane],
        owner,
        np.arange(n),
        owner * blk + poff[lane],
        None,
        poff[lane],
        channel[lane],
        chunk[lane],
    )


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, blk = spec.nranks, spec.block_count
    channel, chunk = _lanes(params)
    poff, psize = split(blk, len(channel))
    owner = np.repeat(np.arange(n), len(channel))
    lane = np.tile(np.arange(len(channel)), n)
    return _schedule(
        spec,
        params,
        psize[lane],
        owner,
        None,
        poff[lane],
        np.arange(n),
        owner * blk + poff[lane],
        channel[lane],
        chunk[lane],
    )


def broadcast(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    channel, chunk = _lanes(params)
    off, size = split(spec.count, len(channel))
    root = np.full(len(channel), spec.root)
    return _schedule(
        spec, params, size, root, None, off, np.arange(spec.nranks), off, channel, chunk
    )


def reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    channel, chunk = _lanes(params)
    off, size = split(spec.count, len(channel))
    root = np.full(len(channel), spec.root)
    return _schedule(
        spec, params, size, root, np.arange(spec.nranks), off, None, off, channel, chunk
    )


BUILDERS = {
    "all_reduce": all_reduce,
    "reduce_scatter": reduce_scatter,
    "all_gather": all_gather,
    "broadcast": broadcast,
    "reduce": reduce,
}
