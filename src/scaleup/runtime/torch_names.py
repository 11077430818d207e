"""torch.distributed's names for the runtime: process groups, ranks and point-to-point messages.

``init_process_group``/``destroy_process_group`` wrap :func:`~scaleup.runtime.current.init` and
:func:`~scaleup.runtime.current.shutdown`; ``new_group`` returns the world group for the whole
world and a :class:`~scaleup.runtime.subgroup.SubGroup` for a subset (every rank calls it, as in
torch); ``get_group_rank``/``get_global_rank``/``get_process_group_ranks`` translate ranks;
``send``/``recv``/``isend``/``irecv`` go through :mod:`scaleup.runtime.p2p` (no tags: messages
between two ranks match in order).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import numpy as np

from scaleup.errors import Unsupported, UsageError
from scaleup.runtime import current, p2p
from scaleup.runtime.group import ProcessGroup, Work
from scaleup.runtime.subgroup import SubGroup, check_ranks, make_subgroup, resolve, to_group_rank

__all__ = [
    "destroy_process_group",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
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
    (every rank calls it, so none releases memory a peer may still read). With a subgroup:
    finish its queued collectives and refuse later ones (its memory goes at shutdown)."""
    if isinstance(group, SubGroup):
        group.close()
        return
    if current.is_initialized():
        current.group().barrier()
    current.shutdown()


def get_rank(group: Any = None) -> int:
    """This rank in ``group`` (the world by default); -1 where it is not a member, as torch."""
    return resolve(group).rank


def get_world_size(group: Any = None) -> int:
    """The number of ranks in ``group`` (the world by default); -1 for a non-member, as torch."""
    pg = resolve(group)
    return pg.world_size if pg.rank >= 0 else -1


def get_process_group_ranks(group: Any) -> list[int]:
    """The global ranks of ``group``, in group-rank order."""
    pg = resolve(group)
    return list(pg.ranks) if isinstance(pg, SubGroup) else list(range(pg.world_size))


def get_group_rank(group: Any, global_rank: int) -> int:
    """``global_rank``'s rank in ``group``; a non-member raises ``UsageError``."""
    pg = resolve(group)
    if isinstance(pg, ProcessGroup):
        pg.heap._check_peer(global_rank)
    return to_group_rank(pg, global_rank, "global_rank")


def get_global_rank(group: Any, group_rank: int) -> int:
    """The global rank of ``group``'s rank ``group_rank``."""
    ranks = get_process_group_ranks(group)
    if not 0 <= int(group_rank) < len(ranks):
        raise UsageError(
            f"group_rank must be in 0..{len(ranks) - 1}, got {group_rank}", source="group_rank"
        )
    return ranks[int(group_rank)]


def new_group(
    ranks: Sequence[int] | None = None,
    timeout: Any = None,
    backend: Any = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    **_torch_only: Any,
) -> ProcessGroup | SubGroup:
    """A group of ``ranks`` (sorted; a member's group rank is its position). Collective: every
    rank calls it with the same ranks, in the same order of calls, as in torch. The whole world
    is the current group; a subset is a :class:`~scaleup.runtime.subgroup.SubGroup`, whose
    collectives run among its members only (non-members get a handle that refuses them)."""
    pg = current.group()
    if use_local_synchronization:
        raise Unsupported(
            "new_group(use_local_synchronization=True): every rank calls new_group (its "
            "mailbox is symmetric memory, allocated by all ranks)",
            source="new_group",
        )
    if ranks is None:
        return pg
    members = check_ranks(ranks, pg.world_size)
    if members == tuple(range(pg.world_size)):
        return pg
    return make_subgroup(pg, members)


def send(array: np.ndarray, dst: int, group: Any = None, tag: int = 0) -> None:
    """Send ``array`` to rank ``dst`` (returns once it is buffered or received)."""
    p2p.send(_p2p_group(tag, group, dst), array, dst)


def recv(array: np.ndarray, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``array`` (in place) from rank ``src``; returns ``src``."""
    return p2p.recv(_p2p_group(tag, group, src), array, src)


def isend(array: np.ndarray, dst: int, group: Any = None, tag: int = 0) -> Work:
    """:func:`send` on a thread of its own; ``wait()`` the returned :class:`Work`."""
    return p2p.isend(_p2p_group(tag, group, dst), array, dst)


def irecv(array: np.ndarray, src: int | None = None, group: Any = None, tag: int = 0) -> Work:
    """:func:`recv` on a thread of its own; ``wait()`` the returned :class:`Work`."""
    return p2p.irecv(_p2p_group(tag, group, src), array, src)


def _p2p_group(tag: int, group: Any, peer: int | None) -> ProcessGroup:
    """The current group, refusing tags (messages between two ranks match in order). A subgroup
    is accepted when this rank and ``peer`` (a global rank, as in torch) are members; messages
    go through the world's mailbox."""
    if tag != 0:
        raise Unsupported("send/recv tags: messages between two ranks match in order", source="tag")
    pg = resolve(group)
    if isinstance(pg, SubGroup):
        pg._member("send/recv")
        if peer is not None:
            to_group_rank(pg, peer, "peer")
        return pg.parent
    return pg
