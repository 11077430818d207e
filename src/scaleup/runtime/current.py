"""This rank's (or, under the local launcher, this thread's) process group: made, found, released.

:func:`init` returns the group the launcher made, one described by ``scaleup run``'s environment
variables, an MPI group under ``mpiexec``, a shared-memory group formed by a rendezvous at rank 0
under torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``:
:mod:`scaleup.runtime.rendezvous`), or else a single-rank local group. The module-level API
(:mod:`scaleup.runtime.api`) acts on :func:`group`.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from scaleup.errors import ExecutionError, UsageError
from scaleup.runtime.group import ProcessGroup
from scaleup.runtime.lifecycle import die_with_parent
from scaleup.runtime.rendezvous import join, torchrun_env

__all__ = [
    "current_group",
    "group",
    "init",
    "is_initialized",
    "make_group",
    "set_group",
    "set_thread_group",
    "shutdown",
]

_process_group: ProcessGroup | None = None
_thread = threading.local()


def set_group(pg: ProcessGroup | None) -> None:
    """Make ``pg`` the process's group (None: no group)."""
    global _process_group
    _process_group = pg


def set_thread_group(pg: ProcessGroup | None) -> None:
    """Make ``pg`` this thread's group (the local launcher's ranks are threads)."""
    _thread.group = pg


def current_group() -> ProcessGroup | None:
    """This thread's group, else the process's, else None."""
    return getattr(_thread, "group", None) or _process_group


def make_group(config: dict[str, Any], rank: int, endpoints: Any = None) -> ProcessGroup:
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
    existing = current_group()
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
        pg = make_group(config, int(env["SCALEUP_RANK"]), endpoints)
        sys.excepthook = _one_line_when_stopped_by_peer(int(env["SCALEUP_RANK"]))
    elif transport == "mpi" or (
        transport is None and ("PMI_RANK" in env or "OMPI_COMM_WORLD_RANK" in env)
    ):
        from scaleup.runtime.transports.mpi import MpiTransport

        pg = ProcessGroup(MpiTransport(timeout))
    elif transport in (None, "local", "shm") and (me := torchrun_env(env)) is not None:
        pg = join(me, transport or "shm", timeout, make_group)
        sys.excepthook = _one_line_when_stopped_by_peer(me.rank)
    elif transport in (None, "local"):
        from scaleup.runtime.transports.local import LocalTransport, LocalWorld

        pg = ProcessGroup(LocalTransport(0, LocalWorld(1), timeout))
    else:
        raise UsageError(
            f"transport {transport!r} needs a launcher: scaleup run -n N or launch()",
            source="transport",
        )
    set_group(pg)
    return pg


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


def is_initialized() -> bool:
    """Whether this rank (or thread) has a group."""
    return current_group() is not None


def group() -> ProcessGroup:
    """The current group (raises if :func:`init` was not called)."""
    pg = current_group()
    if pg is None:
        raise UsageError("call scaleup.runtime.init() first", source="runtime")
    return pg


def shutdown() -> None:
    """Finish queued work and release this rank's transport."""
    pg = current_group()
    if pg is not None:
        pg.close()
        set_group(None)
        set_thread_group(None)
