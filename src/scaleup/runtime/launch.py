"""Start N ranks, watch them, propagate the first failure, clean up every segment.

``launch(fn, world_size)`` runs ``fn(*args, **kwargs)`` in ``world_size`` worker processes (fork by
default; ``start_method="spawn"`` needs a picklable ``fn``) or, for ``transport="local"``, threads,
and returns the per-rank results. Inside ``fn``, :func:`scaleup.runtime.init` returns the group.
``run_script`` is ``scaleup run -n N script.py``: the ranks are ``python script.py`` processes
that find their rank through environment variables (``SCALEUP_RANK``, ``SCALEUP_WORLD_SIZE``, and
torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``).

Faults: the launcher polls the workers' exit sentinels and result pipes. The first worker that
raises or dies sets the abort word in the control block, so every rank spinning on a flag stops
within a few hundred polls with :class:`~scaleup.errors.RankFailed` naming it; a rank that waits
too long raises :class:`~scaleup.errors.RankTimeout` naming the rank it waited for. Ranks still
alive ``timeout_s`` after the first failure are killed. In every case (normal exit, exception,
SIGINT to the launcher, SIGKILL of a worker) the launcher kills and reaps every worker, then
unlinks every segment under its run prefix.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from scaleup.errors import RankFailed, RankTimeout, ScaleupError, UsageError
from scaleup.runtime import shm as shm_mod
from scaleup.runtime.shm import ControlBlock, Segment

__all__ = ["TRANSPORTS", "launch", "run_script"]

TRANSPORTS = ("shm", "pipe", "local")
_POLL_S = 0.05


def _check(world_size: int, transport: str, timeout_s: float) -> None:
    if not isinstance(world_size, int) or world_size < 1:
        raise UsageError(
            f"world_size must be an integer >= 1, got {world_size!r}", source="world_size"
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


def _error_payload(error: BaseException, rank: int) -> dict[str, Any]:
    culprit = getattr(error, "rank", None) if isinstance(error, (RankFailed, RankTimeout)) else None
    return {
        "rank": rank,
        "culprit": rank if culprit is None else culprit,
        "timeout": isinstance(error, RankTimeout),
        "type": type(error).__name__,
        "message": str(error),
        "traceback": "".join(traceback.format_exception(error)),
    }


def _failure_error(failure: dict[str, Any]) -> ScaleupError:
    culprit = failure["culprit"]
    if failure.get("died") is not None:
        return RankFailed(f"rank {culprit} died ({failure['died']})", rank=culprit)
    if failure["culprit"] != failure["rank"]:
        cls = RankTimeout if failure["timeout"] else RankFailed
        return cls(f"rank {failure['rank']}: {failure['message']}", rank=culprit)
    error = RankFailed(
        f"rank {culprit} raised {failure['type']}: {failure['message']}", rank=culprit
    )
    error.remote_traceback = failure["traceback"]  # type: ignore[attr-defined]
    return error


def _worker(
    rank: int,
    config: dict[str, Any],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    result: Connection,
    endpoints: Any,
) -> None:
    from scaleup.runtime import api

    group = None
    code = 0
    try:
        if endpoints is not None:
            endpoints = endpoints.keep(rank)
        group = api._make_group(config, rank, endpoints)
        api._set_group(group)
        value = fn(*args, **kwargs)
        group.barrier()  # nobody returns while a peer may still reach into its memory
        result.send(("ok", value))
    except BaseException as error:  # reported to the launcher, which raises for everyone
        code = 1
        try:
            result.send(("error", _error_payload(error, rank)))
        except Exception:  # noqa: BLE001 (the launcher still sees the exit code)
            pass
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
        Number of ranks.
    transport
        ``shm`` (processes, shared memory), ``pipe`` (processes, message passing) or ``local``
        (threads in this process).
    timeout_s
        Longest wait for a peer before :class:`~scaleup.errors.RankTimeout`; also how long
        ranks get to stop after the first failure before they are killed.
    start_method
        ``fork`` or ``spawn`` (multiprocessing start method).

    Raises
    ------
    RankFailed
        A rank raised or died; ``error.rank`` is that rank.
    RankTimeout
        A rank waited past ``timeout_s`` for ``error.rank``.
    """
    _check(world_size, transport, timeout_s)
    if transport == "local":
        return _launch_threads(fn, world_size, args, kwargs, timeout_s)
    prefix = shm_mod.new_run_prefix()
    config = {
        "transport": transport,
        "world_size": world_size,
        "prefix": prefix,
        "timeout_s": timeout_s,
        "launcher_pid": os.getpid(),
    }
    control_segment = Segment(prefix + "ctrl", ControlBlock.size_bytes(world_size), create=True)
    control = ControlBlock(control_segment.mm, world_size)
    ctx = mp.get_context(start_method)
    procs: list[Any] = []
    endpoints = None
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
        return _supervise(procs, readers, control, timeout_s)
    except KeyboardInterrupt:
        control.set_abort(0, shm_mod.ABORT_INTERRUPTED)
        raise
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join()
        if endpoints is not None:
            endpoints.close_all()
        control.release()
        control_segment.close()
        shm_mod.unlink_run(prefix)


def _supervise(
    procs: list[Any], readers: dict[Connection, int], control: ControlBlock, timeout_s: float
) -> list[Any]:
    n = len(procs)
    results: list[Any] = [None] * n
    failure: dict[str, Any] | None = None
    kill_at = float("inf")
    sentinels = {proc.sentinel: rank for rank, proc in enumerate(procs)}

    def read(conn: Connection) -> None:
        nonlocal failure
        rank = readers.pop(conn)
        try:
            status, payload = conn.recv()
        except (EOFError, OSError):
            return
        finally:
            conn.close()
        if status == "ok":
            results[rank] = payload
        elif failure is None:
            failure = payload
            control.set_abort(
                payload["culprit"],
                shm_mod.ABORT_TIMEOUT if payload["timeout"] else shm_mod.ABORT_RAISED,
            )

    while sentinels:
        for obj in wait([*readers, *sentinels], timeout=_POLL_S):
            if obj in readers:
                read(obj)  # type: ignore[arg-type]
            elif obj in sentinels:
                rank = sentinels.pop(obj)  # type: ignore[call-overload]
                for conn, r in list(readers.items()):
                    if r == rank and conn.poll():
                        read(conn)
                procs[rank].join()
                code = procs[rank].exitcode
                if code != 0 and failure is None:
                    how = (
                        f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    )
                    failure = {"rank": rank, "culprit": rank, "died": how, "timeout": False}
                    control.set_abort(rank, shm_mod.ABORT_DIED)
        if failure is not None and kill_at == float("inf"):
            kill_at = time.monotonic() + timeout_s
        if time.monotonic() > kill_at:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
    if failure is not None:
        raise _failure_error(failure)
    return results


def _launch_threads(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout_s: float,
) -> list[Any]:
    from scaleup.runtime import api
    from scaleup.runtime.group import ProcessGroup
    from scaleup.runtime.transports.local import LocalTransport, LocalWorld

    world = LocalWorld(world_size)
    results: list[Any] = [None] * world_size
    failures: list[dict[str, Any]] = []

    def body(rank: int) -> None:
        group = ProcessGroup(LocalTransport(rank, world, timeout_s))
        api._set_thread_group(group)
        try:
            results[rank] = fn(*args, **kwargs)
            group.barrier()
        except BaseException as error:  # reported below
            payload = _error_payload(error, rank)
            failures.append(payload)
            world.control.set_abort(payload["culprit"], shm_mod.ABORT_RAISED)
        finally:
            api._set_thread_group(None)

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
            if failures and deadline == float("inf"):
                deadline = time.monotonic() + timeout_s
    if failures:
        raise _failure_error(failures[0])
    return results


def run_script(
    script: str,
    argv: list[str],
    world_size: int,
    *,
    transport: str = "shm",
    timeout_s: float = 30.0,
) -> int:
    """``scaleup run``: start ``python script argv...`` on each rank; 0 when every rank succeeded."""
    _check(world_size, transport, timeout_s)
    if transport == "local":
        raise UsageError(
            "scaleup run starts processes: use --transport shm or pipe", source="transport"
        )
    prefix = shm_mod.new_run_prefix()
    control_segment = Segment(prefix + "ctrl", ControlBlock.size_bytes(world_size), create=True)
    control = ControlBlock(control_segment.mm, world_size)
    procs: list[subprocess.Popen[bytes]] = []
    fds: list[list[tuple[int, int]]] = [[] for _ in range(world_size)]
    owned: list[int] = []
    try:
        if transport == "pipe":
            import socket

            for a in range(world_size):
                for b in range(a + 1, world_size):
                    left, right = socket.socketpair()
                    fds[a].append((b, left.detach()))
                    fds[b].append((a, right.detach()))
            owned = [fd for rank_fds in fds for _, fd in rank_fds]
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
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, script, *argv], env=env, pass_fds=[fd for _, fd in fds[rank]]
                )
            )
        for fd in owned:
            os.close(fd)
        owned = []
        failed: tuple[int, int] | None = None
        kill_at = float("inf")
        running = set(range(world_size))
        while running:
            time.sleep(_POLL_S)
            for rank in sorted(running):
                code = procs[rank].poll()
                if code is None:
                    continue
                running.discard(rank)
                if code != 0 and failed is None:
                    failed = (rank, code)
                    control.set_abort(rank, shm_mod.ABORT_DIED)
                    kill_at = time.monotonic() + timeout_s
            if time.monotonic() > kill_at:
                for rank in running:
                    procs[rank].kill()
        if failed is not None:
            rank, code = failed
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise RankFailed(f"rank {rank} failed ({how})", rank=rank)
        return 0
    except KeyboardInterrupt:
        control.set_abort(0, shm_mod.ABORT_INTERRUPTED)
        raise
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for fd in owned:
            os.close(fd)
        control.release()
        control_segment.close()
        shm_mod.unlink_run(prefix)
