"""The process group: collectives over a transport, symmetric memory, asynchronous work.

A :class:`ProcessGroup` turns a torch.distributed-shaped call (``all_reduce(x, op="sum")``) into a
:class:`~scaleup.collectives.spec.CollectiveSpec`, picks the Schedule
(:func:`~scaleup.runtime.schedules.select_schedule`), binds the schedule's input, output and
scratch buffers to symmetric memory and asks the transport to execute it.

- Arrays from :meth:`ProcessGroup.alloc` are used in place (zero copy). Other arrays are staged
  through a symmetric *workspace* (copied in and out). All ranks must pass the same kind of
  array to one collective: symmetric arrays at the same symmetric address, or ordinary arrays
  (as NVSHMEM requires symmetric addresses). The workspace is sized from the spec alone, so every
  rank grows it at the same call.
- In place (input is output) runs with the two aliased when the schedule is safe that way
  (:func:`~scaleup.runtime.schedules.in_place_safe`), else through the workspace. An output
  that overlaps the input otherwise (NCCL's in-place all_gather and reduce_scatter, where one is
  this rank's block of the other) has offsets that differ by rank, which symmetric addressing
  cannot bind: both are staged through the workspace.
- ``async_op=True`` queues the collective on one worker thread per group and returns a
  :class:`Work`. Collectives run in issue order: a blocking collective (or barrier) first waits
  for queued ones, then runs on the caller's thread (so the blocking path has no thread handoff).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scaleup.collectives.schedule import Buffer
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError
from scaleup.runtime.call_args import (
    ReduceOp,
    average_after,
    check_blocked,
    dtype_of,
    gathered_list,
    output_of,
    redop_name,
    root_of,
    size_of,
)
from scaleup.runtime.schedules import select_schedule
from scaleup.runtime.staging import Layout, round_up, stage
from scaleup.runtime.symmetric import SymmetricHeap
from scaleup.runtime.transports.base import BaseTransport, Binding
from scaleup.runtime.work import InOrder, Work

__all__ = ["ProcessGroup", "ReduceOp", "Work"]


class ProcessGroup:
    """All ranks of one launch, seen from one rank (``rank``, ``world_size``)."""

    def __init__(self, transport: BaseTransport) -> None:
        self.transport = transport
        self.rank = transport.rank
        self.world_size = transport.world_size
        self.heap = SymmetricHeap(transport)
        self._epoch = 0
        self._workspace: tuple[int, int] | None = None  # (alloc id, bytes)
        self._jobs = InOrder(f"scaleup-rank{self.rank}")
        self.mailbox: Any = None  # point-to-point state (scaleup.runtime.p2p), made on request
        self.subgroups: list[Any] = []  # new_group's subgroups (scaleup.runtime.subgroup)

    # ---- symmetric memory and one-sided ops ----------------------------------------------------
    def alloc(self, shape: int | tuple[int, ...], dtype: Any = "float32") -> np.ndarray:
        """Collective: a zeroed symmetric array; see :mod:`scaleup.runtime.symmetric`."""
        self._drain()
        return self.heap.alloc(shape, dtype_of(dtype))

    def free(self, array: np.ndarray) -> None:
        self._drain()
        self.heap.free(array)

    def get_buffer(self, array: np.ndarray, peer: int) -> np.ndarray:
        return self.heap.peer_view(array, peer)

    def put(self, dest: np.ndarray, source: Any, peer: int) -> None:
        """Store ``source`` into ``peer``'s copy of the symmetric ``dest``."""
        alloc_id, offset = self.heap.require(dest, "put")
        self.heap._check_peer(peer)
        data = np.ascontiguousarray(source, dtype=dest.dtype)
        if data.size != dest.size:
            raise UsageError(
                f"put: source has {data.size} elements, dest {dest.size}", source="put"
            )
        self.transport.put_bytes(alloc_id, int(peer), offset, data.reshape(-1).view(np.uint8))

    def get(self, source: np.ndarray, peer: int, out: np.ndarray | None = None) -> np.ndarray:
        """Load ``peer``'s copy of the symmetric ``source`` (into ``out`` if given)."""
        alloc_id, offset = self.heap.require(source, "get")
        self.heap._check_peer(peer)
        result = np.empty_like(source) if out is None else out
        if (
            result.dtype != source.dtype
            or result.size != source.size
            or not result.flags.c_contiguous
        ):
            raise UsageError(
                "get: out must be contiguous with the source's dtype and size", source="get"
            )
        self.transport.get_bytes(alloc_id, int(peer), offset, result.reshape(-1).view(np.uint8))
        return result

    def atomic_fetch_add(self, cell: np.ndarray, value: int, peer: int, index: int = 0) -> int:
        """Atomically add ``value`` to element ``index`` of ``peer``'s int64 ``cell``; old value."""
        if cell.dtype != np.int64:
            raise UsageError(
                "atomic_fetch_add needs an int64 symmetric array", source="atomic_fetch_add"
            )
        if not 0 <= index < cell.size:
            raise UsageError(f"index {index} outside the cell array", source="atomic_fetch_add")
        alloc_id, offset = self.heap.require(cell, "atomic_fetch_add")
        self.heap._check_peer(peer)
        return self.transport.atomic_fetch_add(
            alloc_id, int(peer), offset + 8 * int(index), int(value)
        )

    def fence(self) -> None:
        self.transport.fence()

    def quiet(self) -> None:
        self.transport.quiet()

    def barrier(self) -> None:
        self._drain()
        self.transport.quiet()
        self.transport.barrier()

    # ---- collectives -------------------------------------------------------------------------
    def all_reduce(
        self,
        array: np.ndarray,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """In place: afterwards ``array`` holds the reduction over ranks on every rank; or into
        ``output`` (NCCL's sendbuff/recvbuff form, nccl-tests' out-of-place group)."""
        out = output_of(array, output, "all_reduce")
        spec = CollectiveSpec("all_reduce", self.world_size, size_of(array), redop=redop_name(op))
        return self._submit(
            spec, array, out, algo, async_op, average_after(op, out, self.world_size)
        )

    def reduce_scatter(
        self,
        output: np.ndarray,
        input: np.ndarray,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """``output`` (size m) = block ``rank`` of the reduction of every rank's ``input`` (n*m)."""
        check_blocked(output, input, self.world_size, "reduce_scatter", big="input")
        spec = CollectiveSpec(
            "reduce_scatter", self.world_size, size_of(input), redop=redop_name(op)
        )
        after = average_after(op, output, self.world_size)
        return self._submit(spec, input, output, algo, async_op, after)

    def all_gather(
        self,
        output: np.ndarray | list[np.ndarray],
        input: np.ndarray,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """``output`` (n*m) = every rank's ``input`` (m), in rank order; or a list of n arrays
        shaped like ``input`` (torch's ``all_gather(tensor_list, tensor)``), filled in order."""
        after = None
        if isinstance(output, (list, tuple)):
            output, after = gathered_list(output, input, self.world_size)
        check_blocked(input, output, self.world_size, "all_gather", big="output")
        spec = CollectiveSpec("all_gather", self.world_size, size_of(output))
        return self._submit(spec, input, output, algo, async_op, after)

    def all_to_all(
        self,
        output: np.ndarray,
        input: np.ndarray,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """Block p of ``input`` goes to rank p; block p of ``output`` comes from rank p."""
        if size_of(output) != size_of(input) or size_of(input) % self.world_size:
            raise UsageError(
                "all_to_all: input and output need the same size, a multiple of world_size",
                source="all_to_all",
            )
        spec = CollectiveSpec("all_to_all", self.world_size, size_of(input))
        return self._submit(spec, input, output, algo, async_op)

    def broadcast(
        self,
        array: np.ndarray,
        src: int = 0,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """In place: every rank's ``array`` becomes rank ``src``'s (or every rank's ``output``,
        out of place)."""
        out = output_of(array, output, "broadcast")
        spec = CollectiveSpec(
            "broadcast", self.world_size, size_of(array), root=root_of(src, self.world_size)
        )
        return self._submit(spec, array, out, algo, async_op)

    def reduce(
        self,
        array: np.ndarray,
        dst: int = 0,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """In place at ``dst``: the reduction over ranks; other ranks' arrays are left as is
        (with ``output``: into ``dst``'s ``output``, out of place)."""
        out = output_of(array, output, "reduce")
        spec = CollectiveSpec(
            "reduce",
            self.world_size,
            size_of(array),
            root=root_of(dst, self.world_size),
            redop=redop_name(op),
        )
        after = average_after(op, out, self.world_size) if self.rank == spec.root else None
        return self._submit(spec, array, out, algo, async_op, after)

    # ---- machinery -----------------------------------------------------------------------------
    def _submit(
        self,
        spec: CollectiveSpec,
        inp: np.ndarray,
        out: np.ndarray,
        algo: str | None,
        async_op: bool,
        after: Callable[[], None] | None = None,
    ) -> Work | None:
        """Run (or queue) the collective, then ``after`` (avg's division, a list's copy-out)."""
        if not isinstance(inp, np.ndarray) or not isinstance(out, np.ndarray):
            raise UsageError("collectives take numpy arrays", source=spec.collective)
        if inp.dtype != out.dtype:
            raise UsageError(
                f"input dtype {inp.dtype} differs from output dtype {out.dtype}",
                source=spec.collective,
            )

        def job() -> None:
            self._run(spec, inp, out, algo)
            if after is not None:
                after()

        if not async_op:
            self._drain()
            job()
            return None
        return self._jobs.submit(job)

    def _run(
        self, spec: CollectiveSpec, inp: np.ndarray, out: np.ndarray, algo: str | None
    ) -> None:
        """Bind the buffers (:mod:`scaleup.runtime.staging`), copy in, execute, copy out."""
        dtype = inp.dtype
        item = dtype.itemsize
        schedule, safe = select_schedule(spec, algo, item)
        layout = Layout(
            spec.input_count * item, spec.output_count * item, schedule.scratch_count * item
        )
        ws = self._workspace_id(layout.total)
        in_place = inp is out
        inp_loc: Binding | None = self.heap.locate(inp)
        out_loc = inp_loc if in_place else self.heap.locate(out)
        staging = stage(layout, ws, inp_loc, out_loc, in_place, safe)
        in_bytes, out_bytes, ws_in = layout.in_bytes, layout.out_bytes, layout.ws_in
        raw = self.transport.local_bytes(ws)
        if staging.copy_in and in_bytes:
            np.copyto(raw[ws_in : ws_in + in_bytes].view(dtype).reshape(inp.shape), inp)
        self._epoch += 1
        self.transport.execute(schedule, staging.bindings, dtype, self._epoch)
        if (
            staging.staged_out
            and out_bytes
            and (spec.collective != "reduce" or self.rank == spec.root)
        ):
            alloc_id, offset = staging.bindings[Buffer.OUTPUT]
            result = self.transport.local_bytes(alloc_id)[offset : offset + out_bytes].view(dtype)
            np.copyto(out, result.reshape(out.shape))

    def _workspace_id(self, nbytes: int) -> int:
        if self._workspace is None or self._workspace[1] < nbytes:
            if self._workspace is not None:
                self.heap.free(self._workspace[0])
            size = max(round_up(nbytes), 1 << 20)
            self._workspace = (self.heap.alloc_raw(size), size)
        return self._workspace[0]

    def _drain(self) -> None:
        """Wait for every queued collective (their errors surface at their own ``wait``)."""
        self._jobs.drain()

    def close(self) -> None:
        """Finish queued work and release the transport."""
        for sub in self.subgroups:
            sub.close()
        self._jobs.close(self.transport.timeout_s)
        self.transport.close()
