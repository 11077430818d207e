"""Shared pieces of the algorithm builders: block splits, parameter checks, vectorised chains.

Block splits
    ``split(total, parts)`` cuts ``total`` elements into ``parts`` contiguous blocks whose sizes
    differ by at most one: the first ``total % parts`` blocks get ``ceil``, the rest ``floor``
    (zero-length blocks when ``total < parts``), exactly as :func:`numpy.array_split` does.

Chains
    Most algorithms are many independent *chains*: a piece of data hops rank to rank
    (``q0 -> q1 -> ... -> qL``), each hop a copy or a reduce that depends on the previous hop.
    :func:`chains` appends all hops of many equally long chains with one ``add_batch`` call, hop
    by hop, so a 1024-rank ring (two million ops) is a handful of numpy calls. Chains whose piece
    is empty (count 0) are left out, so count 0 schedules have no ops.

Reduce chains with just-in-time operands
    A reduce is ``dst = dst op src``, so the receiver of a partial sum must first hold its own
    contribution in ``dst``. :func:`reduce_chains` gives every hop its own block-sized local copy
    ``input -> dst`` at the receiver, issued *just in time*: the copy for hop ``t`` waits for the
    receiver's reduce of hop ``t - 2`` (hop 1's for its copy of hop 0), so it overlaps the previous
    step's transfer, as NCCL's ``recvReduceSend`` reads its own input while the ring runs. Every
    rank's ops in a step then have one size and become ready together (one event batch in the
    simulator), instead of each rank first copying ``p`` and ``n-1-p`` blocks of its input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, OpKind, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = [
    "normalise_lanes",
    "chains",
    "check_int",
    "graph_channels",
    "local_copies",
    "local_copy_schedule",
    "op_table",
    "reduce_chains",
    "sequences",
    "split",
    "table_builder",
]

NONE = -1


def split(total: int, parts: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and sizes of ``parts`` near-equal contiguous blocks of ``total`` elements.

    >>> split(10, 4)
    (array([0, 3, 6, 8]), array([3, 3, 2, 2]))
    """
    parts = max(int(parts), 1)
    sizes = np.full(parts, total // parts, dtype=np.int64) + (np.arange(parts) < total % parts)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return offsets, sizes


def normalise_lanes(spec: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels`` and ``chunks``: the whole ``normalise`` of an algorithm whose only
    parameters are its lanes."""
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
    }


def check_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer parameter >= ``minimum``, else UsageError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UsageError(
            f"parameter {name} must be an integer >= {minimum}, got {value!r}", source=name
        )
    return int(value)


def graph_channels(params: dict[str, Any]) -> int | None:
    """The ``graph_channels`` parameter of a ring or tree: None, or how many channels of the
    library's searched graph the lanes are copies of (lane ``k`` of graph channel ``k mod
    graph_channels``). The schedule is the same either way; the simulator shares NCCL's
    per-channel caps among a graph channel's copies (:mod:`scaleup.sim.graph_channels`)."""
    value = params.get("graph_channels")
    return None if value is None else check_int("graph_channels", value)


def chains(
    b: ScheduleBuilder,
    kind: OpKind,
    ranks: np.ndarray,
    src_buffer: Any,
    dst_buffer: Any,
    src_offset: Any,
    dst_offset: Any,
    count: Any,
    *,
    first_deps: Any = None,
    hop_deps: Any = None,
    channel: Any = 0,
    step: Any = 0,
) -> np.ndarray:
    """Append ``M`` chains of ``L`` hops each; hop ``t`` moves ``ranks[:, t] -> ranks[:, t+1]``.

    A copy is issued by its source (a put), a reduce by its destination. See :func:`sequences`
    for the other arguments. Returns the op ids, shape (M, L).
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    src_rank, dst_rank = ranks[:, :-1], ranks[:, 1:]
    return sequences(
        b, kind, src_rank, src_buffer, src_offset, dst_rank, dst_buffer, dst_offset, count,
        first_deps=first_deps, hop_deps=hop_deps, channel=channel, step=step,
        issuer=src_rank if kind is OpKind.COPY else dst_rank,
    )  # fmt: skip


def sequences(
    b: ScheduleBuilder,
    kind: OpKind,
    src_rank: np.ndarray,
    src_buffer: Any,
    src_offset: Any,
    dst_rank: Any,
    dst_buffer: Any,
    dst_offset: Any,
    count: Any,
    *,
    first_deps: Any = None,
    hop_deps: Any = None,
    channel: Any = 0,
    step: Any = 0,
    issuer: Any = None,
) -> np.ndarray:
    """Append ``M`` sequences of ``L`` dependent ops each, with one ``add_batch`` call.

    Every per-op argument broadcasts to (M, L) (``count`` and ``channel`` to (M,): one piece per
    sequence). Op ``t`` depends on op ``t-1``; op 0 on ``first_deps`` (M, k); every op also on
    ``hop_deps`` (M, L) or (M, L, k) when given (``-1`` = none). ``issuer`` defaults to the
    source rank for copies and the destination rank for reduces. Sequences whose count is 0 are
    left out. Returns the op ids, shape (M, L), ``-1`` where left out.
    """
    src_rank = np.asarray(src_rank, dtype=np.int64)
    m, hops = src_rank.shape
    ids = np.full((m, hops), NONE, dtype=np.int64)
    count = np.broadcast_to(np.asarray(count, dtype=np.int64), (m,))
    keep = np.flatnonzero(count > 0)
    if hops == 0 or not len(keep):
        return ids
    k = len(keep)

    def grid(value: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(value, dtype=np.int64), (m, hops))[keep]

    dst_rank = grid(dst_rank)
    who = (
        grid(issuer)
        if issuer is not None
        else (src_rank[keep] if kind is OpKind.COPY else dst_rank)
    )
    base = b.n_ops
    kept_ids = base + np.arange(hops)[None, :] * k + np.arange(k)[:, None]  # (k, L)
    prev = np.full((k, hops, 1), NONE, dtype=np.int64)
    prev[:, 1:, 0] = kept_ids[:, :-1]
    dep_blocks = [prev]
    if first_deps is not None:
        fd = np.asarray(first_deps, dtype=np.int64).reshape(m, -1)[keep]
        block = np.full((k, hops, fd.shape[1]), NONE, dtype=np.int64)
        block[:, 0, :] = fd
        dep_blocks.append(block)
    if hop_deps is not None:
        hd = np.asarray(hop_deps, dtype=np.int64)
        hd = hd[:, :, None] if hd.ndim == 2 else hd
        dep_blocks.append(np.broadcast_to(hd, (m, hops, hd.shape[2]))[keep])
    deps = np.concatenate(dep_blocks, axis=2)  # (k, L, d)

    def flat(a: np.ndarray) -> np.ndarray:  # hop-major order, so deps point at earlier ids
        return np.ascontiguousarray(np.swapaxes(a, 0, 1)).reshape(-1, *a.shape[2:])

    ch = np.broadcast_to(np.asarray(channel, dtype=np.int64), (m,))[keep]
    out = b.add_batch(
        kind,
        src_rank=flat(src_rank[keep]), src_buffer=flat(grid(src_buffer)),
        src_offset=flat(grid(src_offset)),
        dst_rank=flat(dst_rank), dst_buffer=flat(grid(dst_buffer)),
        dst_offset=flat(grid(dst_offset)),
        count=flat(np.broadcast_to(count[keep][:, None], (k, hops))),
        deps=flat(deps), rank=flat(who),
        channel=flat(np.broadcast_to(ch[:, None], (k, hops))), step=flat(grid(step)),
    )  # fmt: skip
    ids[keep] = out.reshape(hops, k).T
    return ids


def table_builder(
    spec: CollectiveSpec,
    algorithm: str,
    *,
    scratch_count: int = 0,
    params: Mapping[str, Any] | None = None,
) -> ScheduleBuilder:
    """The builder of the vectorised algorithms: every dependency stated, none inferred (so a
    1024-rank ring of three million ops builds in about a second)."""
    return ScheduleBuilder(
        spec, algorithm, scratch_count=scratch_count, params=params, infer_deps=False
    )


def reduce_chains(
    b: ScheduleBuilder,
    ranks: np.ndarray,
    src_buffer: Any,
    dst_buffer: Any,
    src_offset: Any,
    dst_offset: Any,
    init_offset: Any,
    count: Any,
    *,
    succ: np.ndarray,
    channel: Any = 0,
    step: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``M`` reduce chains of ``L`` hops, each hop's target initialised just in time.

    Hop ``t`` of chain ``m`` reduces ``ranks[m, t]``'s ``src_buffer[src_offset]`` into
    ``ranks[m, t+1]``'s ``dst_buffer[dst_offset]``, after a local copy of the receiver's
    ``input[init_offset]`` into that target (same count). ``succ[m]`` is the chain whose hop
    ``t - 1`` reaches the same receiver as chain ``m``'s hop ``t`` (ring: the next block); the copy
    of hop ``t >= 2`` depends on the receiver's reduce of hop ``t - 2`` (chain ``succ[succ[m]]``),
    the copy of hop 1 on the receiver's copy of hop 0, and hop ``t``'s reduce on hop ``t - 1``
    and its own copy. (No extra "in program order" edge to the receiver's previous reduce: on
    fabrics with unequal route latencies, e.g. a two-tier Clos, it turns every op into its own
    event batch: 82k instead of 5k batches for a 256-rank ring, for 0.5% of busbw.)
    Per-op arguments broadcast to (M, L), ``count``/``channel`` to (M,).
    Empty chains are left out. This is one ``add_batch`` with a kind per op. Returns
    (reduce ids, copy ids), each (M, L), ``-1`` where left out.
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    m, hops = ranks.shape[0], ranks.shape[1] - 1
    red_ids = np.full((m, hops), NONE, dtype=np.int64)
    copy_ids = np.full((m, hops), NONE, dtype=np.int64)
    count = np.broadcast_to(np.asarray(count, dtype=np.int64), (m,))
    keep = np.flatnonzero(count > 0)
    if hops <= 0 or not len(keep):
        return red_ids, copy_ids
    k = len(keep)
    kidx = np.full(m, NONE, dtype=np.int64)
    kidx[keep] = np.arange(k)
    succ = np.asarray(succ, dtype=np.int64)
    succ1 = kidx[succ[keep]]  # kept index of the chain one hop ahead at the same receiver, or -1
    succ2 = np.where(succ1 >= 0, kidx[succ[keep[np.maximum(succ1, 0)]]], NONE)

    def grid(value: Any) -> np.ndarray:  # (L, k): hop-major
        full = np.broadcast_to(np.asarray(value, dtype=np.int64), (m, hops))
        return np.ascontiguousarray(full[keep].T)

    # op blocks of k ops, in the order C0 C1 R0 C2 R1 ... C(L-1) R(L-2) R(L-1): copy of hop t is
    # block 2t-1 (t >= 1), reduce of hop t block 2t+2 (2L-1 for the last); deps point backwards
    t = np.arange(hops)
    cblock = np.maximum(2 * t - 1, 0)
    rblock = np.where(t == hops - 1, 2 * hops - 1, 2 * t + 2)
    base, ar = b.n_ops, np.arange(k)
    cid = base + cblock[:, None] * k + ar[None, :]  # (L, k)
    rid = base + rblock[:, None] * k + ar[None, :]

    def pick(ids: np.ndarray, row: int, which: np.ndarray) -> np.ndarray:
        return np.where(which >= 0, ids[row][np.maximum(which, 0)], NONE)

    cdep = np.full((hops, k), NONE, dtype=np.int64)
    if hops > 1:
        cdep[1] = pick(cid, 0, succ1)
    if hops > 2:
        cdep[2:] = np.where(succ2 >= 0, rid[:-2][:, np.maximum(succ2, 0)], NONE)
    rdep = np.full((hops, k, 2), NONE, dtype=np.int64)
    rdep[:, :, 0] = cid
    rdep[1:, :, 1] = rid[:-1]
    dst_rank = grid(ranks[:, 1:])
    dbuf, doff = grid(dst_buffer), grid(dst_offset)
    steps = grid(step)
    cnt = np.broadcast_to(count[keep], (hops, k))
    lane_ch = np.broadcast_to(np.asarray(channel, dtype=np.int64), (m,))[keep]
    ch = np.broadcast_to(lane_ch, (hops, k))
    copies = {
        "src_rank": dst_rank, "src_buffer": np.full((hops, k), INPUT),
        "src_offset": grid(init_offset),
        "dst_rank": dst_rank, "dst_buffer": dbuf, "dst_offset": doff, "count": cnt,
        "channel": ch, "step": steps,
        "deps": np.stack([cdep, np.full((hops, k), NONE)], axis=2),
        "kind": np.full((hops, k), int(OpKind.COPY)), "rank": dst_rank,
    }  # fmt: skip
    reduces = {
        "src_rank": grid(ranks[:, :-1]), "src_buffer": grid(src_buffer),
        "src_offset": grid(src_offset), "dst_rank": dst_rank, "dst_buffer": dbuf,
        "dst_offset": doff, "count": cnt, "channel": ch, "step": steps, "deps": rdep,
        "kind": np.full((hops, k), int(OpKind.REDUCE)), "rank": dst_rank,
    }  # fmt: skip
    blocks = np.r_[cblock, rblock]
    order = np.argsort(blocks, kind="stable")
    cols = {
        key: np.concatenate([copies[key], reduces[key]])[order].reshape(
            (2 * hops * k,) + copies[key].shape[2:]
        )
        for key in copies
    }
    kind = cols.pop("kind")
    b.add_batch(kind, **cols)
    copy_ids[keep] = cid.T
    red_ids[keep] = rid.T
    return red_ids, copy_ids


def local_copies(
    b: ScheduleBuilder,
    ranks: Any,
    src_buffer: Any,
    src_offset: Any,
    dst_buffer: Any,
    dst_offset: Any,
    count: Any,
    *,
    deps: Any = None,
    channel: Any = 0,
    step: Any = 0,
    dst_rank: Any = None,
    kind: OpKind = OpKind.COPY,
    rank: Any = None,
) -> np.ndarray:
    """One op per row (a copy by default, local unless ``dst_rank`` is given); ids, -1 if empty."""
    ranks = np.asarray(ranks, dtype=np.int64).ravel()
    n = len(ranks)

    def full(v: Any) -> np.ndarray:
        a = np.asarray(v, dtype=np.int64)
        return np.broadcast_to(a.ravel() if a.ndim > 1 else a, (n,))

    count = full(count)
    ids = np.full(n, NONE, dtype=np.int64)
    keep = np.flatnonzero(count > 0)
    if not len(keep):
        return ids

    def col(v: Any) -> np.ndarray:
        return full(v)[keep]

    dr = ranks if dst_rank is None else full(dst_rank)
    dep = None if deps is None else np.asarray(deps, dtype=np.int64).reshape(n, -1)[keep]
    ids[keep] = b.add_batch(
        kind, src_rank=ranks[keep], src_buffer=col(src_buffer), src_offset=col(src_offset),
        dst_rank=dr[keep], dst_buffer=col(dst_buffer), dst_offset=col(dst_offset),
        count=count[keep], deps=dep, channel=col(channel), step=col(step),
        rank=None if rank is None else col(rank),
    )  # fmt: skip
    return ids


def local_copy_schedule(
    spec: CollectiveSpec, algorithm: str, params: Mapping[str, Any]
) -> Schedule:
    """The one-rank schedule: copy the input to the output (nothing to do when count is 0)."""
    b = ScheduleBuilder(spec, algorithm, params=params)
    n = min(spec.input_count, spec.output_count)
    if n:
        b.copy(b.input(0, 0, n), b.output(0, 0, n), deps=[])
    return b.build()


def op_table(
    kind: np.ndarray,
    n_srcs: np.ndarray,
    src_rows: np.ndarray,
    n_dsts: np.ndarray,
    dst_rows: np.ndarray,
    count: np.ndarray,
    issuer: np.ndarray,
    channel: np.ndarray,
    step: np.ndarray,
    *,
    n_deps: np.ndarray | None = None,
    dep_idx: np.ndarray | None = None,
) -> OpTable:
    """An OpTable from numpy columns (no per-op Python objects), for ops of any kind: the
    builder's ``add_batch`` takes copy and reduce only (LEAD request in the coordination notes),
    so schedules with switch_reduce ops assemble their table here.

    ``n_srcs[i]`` rows of ``src_rows`` ((S, 3): rank, buffer, offset) are op ``i``'s sources, in
    op order; likewise the destinations, and ``n_deps[i]`` entries of ``dep_idx`` its
    dependencies (none when left out).
    """
    n = len(count)

    def ptr(lengths: np.ndarray) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(
            np.int64
        )

    src_rows = np.asarray(src_rows, dtype=np.int64).reshape(-1, 3)
    dst_rows = np.asarray(dst_rows, dtype=np.int64).reshape(-1, 3)
    return OpTable(
        kind=kind, rank=issuer, count=count, channel=channel, step=step, src_ptr=ptr(n_srcs),
        src_rank=src_rows[:, 0], src_buffer=src_rows[:, 1], src_offset=src_rows[:, 2],
        dst_ptr=ptr(n_dsts), dst_rank=dst_rows[:, 0], dst_buffer=dst_rows[:, 1],
        dst_offset=dst_rows[:, 2],
        dep_ptr=ptr(np.zeros(n, dtype=np.int64) if n_deps is None else n_deps),
        dep_idx=np.zeros(0, dtype=np.int64) if dep_idx is None else dep_idx,
    )  # fmt: skip


INPUT, OUTPUT, SCRATCH = int(Buffer.INPUT), int(Buffer.OUTPUT), int(Buffer.SCRATCH)
