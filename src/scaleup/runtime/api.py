"""The runtime API as module functions, shaped like torch.distributed and NVSHMEM.

``init()`` returns this rank's :class:`~scaleup.runtime.group.ProcessGroup`: the one
:func:`~scaleup.runtime.launch.launch` made, one described by ``scaleup run``'s environment
variables, an MPI group under ``mpiexec`` (``transport="mpi"``, or detected from ``PMI_RANK``
/ ``OMPI_COMM_WORLD_RANK``), or else a single-rank local group. Every other function acts on
that group::

    import numpy as np
    from scaleup import runtime as rt

    rt.init()
    x = rt.alloc(1024, "float32")          # symmetric: the same buffer on every rank
    x[:] = rt.rank()
    rt.all_reduce(x)                        # in place, like torch.distributed.all_reduce
    peer = rt.get_buffer(x, (rt.rank() + 1) % rt.world_size())   # load/store view of a peer
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from scaleup.errors import UsageError
from scaleup.runtime.group import ProcessGroup, ReduceOp, Work
from scaleup.runtime.lifecycle import die_with_parent

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
    "fence",
    "free",
    "get",
    "get_buffer",
    "group",
    "init",
    "is_initialized",
    "put",
    "quiet",
    "rank",
    "reduce",
    "reduce_scatter",
    "shutdown",
    "world_size",
]

_process_group: ProcessGroup | None = None
_thread = threading.local()


def _set_group(pg: ProcessGroup | None) -> None:
    global _process_group
    _process_group = pg


def _set_thread_group(pg: ProcessGroup | None) -> None:
    _thread.group = pg


def _current() -> ProcessGroup | None:
    return getattr(_thread, "group", None) or _process_group


def _make_group(config: dict[str, Any], rank: int, endpoints: Any = None) -> ProcessGroup:
    """Build this rank's group from a launcher's config."""
    transport = config["transport"]
    timeout_s = float(config["timeout_s"])
    if transport == "shm":
        from scaleup.runtime.transports.shm import ShmTransport

        return ProcessGroup(
            ShmTransport(
                rank, config["world_size"], timeout_s, config["prefix"], config.get("launcher_pid")
            )
        )
    if transport == "pipe":
        from scaleup.runtime.transports.pipe import PipeTransport

        return ProcessGroup(
            PipeTransport(
                rank,
                config["world_size"],
                timeout_s,
                endpoints,
                config["prefix"],
                config.get("launcher_pid"),
            )
        )
    raise UsageError(f"unknown transport {transport!r}", source="transport")


def init(transport: str | None = None, *, timeout_s: float | None = None) -> ProcessGroup:
    """This rank's process group (created on first call; later calls return it)."""
    existing = _current()
    if existing is not None:
        return existing
    env = os.environ
    timeout = float(timeout_s if timeout_s is not None else env.get("SCALEUP_TIMEOUT_S", 30.0))
    if "SCALEUP_RANK" in env and transport in (None, env.get("SCALEUP_TRANSPORT")):
        from scaleup.runtime.transports.pipe import Endpoints

        config = {
            "transport": env["SCALEUP_TRANSPORT"],
            "world_size": int(env["SCALEUP_WORLD_SIZE"]),
            "prefix": env["SCALEUP_RUN_PREFIX"],
            "timeout_s": timeout,
            "launcher_pid": int(env["SCALEUP_LAUNCHER_PID"]),
        }
        # dies with the launcher: set before exec on Linux, a watchdog thread elsewhere
        die_with_parent(int(env["SCALEUP_LAUNCHER_PID"]))
        endpoints = Endpoints.from_env(env.get("SCALEUP_PIPE_FDS", ""))
        pg = _make_group(config, int(env["SCALEUP_RANK"]), endpoints)
    elif transport == "mpi" or (
        transport is None and ("PMI_RANK" in env or "OMPI_COMM_WORLD_RANK" in env)
    ):
        from scaleup.runtime.transports.mpi import MpiTransport

        pg = ProcessGroup(MpiTransport(timeout))
    elif transport in (None, "local"):
        from scaleup.runtime.transports.local import LocalTransport, LocalWorld

        pg = ProcessGroup(LocalTransport(0, LocalWorld(1), timeout))
    else:
        raise UsageError(
            f"transport {transport!r} needs a launcher: scaleup run -n N or launch()",
            source="transport",
        )
    _set_group(pg)
    return pg


def is_initialized() -> bool:
    return _current() is not None


def group() -> ProcessGroup:
    """The current group (raises if :func:`init` was not called)."""
    pg = _current()
    if pg is None:
        raise UsageError("call scaleup.runtime.init() first", source="runtime")
    return pg


def shutdown() -> None:
    """Finish queued work and release this rank's transport."""
    pg = _current()
    if pg is not None:
        pg.close()
        _set_group(None)
        _set_thread_group(None)


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


def barrier() -> None:
    group().barrier()


def all_reduce(
    array: np.ndarray,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    return group().all_reduce(array, op, async_op=async_op, algo=algo)


def reduce_scatter(
    output: np.ndarray,
    input: np.ndarray,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    return group().reduce_scatter(output, input, op, async_op=async_op, algo=algo)


def all_gather(
    output: np.ndarray, input: np.ndarray, *, async_op: bool = False, algo: str | None = None
) -> Work | None:
    return group().all_gather(output, input, async_op=async_op, algo=algo)


def all_to_all(
    output: np.ndarray, input: np.ndarray, *, async_op: bool = False, algo: str | None = None
) -> Work | None:
    return group().all_to_all(output, input, async_op=async_op, algo=algo)


def broadcast(
    array: np.ndarray, src: int = 0, *, async_op: bool = False, algo: str | None = None
) -> Work | None:
    return group().broadcast(array, src, async_op=async_op, algo=algo)


def reduce(
    array: np.ndarray,
    dst: int = 0,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    return group().reduce(array, dst, op, async_op=async_op, algo=algo)
