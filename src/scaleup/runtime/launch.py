"""Start N ranks, watch them, name the rank that failed, clean up every segment.

``launch(fn, world_size)`` runs ``fn(*args, **kwargs)`` in ``world_size`` worker processes (fork by
default; ``start_method="spawn"`` needs a picklable ``fn``) or, for ``transport="local"``, threads,
and returns the per-rank results. Inside ``fn``, :func:`scaleup.runtime.init` returns the group.
``run_script`` is ``scaleup run -n N script.py``: the ranks are ``python script.py`` processes
that find their rank through environment variables (``SCALEUP_RANK``, ``SCALEUP_WORLD_SIZE``, and
torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``).

Limits, checked before anything is created: at most :data:`MAX_WORLD_SIZE` ranks (one host:
every rank is a Python process); the ``pipe`` transport needs ``n * (n - 1)`` socket ends in the
launcher, within its open-file limit (``ulimit -n``). Allocations are checked against the
symmetric heap limit (:mod:`scaleup.runtime.symmetric`) and the free space of /dev/shm.

Faults (:mod:`scaleup.runtime.supervise`): the first failure is stored in the control block's
abort word and every rank stops; the error names the rank that raised, died or hung (not the
ranks that waited for it). Ranks die with the launcher (:mod:`scaleup.runtime.lifecycle`); SIGINT
and SIGTERM to the launcher stop every rank and raise :class:`~scaleup.errors.Interrupted`. In
every case the launcher reaps every worker, then unlinks every segment under its run prefix; a
SIGKILLed launcher's segments are reclaimed by the next launch.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from scaleup.errors import UsageError
from scaleup.runtime import lifecycle
from scaleup.runtime import shm as shm_mod
from scaleup.runtime.control import ControlBlock
from scaleup.runtime.supervise import GRACE_S, Supervisor, abort_for, decide, error_payload

__all__ = ["MAX_WORLD_SIZE", "TRANSPORTS", "launch", "run_script"]

TRANSPORTS = ("shm", "pipe", "local")
#: Most ranks one launch starts: all run on one host, each a Python process (tens of MB).
MAX_WORLD_SIZE = 1024
_POLL_S = 0.05
_SPARE_FDS = 64


def _check(world_size: int, transport: str, timeout_s: float, start_method: str = "fork") -> None:
    if not isinstance(world_size, int) or not 1 <= world_size <= MAX_WORLD_SIZE:
        raise UsageError(
            f"world_size must be an integer in 1..{MAX_WORLD_SIZE} (ranks on one host), "
            f"got {world_size!r}",
            source="world_size",
        )
    if transport == "mpi":
        raise UsageError(
            "the mpi transport is started by mpiexec: run `mpiexec -n N python script.py` "
            "and call scaleup.runtime.init(transport='mpi')",
            source="transport",
        )
    if transport not in TRANSPORTS:
        raise UsageError(
            f"unknown transport {transport!r}; known: {', '.join(TRANSPORTS)}, mpi",
            source="transport",
        )
    if not timeout_s > 0:
        raise UsageError(f"timeout_s must be > 0, got {timeout_s}", source="timeout_s")
    if start_method not in ("fork", "spawn"):  # a forkserver child is not the launcher's child
        raise UsageError(
            f"start_method must be fork or spawn, got {start_method!r}", source="start_method"
        )
    soft_fds = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    need_fds = world_size * (world_size - 1) + _SPARE_FDS
    if transport == "pipe" and soft_fds != resource.RLIM_INFINITY and need_fds > soft_fds:
        raise UsageError(
            f"the pipe transport with {world_size} ranks needs {need_fds} open files in the "
            f"launcher (a socket pair per pair of ranks), over the limit of {soft_fds}; "
            "raise it (ulimit -n) or use the shm transport",
            source="world_size",
        )


def _worker(
    rank: int,
    config: dict[str, Any],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    result: Connection,
    endpoints: Any,
) -> None:
    from scaleup.runtime import current

    lifecycle.reset_worker_signals()
    lifecycle.die_with_parent(config["launcher_pid"])
    group = None
    code = 0
    try:
        if endpoints is not None:
            endpoints = endpoints.keep(rank)
        group = current.make_group(config, rank, endpoints)
        current.set_group(group)
        value = fn(*args, **kwargs)
        # not shut down by fn (destroy_process_group() barriers)
        if current.current_group() is group:
            group.barrier()  # nobody returns while a peer may still reach into its memory
        result.send(("ok", value))
    except BaseException as error:  # reported to the launcher, which raises for everyone
        code = 1
        payload = error_payload(error, rank)
        control = getattr(group.transport, "control", None) if group is not None else None
        if isinstance(control, ControlBlock):  # say who failed before this rank's segments go: a
            # peer that then cannot attach them must not be taken for the culprit (first wins)
            with contextlib.suppress(Exception):
                abort_for(control, payload, rank)
        with contextlib.suppress(Exception):  # the launcher still sees the exit code
            result.send(("error", payload))
    finally:
        if group is not None:
            group.transport.close()
        result.close()
    sys.exit(code)


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    transport: str = "shm",
    timeout_s: float = 30.0,
    start_method: str = "fork",
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(*args, **kwargs)`` on ``world_size`` ranks; return the results in rank order.

    Parameters
    ----------
    fn
        What every rank runs; it reaches the group with :func:`scaleup.runtime.init`.
    world_size
        Number of ranks, 1 to :data:`MAX_WORLD_SIZE`.
    transport
        ``shm`` (processes, shared memory), ``pipe`` (processes, message passing) or ``local``
        (threads in this process).
    timeout_s
        Longest a rank may go without progress while a peer waits for it, before
        :class:`~scaleup.errors.RankTimeout` names it.
    start_method
        ``fork`` or ``spawn`` (multiprocessing start method).

    Raises
    ------
    RankFailed
        A rank raised or died; ``error.rank`` is that rank.
    RankTimeout
        ``error.rank`` made no progress for ``timeout_s`` while another rank waited for it.
    Interrupted
        SIGINT or SIGTERM reached this process; every rank was stopped.
    """
    _check(world_size, transport, timeout_s, start_method)
    if transport == "local":
        return _launch_threads(fn, world_size, args, kwargs, timeout_s)
    shm_mod.reclaim_dead_runs()
    prefix = shm_mod.new_run_prefix()
    config = {
        "transport": transport,
        "world_size": world_size,
        "prefix": prefix,
        "timeout_s": timeout_s,
        "launcher_pid": os.getpid(),
    }
    control_segment, control = shm_mod.open_control(prefix, world_size, create=True)
    # typeshed types get_context(str) as BaseContext, which declares no Process.
    ctx: Any = mp.get_context(start_method)
    procs: list[Any] = []
    endpoints = None
    with lifecycle.SignalGuard() as guard:
        try:
            if transport == "pipe":
                from scaleup.runtime.transports.pipe import Endpoints

                endpoints = Endpoints.create(world_size, ctx)
            readers: dict[Connection, int] = {}
            for rank in range(world_size):
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_worker,
                    name=f"scaleup-rank{rank}",
                    args=(rank, config, fn, args, kwargs, writer, endpoints),
                )
                proc.start()
                writer.close()
                procs.append(proc)
                readers[reader] = rank
            if endpoints is not None:
                endpoints.close_all()
            return Supervisor(procs, control, guard, timeout_s, readers).run()
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
                proc.join()
            if endpoints is not None:
                endpoints.close_all()
            control.release()
            control_segment.close()
            shm_mod.unlink_run(prefix)


def _launch_threads(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout_s: float,
) -> list[Any]:
    from scaleup.runtime import current
    from scaleup.runtime.group import ProcessGroup
    from scaleup.runtime.transports.local import LocalTransport, LocalWorld

    world = LocalWorld(world_size)
    results: list[Any] = [None] * world_size
    reports: dict[int, dict[str, Any]] = {}

    def body(rank: int) -> None:
        group = ProcessGroup(LocalTransport(rank, world, timeout_s))
        current.set_thread_group(group)
        try:
            results[rank] = fn(*args, **kwargs)
            if current.current_group() is group:  # not shut down by fn
                group.barrier()
        except BaseException as error:  # reported below
            payload = reports[rank] = error_payload(error, rank)
            abort_for(world.control, payload, rank)
        finally:
            current.set_thread_group(None)

    threads = [
        threading.Thread(target=body, args=(r,), name=f"scaleup-local{r}", daemon=True)
        for r in range(world_size)
    ]
    for thread in threads:
        thread.start()
    deadline = float("inf")
    for thread in threads:
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(_POLL_S)
            if world.control.abort_state() is not None and deadline == float("inf"):
                deadline = time.monotonic() + 2 * GRACE_S  # a hung thread cannot be killed
    error = decide(world.control.abort_state(), dict(reports), {}, set(), timeout_s)
    if error is not None:
        raise error
    return results


#: Called with (rank, from stderr?, line) for each line a rank writes, when relayed.
Relay = Callable[[int, bool, str], None]


def _relay_stream(stream: Any, rank: int, is_err: bool, relay: Relay) -> threading.Thread:
    """A thread handing each line of a rank's pipe to ``relay`` until the rank closes it."""

    def pump() -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                relay(rank, is_err, raw.decode("utf-8", errors="replace"))

    thread = threading.Thread(target=pump, name=f"scaleup-relay{rank}", daemon=True)
    thread.start()
    return thread


def _free_port() -> int:
    """A TCP port free now on 127.0.0.1, for ``MASTER_PORT`` (scripts that read it expect one)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_script(
    script: str,
    argv: list[str],
    world_size: int,
    *,
    transport: str = "shm",
    timeout_s: float = 30.0,
    relay: Relay | None = None,
) -> int:
    """``scaleup run``: start ``python script argv...`` on each rank; 0 when every rank succeeded.

    Each rank gets scaleup's variables and torchrun's (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``). With ``relay``, the ranks' stdout
    and stderr are pipes whose lines are handed to it (the command line prefixes them with the
    rank), all of them before this returns or raises; without it, the ranks inherit this
    process's streams. Raises as :func:`launch` does (without the ranks' tracebacks: they print
    their own).
    """
    _check(world_size, transport, timeout_s)
    if transport == "local":
        raise UsageError(
            "scaleup run starts processes: use --transport shm or pipe", source="transport"
        )
    shm_mod.reclaim_dead_runs()
    prefix = shm_mod.new_run_prefix()
    control_segment, control = shm_mod.open_control(prefix, world_size, create=True)
    procs: list[subprocess.Popen[bytes]] = []
    fds: list[list[tuple[int, int]]] = [[] for _ in range(world_size)]
    owned: list[int] = []
    relays: list[threading.Thread] = []
    pipe = subprocess.PIPE if relay is not None else None
    port = _free_port()
    with lifecycle.SignalGuard() as guard:
        try:
            if transport == "pipe":
                import socket

                for a in range(world_size):
                    for b in range(a + 1, world_size):
                        left, right = socket.socketpair()
                        fds[a].append((b, left.detach()))
                        fds[b].append((a, right.detach()))
                owned = [fd for rank_fds in fds for _, fd in rank_fds]
            preexec = lifecycle.pdeathsig_preexec(os.getpid())
            for rank in range(world_size):
                env = dict(
                    os.environ,
                    SCALEUP_RANK=str(rank),
                    SCALEUP_WORLD_SIZE=str(world_size),
                    SCALEUP_TRANSPORT=transport,
                    SCALEUP_RUN_PREFIX=prefix,
                    SCALEUP_TIMEOUT_S=str(timeout_s),
                    SCALEUP_LAUNCHER_PID=str(os.getpid()),
                    SCALEUP_PIPE_FDS=",".join(f"{p}:{fd}" for p, fd in fds[rank]),
                    RANK=str(rank),
                    WORLD_SIZE=str(world_size),
                    LOCAL_RANK=str(rank),
                    LOCAL_WORLD_SIZE=str(world_size),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                )
                if relay is not None:
                    env.setdefault("PYTHONUNBUFFERED", "1")  # lines as they are written
                proc = subprocess.Popen(
                    [sys.executable, script, *argv],
                    env=env,
                    pass_fds=[fd for _, fd in fds[rank]],
                    preexec_fn=preexec,
                    stdout=pipe,
                    stderr=pipe,
                )
                procs.append(proc)
                if relay is not None:
                    relays.append(_relay_stream(proc.stdout, rank, False, relay))
                    relays.append(_relay_stream(proc.stderr, rank, True, relay))
            for fd in owned:
                os.close(fd)
            owned = []
            Supervisor(procs, control, guard, timeout_s).run()
            return 0
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
            for thread in relays:  # every line out before the launcher's own summary
                thread.join(timeout=GRACE_S)
            for fd in owned:
                os.close(fd)
            control.release()
            control_segment.close()
            shm_mod.unlink_run(prefix)
