"""The ``shm`` transport: ranks are processes, memory is /dev/shm segments every peer maps.

Memory semantics for real: ``put`` is a store into the peer's mapping, ``get`` a load, and
collectives are load/store plans (:mod:`scaleup.runtime.execute`). Each allocation is one segment
per rank (``<run prefix>r<rank>-a<k>``); the owner creates and unlinks it, peers only map it.

``atomic_fetch_add`` takes a POSIX record lock (``fcntl.lockf``) on the 8 bytes of the cell in the
owner's segment file, then does a plain read-modify-write. The kernel makes the lock exclusive
across processes, it is dropped automatically if the holder dies (no stuck lock after a crash),
and the lock/unlock system calls are full memory barriers. It is atomic with respect to every
other ``atomic_fetch_add`` (not to plain stores into the same cell), as in NVSHMEM. Cost: two
system calls, about 1-2 us. (numpy has no atomic read-modify-write, and Python offers no C-free
way to issue ``lock xadd``.)
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from scaleup.errors import TransportError
from scaleup.runtime.control import Waiter
from scaleup.runtime.execute import needs_fences
from scaleup.runtime.shm import Segment, check_free_space, open_control
from scaleup.runtime.transports.loadstore import LoadStoreTransport
from scaleup.units import format_bytes_approx

__all__ = ["ShmTransport"]


class ShmTransport(LoadStoreTransport):
    """One process's endpoint of the shared-memory pool."""

    name = "shm"

    def __init__(
        self,
        rank: int,
        world_size: int,
        timeout_s: float,
        prefix: str,
        launcher_pid: int | None = None,
    ) -> None:
        if needs_fences() and os.environ.get("SCALEUP_UNSAFE_ORDERING") != "1":
            raise TransportError(
                "the shm transport relies on x86-TSO store ordering; this CPU is weakly ordered "
                "(set SCALEUP_UNSAFE_ORDERING=1 to run anyway)",
                source="shm",
            )
        self.prefix = prefix
        self._control_segment, control = open_control(prefix, world_size, create=False)
        cores = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
        waiter = Waiter(
            control, rank, timeout_s, oversubscribed=world_size > cores, launcher_pid=launcher_pid
        )
        super().__init__(rank, world_size, timeout_s, control, waiter)
        self._segments: dict[int, dict[int, Segment]] = {}
        #: called once this rank's segments are released (a rendezvous's goodbye and cleanup).
        self.on_close: Callable[[], None] | None = None

    def _name(self, alloc_id: int, rank: int) -> str:
        return f"{self.prefix}r{rank}-a{alloc_id}"

    def _create(self, alloc_id: int, nbytes: int) -> np.ndarray:
        n = self.world_size
        check_free_space(nbytes * n, f"alloc of {format_bytes_approx(nbytes)} on each of {n} ranks")
        segment = Segment(self._name(alloc_id, self.rank), nbytes, create=True)
        self._segments.setdefault(alloc_id, {})[self.rank] = segment
        return np.frombuffer(segment.mm, dtype=np.uint8)[:nbytes]

    def _attach(self, alloc_id: int, peer: int, nbytes: int) -> np.ndarray:
        segment = Segment(self._name(alloc_id, peer), nbytes, create=False)
        self._segments.setdefault(alloc_id, {})[peer] = segment
        return np.frombuffer(segment.mm, dtype=np.uint8)[:nbytes]

    def _release(self, alloc_id: int) -> None:
        for rank, segment in self._segments.pop(alloc_id, {}).items():
            if rank == self.rank:
                segment.unlink()
            segment.close()

    @contextmanager
    def _cell_lock(self, alloc_id: int, peer: int, offset: int) -> Iterator[None]:
        fd = self._segments[alloc_id][peer].fd
        fcntl.lockf(fd, fcntl.LOCK_EX, 8, offset, os.SEEK_SET)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 8, offset, os.SEEK_SET)

    def close(self) -> None:
        self._copies.clear()
        self._plans.clear()
        for alloc_id in list(self._segments):
            self._release(alloc_id)
        self.control.release()
        self._control_segment.close()
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close()
