"""Executing a Schedule by direct loads and stores: per-rank plans synchronised by flags.

A :class:`LoadStorePlan` is compiled once per (schedule, buffer bindings, dtype) for one rank
and cached by the transport. It is a list of steps, each a few numpy views plus the flag waits
that must hold before it runs:

- Each rank executes the ops it *issues*, in op-id order (the runtime only runs schedules whose
  deps point to earlier ids, so that order is topological). Every step runs
  :func:`scaleup.collectives.semantics.combine`, the kernel of the op semantics the verifier
  replays ("read every operand, then write"), on views of the mapped segments. A run of
  consecutive ops into the same destination chunk (``copy`` then ``reduce``s, the direct
  algorithm's "reduce my slice from every peer") is fused into one step, cache-blocked: per
  256 KiB block, the accumulator stays in L2 while every source streams. Fusing is the same as
  running the ops one by one only when no fused source overlaps the destination (else the op
  starts a step of its own) and no fused op waits for a peer op that may wait for this step
  (every cross-rank dependency of a fused op is older than the step's first op).
- Aliasing (in place, output bound to input): where accumulating straight into the destination
  would read an operand after overwriting it (:func:`~scaleup.collectives.semantics.needs_stage`:
  ``nvls`` reduce to root r reads ``r.input`` after ``r.output`` received rank 0's data), the
  step accumulates in a stage buffer allocated with the plan and then copies it out; cache
  blocking is used only where no operand overlaps the accumulator.
- Rank r has one progress word ``P[r]`` (its own cache line). For collective call ``e``
  (``base = e * 2**24``) rank r stores ``P[r] = base`` on entry ("my buffers are ready") and
  ``P[r] = base + i`` after its i-th op. A step waits ``P[q] >= base + i`` for every cross-rank
  dependency (op i of rank q) and ``P[q] >= base`` before it first touches rank q's memory.
  Progress words only grow, so a rank that has moved on to a later call still satisfies them.
- Before returning, rank r waits until every peer has finished its last op that touches r's
  buffers, so the caller may reuse them at once. There is no global barrier per step.

Memory ordering (x86-64, TSO): a producer's data stores (numpy loops) precede its flag store in
program order, and TSO never reorders a store with an earlier store, so a consumer that sees the
flag sees the data; the consumer's loads after its flag load are not reordered with that load
either. Each numpy call and each flag access is an opaque C call, so neither the Python compiler
nor the C compiler moves memory accesses across it. On weakly ordered CPUs (ARM, POWER) this
would need a release fence before each flag store and an acquire fence after each flag load;
:func:`needs_fences` reports that and the transports then refuse to run (see docs/runtime.md).
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scaleup.collectives.schedule import Buffer, OpKind, OpTable, Schedule
from scaleup.collectives.semantics import combine, needs_stage, overlaps
from scaleup.collectives.spec import reduce_ufunc
from scaleup.runtime.shm import ControlBlock, Waiter

__all__ = ["EPOCH_STRIDE", "LoadStorePlan", "compile_plan", "needs_fences"]

#: Progress values of one collective call live in [epoch * EPOCH_STRIDE, (epoch+1) * EPOCH_STRIDE).
EPOCH_STRIDE = 1 << 24
#: Bytes per block of a fused, cache-blocked reduction (half of this machine's 512 KiB L2).
BLOCK_BYTES = 256 * 1024


def needs_fences() -> bool:
    """Whether this CPU may reorder stores with stores (then plain flags are not enough)."""
    return platform.machine().lower() not in {"x86_64", "amd64", "i386", "i686", "x86"}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two views are the same memory (a copy between them does nothing)."""
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and len(a) == len(b)


@dataclass
class _Step:
    waits: tuple[tuple[int, int, int], ...]  # (control word, value above base, peer)
    dsts: tuple[np.ndarray, ...]  # the destination, then switch_reduce's multicast targets
    init: np.ndarray | None  # first operand (None: the destination as it is)
    srcs: tuple[np.ndarray, ...]  # reduced into the accumulator, in order
    stage: np.ndarray | None  # the accumulator when the destination aliases a later operand
    block: int | None  # cache-block size in elements; None where an operand overlaps the acc
    done: int  # progress value (above base) once this step is finished


def _step(
    waits: tuple[tuple[int, int, int], ...],
    dsts: list[np.ndarray],
    init: np.ndarray | None,
    srcs: list[np.ndarray],
    block: int,
    done: int,
) -> _Step:
    """A step whose stage and blocking follow the op semantics (see the module docstring)."""
    if init is not None and _same(init, dsts[0]):
        init = None  # the destination already holds the first operand
    stage = np.empty_like(dsts[0]) if needs_stage(dsts[0], init, srcs) else None
    acc = dsts[0] if stage is None else stage
    operands = [*srcs] if init is None else [init, *srcs]
    blocked = not any(overlaps(acc, x) for x in operands)
    return _Step(waits, tuple(dsts), init, tuple(srcs), stage, block if blocked else None, done)


class LoadStorePlan:
    """One rank's precompiled part of a schedule (see the module docstring)."""

    def __init__(
        self,
        steps: list[_Step],
        exit_waits: tuple[tuple[int, int, int], ...],
        my_word: int,
        ufunc: np.ufunc,
    ) -> None:
        self.steps = steps
        self.exit_waits = exit_waits
        self.my_word = my_word
        self.ufunc = ufunc

    def run(self, epoch: int, control: ControlBlock, waiter: Waiter) -> None:
        """Execute this rank's ops for collective call ``epoch``."""
        base = epoch * EPOCH_STRIDE
        words = control.words
        me = self.my_word
        words[me] = base
        control.wake(me)
        ufunc = self.ufunc
        for step in self.steps:
            for index, value, peer in step.waits:
                if words[index] < base + value:
                    waiter.wait_ge(index, base + value, peer)
            combine(step.dsts, step.init, step.srcs, ufunc, stage=step.stage, block=step.block)
            words[me] = base + step.done
            control.wake(me)  # a peer blocked on this word runs now, not at its next tick
        for index, value, peer in self.exit_waits:
            if words[index] < base + value:
                waiter.wait_ge(index, base + value, peer)


def compile_plan(
    schedule: Schedule,
    rank: int,
    view: Callable[[int, Buffer], np.ndarray],
    redop: str,
    dtype: np.dtype,
) -> LoadStorePlan:
    """Compile ``rank``'s plan; ``view(r, buffer)`` is rank r's whole buffer, typed."""
    t = schedule.table
    n_ops = t.n_ops
    issuer = t.rank
    local_index = np.zeros(n_ops, dtype=np.int64)  # progress value once the op is done
    counters = np.zeros(schedule.nranks, dtype=np.int64)
    for i in range(n_ops):
        counters[issuer[i]] += 1
        local_index[i] = counters[issuer[i]]
    prog = ControlBlock.progress_index

    def touched(i: int) -> set[int]:
        ranks = set(t.src_rank[t.src_ptr[i] : t.src_ptr[i + 1]].tolist())
        return ranks | set(t.dst_rank[t.dst_ptr[i] : t.dst_ptr[i + 1]].tolist())

    mine = [i for i in range(n_ops) if issuer[i] == rank]
    waited = dict.fromkeys(range(schedule.nranks), -1)

    def waits_for(ops: list[int]) -> tuple[tuple[int, int, int], ...]:
        need: dict[int, int] = {}
        for i in ops:
            for q in touched(i):
                if q != rank:
                    need[q] = max(need.get(q, 0), 0)
            for d in t.deps_of(i):
                q = int(issuer[d])
                if q != rank:
                    need[q] = max(need.get(q, 0), int(local_index[d]))
        out = []
        for q, value in sorted(need.items()):
            if value > waited[q]:
                waited[q] = value
                out.append((prog(q), value, q))
        return tuple(out)

    def chunks(side: str, i: int) -> list[np.ndarray]:
        """Views of op i's sources (``side="src"``) or destinations (``"dst"``)."""
        ptr, ranks, bufs, offs = (
            getattr(t, f"{side}_{column}") for column in ("ptr", "rank", "buffer", "offset")
        )
        count = int(t.count[i])
        return [
            view(int(ranks[j]), Buffer(int(bufs[j])))[offs[j] : offs[j] + count]
            for j in range(ptr[i], ptr[i + 1])
        ]

    def fusable(j: int, first: int, dst: np.ndarray, key: tuple[int, ...]) -> bool:
        """Whether op j is a reduce into ``dst`` that may join the step starting at ``first``."""
        if int(t.kind[j]) != OpKind.REDUCE or key != _dst_key(t, j):
            return False
        if overlaps(dst, chunks("src", j)[0]):
            return False  # it reads what the step writes: one by one is not the same as fused
        return all(d < first or int(issuer[d]) == rank for d in t.deps_of(j).tolist())

    block = max(BLOCK_BYTES // max(dtype.itemsize, 1), 1)
    steps: list[_Step] = []
    k = 0
    while k < len(mine):
        i = mine[k]
        srcs = chunks("src", i)
        dsts = chunks("dst", i)
        group = [i]
        kind = int(t.kind[i])
        if kind == OpKind.REDUCE:
            init, rest = None, srcs
        else:  # copy, switch_reduce: the first source, then the others
            init, rest = srcs[0], srcs[1:]
        if kind != OpKind.SWITCH_REDUCE:
            key = _dst_key(t, i)
            while k + 1 < len(mine) and fusable(mine[k + 1], i, dsts[0], key):
                j = mine[k + 1]
                rest = [*rest, chunks("src", j)[0]]
                group.append(j)
                k += 1
        steps.append(_step(waits_for(group), dsts, init, rest, block, int(local_index[group[-1]])))
        k += 1

    exit_need: dict[int, int] = {}
    for i in range(n_ops):
        q = int(issuer[i])
        if q != rank and rank in touched(i):
            exit_need[q] = max(exit_need.get(q, 0), int(local_index[i]))
    exit_waits = tuple((prog(q), v, q) for q, v in sorted(exit_need.items()) if v > waited[q])
    return LoadStorePlan(steps, exit_waits, prog(rank), reduce_ufunc(redop))


def _dst_key(t: OpTable, i: int) -> tuple[int, int, int, int]:
    """(rank, buffer, offset, count) of op i's first destination."""
    row = t.dst_ptr[i]
    return int(t.dst_rank[row]), int(t.dst_buffer[row]), int(t.dst_offset[row]), int(t.count[i])
