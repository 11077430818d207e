"""The transport interface: the strict cut-off between the runtime API and moving bytes.

Shaped like httpx's ``BaseTransport``: the process group (:mod:`scaleup.runtime.group`) speaks
only to these methods, so shared memory, pipes, a threaded in-process mock and MPI windows are
interchangeable. Memory is handled in *allocations*: ``alloc_bytes`` is collective and returns the
same id on every rank (a symmetric allocation); offsets are bytes inside it.

Two families implement it:

- memory-semantic (``memory_semantic = True``: ``shm``, ``local``): every rank can load and store
  into a peer's copy (``peer_bytes``); collectives run as precompiled load/store plans
  (:mod:`scaleup.runtime.execute`).
- message passing (``pipe``, ``mpi``): peers' memory is reached only through messages or RMA
  calls; ``peer_bytes`` raises :class:`~scaleup.errors.TransportError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from scaleup.collectives.schedule import Buffer, Schedule
from scaleup.errors import TransportError

__all__ = ["BaseTransport", "Binding"]

#: Where one schedule buffer lives on every rank: (allocation id, byte offset).
Binding = tuple[int, int]


class BaseTransport(ABC):
    """One rank's endpoint of a transport."""

    name: ClassVar[str] = "base"
    memory_semantic: ClassVar[bool] = False

    def __init__(self, rank: int, world_size: int, timeout_s: float) -> None:
        self.rank = rank
        self.world_size = world_size
        self.timeout_s = timeout_s

    # ---- memory ------------------------------------------------------------------------------
    @abstractmethod
    def alloc_bytes(self, nbytes: int) -> int:
        """Collective: allocate ``nbytes`` on every rank; returns the allocation id."""

    @abstractmethod
    def free(self, alloc_id: int) -> None:
        """Collective: release an allocation on every rank."""

    @abstractmethod
    def local_bytes(self, alloc_id: int) -> np.ndarray:
        """This rank's copy of an allocation, as a uint8 array."""

    def peer_bytes(self, alloc_id: int, peer: int) -> np.ndarray:
        """A peer's copy as a uint8 array view (memory-semantic transports only)."""
        raise TransportError(
            f"transport {self.name!r} has no load/store access to peers; use get()/put()",
            rank=peer,
        )

    # ---- one-sided -------------------------------------------------------------------------
    @abstractmethod
    def put_bytes(self, alloc_id: int, peer: int, offset: int, data: np.ndarray) -> None:
        """Store ``data`` (uint8) into ``peer``'s copy at ``offset``."""

    @abstractmethod
    def get_bytes(self, alloc_id: int, peer: int, offset: int, out: np.ndarray) -> None:
        """Load ``len(out)`` bytes of ``peer``'s copy at ``offset`` into ``out`` (uint8)."""

    @abstractmethod
    def atomic_fetch_add(self, alloc_id: int, peer: int, offset: int, value: int) -> int:
        """Atomically add ``value`` to the int64 at ``offset`` of ``peer``'s copy; old value."""

    def fence(self) -> None:  # noqa: B027 - a no-op default that transports override
        """Order this rank's earlier puts before its later ones (per peer)."""

    def quiet(self) -> None:  # noqa: B027 - a no-op default that transports override
        """Wait until every earlier put of this rank is complete and visible."""

    @abstractmethod
    def barrier(self) -> None:
        """Every rank has arrived (and, as in NVSHMEM, earlier puts are complete)."""

    # ---- collectives -------------------------------------------------------------------------
    @abstractmethod
    def execute(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype, epoch: int
    ) -> None:
        """Run this rank's part of ``schedule`` on the bound buffers (collective call ``epoch``)."""

    def close(self) -> None:  # noqa: B027 - a no-op default that transports override
        """Release what this endpoint holds (own segments are unlinked)."""

    def check(self) -> None:  # noqa: B027 - a no-op default that transports override
        """Raise :class:`~scaleup.errors.RankFailed` if a peer is known to have failed."""
