"""The ``local`` transport: an in-process mock, ranks are threads sharing process memory.

The same load/store plans and flags as ``shm`` (so tests of the executor need no processes and
no /dev/shm), in the role of httpx's ``MockTransport`` and torch's threaded process group. Waits
yield with ``time.sleep(0)``, which releases the GIL. A :class:`LocalWorld` holds what the
threads share: every rank's allocations and the control block.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from scaleup.runtime.control import ControlBlock, Waiter
from scaleup.runtime.transports.loadstore import LoadStoreTransport

__all__ = ["LocalTransport", "LocalWorld"]


class LocalWorld:
    """State shared by the threads of one local launch."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.control = ControlBlock(bytearray(ControlBlock.size_bytes(world_size)), world_size)
        self.memory: dict[tuple[int, int], np.ndarray] = {}
        self.lock = threading.Lock()


class LocalTransport(LoadStoreTransport):
    """One thread's endpoint of a :class:`LocalWorld`."""

    name = "local"

    def __init__(self, rank: int, world: LocalWorld, timeout_s: float) -> None:
        waiter = Waiter(world.control, rank, timeout_s, threads=True)
        super().__init__(rank, world.world_size, timeout_s, world.control, waiter)
        self.world = world

    def _create(self, alloc_id: int, nbytes: int) -> np.ndarray:
        array = np.zeros(nbytes, dtype=np.uint8)
        with self.world.lock:
            self.world.memory[alloc_id, self.rank] = array
        return array

    def _attach(self, alloc_id: int, peer: int, nbytes: int) -> np.ndarray:
        with self.world.lock:
            return self.world.memory[alloc_id, peer]

    def _release(self, alloc_id: int) -> None:
        with self.world.lock:
            self.world.memory.pop((alloc_id, self.rank), None)

    @contextmanager
    def _cell_lock(self, alloc_id: int, peer: int, offset: int) -> Iterator[None]:
        with self.world.lock:
            yield

    def close(self) -> None:
        self._copies.clear()
        self._plans.clear()
