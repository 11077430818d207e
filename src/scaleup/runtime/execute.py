"""Executing a Schedule by direct loads and stores: per-rank plans synchronised by flags.

A :class:`LoadStorePlan` is compiled once per (schedule, buffer bindings, dtype) for one rank
and cached by the transport. It is a list of steps, each a few numpy views plus the flag waits
that must hold before it runs:

- Each rank executes the ops it *issues*, in op-id order (the builder guarantees deps point to
  earlier ids, so that order is topological). A copy is ``np.copyto(dst, src)`` on views of the
  mapped segments; a run of consecutive ops into the same destination chunk (``copy`` then
  ``reduce``s, the direct algorithm's "reduce my slice from every peer") is fused into one
  cache-blocked pass: per 256 KiB block, the accumulator stays in L2 while every source streams.
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

from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.runtime.shm import ControlBlock, Waiter

__all__ = ["EPOCH_STRIDE", "LoadStorePlan", "compile_plan", "needs_fences", "ufunc_for"]

#: Progress values of one collective call live in [epoch * EPOCH_STRIDE, (epoch+1) * EPOCH_STRIDE).
EPOCH_STRIDE = 1 << 24
#: Bytes per block of a fused, cache-blocked reduction (half of this machine's 512 KiB L2).
BLOCK_BYTES = 256 * 1024

_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def ufunc_for(redop: str) -> np.ufunc:
    """The numpy ufunc of a reduction name."""
    return _UFUNCS[redop]


def needs_fences() -> bool:
    """Whether this CPU may reorder stores with stores (then plain flags are not enough)."""
    return platform.machine().lower() not in {"x86_64", "amd64", "i386", "i686", "x86"}


def _address(view: np.ndarray) -> int:
    return int(view.__array_interface__["data"][0])


@dataclass
class _Step:
    waits: tuple[tuple[int, int, int], ...]  # (control word, value above base, peer)
    dst: np.ndarray
    init: np.ndarray | None  # copy source (None: accumulate into dst as it is)
    srcs: tuple[np.ndarray, ...]  # reduced into dst, in order
    extra_dsts: tuple[np.ndarray, ...]  # switch_reduce multicast targets
    done: int  # progress value (above base) once this step is finished


class LoadStorePlan:
    """One rank's precompiled part of a schedule (see the module docstring)."""

    def __init__(
        self,
        steps: list[_Step],
        exit_waits: tuple[tuple[int, int, int], ...],
        my_word: int,
        ufunc: np.ufunc,
        block: int,
    ) -> None:
        self.steps = steps
        self.exit_waits = exit_waits
        self.my_word = my_word
        self.ufunc = ufunc
        self.block = block

    def run(self, epoch: int, control: ControlBlock, waiter: Waiter) -> None:
        """Execute this rank's ops for collective call ``epoch``."""
        base = epoch * EPOCH_STRIDE
        words = control.words
        me = self.my_word
        words[me] = base
        ufunc, block = self.ufunc, self.block
        for step in self.steps:
            for index, value, peer in step.waits:
                if words[index] < base + value:
                    waiter.wait_ge(index, base + value, peer)
            dst, srcs = step.dst, step.srcs
            if len(srcs) + (step.init is not None) <= 1 or len(dst) <= block:
                if step.init is not None:
                    np.copyto(dst, step.init)
                for src in srcs:
                    ufunc(dst, src, out=dst)
            else:  # cache-blocked: the block of dst stays in L2 while every source streams
                init = step.init
                for lo in range(0, len(dst), block):
                    hi = lo + block
                    d = dst[lo:hi]
                    if init is not None:
                        np.copyto(d, init[lo:hi])
                    for src in srcs:
                        ufunc(d, src[lo:hi], out=d)
            for extra in step.extra_dsts:
                np.copyto(extra, dst)
            words[me] = base + step.done
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

    def chunk(rank_: int, buffer: int, offset: int, count: int) -> np.ndarray:
        return view(int(rank_), Buffer(int(buffer)))[offset : offset + count]

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

    steps: list[_Step] = []
    k = 0
    while k < len(mine):
        i = mine[k]
        kind = int(t.kind[i])
        count = int(t.count[i])
        srcs = [
            chunk(t.src_rank[j], t.src_buffer[j], t.src_offset[j], count)
            for j in range(t.src_ptr[i], t.src_ptr[i + 1])
        ]
        dsts = [
            chunk(t.dst_rank[j], t.dst_buffer[j], t.dst_offset[j], count)
            for j in range(t.dst_ptr[i], t.dst_ptr[i + 1])
        ]
        group = [i]
        if kind == OpKind.SWITCH_REDUCE:
            init, reduce_srcs = srcs[0], tuple(srcs[1:])
        else:
            dst_key = (
                int(t.dst_rank[t.dst_ptr[i]]),
                int(t.dst_buffer[t.dst_ptr[i]]),
                int(t.dst_offset[t.dst_ptr[i]]),
                count,
            )
            same = _address(srcs[0]) == _address(dsts[0])
            if kind == OpKind.COPY:
                init, reduce_list = (None if same else srcs[0]), []
            else:
                init, reduce_list = None, [srcs[0]]
            while k + 1 < len(mine):  # fuse following reduces into the same chunk
                j = mine[k + 1]
                row = t.dst_ptr[j]
                key = (
                    int(t.dst_rank[row]),
                    int(t.dst_buffer[row]),
                    int(t.dst_offset[row]),
                    int(t.count[j]),
                )
                if int(t.kind[j]) != OpKind.REDUCE or key != dst_key:
                    break
                s = t.src_ptr[j]
                reduce_list.append(chunk(t.src_rank[s], t.src_buffer[s], t.src_offset[s], count))
                group.append(j)
                k += 1
            reduce_srcs = tuple(reduce_list)
        steps.append(
            _Step(
                waits_for(group),
                dsts[0],
                init,
                reduce_srcs,
                tuple(dsts[1:]),
                int(local_index[group[-1]]),
            )
        )
        k += 1

    exit_need: dict[int, int] = {}
    for i in range(n_ops):
        q = int(issuer[i])
        if q != rank and rank in touched(i):
            exit_need[q] = max(exit_need.get(q, 0), int(local_index[i]))
    exit_waits = tuple((prog(q), v, q) for q, v in sorted(exit_need.items()) if v > waited[q])
    block = max(BLOCK_BYTES // max(dtype.itemsize, 1), 1)
    return LoadStorePlan(steps, exit_waits, prog(rank), ufunc_for(redop), block)
