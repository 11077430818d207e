"""What the memory-semantic transports share: loads, stores and flag-synchronised plans.

Subclasses (``shm``: processes and /dev/shm segments; ``local``: threads and process memory) only
say how a rank's copy of an allocation is created and how a peer's copy is reached; everything
else (put/get as ``np.copyto`` on peer views, the spin barrier, plan compilation and caching) is
here.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager

import numpy as np

from scaleup.collectives.schedule import Buffer, Schedule
from scaleup.errors import TransportError
from scaleup.runtime.control import ControlBlock, Waiter
from scaleup.runtime.execute import LoadStorePlan, compile_plan
from scaleup.runtime.transports.base import BaseTransport, Binding

__all__ = ["LoadStoreTransport"]

_PLAN_CACHE_SIZE = 128


class LoadStoreTransport(BaseTransport):
    """Base of transports whose ranks can load and store into each other's memory."""

    memory_semantic = True

    def __init__(
        self, rank: int, world_size: int, timeout_s: float, control: ControlBlock, waiter: Waiter
    ) -> None:
        super().__init__(rank, world_size, timeout_s)
        self.control = control
        self.waiter = waiter
        self._copies: dict[int, list[np.ndarray]] = {}
        self._next_id = 0
        self._barrier_epoch = 0
        self._plans: OrderedDict[tuple[object, ...], LoadStorePlan] = OrderedDict()
        self._thread_lock = threading.Lock()

    # ---- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def _create(self, alloc_id: int, nbytes: int) -> np.ndarray:
        """Create this rank's copy (uint8, ``nbytes``)."""

    @abstractmethod
    def _attach(self, alloc_id: int, peer: int, nbytes: int) -> np.ndarray:
        """Reach ``peer``'s copy (uint8 view)."""

    @abstractmethod
    def _release(self, alloc_id: int) -> None:
        """Drop the copies of one allocation (this rank's own is destroyed)."""

    @abstractmethod
    def _cell_lock(self, alloc_id: int, peer: int, offset: int) -> AbstractContextManager[None]:
        """Exclusive access to the int64 at ``offset`` of ``peer``'s copy, across all ranks."""

    # ---- memory ------------------------------------------------------------------------------
    def alloc_bytes(self, nbytes: int) -> int:
        alloc_id = self._next_id
        self._next_id += 1
        mine = self._create(alloc_id, nbytes)
        self.barrier()  # every copy exists before anyone attaches
        self._copies[alloc_id] = [
            mine if peer == self.rank else self._attach(alloc_id, peer, nbytes)
            for peer in range(self.world_size)
        ]
        return alloc_id

    def free(self, alloc_id: int) -> None:
        self.barrier()  # nobody still reads it
        self._plans.clear()
        self._copies.pop(alloc_id, None)
        self._release(alloc_id)

    def _copy(self, alloc_id: int, peer: int) -> np.ndarray:
        try:
            return self._copies[alloc_id][peer]
        except (KeyError, IndexError):
            raise TransportError(f"no allocation {alloc_id} on rank {peer}", rank=peer) from None

    def local_bytes(self, alloc_id: int) -> np.ndarray:
        return self._copy(alloc_id, self.rank)

    def peer_bytes(self, alloc_id: int, peer: int) -> np.ndarray:
        return self._copy(alloc_id, peer)

    # ---- one-sided: plain stores and loads -----------------------------------------------------
    def put_bytes(self, alloc_id: int, peer: int, offset: int, data: np.ndarray) -> None:
        np.copyto(self._copy(alloc_id, peer)[offset : offset + len(data)], data)

    def get_bytes(self, alloc_id: int, peer: int, offset: int, out: np.ndarray) -> None:
        np.copyto(out, self._copy(alloc_id, peer)[offset : offset + len(out)])

    def atomic_fetch_add(self, alloc_id: int, peer: int, offset: int, value: int) -> int:
        cell = self._copy(alloc_id, peer)[offset : offset + 8].view(np.int64)
        with self._thread_lock, self._cell_lock(alloc_id, peer, offset):
            old = int(cell[0])
            cell[0] = old + int(value)
        return old

    def barrier(self) -> None:
        self._barrier_epoch += 1
        epoch = self._barrier_epoch
        words = self.control.words
        words[self.control.barrier_index(self.rank)] = epoch
        self.control.wake(self.control.barrier_index(self.rank))
        for peer in range(self.world_size):
            index = self.control.barrier_index(peer)
            if words[index] < epoch:
                self.waiter.wait_ge(index, epoch, peer)

    def check(self) -> None:
        self.waiter.check()

    # ---- collectives -------------------------------------------------------------------------
    def execute(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype, epoch: int
    ) -> None:
        key = (schedule, tuple(sorted(bindings.items())), dtype.str)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._compile(schedule, bindings, dtype)
            self._plans[key] = plan
            if len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        plan.run(epoch, self.control, self.waiter)

    def _compile(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype
    ) -> LoadStorePlan:
        views: dict[tuple[int, Buffer], np.ndarray] = {}

        def view(rank: int, buffer: Buffer) -> np.ndarray:
            if (rank, buffer) not in views:
                count = schedule.buffer_count(buffer)
                if buffer not in bindings or count == 0:
                    views[rank, buffer] = np.zeros(0, dtype=dtype)
                else:
                    alloc_id, offset = bindings[buffer]
                    raw = self._copy(alloc_id, rank)[offset : offset + count * dtype.itemsize]
                    views[rank, buffer] = raw.view(dtype)
            return views[rank, buffer]

        return compile_plan(schedule, self.rank, view, schedule.spec.redop, dtype)

    def allocations(self) -> Iterator[int]:
        return iter(list(self._copies))
