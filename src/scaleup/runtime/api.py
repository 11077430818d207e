"""The runtime API as module functions, shaped like torch.distributed and NVSHMEM.

``init()`` returns this rank's :class:`~scaleup.runtime.group.ProcessGroup`: the one
:func:`~scaleup.runtime.launch.launch` made, one described by ``scaleup run``'s environment
variables, an MPI group under ``mpiexec`` (``transport="mpi"``, or detected from ``PMI_RANK``
/ ``OMPI_COMM_WORLD_RANK``), or else a single-rank local group. torchrun's environment
(``RANK``, ``WORLD_SIZE``) without ``scaleup run``'s is refused when ``WORLD_SIZE > 1``: the
shared-memory groups are set up by scaleup's launcher, and silently becoming one rank of one
would be wrong. torch's names are here too: ``init_process_group``, ``destroy_process_group``,
``get_rank``, ``get_world_size``, ``new_group`` (the whole world only), ``send``/``recv``/
``isend``/``irecv`` (:mod:`scaleup.runtime.p2p`) and the list form of ``all_gather``.
Every other function acts on that group::

    import numpy as np
    from scaleup import runtime as rt

    rt.init()
    x = rt.alloc(1024, "float32")          # symmetric: the same buffer on every rank
    x[:] = rt.rank()
    rt.all_reduce(x)                        # in place, like torch.distributed.all_reduce
    peer = rt.get_buffer(x, (rt.rank() + 1) % rt.world_size())   # load/store view of a peer
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scaleup.errors import ExecutionError, Unsupported, UsageError
from scaleup.runtime import p2p
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
    "destroy_process_group",
    "fence",
    "free",
    "get",
    "get_buffer",
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
        sys.excepthook = _one_line_when_stopped_by_peer(int(env["SCALEUP_RANK"]))
    elif transport == "mpi" or (
        transport is None and ("PMI_RANK" in env or "OMPI_COMM_WORLD_RANK" in env)
    ):
        from scaleup.runtime.transports.mpi import MpiTransport

        pg = ProcessGroup(MpiTransport(timeout))
    elif transport in (None, "local"):
        from scaleup.runtime.transports.local import LocalTransport, LocalWorld

        _refuse_foreign_launcher(env)
        pg = ProcessGroup(LocalTransport(0, LocalWorld(1), timeout))
    else:
        raise UsageError(
            f"transport {transport!r} needs a launcher: scaleup run -n N or launch()",
            source="transport",
        )
    _set_group(pg)
    return pg


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{text!r} is not an integer", source=name) from None


def _refuse_foreign_launcher(env: Mapping[str, str]) -> None:
    """One clear error for torchrun's ``RANK``/``WORLD_SIZE`` without ``scaleup run``'s
    variables: joining needs the launcher's segments, and one rank of one would be wrong."""
    world = _env_int(env, "WORLD_SIZE", 1)
    rank = _env_int(env, "RANK", 0)
    if world > 1 or rank != 0:
        raise UsageError(
            f"RANK={rank} WORLD_SIZE={world} come from another launcher (torchrun?); "
            "scaleup's shared-memory groups are set up by its own: run "
            f"`scaleup run --nproc-per-node {max(world, rank + 1)} script.py` "
            "(or scaleup.runtime.launch())",
            source="WORLD_SIZE",
        )


def _one_line_when_stopped_by_peer(me: int) -> Any:
    """An excepthook that reports, in one line and without a traceback, an error that only says
    another rank failed (the launcher names that rank); anything else as Python does."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if isinstance(error, ExecutionError) and error.rank is not None and error.rank != me:
            sys.stderr.write(f"{kind.__name__}: {error}\n")
            return
        previous(kind, error, tb)

    return hook


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | float | None = None,
    world_size: int = -1,
    rank: int = -1,
    **_torch_only: Any,
) -> None:
    """torch.distributed's name for :func:`init`, which also sets up point-to-point messages.

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
    pg = init(transport, timeout_s=seconds)
    for name, given, actual in (("world_size", world_size, pg.world_size), ("rank", rank, pg.rank)):
        if given not in (-1, None, actual):
            raise UsageError(
                f"{name}={given}, but the launcher started this as {actual}", source=name
            )
    if pg.world_size > 1 and p2p.mailbox(pg) is None:
        p2p.enable(pg)


def destroy_process_group(group: Any = None) -> None:
    """torch.distributed's name for :func:`shutdown`, after a barrier (every rank calls it, so
    none releases memory a peer may still read)."""
    if is_initialized():
        barrier()
    shutdown()


def get_rank(group: Any = None) -> int:
    """torch.distributed's name for :func:`rank`."""
    return rank()


def get_world_size(group: Any = None) -> int:
    """torch.distributed's name for :func:`world_size`."""
    return world_size()


def new_group(ranks: Sequence[int] | None = None, **_torch_only: Any) -> ProcessGroup:
    """A group of ``ranks``: the whole world is supported (it is the current group); a proper
    subset raises :class:`~scaleup.errors.Unsupported`, because a transport's collectives and
    symmetric allocations span every rank of its launch."""
    pg = group()
    if ranks is None or sorted(int(r) for r in ranks) == list(range(pg.world_size)):
        return pg
    raise Unsupported(
        f"new_group({sorted(ranks)}): subgroups of ranks are not supported; a transport's "
        f"collectives span all {pg.world_size} ranks (launch a smaller world instead)",
        source="new_group",
    )


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
    output: np.ndarray | None = None,
) -> Work | None:
    return group().all_reduce(array, op, async_op=async_op, algo=algo, output=output)


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
    output: np.ndarray | list[np.ndarray],
    input: np.ndarray,
    *,
    async_op: bool = False,
    algo: str | None = None,
) -> Work | None:
    """``output`` (n*m) = every rank's ``input`` (m); or torch's list form
    ``all_gather(tensor_list, tensor)``: element p of the list gets rank p's ``input``."""
    return group().all_gather(output, input, async_op=async_op, algo=algo)


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
    if tag != 0:
        raise Unsupported("send/recv tags: messages between two ranks match in order", source="tag")
    return group()


def all_to_all(
    output: np.ndarray, input: np.ndarray, *, async_op: bool = False, algo: str | None = None
) -> Work | None:
    return group().all_to_all(output, input, async_op=async_op, algo=algo)


def broadcast(
    array: np.ndarray,
    src: int = 0,
    *,
    async_op: bool = False,
    algo: str | None = None,
    output: np.ndarray | None = None,
) -> Work | None:
    return group().broadcast(array, src, async_op=async_op, algo=algo, output=output)


def reduce(
    array: np.ndarray,
    dst: int = 0,
    op: ReduceOp | str = ReduceOp.SUM,
    *,
    async_op: bool = False,
    algo: str | None = None,
    output: np.ndarray | None = None,
) -> Work | None:
    return group().reduce(array, dst, op, async_op=async_op, algo=algo, output=output)
