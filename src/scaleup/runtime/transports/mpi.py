"""The ``mpi`` transport: MPI-3 one-sided windows (mpi4py), so one program runs under mpiexec.

Optional extra ``scaleup[mpi]`` (mpi4py + the mpich wheel). Each symmetric allocation is an
``MPI.Win.Allocate`` window (displacement unit 1 byte). ``put``/``get`` are ``Win.Put``/``Win.Get``
inside a passive-target ``Lock``/``Unlock`` (complete at ``Unlock``, so ``quiet`` has nothing to
wait for); ``atomic_fetch_add`` is ``Win.Fetch_and_op``, atomic by the MPI standard.

Collectives run the Schedule level by level in active-target epochs: an op's level is one more
than its deepest dependency, ops of one level are independent, and ``Win.Fence`` on every
involved window separates levels. A copy is a ``Get`` by the destination's owner; a reduction is
an ``Accumulate`` by the source's owner (element-wise atomic at the target) when the dtype has an
MPI type, else (float16, bfloat16) a ``Get`` into a temporary, a fence, the local reduction and one
more fence. This is MPI's "global barrier per step" model, the contrast to ``shm``'s per-op flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.semantics import apply_op
from scaleup.collectives.spec import reduce_ufunc
from scaleup.errors import TransportError
from scaleup.runtime.transports.base import BaseTransport, Binding

__all__ = ["MpiTransport"]


class MpiTransport(BaseTransport):
    """This process's endpoint in ``MPI.COMM_WORLD`` (started by mpiexec)."""

    name = "mpi"

    def __init__(self, timeout_s: float = 30.0) -> None:
        try:
            from mpi4py import MPI
        except ImportError as error:
            raise TransportError(
                "the mpi transport needs mpi4py and an MPI (pip install scaleup[mpi])", source="mpi"
            ) from error
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        super().__init__(self.comm.Get_rank(), self.comm.Get_size(), timeout_s)
        self._windows: dict[int, tuple[Any, np.ndarray]] = {}
        self._next_id = 0
        self._plans: dict[tuple[object, ...], list[tuple[list[Any], list[Any] | None]]] = {}
        self._types = {
            "float32": MPI.FLOAT,
            "float64": MPI.DOUBLE,
            "int32": MPI.INT32_T,
            "int64": MPI.INT64_T,
        }
        self._ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    def alloc_bytes(self, nbytes: int) -> int:
        win = self.MPI.Win.Allocate(max(int(nbytes), 8), 1, comm=self.comm)
        memory = np.frombuffer(cast(Any, win.tomemory()), dtype=np.uint8)[: int(nbytes)]
        memory[:] = 0
        alloc_id = self._next_id
        self._next_id += 1
        self._windows[alloc_id] = (win, memory)
        self.comm.Barrier()
        return alloc_id

    def free(self, alloc_id: int) -> None:
        self._plans.clear()
        win, _ = self._windows.pop(alloc_id)
        win.Free()

    def local_bytes(self, alloc_id: int) -> np.ndarray:
        return self._windows[alloc_id][1]

    def put_bytes(self, alloc_id: int, peer: int, offset: int, data: np.ndarray) -> None:
        win = self._windows[alloc_id][0]
        win.Lock(peer, self.MPI.LOCK_SHARED)
        win.Put(np.ascontiguousarray(data), peer, target=(offset, len(data), self.MPI.BYTE))
        win.Unlock(peer)

    def get_bytes(self, alloc_id: int, peer: int, offset: int, out: np.ndarray) -> None:
        win = self._windows[alloc_id][0]
        win.Lock(peer, self.MPI.LOCK_SHARED)
        win.Get(out, peer, target=(offset, len(out), self.MPI.BYTE))
        win.Unlock(peer)

    def atomic_fetch_add(self, alloc_id: int, peer: int, offset: int, value: int) -> int:
        win = self._windows[alloc_id][0]
        origin, result = np.array([value], dtype=np.int64), np.zeros(1, dtype=np.int64)
        win.Lock(peer, self.MPI.LOCK_SHARED)
        win.Fetch_and_op(
            [origin, self.MPI.INT64_T], [result, self.MPI.INT64_T], peer, offset, self.MPI.SUM
        )
        win.Unlock(peer)
        return int(result[0])

    def barrier(self) -> None:
        self.comm.Barrier()

    def execute(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype, epoch: int
    ) -> None:
        key = (schedule, tuple(sorted(bindings.items())), dtype.str)
        levels = self._plans.get(key)
        if levels is None:
            levels = self._plans[key] = self._compile(schedule, bindings, dtype)
        windows = sorted({alloc_id for alloc_id, _ in bindings.values()})
        wins = [self._windows[a][0] for a in windows]
        ufunc = reduce_ufunc(schedule.spec.redop)
        for win in wins:
            win.Fence()
        for phase_a, phase_b in levels:
            for action in phase_a:
                action()
            for win in wins:
                win.Fence()
            if phase_b is not None:
                for kind, dsts, temps in phase_b:
                    apply_op(kind, temps, dsts, ufunc)
                for win in wins:
                    win.Fence()

    def _compile(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype
    ) -> list[tuple[list[Any], list[Any] | None]]:
        MPI, me, t = self.MPI, self.rank, schedule.table
        mpi_type = self._types.get(dtype.name)
        mpi_op = self._ops[schedule.spec.redop]
        item = dtype.itemsize
        ufunc = reduce_ufunc(schedule.spec.redop)

        def where(buffer: int, offset: int) -> tuple[Any, np.ndarray, int]:
            alloc_id, base = bindings[Buffer(int(buffer))]
            win, memory = self._windows[alloc_id]
            return win, memory, base + int(offset) * item

        def local(buffer: int, offset: int, count: int) -> np.ndarray:
            _, memory, lo = where(buffer, offset)
            return memory[lo : lo + count * item].view(dtype)

        level = np.zeros(t.n_ops, dtype=np.int64)
        for i in range(t.n_ops):
            deps = t.deps_of(i)
            level[i] = 1 + int(level[deps].max()) if len(deps) else 0
        n_levels = int(level.max()) + 1 if t.n_ops else 0
        phase_a: list[list[Any]] = [[] for _ in range(n_levels)]
        phase_b: list[list[Any]] = [[] for _ in range(n_levels)]
        two_phase = [False] * n_levels
        for op in schedule.ops:
            lv, count = int(level[op.id]), op.count
            if count == 0:
                continue
            if op.kind == OpKind.SWITCH_REDUCE or (op.kind == OpKind.REDUCE and mpi_type is None):
                two_phase[lv] = True  # the same on every rank: all see the same schedule and dtype
            if op.kind == OpKind.REDUCE and mpi_type is not None:
                src, dst = op.srcs[0], op.dsts[0]
                if src.rank == me and dst.rank == me:
                    s, d = (
                        local(src.buffer, src.offset, count),
                        local(dst.buffer, dst.offset, count),
                    )
                    phase_a[lv].append(lambda s=s, d=d: ufunc(d, s, out=d))
                elif src.rank == me:
                    win, _, disp = where(dst.buffer, dst.offset)
                    s = local(src.buffer, src.offset, count)
                    phase_a[lv].append(
                        lambda win=win, s=s, r=dst.rank, disp=disp, c=count: win.Accumulate(
                            [s, mpi_type], r, target=(disp, c, mpi_type), op=mpi_op
                        )
                    )
                continue
            mine = [c for c in op.dsts if c.rank == me]
            if not mine:
                continue
            dsts = [local(c.buffer, c.offset, count) for c in mine]
            if op.kind == OpKind.COPY:
                src = op.srcs[0]
                if src.rank == me:
                    s = local(src.buffer, src.offset, count)
                    phase_a[lv].append(lambda s=s, d=dsts[0]: np.copyto(d, s))
                else:
                    win, _, disp = where(src.buffer, src.offset)
                    phase_a[lv].append(
                        lambda win=win, d=dsts[0], r=src.rank, disp=disp, c=count: win.Get(
                            d.view(np.uint8), r, target=(disp, c * item, MPI.BYTE)
                        )
                    )
                continue
            # reduce without an MPI type, or switch_reduce: gather sources, then reduce locally
            temps: list[np.ndarray] = []
            for src in op.srcs:
                temp = np.empty(count, dtype=dtype)
                win, _, disp = where(src.buffer, src.offset)
                phase_a[lv].append(
                    lambda win=win, d=temp, r=src.rank, disp=disp, c=count: win.Get(
                        d.view(np.uint8), r, target=(disp, c * item, MPI.BYTE)
                    )
                )
                temps.append(temp)
            phase_b[lv].append((op.kind, dsts, temps))
        return [(phase_a[lv], phase_b[lv] if two_phase[lv] else None) for lv in range(n_levels)]

    def close(self) -> None:
        for win, _ in self._windows.values():
            win.Free()
        self._windows.clear()
