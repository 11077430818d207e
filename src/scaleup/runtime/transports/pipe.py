"""The ``pipe`` transport: the same API by message passing, the degraded case we measure.

Ranks are processes with private memory; every byte between them is copied through the kernel
over a socket pair per pair of ranks (``multiprocessing`` connections). One reader thread per
peer applies what arrives: puts are written into this rank's memory, gets and atomics are
answered (replies go through a responder thread, so a reader never blocks on a send), and
collective data lands in a mailbox.

Collectives execute the same Schedules "owner computes": every rank walks the ops in id order
(a topological order) and, for each op touching a chunk it owns, either sends its source chunk
(a snapshot taken at that point), or receives the sources and applies the op to its destination
with :func:`~scaleup.collectives.semantics.apply_op` (every source read before any destination
is written, also when one of its own source chunks is the destination, in place). Every chunk
lives on one rank, which serialises all accesses to it in the same topological order, so all
hazards are respected; sends never wait for the receiver (its reader drains them), so the
minimal unfinished op always progresses: no deadlock. Connections are FIFO, so a put issued
before a barrier message is applied before the peer sees the barrier.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.semantics import apply_op
from scaleup.collectives.spec import reduce_ufunc
from scaleup.errors import RankFailed
from scaleup.runtime.control import Waiter
from scaleup.runtime.shm import open_control
from scaleup.runtime.transports.base import BaseTransport, Binding

__all__ = ["Endpoints", "PipeTransport"]


class Endpoints:
    """The connections of every pair of ranks, made by the launcher before the workers start."""

    def __init__(self, conns: dict[tuple[int, int], Connection]) -> None:
        self.conns = conns  # (rank, peer) -> rank's end of the pair

    @classmethod
    def create(cls, world_size: int, ctx: Any) -> Endpoints:
        conns = {}
        for a, b in itertools.combinations(range(world_size), 2):
            conns[a, b], conns[b, a] = ctx.Pipe(duplex=True)
        return cls(conns)

    @classmethod
    def from_env(cls, text: str) -> Endpoints | None:
        """``"peer:fd,..."`` as ``scaleup run`` passes them; None when empty."""
        if not text:
            return None
        return cls(
            {
                (-1, int(p)): Connection(int(fd))
                for p, fd in (item.split(":") for item in text.split(","))
            }
        )

    def keep(self, rank: int) -> Endpoints:
        """This rank's ends only; every other inherited end is closed (so EOF means death)."""
        mine = {}
        for (r, peer), conn in self.conns.items():
            if r in (rank, -1):
                mine[rank, peer] = conn
            else:
                conn.close()
        return Endpoints(mine)

    def close_all(self) -> None:
        for conn in self.conns.values():
            conn.close()


class PipeTransport(BaseTransport):
    """One process's endpoint of the message-passing transport."""

    name = "pipe"

    def __init__(
        self,
        rank: int,
        world_size: int,
        timeout_s: float,
        endpoints: Endpoints | None,
        prefix: str,
        launcher_pid: int | None = None,
    ) -> None:
        super().__init__(rank, world_size, timeout_s)
        self.prefix = prefix
        conns = {} if endpoints is None else {peer: c for (_r, peer), c in endpoints.conns.items()}
        self.conns: dict[int, Connection] = conns
        self._control_segment, self.control = open_control(prefix, world_size, create=False)
        self.waiter = Waiter(self.control, rank, timeout_s, launcher_pid=launcher_pid)
        self._memory: dict[int, np.ndarray] = {}
        self._next_id = 0
        self._mail: dict[tuple[int, Any], Any] = {}
        self._cond = threading.Condition()
        self._dead: set[int] = set()
        self._send_locks = {peer: threading.Lock() for peer in conns}
        self._atomic_lock = threading.Lock()
        self._requests = itertools.count()
        self._barrier_epoch = 0
        self._dirty: set[int] = set()
        self._replies: queue.SimpleQueue[tuple[int, Any, np.ndarray | None] | None] = (
            queue.SimpleQueue()
        )
        self._plans: dict[tuple[object, ...], list[tuple[Any, ...]]] = {}
        for peer, conn in conns.items():
            threading.Thread(
                target=self._read, args=(peer, conn), daemon=True, name=f"scaleup-pipe{rank}<{peer}"
            ).start()
        threading.Thread(
            target=self._respond, daemon=True, name=f"scaleup-pipe{rank}-reply"
        ).start()

    # ---- wire --------------------------------------------------------------------------------
    def _send(self, peer: int, header: tuple[Any, ...], payload: np.ndarray | None = None) -> None:
        try:
            with self._send_locks[peer]:
                self.conns[peer].send(header)
                if payload is not None:
                    self.conns[peer].send_bytes(payload.data)
        except (OSError, ValueError) as error:
            raise self.waiter.peer_gone(peer) from error

    def _read(self, peer: int, conn: Connection) -> None:
        try:
            while True:
                header = conn.recv()
                kind = header[0]
                if kind == "data":
                    buf = np.empty(header[2], dtype=np.uint8)
                    if header[2]:
                        conn.recv_bytes_into(buf)
                    self._deliver(peer, header[1], buf)
                elif kind == "put":
                    _, alloc_id, offset, nbytes = header
                    if nbytes:
                        conn.recv_bytes_into(self._memory[alloc_id][offset : offset + nbytes])
                elif kind == "get":
                    _, alloc_id, offset, nbytes, tag = header
                    self._replies.put(
                        (peer, tag, self._memory[alloc_id][offset : offset + nbytes].copy())
                    )
                elif kind == "atomic":
                    _, alloc_id, offset, value, tag = header
                    self._replies.put((peer, tag, np.array([self._add(alloc_id, offset, value)])))
                elif kind == "ping":
                    self._replies.put((peer, header[1], None))
                else:  # "value" or "barrier": a small message for the mailbox
                    self._deliver(peer, header[1], header[2] if len(header) > 2 else None)
        except (EOFError, OSError):
            with self._cond:
                self._dead.add(peer)
                self._cond.notify_all()

    def _respond(self) -> None:
        while (item := self._replies.get()) is not None:
            peer, tag, data = item
            try:
                if data is not None and tag[0] == "get":
                    self._send(peer, ("data", tag, data.nbytes), data)
                else:
                    self._send(peer, ("value", tag, None if data is None else int(data[0])))
            except RankFailed:
                continue

    def _deliver(self, peer: int, tag: Any, value: Any) -> None:
        with self._cond:
            self._mail[peer, tag] = value
            self._cond.notify_all()

    def _take(self, peer: int, tag: Any) -> Any:
        """The message ``tag`` from ``peer``, waiting for it (published as a wait on ``peer``)."""
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            if (peer, tag) in self._mail:
                return self._mail.pop((peer, tag))
            self.waiter.begin(peer)
            try:
                while (peer, tag) not in self._mail:
                    if peer in self._dead:
                        raise self.waiter.peer_gone(peer)
                    self.waiter.check(peer)
                    if time.monotonic() > deadline:
                        raise self.waiter.timed_out(peer)
                    self._cond.wait(0.05)
            finally:
                self.waiter.end()
            return self._mail.pop((peer, tag))

    # ---- memory and one-sided ----------------------------------------------------------------
    def alloc_bytes(self, nbytes: int) -> int:
        alloc_id = self._next_id
        self._next_id += 1
        self._memory[alloc_id] = np.zeros(nbytes, dtype=np.uint8)
        return alloc_id

    def free(self, alloc_id: int) -> None:
        self.barrier()
        self._plans.clear()
        self._memory.pop(alloc_id, None)

    def local_bytes(self, alloc_id: int) -> np.ndarray:
        return self._memory[alloc_id]

    def _add(self, alloc_id: int, offset: int, value: int) -> int:
        cell = self._memory[alloc_id][offset : offset + 8].view(np.int64)
        with self._atomic_lock:
            old = int(cell[0])
            cell[0] = old + value
        return old

    def put_bytes(self, alloc_id: int, peer: int, offset: int, data: np.ndarray) -> None:
        if peer == self.rank:
            self._memory[alloc_id][offset : offset + len(data)] = data
            return
        self._dirty.add(peer)
        self._send(peer, ("put", alloc_id, offset, len(data)), data if len(data) else None)

    def get_bytes(self, alloc_id: int, peer: int, offset: int, out: np.ndarray) -> None:
        if peer == self.rank:
            np.copyto(out, self._memory[alloc_id][offset : offset + len(out)])
            return
        tag = ("get", next(self._requests))
        self._send(peer, ("get", alloc_id, offset, len(out), tag))
        np.copyto(out, self._take(peer, tag))

    def atomic_fetch_add(self, alloc_id: int, peer: int, offset: int, value: int) -> int:
        if peer == self.rank:
            return self._add(alloc_id, offset, value)
        tag = ("atomic", next(self._requests))
        self._send(peer, ("atomic", alloc_id, offset, int(value), tag))
        return int(self._take(peer, tag))

    def quiet(self) -> None:
        """Every put issued so far has been applied by its target (a ping after them returns)."""
        dirty, self._dirty = self._dirty, set()
        tags = {}
        for peer in dirty:
            tags[peer] = ("ping", next(self._requests))
            self._send(peer, ("ping", tags[peer]))
        for peer, tag in tags.items():
            self._take(peer, tag)

    def barrier(self) -> None:
        self._barrier_epoch += 1
        tag = ("barrier", self._barrier_epoch)
        for peer in self.conns:
            self._send(peer, ("barrier", tag))
        for peer in self.conns:
            self._take(peer, tag)
        self._dirty.clear()  # FIFO: every put sent before our barrier message is applied

    def check(self) -> None:
        self.waiter.check()

    # ---- collectives: owner computes ---------------------------------------------------------
    def execute(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype, epoch: int
    ) -> None:
        key = (schedule, tuple(sorted(bindings.items())), dtype.str)
        actions = self._plans.get(key)
        if actions is None:
            actions = self._plans[key] = self._compile(schedule, bindings, dtype)
        ufunc = reduce_ufunc(schedule.spec.redop)
        for action in actions:
            what = action[0]
            if what == "send":
                _, peer, tag, src = action
                self._send(
                    peer,
                    ("data", (epoch, *tag), src.nbytes),
                    src.view(np.uint8) if src.nbytes else None,
                )
            else:  # recv: every source (own chunks are views: they may alias dsts), then the op
                _, kind, sources, dsts = action
                values = [
                    s if isinstance(s, np.ndarray) else self._take(s[0], (epoch, *s[1])).view(dtype)
                    for s in sources
                ]
                apply_op(kind, values, dsts, ufunc)

    def _compile(
        self, schedule: Schedule, bindings: Mapping[Buffer, Binding], dtype: np.dtype
    ) -> list[tuple[Any, ...]]:
        me = self.rank

        def view(buffer: int, offset: int, count: int) -> np.ndarray:
            buffer = Buffer(int(buffer))
            if buffer not in bindings:
                return np.zeros(0, dtype=dtype)
            alloc_id, base = bindings[buffer]
            lo = base + int(offset) * dtype.itemsize
            return self._memory[alloc_id][lo : lo + int(count) * dtype.itemsize].view(dtype)

        actions: list[tuple[Any, ...]] = []
        for op in schedule.ops:
            count = op.count
            srcs = [(c.rank, view(c.buffer, c.offset, count)) for c in op.srcs]
            dsts = [(c.rank, view(c.buffer, c.offset, count)) for c in op.dsts]
            if op.kind != OpKind.SWITCH_REDUCE:
                (rs, src), (rd, dst) = srcs[0], dsts[0]
                if rs == me and rd == me:
                    actions.append(("recv", op.kind, [src], [dst]))
                elif rs == me:
                    actions.append(("send", rd, (op.id, 0), src))
                elif rd == me:
                    actions.append(("recv", op.kind, [(rs, (op.id, 0))], [dst]))
                continue
            receivers = sorted({rd for rd, _ in dsts})
            for j, (rs, src) in enumerate(srcs):
                if rs == me:
                    actions.extend(("send", rd, (op.id, j), src) for rd in receivers if rd != me)
            mine = [d for rd, d in dsts if rd == me]
            if mine:
                sources = [
                    src if rs == me else (rs, (op.id, j)) for j, (rs, src) in enumerate(srcs)
                ]
                actions.append(("recv", op.kind, sources, mine))
        return actions

    def close(self) -> None:
        self._replies.put(None)
        for conn in self.conns.values():
            conn.close()
        self.control.release()
        self._control_segment.close()
