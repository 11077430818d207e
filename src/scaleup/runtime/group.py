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

import queue
import threading
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import numpy as np

from scaleup.collectives.schedule import Buffer
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScaleupError, UsageError
from scaleup.runtime.schedules import select_schedule
from scaleup.runtime.symmetric import SymmetricHeap
from scaleup.runtime.transports.base import BaseTransport, Binding

__all__ = ["ProcessGroup", "ReduceOp", "Work"]

_ALIGN = 64


class ReduceOp(StrEnum):
    """Reductions, as torch.distributed names them (strings work too). ``AVG`` is a sum divided
    by the world size afterwards, on floating dtypes (as NCCL's ``ncclAvg``)."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


def _redop(op: ReduceOp | str) -> str:
    name = op.value if isinstance(op, ReduceOp) else str(op).lower()
    if name not in ("sum", "prod", "max", "min", "avg"):
        raise UsageError(f"unknown reduction {op!r}; use sum, prod, max, min or avg", source="op")
    return "sum" if name == "avg" else name


def _average(op: ReduceOp | str, out: np.ndarray, n: int) -> Callable[[], None] | None:
    """For ``avg``: what divides the summed ``out`` by ``n`` once the collective is done."""
    if (op.value if isinstance(op, ReduceOp) else str(op).lower()) != "avg":
        return None
    if not np.issubdtype(out.dtype, np.floating) and out.dtype.kind != "V":
        raise UsageError(f"avg needs a floating dtype, got {out.dtype}", source="op")
    return lambda: np.divide(out, n, out=out, casting="unsafe")


def _output_of(array: np.ndarray, output: np.ndarray | None, what: str) -> np.ndarray:
    """``output`` when given (out of place: it must be shaped like ``array``), else ``array``."""
    if output is None:
        return array
    if not isinstance(output, np.ndarray) or _size(output) != _size(array):
        raise UsageError(f"{what}: output must be an array the size of the input", source=what)
    return output


class Work:
    """Handle of an asynchronous collective: :meth:`wait` blocks and re-raises its error."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done.set()

    def _complete(self, body: Callable[[], None]) -> None:
        """Run ``body``; finish with its error (handed to :meth:`wait`) or None."""
        try:
            body()
        except BaseException as error:  # handed to Work.wait()
            self._finish(error)
        else:
            self._finish(None)

    def is_completed(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collective finished (True), or ``timeout`` seconds passed (False)."""
        if not self._done.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True


def _round_up(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class ProcessGroup:
    """All ranks of one launch, seen from one rank (``rank``, ``world_size``)."""

    def __init__(self, transport: BaseTransport) -> None:
        self.transport = transport
        self.rank = transport.rank
        self.world_size = transport.world_size
        self.heap = SymmetricHeap(transport)
        self._epoch = 0
        self._workspace: tuple[int, int] | None = None  # (alloc id, bytes)
        self._queue: queue.SimpleQueue[tuple[Callable[[], None], Work] | None] | None = None
        self._thread: threading.Thread | None = None
        self._pending: list[Work] = []
        self.mailbox: Any = None  # point-to-point state (scaleup.runtime.p2p), made on request

    # ---- symmetric memory and one-sided ops ----------------------------------------------------
    def alloc(self, shape: int | tuple[int, ...], dtype: Any = "float32") -> np.ndarray:
        """Collective: a zeroed symmetric array; see :mod:`scaleup.runtime.symmetric`."""
        self._drain()
        return self.heap.alloc(shape, _dtype(dtype))

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
        out = _output_of(array, output, "all_reduce")
        spec = CollectiveSpec("all_reduce", self.world_size, _size(array), redop=_redop(op))
        return self._submit(spec, array, out, algo, async_op, _average(op, out, self.world_size))

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
        _blocked(output, input, self.world_size, "reduce_scatter", big="input")
        spec = CollectiveSpec("reduce_scatter", self.world_size, _size(input), redop=_redop(op))
        after = _average(op, output, self.world_size)
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
            output, after = _gathered_list(output, input, self.world_size)
        _blocked(input, output, self.world_size, "all_gather", big="output")
        spec = CollectiveSpec("all_gather", self.world_size, _size(output))
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
        if _size(output) != _size(input) or _size(input) % self.world_size:
            raise UsageError(
                "all_to_all: input and output need the same size, a multiple of world_size",
                source="all_to_all",
            )
        spec = CollectiveSpec("all_to_all", self.world_size, _size(input))
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
        out = _output_of(array, output, "broadcast")
        spec = CollectiveSpec(
            "broadcast", self.world_size, _size(array), root=_root(src, self.world_size)
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
        out = _output_of(array, output, "reduce")
        spec = CollectiveSpec(
            "reduce",
            self.world_size,
            _size(array),
            root=_root(dst, self.world_size),
            redop=_redop(op),
        )
        after = _average(op, out, self.world_size) if self.rank == spec.root else None
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
        work = Work()
        jobs = self._ensure_thread()
        self._pending.append(work)
        jobs.put((job, work))
        return work

    def _run(
        self, spec: CollectiveSpec, inp: np.ndarray, out: np.ndarray, algo: str | None
    ) -> None:
        dtype = inp.dtype
        item = dtype.itemsize
        schedule, safe = select_schedule(spec, algo, item)
        in_bytes, out_bytes = spec.input_count * item, spec.output_count * item
        scratch_bytes = schedule.scratch_count * item
        ws_in, ws_out = 0, _round_up(in_bytes)
        ws_scratch = ws_out + _round_up(out_bytes)
        ws = self._workspace_id(ws_scratch + _round_up(scratch_bytes))
        in_place = inp is out
        inp_loc = self.heap.locate(inp)
        out_loc = inp_loc if in_place else self.heap.locate(out)
        if not in_place and _overlap(inp_loc, in_bytes, out_loc, out_bytes):
            inp_loc = out_loc = None  # one is a block of the other: rank-dependent offsets
        copy_in = inp_loc is None
        bindings: dict[Buffer, Binding] = {Buffer.INPUT: inp_loc or (ws, ws_in)}
        if in_place and safe:
            bindings[Buffer.OUTPUT] = bindings[Buffer.INPUT]
        elif (
            out_loc is not None
            and not in_place
            and not _overlap(inp_loc, in_bytes, out_loc, out_bytes)
        ):
            bindings[Buffer.OUTPUT] = out_loc
        else:
            bindings[Buffer.OUTPUT] = (ws, ws_out)
        if scratch_bytes:
            bindings[Buffer.SCRATCH] = (ws, ws_scratch)
        staged_out = bindings[Buffer.OUTPUT] != out_loc
        raw = self.transport.local_bytes(ws)
        if copy_in and in_bytes:
            np.copyto(raw[ws_in : ws_in + in_bytes].view(dtype).reshape(inp.shape), inp)
        self._epoch += 1
        self.transport.execute(schedule, bindings, dtype, self._epoch)
        if staged_out and out_bytes and (spec.collective != "reduce" or self.rank == spec.root):
            alloc_id, offset = bindings[Buffer.OUTPUT]
            result = self.transport.local_bytes(alloc_id)[offset : offset + out_bytes].view(dtype)
            np.copyto(out, result.reshape(out.shape))

    def _workspace_id(self, nbytes: int) -> int:
        if self._workspace is None or self._workspace[1] < nbytes:
            if self._workspace is not None:
                self.heap.free(self._workspace[0])
            size = max(_round_up(nbytes), 1 << 20)
            self._workspace = (self.heap.alloc_raw(size), size)
        return self._workspace[0]

    def _ensure_thread(self) -> queue.SimpleQueue[tuple[Callable[[], None], Work] | None]:
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._serve,
                args=(self._queue,),
                name=f"scaleup-rank{self.rank}",
                daemon=True,
            )
            self._thread.start()
        return self._queue

    def _serve(self, jobs: queue.SimpleQueue[tuple[Callable[[], None], Work] | None]) -> None:
        while (item := jobs.get()) is not None:
            fn, work = item
            work._complete(fn)

    def _drain(self) -> None:
        """Wait for every queued collective (their errors surface at their own ``wait``)."""
        pending, self._pending = self._pending, []
        for work in pending:
            work._done.wait()
        for work in pending:
            if work._error is not None and isinstance(work._error, ScaleupError):
                raise work._error

    def close(self) -> None:
        """Finish queued work and release the transport."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join(timeout=self.transport.timeout_s)
        self.transport.close()


def _dtype(dtype: Any) -> np.dtype:
    from scaleup.collectives.spec import numpy_dtype

    return numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)


def _gathered_list(
    outputs: list[np.ndarray] | tuple[np.ndarray, ...], input: np.ndarray, n: int
) -> tuple[np.ndarray, Callable[[], None]]:
    """The flat output of a list-form all_gather, and what copies it into the list after."""
    if len(outputs) != n or not all(
        isinstance(o, np.ndarray) and o.shape == input.shape and o.dtype == input.dtype
        for o in outputs
    ):
        raise UsageError(
            f"all_gather: the output list needs {n} arrays shaped like the input "
            f"({input.shape}, {input.dtype})",
            source="all_gather",
        )
    flat = np.empty((n, *input.shape), dtype=input.dtype)

    def scatter() -> None:
        for o, part in zip(outputs, flat, strict=True):
            np.copyto(o, part)

    return flat.reshape(-1), scatter


def _overlap(a: Binding | None, a_bytes: int, b: Binding | None, b_bytes: int) -> bool:
    """Whether two bound byte ranges share memory (same allocation, intersecting offsets)."""
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[1] < b[1] + b_bytes and b[1] < a[1] + a_bytes


def _size(array: np.ndarray) -> int:
    return int(array.size)


def _root(root: int, n: int) -> int:
    if not 0 <= int(root) < n:
        raise UsageError(f"root must be in 0..{n - 1}, got {root}", source="root")
    return int(root)


def _blocked(small: np.ndarray, large: np.ndarray, n: int, what: str, big: str) -> None:
    if _size(large) != n * _size(small):
        raise UsageError(
            f"{what}: {big} must have world_size * the other's elements "
            f"({n} * {_size(small)}), got {_size(large)}",
            source=what,
        )
