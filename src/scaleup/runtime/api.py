"""The runtime API as module functions, shaped like torch.distributed and NVSHMEM.

``init()`` returns this rank's :class:`~scaleup.runtime.group.ProcessGroup`: the one
:func:`~scaleup.runtime.launch.launch` made, one described by ``scaleup run``'s environment
variables, an MPI group under ``mpiexec`` (``transport="mpi"``, or detected from ``PMI_RANK``
/ ``OMPI_COMM_WORLD_RANK``), or else a single-rank local group. torchrun's environment
(``RANK``, ``WORLD_SIZE``) without ``scaleup run``'s is refused when ``WORLD_SIZE > 1``: the
shared-memory groups are set up by scaleup's launcher, and silently becoming one rank of one
would be wrong. torch's names are here too: ``init_process_group``, ``destroy_process_group``,
``get_rank``, ``get_world_size``, ``new_group`` (the world, or a subset:
:mod:`scaleup.runtime.subgroup`), ``get_group_rank``/``get_global_rank``, ``send``/``recv``/
``isend``/``irecv`` (:mod:`scaleup.runtime.p2p`) and the list form of ``all_gather``.
Every other function acts on that group, or on ``group=`` (what ``new_group`` returned; then
``src``/``dst`` are global ranks, as in torch). The group's making and finding are
:mod:`scaleup.runtime.current`, torch's names :mod:`scaleup.runtime.torch_names`; this module
gathers them with the functions below::

    import numpy as np
    from scaleup import runtime as rt

    rt.init()
    x = rt.alloc(1024, "float32")          # symmetric: the same buffer on every rank
    x[:] = rt.rank()
    rt.all_reduce(x)                        # in place, like torch.distributed.all_reduce
    peer = rt.get_buffer(x, (rt.rank() + 1) % rt.world_size())   # load/store view of a peer
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.runtime.current import group, init, is_initialized, shutdown
from scaleup.runtime.group import ReduceOp, Work
from scaleup.runtime.subgroup import resolve, to_group_rank
from scaleup.runtime.torch_names import (
    destroy_process_group,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    irecv,
    isend,
    new_group,
    recv,
    send,
)

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "alloc",
    "atomic_fetch_add",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "fence",
    "free",
    "get",
    "get_buffer",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init",
    "init_process_group",
    "irecv",
    "is_initialized",
    "isend",
    "new_group",
    "put",
    "quiet",
    "rank",
    "recv",
    "reduce",
    "reduce_scatter",
    "send",
    "shutdown",
    "world_size",
]


def rank() -> int:
    return group().rank


def world_size() -> int:
    return group().world_size


def alloc(shape: int | tuple[int, ...], dtype: Any = "float32") -> np.ndarray:
    return group().alloc(shape, dtype)


def free(array: np.ndarray) -> None:
    group().free(array)


def get_buffer(array: np.ndarray, peer: int) -> np.ndarray:
    return group().get_buffer(array, peer)


def put(dest: np.ndarray, source: Any, peer: int) -> None:
    group().put(dest, source, peer)


def get(source: np.ndarray, peer: int, out: np.ndarray | None = None) -> np.ndarray:
    return group().get(source, peer, out)


def atomic_fetch_add(cell: np.ndarray, value: int, peer: int, index: int = 0) -> int:
    return group().atomic_fetch_add(cell, value, peer, index)


def fence() -> None:
    group().fence()


def quiet() -> None:
    group().quiet()


def barrier(group: Any = None) -> None:
    """Every rank of ``group`` (the world by default) has arrived."""
    resolve(group).barrier()


def all_reduce(
    array: np.ndarray,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
    output: np.ndarray | None = None,
) -> Work | None:
    return resolve(group).all_reduce(array, op, async_op=async_op, algo=algo, output=output)


def reduce_scatter(
    output: np.ndarray,
    input: np.ndarray,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    return resolve(group).reduce_scatter(output, input, op, async_op=async_op, algo=algo)


def all_gather(
    output: np.ndarray | list[np.ndarray],
    input: np.ndarray,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    """``output`` (n*m) = every rank's ``input`` (m); or torch's list form
    ``all_gather(tensor_list, tensor)``: element p of the list gets rank p's ``input``."""
    return resolve(group).all_gather(output, input, async_op=async_op, algo=algo)


def all_to_all(
    output: np.ndarray,
    input: np.ndarray,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    return resolve(group).all_to_all(output, input, async_op=async_op, algo=algo)


def broadcast(
    array: np.ndarray,
    src: int = 0,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
    output: np.ndarray | None = None,
) -> Work | None:
    pg = resolve(group)
    root = to_group_rank(pg, src, "src")
    return pg.broadcast(array, root, async_op=async_op, algo=algo, output=output)


def reduce(
    array: np.ndarray,
    dst: int = 0,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    group: Any = None,
    async_op: bool = False,
    algo: str | None = None,
    output: np.ndarray | None = None,
) -> Work | None:
    pg = resolve(group)
    root = to_group_rank(pg, dst, "dst")
    return pg.reduce(array, root, op, async_op=async_op, algo=algo, output=output)
