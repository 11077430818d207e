"""What an op does: the one definition the verifier and every runtime transport execute.

An op of a :class:`~scaleup.collectives.schedule.Schedule` **reads all its operands, then writes
its destinations**:

=============== =================================================================================
copy            ``dsts[0] := srcs[0]``
reduce          ``dsts[0] := dsts[0] (redop) srcs[0]``
switch_reduce   ``v := srcs[0] (redop) srcs[1] (redop) ...`` left to right (the order floats are
                summed in); then every ``dsts[k] := v``
=============== =================================================================================

Operands may alias. When the runtime binds a rank's output to its input (in place, as
``torch.distributed.all_reduce(x)``), an op's destination can be one of its own sources: ``nvls``
reduce to root r reads ``r.input`` and writes ``r.output``, the same memory. The value written is
still computed from the values *before* the op. The destinations of one op must not overlap each
other (:func:`~scaleup.collectives.verify.verify` rejects that: which value would win?).

Implementations:

- :func:`apply_op` is the definition on numpy views. The verifier replays with it (also with
  output aliased to input, ``verify(..., in_place=True)``, the runtime's in-place check); the
  ``pipe`` and ``mpi`` transports execute with it.
- :func:`combine` is the kernel under it: accumulate into one buffer, then copy into the other
  destinations. The load/store plans of ``shm`` and ``local``
  (:mod:`scaleup.runtime.execute`) call it directly with what they decided once at compile
  time: a *stage* (a temporary accumulator) wherever :func:`needs_stage` says accumulating
  straight into the destination would read an operand after overwriting it, and cache blocking
  only where no operand overlaps the destination at all.

Why this is enough: numpy makes a single ``copyto`` or ufunc call behave as if all its inputs were
read before its output is written (it buffers overlapping operands), so only an operand read by a
*later* call of the accumulation can see a value the op itself already stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaleup.collectives.schedule import OpKind

__all__ = ["accumulate", "apply_op", "combine", "needs_stage", "overlaps"]


def overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two views may share memory (exact for the contiguous 1-D chunks of schedules)."""
    return bool(np.may_share_memory(a, b))


def needs_stage(acc: np.ndarray, first: np.ndarray | None, rest: Sequence[np.ndarray]) -> bool:
    """Whether ``accumulate(acc, first, rest)`` would read an operand after storing into ``acc``.

    The first numpy call (``copyto(acc, first)``, or ``acc op= rest[0]`` when ``first`` is None)
    reads its input before writing; every later call reads one of ``rest`` after ``acc`` changed.
    """
    later = rest if first is not None else rest[1:]
    return any(overlaps(acc, s) for s in later)


def accumulate(
    acc: np.ndarray,
    first: np.ndarray | None,
    rest: Sequence[np.ndarray],
    ufunc: np.ufunc,
    block: int | None = None,
) -> None:
    """``acc := first (op) rest[0] (op) rest[1] ...``; ``first`` None: ``acc`` is the first operand.

    ``block`` (elements) processes the buffers block by block so that the accumulator stays in
    cache while every operand streams; callers pass it only when no operand overlaps ``acc``.
    """
    if block is None or len(acc) <= block or len(rest) + (first is not None) <= 1:
        if first is not None:
            np.copyto(acc, first)
        for src in rest:
            ufunc(acc, src, out=acc)
        return
    for lo in range(0, len(acc), block):
        hi = lo + block
        part = acc[lo:hi]
        if first is not None:
            np.copyto(part, first[lo:hi])
        for src in rest:
            ufunc(part, src[lo:hi], out=part)


def combine(
    dsts: Sequence[np.ndarray],
    first: np.ndarray | None,
    rest: Sequence[np.ndarray],
    ufunc: np.ufunc,
    *,
    stage: np.ndarray | None = None,
    block: int | None = None,
) -> None:
    """Every ``dsts[k] := first (op) rest...`` (``first`` None: ``dsts[0]`` is the first operand).

    Accumulates in ``stage`` when given (then copies it into every destination), else in
    ``dsts[0]``, which is only "read all, then write" when :func:`needs_stage` is False.
    """
    acc = dsts[0] if stage is None else stage
    if stage is not None and first is None:
        np.copyto(stage, dsts[0])
    accumulate(acc, first, rest, ufunc, block)
    for dst in dsts:
        if dst is not acc:
            np.copyto(dst, acc)


def _order_free(ufunc: np.ufunc, dtype: np.dtype) -> bool:
    """Whether reducing with ``ufunc`` in ``dtype`` gives one result in any order: integers
    (wrapping sums and products), max and min. Float sums are left to right (numpy would sum
    a stack pairwise where it sees fit)."""
    return dtype.kind in "iub" or ufunc in (np.maximum, np.minimum)


def apply_op(
    kind: OpKind | int,
    srcs: Sequence[np.ndarray],
    dsts: Sequence[np.ndarray],
    ufunc: np.ufunc,
    *,
    disjoint: bool = False,
) -> None:
    """Execute one op on numpy views of its chunks, exactly as the module docstring defines it.

    ``disjoint``: the caller knows that no source lies in a destination's buffer (the overlap
    test is then skipped: the verifier's replay, which knows every operand's buffer)."""
    if len(srcs) == 1 and len(dsts) == 1:  # the common ops: what combine() does for them
        if kind == OpKind.COPY:
            np.copyto(dsts[0], srcs[0])  # copyto handles an overlap
            return
        if kind == OpKind.REDUCE:  # one ufunc call reads both operands before it writes
            ufunc(dsts[0], srcs[0], out=dsts[0])
            return
    if kind == OpKind.REDUCE:
        first, rest = None, srcs[:1]
    elif len(srcs) > 2 and _order_free(ufunc, dsts[0].dtype):  # an in-switch reduction of
        # many, where the order of the terms cannot change the result: the sources stacked
        # (all read before any write) and reduced in one call
        ufunc.reduce(np.stack(srcs), axis=0, out=dsts[0])
        for dst in dsts[1:]:
            np.copyto(dst, dsts[0])
        return
    else:  # copy: one source; switch_reduce: the sources, left to right
        first, rest = srcs[0], srcs[1:]
    staged = not disjoint and needs_stage(dsts[0], first, rest)
    stage = np.empty_like(dsts[0]) if staged else None
    combine(dsts, first, rest, ufunc, stage=stage)
