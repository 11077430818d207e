"""torch.distributed's names for the runtime: process groups, ranks and point-to-point messages.

``init_process_group``/``destroy_process_group`` wrap :func:`~scaleup.runtime.current.init` and
:func:`~scaleup.runtime.current.shutdown`; ``new_group`` is the whole world only; ``send``/
``recv``/``isend``/``irecv`` go through :mod:`scaleup.runtime.p2p` (no tags: messages between two
ranks match in order).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import numpy as np

from scaleup.errors import Unsupported, UsageError
from scaleup.runtime import current, p2p
from scaleup.runtime.group import ProcessGroup, Work

__all__ = [
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "irecv",
    "isend",
    "new_group",
    "recv",
    "send",
]


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | float | None = None,
    world_size: int = -1,
    rank: int = -1,
    **_torch_only: Any,
) -> None:
    """torch.distributed's name for :func:`~scaleup.runtime.current.init`, which also sets up
    point-to-point messages.

    ``backend``: a scaleup transport (``shm``, ``pipe``, ``mpi``, ``local``) or torch's
    ``gloo``/``nccl`` (whatever the launcher chose). ``world_size``/``rank``, when given, must
    match the launcher's. Collective: every rank calls it (the mailbox is symmetric memory).
    """
    if init_method not in (None, "env://"):
        raise Unsupported(
            f"init_method {init_method!r}: ranks find each other through scaleup run's "
            "environment (env://)",
            source="init_method",
        )
    transport = backend if backend in ("shm", "pipe", "mpi", "local") else None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    pg = current.init(transport, timeout_s=seconds)
    for name, given, actual in (("world_size", world_size, pg.world_size), ("rank", rank, pg.rank)):
        if given not in (-1, None, actual):
            raise UsageError(
                f"{name}={given}, but the launcher started this as {actual}", source=name
            )
    if pg.world_size > 1 and p2p.mailbox(pg) is None:
        p2p.enable(pg)


def destroy_process_group(group: Any = None) -> None:
    """torch.distributed's name for :func:`~scaleup.runtime.current.shutdown`, after a barrier
    (every rank calls it, so none releases memory a peer may still read)."""
    if current.is_initialized():
        current.group().barrier()
    current.shutdown()


def get_rank(group: Any = None) -> int:
    """torch.distributed's name for :func:`~scaleup.runtime.api.rank`."""
    return current.group().rank


def get_world_size(group: Any = None) -> int:
    """torch.distributed's name for :func:`~scaleup.runtime.api.world_size`."""
    return current.group().world_size


def new_group(ranks: Sequence[int] | None = None, **_torch_only: Any) -> ProcessGroup:
    """A group of ``ranks``: the whole world is supported (it is the current group); a proper
    subset raises :class:`~scaleup.errors.Unsupported`, because a transport's collectives and
    symmetric allocations span every rank of its launch."""
    pg = current.group()
    if ranks is None or sorted(int(r) for r in ranks) == list(range(pg.world_size)):
        return pg
    raise Unsupported(
        f"new_group({sorted(ranks)}): subgroups of ranks are not supported; a transport's "
        f"collectives span all {pg.world_size} ranks (launch a smaller world instead)",
        source="new_group",
    )


def send(array: np.ndarray, dst: int, group: Any = None, tag: int = 0) -> None:
    """Send ``array`` to rank ``dst`` (returns once it is buffered or received)."""
    p2p.send(_p2p_group(tag), array, dst)


def recv(array: np.ndarray, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``array`` (in place) from rank ``src``; returns ``src``."""
    return p2p.recv(_p2p_group(tag), array, src)


def isend(array: np.ndarray, dst: int, group: Any = None, tag: int = 0) -> Work:
    """:func:`send` on a thread of its own; ``wait()`` the returned :class:`Work`."""
    return p2p.isend(_p2p_group(tag), array, dst)


def irecv(array: np.ndarray, src: int | None = None, group: Any = None, tag: int = 0) -> Work:
    """:func:`recv` on a thread of its own; ``wait()`` the returned :class:`Work`."""
    return p2p.irecv(_p2p_group(tag), array, src)


def _p2p_group(tag: int) -> ProcessGroup:
    """The current group, refusing tags (messages between two ranks match in order)."""
    if tag != 0:
        raise Unsupported("send/recv tags: messages between two ranks match in order", source="tag")
    return current.group()
