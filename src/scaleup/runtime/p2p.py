"""Point-to-point messages (``send``/``recv``, ``isend``/``irecv``) over the symmetric heap.

torch.distributed's send and recv are two-sided; the heap is one-sided (``put``, ``get``,
``atomic_fetch_add``), so a :class:`Mailbox` builds them from those, on every transport:

- Each rank owns one *slot* per peer (``slot_bytes``, an 8-byte header then payload) and two
  int64 counters per peer: ``arrived[src]`` (chunks ``src`` has delivered into its slot here)
  and ``freed[dst]`` (chunks of this rank's messages ``dst`` has taken out of its slot there).
- A message travels in chunks. Chunk ``k`` of the pair (s, d): s waits until ``freed[d] >= k``
  on itself (the slot is empty), ``put``\\s header and payload into d's slot, ``quiet``\\s (the
  data has landed) and adds 1 to ``arrived[s]`` on d. d waits until ``arrived[s] > k``, copies the
  chunk out and adds 1 to ``freed[d]`` on s. A message of one slot or less is buffered: its
  ``send`` returns before the ``recv`` is posted, as NCCL's and gloo's small sends do.
- Sequence numbers are claimed when an operation is issued, so ``isend``\\s to one peer arrive in
  issue order whatever threads run them; ``isend``/``irecv`` run on a thread of their own and
  return a :class:`~scaleup.runtime.group.Work`.
- The header carries the message's size; a ``recv`` into a buffer of another size raises.

The mailbox is collective to create (two symmetric allocations), so it is made by
``init_process_group()`` (or :meth:`ProcessGroup.enable_p2p` on every rank), not by a ``send``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from scaleup.errors import RankTimeout, UsageError
from scaleup.runtime.group import ProcessGroup, Work

__all__ = [
    "DEFAULT_SLOT_BYTES",
    "Mailbox",
    "enable",
    "irecv",
    "isend",
    "mailbox",
    "recv",
    "run_async",
    "send",
]

#: Bytes of one peer's slot (header included): a message up to this size less 8 is one chunk.
DEFAULT_SLOT_BYTES = 256 * 1024
_HEADER = 8
_MAX_SLEEP_S = 1e-3


class Mailbox:
    """This rank's point-to-point state: slots, counters and claimed sequence numbers."""

    def __init__(self, group: ProcessGroup, slot_bytes: int = DEFAULT_SLOT_BYTES) -> None:
        n = group.world_size
        if slot_bytes <= _HEADER:
            raise UsageError(f"slot_bytes must exceed {_HEADER}", source="slot_bytes")
        self.group = group
        self.slot_bytes = int(slot_bytes)
        self.counters = group.alloc(2 * n, "int64")  # collective: arrived[0..n), freed[n..2n)
        self.slots = group.alloc(n * self.slot_bytes, "uint8")  # collective
        self._sent = [0] * n  # chunks claimed towards each peer
        self._taken = [0] * n  # chunks claimed from each peer
        self._lock = threading.Lock()

    @property
    def payload_bytes(self) -> int:
        """Bytes of message one chunk carries (the slot less its header)."""
        return self.slot_bytes - _HEADER

    def chunks(self, nbytes: int) -> int:
        """Chunks a message of ``nbytes`` travels in (at least one: empty messages too)."""
        payload = self.slot_bytes - _HEADER
        return max(1, -(-nbytes // payload))

    def claim(self, peer: int, nbytes: int, *, sending: bool) -> int:
        """Reserve the sequence numbers of one message to or from ``peer``; the first one."""
        self.group.heap._check_peer(peer)
        if peer == self.group.rank:
            raise UsageError("send/recv to this rank itself would wait forever", source="peer")
        with self._lock:
            table = self._sent if sending else self._taken
            first = table[peer]
            table[peer] += self.chunks(nbytes)
        return first

    def send(self, data: np.ndarray, dst: int, first: int) -> None:
        """Deliver ``data`` (uint8, contiguous) to ``dst`` as chunks ``first``, ``first + 1``..."""
        g, n, me = self.group, self.group.world_size, self.group.rank
        payload = self.slot_bytes - _HEADER
        slot = self.slots[me * self.slot_bytes : (me + 1) * self.slot_bytes]  # mine, on dst
        for k in range(self.chunks(data.size)):
            piece = data[k * payload : (k + 1) * payload]
            self._wait(n + dst, first + k, dst, "send")
            chunk = np.empty(_HEADER + piece.size, dtype=np.uint8)
            chunk[:_HEADER] = np.array([data.size], dtype=np.int64).view(np.uint8)
            chunk[_HEADER:] = piece
            g.put(slot[: chunk.size], chunk, dst)
            g.quiet()
            g.atomic_fetch_add(self.counters, 1, dst, me)

    def recv(self, out: np.ndarray, src: int, first: int) -> None:
        """Fill ``out`` (uint8, contiguous) with the message ``src`` sent as chunks ``first``..."""
        g, n, me = self.group, self.group.world_size, self.group.rank
        payload = self.slot_bytes - _HEADER
        slot = self.slots[src * self.slot_bytes : (src + 1) * self.slot_bytes]
        header = np.empty(_HEADER, dtype=np.uint8)
        for k in range(self.chunks(out.size)):
            self._wait(src, first + k + 1, src, "recv")
            g.get(slot[:_HEADER], me, header)
            sent = int(header.view(np.int64)[0])
            if sent != out.size:
                raise UsageError(
                    f"recv: rank {src} sent {sent} bytes, the buffer holds {out.size}",
                    source="recv",
                )
            piece = out[k * payload : (k + 1) * payload]
            g.get(slot[_HEADER : _HEADER + piece.size], me, piece)
            g.atomic_fetch_add(self.counters, 1, src, n + me)

    def _read(self, index: int) -> int:
        return self.group.atomic_fetch_add(self.counters, 0, self.group.rank, index)

    def _wait(self, index: int, target: int, peer: int, what: str) -> None:
        """Spin, then sleep, until counter ``index`` here reaches ``target``."""
        timeout_s = float(self.group.transport.timeout_s)
        deadline = time.monotonic() + timeout_s
        delay = 0.0
        while self._read(index) < target:
            self.group.transport.check()
            if time.monotonic() > deadline:
                raise RankTimeout(
                    f"{what}: rank {self.group.rank} waited {timeout_s:g} s for rank {peer}",
                    rank=peer,
                )
            time.sleep(delay)
            delay = min(_MAX_SLEEP_S, delay * 2 or 1e-6)


def mailbox(group: ProcessGroup) -> Mailbox | None:
    """The group's mailbox, None before :func:`enable`."""
    box = getattr(group, "mailbox", None)
    return box if isinstance(box, Mailbox) else None


def enable(group: ProcessGroup, slot_bytes: int = DEFAULT_SLOT_BYTES) -> Mailbox:
    """Collective: create the group's mailbox (every rank calls it, once)."""
    box = mailbox(group)
    if box is None:
        box = group.mailbox = Mailbox(group, slot_bytes)
    return box


def _ready(group: ProcessGroup, array: np.ndarray, what: str, *, writable: bool) -> Mailbox:
    box = mailbox(group)
    if box is None:
        raise UsageError(
            f"{what} needs the point-to-point mailbox, made by init_process_group() on every "
            "rank (or scaleup.runtime.p2p.enable(group()))",
            source=what,
        )
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise UsageError(f"{what} takes a contiguous numpy array", source=what)
    if writable and not array.flags.writeable:
        raise UsageError(f"{what} writes into its array; this one is read-only", source=what)
    group._drain()  # queued async collectives first, in issue order
    return box


def _source(src: int | None) -> int:
    if src is None:
        raise UsageError("recv needs src: receiving from any rank is not supported", source="src")
    return int(src)


def send(group: ProcessGroup, array: np.ndarray, dst: int) -> None:
    """Send ``array`` to ``dst``; returns once its last chunk is in ``dst``'s slot."""
    box = _ready(group, array, "send", writable=False)
    data = array.reshape(-1).view(np.uint8)
    box.send(data, int(dst), box.claim(int(dst), data.size, sending=True))


def recv(group: ProcessGroup, array: np.ndarray, src: int | None) -> int:
    """Receive ``src``'s next message into ``array``; returns ``src``."""
    box = _ready(group, array, "recv", writable=True)
    peer = _source(src)
    out = array.reshape(-1).view(np.uint8)
    box.recv(out, peer, box.claim(peer, out.size, sending=False))
    return peer


def isend(group: ProcessGroup, array: np.ndarray, dst: int) -> Work:
    """:func:`send` on its own thread; the message's place in order is taken now."""
    box = _ready(group, array, "isend", writable=False)
    data = array.reshape(-1).view(np.uint8)
    first = box.claim(int(dst), data.size, sending=True)
    work = Work()
    run_async(lambda: box.send(data, int(dst), first), work, f"scaleup-isend{group.rank}")
    return work


def irecv(group: ProcessGroup, array: np.ndarray, src: int | None) -> Work:
    """:func:`recv` on its own thread; the message's place in order is taken now."""
    box = _ready(group, array, "irecv", writable=True)
    peer = _source(src)
    out = array.reshape(-1).view(np.uint8)
    first = box.claim(peer, out.size, sending=False)
    work = Work()
    run_async(lambda: box.recv(out, peer, first), work, f"scaleup-irecv{group.rank}")
    return work


def run_async(body: Callable[[], None], work: Work, name: str) -> None:
    """Run ``body`` on a daemon thread; ``work`` finishes with its error (or None)."""
    threading.Thread(target=work._complete, args=(body,), name=name, daemon=True).start()
