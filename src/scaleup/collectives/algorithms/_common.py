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
    "chains",
    "check_int",
    "local_copies",
    "local_copy_schedule",
    "sequences",
    "split",
    "switch_table",
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


def check_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer parameter >= ``minimum``, else UsageError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UsageError(
            f"parameter {name} must be an integer >= {minimum}, got {value!r}", source=name
        )
    return int(value)


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


def switch_table(
    n_srcs: np.ndarray,
    src_rows: np.ndarray,
    n_dsts: np.ndarray,
    dst_rows: np.ndarray,
    count: np.ndarray,
    issuer: np.ndarray,
    channel: np.ndarray,
    step: np.ndarray,
) -> OpTable:
    """An OpTable of switch_reduce ops from numpy columns (no per-op Python objects).

    ``n_srcs[i]`` rows of ``src_rows`` ((S, 3): rank, buffer, offset) are op ``i``'s sources, in
    op order; likewise the destinations. The builder's ``add_batch`` takes copy and reduce only
    (LEAD request in the coordination notes), so NVLS schedules assemble their table here.
    """
    n = len(count)

    def ptr(lengths: np.ndarray) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))]).astype(
            np.int64
        )

    src_rows = np.asarray(src_rows, dtype=np.int64).reshape(-1, 3)
    dst_rows = np.asarray(dst_rows, dtype=np.int64).reshape(-1, 3)
    return OpTable(
        kind=np.full(n, int(OpKind.SWITCH_REDUCE)), rank=issuer, count=count, channel=channel,
        step=step, src_ptr=ptr(n_srcs), src_rank=src_rows[:, 0], src_buffer=src_rows[:, 1],
        src_offset=src_rows[:, 2], dst_ptr=ptr(n_dsts), dst_rank=dst_rows[:, 0],
        dst_buffer=dst_rows[:, 1], dst_offset=dst_rows[:, 2],
        dep_ptr=np.zeros(n + 1, dtype=np.int64), dep_idx=np.zeros(0, dtype=np.int64),
    )  # fmt: skip


INPUT, OUTPUT, SCRATCH = int(Buffer.INPUT), int(Buffer.OUTPUT), int(Buffer.SCRATCH)
