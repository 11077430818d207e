"""Symmetric memory: the same buffer on every rank, and views of a peer's copy.

``alloc(shape, dtype)`` is collective (every rank calls it, in the same order) and returns this
rank's copy as a numpy array; the allocation has the same id and layout on every rank, as
``nvshmem_malloc`` or torch's ``empty_strided_p2p``. Any contiguous sub-view of it is a symmetric
address: :meth:`SymmetricHeap.locate` finds (allocation, byte offset) from the array's address,
and :meth:`SymmetricHeap.peer_view` returns the peer's copy of the same bytes (load/store
transports only).

The heap of one rank is bounded: at most :func:`heap_limit_bytes` live bytes (64 GiB by default,
``SCALEUP_SYMMETRIC_SIZE`` such as ``8G`` changes it, as ``NVSHMEM_SYMMETRIC_SIZE`` bounds
NVSHMEM's heap), checked before anything is created, so a typo such as ``alloc(10**12)`` is a
:class:`~scaleup.errors.UsageError`, not a terabyte sparse file; the ``shm`` transport also checks
the free space of /dev/shm.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from scaleup.errors import UsageError
from scaleup.runtime.transports.base import BaseTransport, Binding
from scaleup.units import GIB, format_bytes_approx, parse_size

__all__ = ["DEFAULT_HEAP_LIMIT_BYTES", "SymmetricHeap", "heap_limit_bytes"]

#: Live symmetric bytes one rank may hold unless ``SCALEUP_SYMMETRIC_SIZE`` says otherwise.
DEFAULT_HEAP_LIMIT_BYTES = 64 * GIB


def heap_limit_bytes() -> int:
    """The per-rank symmetric heap limit: ``$SCALEUP_SYMMETRIC_SIZE`` (e.g. ``8G``) or 64 GiB."""
    text = os.environ.get("SCALEUP_SYMMETRIC_SIZE")
    return (
        DEFAULT_HEAP_LIMIT_BYTES
        if text is None
        else parse_size(text, source="SCALEUP_SYMMETRIC_SIZE")
    )


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


@dataclass(frozen=True)
class _Allocation:
    alloc_id: int
    address: int
    nbytes: int


class SymmetricHeap:
    """The symmetric allocations of one rank, found again from numpy arrays."""

    def __init__(self, transport: BaseTransport) -> None:
        self.transport = transport
        self._allocations: dict[int, _Allocation] = {}
        self._sizes: dict[int, int] = {}  # live bytes per allocation id, typed or raw
        self.limit_bytes = heap_limit_bytes()

    def alloc(self, shape: int | tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Collective: a new zeroed symmetric array of ``shape`` and ``dtype``."""
        shape_t = (
            (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        )
        if any(s < 0 for s in shape_t):
            raise UsageError(f"shape must be non-negative, got {shape_t}", source="alloc")
        nbytes = math.prod(shape_t) * dtype.itemsize
        alloc_id = self.alloc_raw(nbytes)
        raw = self.transport.local_bytes(alloc_id)
        self._allocations[alloc_id] = _Allocation(alloc_id, _address(raw), nbytes)
        return raw[:nbytes].view(dtype).reshape(shape_t)

    def alloc_raw(self, nbytes: int) -> int:
        """Collective: an untyped symmetric allocation (the runtime's workspace); its id."""
        live = sum(self._sizes.values())
        if live + nbytes > self.limit_bytes:
            raise UsageError(
                f"{format_bytes_approx(nbytes)} would grow rank {self.transport.rank}'s "
                f"symmetric heap to {format_bytes_approx(live + nbytes)}, over its limit of "
                f"{format_bytes_approx(self.limit_bytes)} (SCALEUP_SYMMETRIC_SIZE)",
                source="alloc",
            )
        alloc_id = self.transport.alloc_bytes(nbytes)
        self._sizes[alloc_id] = nbytes
        return alloc_id

    def free(self, array_or_id: np.ndarray | int) -> None:
        """Collective: release an allocation (by one of its arrays, or its id)."""
        if isinstance(array_or_id, np.ndarray):
            found = self.locate(array_or_id)
            if found is None:
                raise UsageError("free() takes an array returned by alloc()", source="free")
            alloc_id = found[0]
        else:
            alloc_id = int(array_or_id)
        self._allocations.pop(alloc_id, None)
        self._sizes.pop(alloc_id, None)
        self.transport.free(alloc_id)

    def locate(self, array: np.ndarray) -> Binding | None:
        """(allocation id, byte offset) when ``array`` is contiguous symmetric memory, else None."""
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            return None
        start = _address(array)
        for a in self._allocations.values():
            if a.address <= start and start + array.nbytes <= a.address + a.nbytes:
                return a.alloc_id, start - a.address
        return None

    def require(self, array: np.ndarray, what: str) -> Binding:
        found = self.locate(array)
        if found is None:
            raise UsageError(
                f"{what} must be a contiguous array from alloc() (symmetric memory)", source=what
            )
        return found

    def peer_view(self, array: np.ndarray, peer: int) -> np.ndarray:
        """``peer``'s copy of the symmetric ``array`` (same shape and dtype)."""
        self._check_peer(peer)
        alloc_id, offset = self.require(array, "get_buffer")
        raw = self.transport.peer_bytes(alloc_id, peer)
        return raw[offset : offset + array.nbytes].view(array.dtype).reshape(array.shape)

    def _check_peer(self, peer: int) -> None:
        if not 0 <= int(peer) < self.transport.world_size:
            raise UsageError(
                f"peer must be in 0..{self.transport.world_size - 1}, got {peer}", source="peer"
            )
