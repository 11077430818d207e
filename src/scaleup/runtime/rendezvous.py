"""Forming a shared-memory group from torchrun's environment, without ``scaleup run``.

Processes started by ``torchrun --nproc-per-node N script.py`` (or by hand with ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) have no launcher that made the run's
segments. So rank 0 plays the launcher: it listens on ``MASTER_ADDR:MASTER_PORT`` (TCP, stdlib
``socket``), creates the run's control block, waits for every other rank to connect and say
hello, then sends each one the configuration ``scaleup run`` puts in ``SCALEUP_*`` (one JSON line:
transport, world size, run prefix, timeout), and every rank makes the usual ``shm`` group.

torchrun's own agent already listens on ``MASTER_PORT`` (its TCPStore; the workers see
``TORCHELASTIC_USE_AGENT_STORE=True``): then the rendezvous uses ``MASTER_PORT + 1``.

Only one machine: ``MASTER_ADDR`` must be an address of this host (one a socket can bind), else
:class:`~scaleup.errors.Unsupported`. The rendezvous waits ``SCALEUP_RENDEZVOUS_TIMEOUT_S``
(default 60 s) and then fails with one line naming the address and the ranks missing.

Faults and cleanup. Every rank keeps its connection to rank 0 for the life of the group; a
thread on each end reads it. A rank whose connection closes before it said goodbye died: rank 0
sets the abort word (:data:`~scaleup.runtime.control.ABORT_DIED`) and every rank's waits stop with
:class:`~scaleup.errors.RankFailed` naming it; likewise every rank when rank 0's connection closes.
A rank that ends with an uncaught exception sets "raised" itself on the way out. Rank 0 owns the
run: at shutdown (or exit) it waits for every rank's goodbye or death, then unlinks every segment
under the run prefix (:func:`scaleup.runtime.shm.unlink_run`, as the launcher does), so a dead
rank leaks nothing. When rank 0 dies, the last rank out reclaims the run
(:func:`scaleup.runtime.shm.reclaim_dead_runs`: the prefix names rank 0's pid, and no process
holds the control block's lock any more); a rank exiting without ``shutdown()`` still releases
its segments first.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scaleup.errors import TransportError, Unsupported, UsageError
from scaleup.runtime import shm as shm_mod
from scaleup.runtime.control import ABORT_DIED, ABORT_RAISED
from scaleup.runtime.group import ProcessGroup

__all__ = ["TIMEOUT_ENV", "TorchrunEnv", "join", "torchrun_env"]

#: Seconds the rendezvous waits for every rank (default 60).
TIMEOUT_ENV = "SCALEUP_RENDEZVOUS_TIMEOUT_S"
_DEFAULT_TIMEOUT_S = 60.0
_RETRY_S = 0.05
_REPLY_GRACE_S = 2.0
#: tries, _RETRY_S apart, to reclaim a run whose rank 0 died (others may still hold it).
_RECLAIM_TRIES = 20
_BYE = b'{"bye": true}\n'


@dataclass(frozen=True)
class TorchrunEnv:
    """torchrun's description of this process: rank, world size, rank 0's address."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int

    @property
    def where(self) -> str:
        return f"{self.master_addr}:{self.master_port} (MASTER_ADDR:MASTER_PORT)"


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None:
        if default is None:
            raise UsageError(f"torchrun's environment without {name}", source=name)
        return default
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{text!r} is not an integer", source=name) from None


def torchrun_env(env: Mapping[str, str]) -> TorchrunEnv | None:
    """torchrun's variables in ``env``, or None when they describe one rank (or are absent)."""
    world = _int(env, "WORLD_SIZE", 1)
    rank = _int(env, "RANK", 0)
    if world == 1 and rank == 0:
        return None
    if not 0 <= rank < world:
        raise UsageError(
            f"RANK={rank} is not in 0..{world - 1} (WORLD_SIZE={world})", source="RANK"
        )
    if "MASTER_ADDR" not in env:
        raise UsageError("torchrun's environment without MASTER_ADDR", source="MASTER_ADDR")
    port = _int(env, "MASTER_PORT")
    if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        port += 1  # torchrun's agent holds MASTER_PORT
    return TorchrunEnv(rank, world, env["MASTER_ADDR"], port)


def local_address(addr: str) -> str:
    """The IP of ``addr`` if it is an address of this host, else :class:`Unsupported`."""
    try:
        infos = socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)
    except OSError as error:
        raise UsageError(
            f"MASTER_ADDR={addr} does not resolve ({error})", source="MASTER_ADDR"
        ) from None
    for family, _, _, _, sockaddr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((sockaddr[0], 0))  # only an address of this host binds
            except OSError:
                continue
            return str(sockaddr[0])
    raise Unsupported(
        f"MASTER_ADDR={addr} is not an address of this machine; scaleup's shared-memory groups "
        "join ranks of one machine only (use MASTER_ADDR=127.0.0.1, or MPI across machines)",
        source="MASTER_ADDR",
    )


def _timeout_s(env: Mapping[str, str]) -> float:
    text = env.get(TIMEOUT_ENV)
    try:
        value = float(text) if text is not None else _DEFAULT_TIMEOUT_S
    except ValueError:
        raise UsageError(f"{text!r} is not a number of seconds", source=TIMEOUT_ENV) from None
    if not value > 0:
        raise UsageError(f"must be > 0, got {value}", source=TIMEOUT_ENV)
    return value


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _recv(sock: socket.socket, deadline: float) -> dict[str, Any] | None:
    """One JSON line, or None when the peer closed; :class:`TimeoutError` past ``deadline``."""
    data = b""
    while not data.endswith(b"\n"):
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    sock.settimeout(None)
    message = json.loads(data)
    return message if isinstance(message, dict) else None


class _Session:
    """This rank's side of the rendezvous after it succeeded: the connections, the watcher
    thread, the control block mapping, and rank 0's cleanup."""

    def __init__(
        self, me: TorchrunEnv, prefix: str, conns: dict[int, socket.socket], timeout_s: float
    ) -> None:
        self.me = me
        self.prefix = prefix
        self.conns = conns
        self.timeout_s = timeout_s
        self.segment, self.control = shm_mod.open_control(
            prefix, me.world_size, create=me.rank == 0
        )
        self.gone: set[int] = set()
        self.closing = False
        self.raised = False
        #: rank 0 died (seen by another rank): the last rank out reclaims the run.
        self.owner_died = False
        #: the group's transport, released at exit if the script did not shut the group down.
        self.transport: Any = None
        self._done = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="scaleup-rendezvous", daemon=True)

    def start(self) -> None:
        self._thread.start()
        atexit.register(self.at_exit)

    def _abort(self, rank: int, kind: int) -> None:
        with self._lock:
            if not self._closed:
                self.control.set_abort(rank, kind, reporter=self.me.rank)

    def _watch(self) -> None:
        """Read every connection until each says goodbye or closes; a close first is a death."""
        selector = selectors.DefaultSelector()
        for rank, conn in self.conns.items():
            selector.register(conn, selectors.EVENT_READ, rank)
        buffers = dict.fromkeys(self.conns, b"")
        while len(self.gone) < len(self.conns):
            for key, _ in selector.select(timeout=0.5):
                rank = key.data
                try:
                    chunk = key.fileobj.recv(4096)  # type: ignore[union-attr]
                except OSError:
                    chunk = b""
                buffers[rank] += chunk
                if chunk and not buffers[rank].endswith(b"\n"):
                    continue
                if not chunk and _BYE not in buffers[rank] and not self.closing:
                    self._abort(rank, ABORT_DIED)
                    self.owner_died = rank == 0
                selector.unregister(key.fileobj)
                self.gone.add(rank)
        selector.close()
        self._done.set()

    def at_exit(self) -> None:
        """Release the group the script did not shut down (its segments), then close."""
        if self.transport is not None and self.transport.on_close is not None:
            with contextlib.suppress(Exception):
                self.transport.close()  # calls close()
        self.close()

    def close(self) -> None:
        """Say goodbye (not rank 0) or wait for every goodbye and unlink the run (rank 0)."""
        if self._closed:
            return
        if self.raised:  # an uncaught exception ends this rank: the others stop now
            self.control.set_abort(self.me.rank, ABORT_RAISED, reporter=self.me.rank)
        if self.me.rank != 0:
            self.closing = True
            for conn in self.conns.values():
                with contextlib.suppress(OSError):
                    conn.sendall(_BYE)
        else:
            if self._thread.is_alive():  # every rank's goodbye or death, boundedly
                self._done.wait(timeout=self.timeout_s)
            self.closing = True
        with self._lock:
            self._closed = True
        for conn in self.conns.values():
            with contextlib.suppress(OSError):
                conn.close()
        self.control.release()
        self.segment.close()
        if self.me.rank == 0:
            shm_mod.unlink_run(self.prefix)
        elif self.owner_died:  # a dead run once no rank maps its control block any more
            for _ in range(_RECLAIM_TRIES):  # rank 0 closes its sockets before it is a zombie
                shm_mod.reclaim_dead_runs()
                if not shm_mod.list_segments(self.prefix):
                    break
                time.sleep(_RETRY_S)
        with contextlib.suppress(Exception):
            atexit.unregister(self.at_exit)


def _serve(me: TorchrunEnv, ip: str, deadline: float) -> tuple[str, dict[int, socket.socket]]:
    """Rank 0: accept every other rank's hello; the run prefix and the connections by rank."""
    listener = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((ip, me.master_port))
    except OSError as error:
        listener.close()
        raise TransportError(
            f"rank 0 cannot listen on {me.where}: {error.strerror}", source="MASTER_PORT"
        ) from None
    conns: dict[int, socket.socket] = {}
    with listener:
        listener.listen(me.world_size)
        while len(conns) < me.world_size - 1:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                missing = sorted(set(range(1, me.world_size)) - set(conns))
                for conn in conns.values():
                    with contextlib.suppress(OSError):
                        _send(conn, {"error": f"ranks {_ranks(missing)} never joined"})
                        conn.close()
                raise _timed_out(me, missing)
            listener.settimeout(left_s)
            try:
                conn, _ = listener.accept()
                hello = _recv(conn, deadline)
            except (TimeoutError, OSError, ValueError):
                continue
            rank = hello.get("rank") if hello else None
            if not isinstance(rank, int) or not 0 < rank < me.world_size or rank in conns:
                conn.close()  # not one of ours (or a second rank r): ignored
                continue
            if hello and hello.get("world_size") != me.world_size:
                conn.close()
                raise UsageError(
                    f"rank {rank} says WORLD_SIZE={hello.get('world_size')}, "
                    f"rank 0 says {me.world_size}",
                    source="WORLD_SIZE",
                )
            conns[rank] = conn
    return shm_mod.new_run_prefix(), conns


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


def _timed_out(me: TorchrunEnv, missing: list[int]) -> TransportError:
    return TransportError(
        f"rendezvous at {me.where} timed out: rank{'s' * (len(missing) != 1)} "
        f"{_ranks(missing)} of WORLD_SIZE={me.world_size} never joined (see {TIMEOUT_ENV})",
        source="MASTER_ADDR",
    )


def _connect(me: TorchrunEnv, ip: str, deadline: float) -> socket.socket:
    """Rank r > 0: connect to rank 0, retrying until it listens or the deadline passes."""
    while True:
        try:
            conn = socket.create_connection(
                (ip, me.master_port), timeout=max(deadline - time.monotonic(), 0.001)
            )
            _send(conn, {"rank": me.rank, "world_size": me.world_size})
            return conn
        except OSError:
            if time.monotonic() > deadline:
                raise _timed_out(me, [0]) from None
            time.sleep(_RETRY_S)


def join(
    me: TorchrunEnv,
    transport: str,
    timeout_s: float,
    make_group: Callable[[dict[str, Any], int], ProcessGroup],
) -> ProcessGroup:
    """Rendezvous at rank 0, then ``make_group(config, rank)`` as a launched rank would.

    ``timeout_s`` is the collectives' timeout; the rendezvous's own is :data:`TIMEOUT_ENV`. The
    group's transport calls back on close to say goodbye (rank 0: to clean up).
    """
    if transport != "shm":
        raise Unsupported(
            f"under torchrun's environment (WORLD_SIZE={me.world_size}) the ranks are "
            f"processes joined by the shm transport, not {transport}",
            source="transport",
        )
    ip = local_address(me.master_addr)
    wait_s = _timeout_s(os.environ)
    deadline = time.monotonic() + wait_s
    config = {"transport": "shm", "world_size": me.world_size, "timeout_s": timeout_s}
    if me.rank == 0:
        shm_mod.reclaim_dead_runs()
        prefix, conns = _serve(me, ip, deadline)
        config["prefix"] = prefix
        session = _Session(me, prefix, conns, timeout_s)
        try:
            for conn in conns.values():
                _send(conn, config)
        except OSError:
            session.raised = True
            session.close()
            raise
    else:
        conn = _connect(me, ip, deadline)
        try:  # a little longer than rank 0, whose reply names the ranks missing
            reply = _recv(conn, deadline + _REPLY_GRACE_S)
        except (TimeoutError, OSError, ValueError):
            conn.close()
            raise TransportError(
                f"rendezvous at {me.where} timed out: rank 0 sent no configuration "
                f"(see {TIMEOUT_ENV})",
                source="MASTER_ADDR",
            ) from None
        if reply is None or "error" in reply:
            conn.close()
            why = reply["error"] if reply else "rank 0 closed the connection"
            raise TransportError(f"rendezvous at {me.where} failed: {why}", source="MASTER_ADDR")
        config = {**reply, "timeout_s": timeout_s}
        session = _Session(me, str(reply["prefix"]), {0: conn}, timeout_s)
    session.start()
    try:
        pg = make_group(config, me.rank)
    except BaseException:
        session.raised = True  # the others stop rather than wait for this rank
        session.close()
        raise
    session.transport = pg.transport  # a ShmTransport: make_group's config says shm
    session.transport.on_close = session.close
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        session.raised = True
        previous(kind, error, tb)

    sys.excepthook = hook
    return pg
