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

from scaleup.arrays import unique
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
    "P2P_BASES",
    "P2P_MODES",
    "P2P_PER_BATCH",
    "PARAMS",
    "auto_shot",
    "normalise",
]

PARAMS: dict[str, Any] = {
    "channels": 1, "chunks": 1, "shot": "auto", "p2p": "batched", "p2p_channels": 32,
    "p2p_base": "group",
}  # fmt: skip
#: NCCL's p2p ops per batch of one channel (``src/include/device.h``,
#: ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``): the rounds of one p2p group.
P2P_PER_BATCH = 8
#: ``p2p`` values: NCCL >= 2.19's batched rounds, or every transfer at once (the fluid bound).
P2P_MODES = ("batched", "all")
#: ``p2p_base`` values: the channel base of a round (``src/include/channel.h``
#: ``ncclP2pChannelBaseForRound``): ``"group"`` across nodes (the 8 rounds of a schedule group
#: share one base), ``"round"`` on one node (every round its own base).
P2P_BASES = ("group", "round")
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
    base = params.get("p2p_base", "group")
    if base not in P2P_BASES:
        raise UsageError(
            f"parameter p2p_base must be one of {P2P_BASES}, got {base!r}", source="p2p_base"
        )
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "shot": int(shot),
        "p2p": p2p,
        "p2p_channels": check_int("p2p_channels", params.get("p2p_channels", 32)),
        "p2p_base": base,
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
    ``ncclAddWorkBatchToPlan``, ``src/include/channel.h`` ``ncclP2pChannelBaseForRound``,
    ``src/include/device.h`` ``ncclP2pChannelForPart``): part k of round t runs on channel
    ``(reverseBits(base(t)) + k) mod p2p_channels``, where ``base(t)`` is the round's group of
    :data:`P2P_PER_BATCH` rounds (``p2p_base="group"``, across nodes) or the round itself
    (``"round"``, one node), bit-reversed over log2(``p2p_channels``) bits; ``channels`` is the
    parts per transfer. A channel's ops of one group are one batch (a thread block runs up to 8
    transfers of a batch at once); a batch never mixes two groups, and a channel runs its
    batches in order: on a channel, a rank's batch of a later group starts when its batch of the
    group before is done. ``p2p="all"``: every transfer at once on ``channels`` tags (the fluid
    bound; the model before NCCL's batching was modelled).
    """
    n, blk = spec.nranks, spec.block_count
    b = ScheduleBuilder(spec, "direct", params=params, infer_deps=False)
    channel, chunk = _lanes(params)
    lanes = len(channel)
    poff, psize = split(blk, lanes)
    sender, t, lane = (a.ravel() for a in np.meshgrid(
        np.arange(n), np.arange(n), np.arange(lanes), indexing="ij"))  # fmt: skip
    dest = (sender + t) % n
    tag_tl, wave_tl = _p2p_channels(n, channel, params)
    tag, wave = tag_tl[t, lane], wave_tl[t, lane]
    ids = np.full(n * n * lanes, -1, dtype=np.int64)
    for w in range(int(wave.max()) + 1):
        rows = np.flatnonzero(wave == w)
        deps = _previous_batch(ids, wave, sender, tag, rows, w)
        ids[rows] = local_copies(
            b, sender[rows], INPUT, dest[rows] * blk + poff[lane[rows]], OUTPUT,
            sender[rows] * blk + poff[lane[rows]], psize[lane[rows]], dst_rank=dest[rows],
            channel=tag[rows], step=chunk[lane[rows]] + t[rows], deps=deps,
        )  # fmt: skip
    return b.build()


def _reverse_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` bits of ``x`` in reverse order (NCCL's ``reverseBits``)."""
    out = np.zeros_like(x)
    for i in range(bits):
        out |= ((x >> i) & 1) << (bits - 1 - i)
    return out


def _p2p_channels(
    n: int, channel: np.ndarray, params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(channel tag, batch wave) of every (round, lane): see :func:`all_to_all`. The wave of a
    (round, lane) is how many earlier groups' batches its channel runs before it."""
    t = np.arange(n)[:, None]
    part = channel[None, :]
    if params["p2p"] != "batched":
        return np.broadcast_to(part, (n, len(channel))).copy(), np.zeros((n, len(channel)), int)
    p2p = params["p2p_channels"]
    bits = max(0, (p2p - 1).bit_length())
    rounds = t if params["p2p_base"] == "round" else t // P2P_PER_BATCH
    tag = (_reverse_bits(rounds, bits) + part) % p2p
    group = np.broadcast_to(t // P2P_PER_BATCH, tag.shape)
    key = tag.ravel() * n + group.ravel()  # (channel, group), one batch each
    uniq = unique(key)
    first = np.searchsorted(uniq // n, uniq // n, side="left")  # each channel's first batch
    rank_of = np.arange(len(uniq)) - first
    wave = rank_of[np.searchsorted(uniq, key)].reshape(tag.shape)
    return tag, wave


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
