"""Direct algorithms (``direct``): every rank loads from (or stores to) every peer, for switched
fabrics where all pairs are one hop apart.

Lanes: the data is cut into ``chunks x channels`` lanes (lane ``c * channels + k``, channel tag
``k``, step tags restart per chunk at ``chunk``).

all_reduce, ``shot=1`` (one-shot): rank r copies its input into its output, then reduces every
peer's whole buffer into it, peers in the order r+1, r+2, ... (so at any step each rank is read by
exactly one peer). ``shot=2`` (two-shot): reduce-scatter by direct loads (rank r reduces every
peer's slice r into its output slice r), then all-gather by direct loads (rank r copies slice q
from rank q's output). ``shot="auto"`` (default) picks one-shot up to :data:`ONE_SHOT_MAX_BYTES`
per rank buffer (small, latency-bound messages: one round of loads instead of two) and two-shot
above (:func:`auto_shot`). A schedule does not know its dtype, so the builder counts 4-byte
elements; the runtime, which does, passes ``shot=auto_shot(count, itemsize)``::

    two-shot, n=3        step 0          1          2          3
    rank 0 slice 0       +=in1[0]        +=in2[0]   get out1[1] get out2[2]
    rank 1 slice 1       +=in2[1]        +=in0[1]   get out2[2] get out0[0]

reduce_scatter and reduce are the reduce-scatter half; all_gather, broadcast the load half;
all_to_all is pairwise (at step t rank r puts block r+t to rank r+t); send_recv a put to r+1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    OUTPUT,
    check_int,
    local_copies,
    sequences,
    split,
)  # fmt: skip
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = [
    "BUILDERS",
    "DEFAULT_ITEMSIZE",
    "ONE_SHOT_MAX_BYTES",
    "P2P_MODES",
    "P2P_PER_BATCH",
    "PARAMS",
    "auto_shot",
    "normalise",
]

PARAMS: dict[str, Any] = {
    "channels": 1, "chunks": 1, "shot": "auto", "p2p": "batched", "p2p_channels": 32,
}  # fmt: skip
#: NCCL's p2p ops per batch of one channel (``src/include/device.h``,
#: ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``): the rounds of one p2p group.
P2P_PER_BATCH = 8
#: ``p2p`` values: NCCL >= 2.19's batched rounds, or every transfer at once (the fluid bound).
P2P_MODES = ("batched", "all")
#: ``shot="auto"``: one-shot while a rank's buffer is at most this many bytes, two-shot above.
ONE_SHOT_MAX_BYTES = 256 * 1024
#: Element size ``shot="auto"`` assumes where the dtype is unknown (float32, the CLI default).
DEFAULT_ITEMSIZE = 4


def auto_shot(count: int, itemsize: int = DEFAULT_ITEMSIZE) -> int:
    """1 (one-shot) if ``count`` elements of ``itemsize`` bytes fit :data:`ONE_SHOT_MAX_BYTES`.

    >>> auto_shot(65536), auto_shot(65537), auto_shot(65536, itemsize=8)
    (1, 2, 2)
    """
    return 1 if count * itemsize <= ONE_SHOT_MAX_BYTES else 2


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks`` and ``shot`` (resolving ``"auto"``)."""
    shot = params.get("shot", "auto")
    if shot == "auto":
        shot = auto_shot(spec.count)
    if shot not in (1, 2) or isinstance(shot, bool):
        raise UsageError(f"parameter shot must be 1, 2 or 'auto', got {shot!r}", source="shot")
    p2p = params.get("p2p", "batched")
    if p2p not in P2P_MODES:
        raise UsageError(f"parameter p2p must be one of {P2P_MODES}, got {p2p!r}", source="p2p")
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "shot": int(shot),
        "p2p": p2p,
        "p2p_channels": check_int("p2p_channels", params.get("p2p_channels", 32)),
    }


def _lanes(params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(channel tag, chunk index) per lane."""
    k, c = params["channels"], params["chunks"]
    lane = np.arange(k * c)
    return lane % k, lane // k


def _peers(n: int) -> np.ndarray:
    """peers[r, t] = (r + 1 + t) % n, the order rank r visits its peers."""
    return (np.arange(n)[:, None] + 1 + np.arange(n - 1)[None, :]) % n


def _reduce_into(
    b: ScheduleBuilder,
    n: int,
    owner: np.ndarray,
    src_off: np.ndarray,
    dst_off: np.ndarray,
    count: np.ndarray,
    init: np.ndarray,
    channel: np.ndarray,
    step0: np.ndarray,
) -> np.ndarray:
    """For each row: ``owner`` reduces every peer's input at ``src_off`` into its output."""
    srcs = (owner[:, None] + 1 + np.arange(n - 1)[None, :]) % n
    return sequences(
        b,
        OpKind.REDUCE,
        srcs,
        INPUT,
        src_off[:, None],
        owner[:, None],
        OUTPUT,
        dst_off[:, None],
        count,
        first_deps=init[:, None],
        channel=channel,
        step=step0[:, None] + np.arange(n - 1)[None, :],
    )


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n = spec.nranks
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    reg_off, reg_size = split(spec.count, len(channel))
    if params["shot"] == 1:
        owner = np.repeat(np.arange(n), len(channel))
        lane = np.tile(np.arange(len(channel)), n)
        off, cnt = reg_off[lane], reg_size[lane]
        init = local_copies(
            b, owner, INPUT, off, OUTPUT, off, cnt, channel=channel[lane], step=chunk[lane]
        )
        _reduce_into(b, n, owner, off, off, cnt, init, channel[lane], chunk[lane])
        return b.build()
    # two-shot: region of lane l split into n slices; slice r owned by rank r
    rel = np.array([split(int(s), n)[0] for s in reg_size])  # (L, n)
    size = np.array([split(int(s), n)[1] for s in reg_size])
    lane = np.repeat(np.arange(len(channel)), n)
    owner = np.tile(np.arange(n), len(channel))
    off = (reg_off[:, None] + rel).ravel()
    cnt = size.ravel()
    init = local_copies(
        b, owner, INPUT, off, OUTPUT, off, cnt, channel=channel[lane], step=chunk[lane]
    )
    rs = _reduce_into(b, n, owner, off, off, cnt, init, channel[lane], chunk[lane])
    last = rs[:, -1] if n > 1 else init
    # all-gather: rank r gets slice q from rank q (r visits q = r-1, r-2, ... so loads spread)
    row = np.repeat(np.arange(len(owner)), n - 1)
    getter = (owner[row] - 1 - np.tile(np.arange(n - 1), len(owner))) % n
    local_copies(
        b,
        owner[row],
        OUTPUT,
        off[row],
        OUTPUT,
        off[row],
        cnt[row],
        deps=last[row],
        dst_rank=getter,
        rank=getter,
        channel=channel[lane][row],
        step=chunk[lane][row] + n - 1 + (owner[row] - 1 - getter) % n,
    )
    return b.build()


def reduce_scatter(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    poff, psize = split(blk, len(channel))
    init = local_copies(b, np.arange(n), INPUT, np.arange(n) * blk, OUTPUT, 0, blk)
    owner = np.repeat(np.arange(n), len(channel))
    lane = np.tile(np.arange(len(channel)), n)
    _reduce_into(
        b,
        n,
        owner,
        owner * blk + poff[lane],
        poff[lane],
        psize[lane],
        init[owner],
        channel[lane],
        chunk[lane],
    )
    return b.build()


def reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, root = spec.nranks, spec.root
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    off, size = split(spec.count, len(channel))
    owner = np.full(len(channel), root)
    init = local_copies(b, owner, INPUT, off, OUTPUT, off, size, channel=channel, step=chunk)
    _reduce_into(b, n, owner, off, off, size, init, channel, chunk)
    return b.build()


def all_gather(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    poff, psize = split(blk, len(channel))
    peers = _peers(n)
    local_copies(b, np.arange(n), INPUT, 0, OUTPUT, np.arange(n) * blk, blk)
    getter = np.repeat(np.arange(n), (n - 1) * len(channel))
    owner = np.repeat(peers.ravel(), len(channel))
    lane = np.tile(np.arange(len(channel)), n * (n - 1))
    t = np.tile(np.repeat(np.arange(n - 1), len(channel)), n)
    local_copies(
        b,
        owner,
        INPUT,
        poff[lane],
        OUTPUT,
        owner * blk + poff[lane],
        psize[lane],
        dst_rank=getter,
        rank=getter,
        channel=channel[lane],
        step=chunk[lane] + t,
    )
    return b.build()


def broadcast(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, root = spec.nranks, spec.root
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    off, size = split(spec.count, len(channel))
    local_copies(b, [root], INPUT, 0, OUTPUT, 0, spec.count)
    getter = np.repeat(_peers(n)[root], len(channel))
    lane = np.tile(np.arange(len(channel)), n - 1)
    local_copies(
        b,
        np.full(len(getter), root),
        INPUT,
        off[lane],
        OUTPUT,
        off[lane],
        size[lane],
        dst_rank=getter,
        rank=getter,
        channel=channel[lane],
        step=chunk[lane],
    )
    return b.build()


def all_to_all(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    """Pairwise exchange: in round t rank r puts its block (r+t) % n into rank (r+t)'s block r.

    ``p2p="batched"`` (default, NCCL >= 2.19: ``src/enqueue.cc`` ``scheduleP2pTasksToPlan`` and
    ``ncclAddWorkBatchToPlan``, ``src/include/channel.h`` ``ncclP2pChannelBaseForRound``):
    rounds are taken in groups of :data:`P2P_PER_BATCH`; one group's transfers are one batch on
    its own ``channels`` channel tags (a batch never mixes two groups, and a thread block runs up
    to 8 transfers of a batch at once). ``p2p_channels`` (NCCL's ``p2pnChannels``) bounds the
    tags: groups ``g`` and ``g + p2p_channels // channels`` share them, and on a shared tag a
    rank's batch starts when its previous batch there is done. ``p2p="all"``: every transfer at
    once on ``channels`` tags (the fluid bound; the model before NCCL's batching was modelled).
    """
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "direct", params=params, infer_deps=False)
    channel, chunk = _lanes(params)
    k, lanes = params["channels"], len(channel)
    poff, psize = split(blk, lanes)
    batched = params["p2p"] == "batched"
    per_wave = max(1, params["p2p_channels"] // k) if batched else 1
    group = np.arange(n) // P2P_PER_BATCH if batched else np.zeros(n, dtype=np.int64)
    wave = group // per_wave
    sender, t, lane = (a.ravel() for a in np.meshgrid(
        np.arange(n), np.arange(n), np.arange(lanes), indexing="ij"))  # fmt: skip
    dest = (sender + t) % n
    tag = channel[lane] + (group[t] % per_wave) * k
    ids = np.full(n * n * lanes, -1, dtype=np.int64)
    for w in range(int(wave.max()) + 1):
        rows = np.flatnonzero(wave[t] == w)
        deps = _previous_batch(ids, wave[t], sender, tag, rows, w)
        ids[rows] = local_copies(
            b, sender[rows], INPUT, dest[rows] * blk + poff[lane[rows]], OUTPUT,
            sender[rows] * blk + poff[lane[rows]], psize[lane[rows]], dst_rank=dest[rows],
            channel=tag[rows], step=chunk[lane[rows]] + t[rows], deps=deps,
        )  # fmt: skip
    return b.build()


def _previous_batch(
    ids: np.ndarray,
    wave: np.ndarray,
    sender: np.ndarray,
    tag: np.ndarray,
    rows: np.ndarray,
    w: int,
) -> np.ndarray | None:
    """For each op in ``rows`` (wave ``w``), the ops its rank ran in wave ``w - 1`` on the same
    channel tag (-1 padded): the batch before it on that thread block."""
    if w == 0:
        return None
    prev = np.flatnonzero((wave == w - 1) & (ids >= 0))
    key_prev = sender[prev] * (int(tag.max()) + 1) + tag[prev]
    key_rows = sender[rows] * (int(tag.max()) + 1) + tag[rows]
    order = np.argsort(key_prev, kind="stable")
    uniq, start, count = np.unique(key_prev[order], return_index=True, return_counts=True)
    width = int(count.max(initial=1))
    table = np.full((len(uniq), width), -1, dtype=np.int64)
    col = np.arange(len(prev)) - np.repeat(start, count)
    table[np.repeat(np.arange(len(uniq)), count), col] = ids[prev][order]
    where = np.searchsorted(uniq, key_rows)
    hit = (where < len(uniq)) & (uniq[np.minimum(where, len(uniq) - 1)] == key_rows)
    out = np.full((len(rows), width), -1, dtype=np.int64)
    out[hit] = table[where[hit]]
    return out


def send_recv(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n = spec.nranks
    b = ScheduleBuilder(spec, "direct", params=params)
    channel, chunk = _lanes(params)
    off, size = split(spec.count, len(channel))
    src = np.repeat(np.arange(n), len(channel))
    lane = np.tile(np.arange(len(channel)), n)
    local_copies(
        b,
        src,
        INPUT,
        off[lane],
        OUTPUT,
        off[lane],
        size[lane],
        dst_rank=(src + 1) % n,
        channel=channel[lane],
        step=chunk[lane],
    )
    return b.build()


BUILDERS = {
    "all_reduce": all_reduce,
    "reduce_scatter": reduce_scatter,
    "all_gather": all_gather,
    "broadcast": broadcast,
    "reduce": reduce,
    "all_to_all": all_to_all,
    "send_recv": send_recv,
}
