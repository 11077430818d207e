"""All-pairs two-shot all_reduce with every peer in parallel (``allpairs``): the shape of RCCL's
MSCCL ``allreduce_pairs`` algorithm.

RCCL runs MSCCL algorithms before its own tuner on the node models that enable them (8 x MI300X,
``rome_models.cc`` ``mscclEnabled=1``): for all_reduce on 8 ranks, ``tools/msccl-algorithms/
allreduce-allpairs-8n-*.xml`` (ROCm/rccl). Each rank owns one slice of every lane; every peer
pushes its piece of that slice into the owner's scratch *at once* (one thread block per peer),
the owner reduces the pieces into its output one after another (a reduce thread block), then
pushes the reduced slice to every peer at once. Two rounds of communication in parallel over
every link of a full mesh, where ``direct``'s serial two-shot takes ``2(n-1)`` rounds.

Lanes are ``chunks x channels`` as in ``direct``; the thread block of the transfer between a rank
and its ``t``-th peer (``t = (peer - rank - 1) mod n``) on channel ``k`` is channel tag
``k * n + t`` and the reduce thread block is ``k * n + n - 1``, so each transfer has its own
thread block as MSCCL gives it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    OUTPUT,
    SCRATCH,
    local_copies,
    normalise_lanes,
    split,
    table_builder,
)  # fmt: skip
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec

__all__ = ["BUILDERS", "PARAMS", "all_reduce", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1}


normalise = normalise_lanes


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """The all-pairs schedule of ``spec`` (module docstring)."""
    n = spec.nranks
    k_channels, chunks = params["channels"], params["chunks"]
    lanes = k_channels * chunks
    channel = np.arange(lanes) % k_channels
    chunk = np.arange(lanes) // k_channels
    reg_off, reg_size = split(spec.count, lanes)
    rel = np.array([split(int(s), n)[0] for s in reg_size])  # (L, n): slice offsets in a lane
    size = np.array([split(int(s), n)[1] for s in reg_size])  # (L, n): slice counts
    width = size.max(axis=1) if n > 1 else np.zeros(lanes, dtype=np.int64)
    # scratch of rank r, lane l: n - 1 slots of ``width[l]`` elements, slot t from peer r+1+t
    scratch_base = np.concatenate([[0], np.cumsum(width * (n - 1))])[:-1]
    b = table_builder(spec, "allpairs", scratch_count=int((width * (n - 1)).sum()), params=params)
    owner = np.tile(np.arange(n), lanes)  # row = (lane, owner)
    lane = np.repeat(np.arange(lanes), n)
    off = (reg_off[:, None] + rel).ravel()
    cnt = size.ravel()
    tag0 = channel[lane] * n
    init = local_copies(
        b, owner, INPUT, off, OUTPUT, off, cnt, channel=tag0 + n - 1, step=chunk[lane]
    )
    if n == 1:
        return b.build()
    # round 1: peer (owner + 1 + t) pushes its piece of the owner's slice into scratch slot t
    t = np.tile(np.arange(n - 1), len(owner))
    row = np.repeat(np.arange(len(owner)), n - 1)
    peer = (owner[row] + 1 + t) % n
    slot = scratch_base[lane[row]] + t * width[lane[row]]
    pushed = local_copies(
        b, peer, INPUT, off[row], SCRATCH, slot, cnt[row], dst_rank=owner[row],
        channel=tag0[row] + (owner[row] - peer - 1) % n, step=chunk[lane[row]],
    )  # fmt: skip
    # the owner reduces slot 0, 1, ... into its output slice, one after another
    prev = init.copy()
    for j in range(n - 1):
        pick = np.flatnonzero(t == j)
        r = row[pick]
        deps = np.stack([prev[r], pushed[pick]], axis=1)
        prev[r] = local_copies(
            b, owner[r], SCRATCH, slot[pick], OUTPUT, off[r], cnt[r], deps=deps,
            kind=OpKind.REDUCE, channel=tag0[r] + n - 1, step=chunk[lane[r]] + 1 + j,
        )  # fmt: skip
    # round 2: the owner pushes its reduced slice to every peer at once
    local_copies(
        b, owner[row], OUTPUT, off[row], OUTPUT, off[row], cnt[row], deps=prev[row],
        dst_rank=peer, channel=tag0[row] + t, step=chunk[lane[row]] + n,
    )  # fmt: skip
    return b.build()


BUILDERS = {"all_reduce": all_reduce}
