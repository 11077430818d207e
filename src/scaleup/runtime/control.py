"""The control block every rank of a launch shares, and bounded waits on its words.

The control block is an array of int64 words, one 64-byte cache line per slot so ranks never
share a line: the abort word, then per rank a progress counter, a barrier counter, a
"waiting for" word (peer + 1 while the rank is blocked on that peer, else 0) and a "sleeping on"
word (index + 1 of the word it blocks on in a futex, else 0). "Waiting for" is how a timeout
names the rank that hung rather than the rank that waited: follow it from the awaited peer until
a rank that is not waiting. Flags are written with single aligned 8-byte stores (atomic on every
64-bit CPU) and read by polling: spin, then yield, then sleep (:class:`Backoff`). Where Linux
futexes are reachable (:mod:`scaleup.runtime.futex`) the sleep blocks until the writer, which
checks the "sleeping on" words after each store (:meth:`ControlBlock.wake`), wakes it, so a
rank that gave its core away runs again as soon as its data is there; elsewhere it sleeps on a
timer with a bounded exponential backoff. See ``docs/runtime.md`` for the memory-ordering
argument. For processes the block lives in a /dev/shm segment
(:func:`scaleup.runtime.shm.create_control`); for threads in a bytearray.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from typing import NamedTuple

from scaleup.errors import Interrupted, RankFailed, RankTimeout, TransportError
from scaleup.runtime.futex import futex

__all__ = [
    "ABORT_DIED",
    "ABORT_INTERRUPTED",
    "ABORT_RAISED",
    "ABORT_TIMEOUT",
    "AbortState",
    "Backoff",
    "ControlBlock",
    "Waiter",
]

#: int64 words per cache line: every flag lives alone on its line.
LINE_WORDS = 8
#: abort kinds stored in the abort word.
ABORT_RAISED, ABORT_DIED, ABORT_TIMEOUT, ABORT_INTERRUPTED = 1, 2, 3, 4


class AbortState(NamedTuple):
    """Why the run stops: ``kind`` (``ABORT_*``), the rank to blame, who noticed, the signal."""

    kind: int
    rank: int | None
    reporter: int | None
    signum: int


class ControlBlock:
    """The shared int64 words: abort word; per rank progress, barrier and waiting-for words.

    The abort word packs :class:`AbortState` into one 8-byte store (kind | (rank + 1) << 8 |
    (reporter + 1) << 24 | signum << 40), so readers never see half of it.
    """

    def __init__(self, buffer: object, world_size: int) -> None:
        self.world_size = world_size
        self._base = memoryview(buffer)  # type: ignore[arg-type]
        self.words = self._base.cast("q")
        if len(self.words) < self.size_bytes(world_size) // 8:
            raise TransportError("control block too small for the world size")
        self.futex = futex()
        self._anchor: ctypes.Array[ctypes.c_char] | None = None
        self._address = 0
        if self.futex is not None and not self._base.readonly:
            self._anchor = (ctypes.c_char * len(self._base)).from_buffer(self._base)
            self._address = ctypes.addressof(self._anchor)
        self._sleep_words = tuple(self.sleeping_index(r) for r in range(world_size))

    @staticmethod
    def size_bytes(world_size: int) -> int:
        return 8 * LINE_WORDS * (1 + 4 * world_size)

    @staticmethod
    def progress_index(rank: int) -> int:
        return LINE_WORDS * (1 + rank)

    def barrier_index(self, rank: int) -> int:
        return LINE_WORDS * (1 + self.world_size + rank)

    def waiting_index(self, rank: int) -> int:
        return LINE_WORDS * (1 + 2 * self.world_size + rank)

    def sleeping_index(self, rank: int) -> int:
        """The word that says which word ``rank`` sleeps on in a futex (index + 1; 0: none)."""
        return LINE_WORDS * (1 + 3 * self.world_size + rank)

    def sleep(self, rank: int, index: int, seen: int, timeout_s: float) -> bool:
        """Block ``rank`` until ``words[index]`` may have changed from ``seen`` (a
        :meth:`wake`), for at most ``timeout_s``; False, having done nothing, without futexes."""
        if self._anchor is None or self.futex is None:
            return False
        words, mark = self.words, self.sleeping_index(rank)
        words[mark] = index + 1  # announced before the word is read again: a writer that
        try:  # stores after this read sees the mark and wakes us
            if words[index] == seen:
                self.futex.wait(self._address + 8 * index, seen, timeout_s)
        finally:
            words[mark] = 0
        return True

    def wake(self, index: int) -> None:
        """After a store to ``words[index]``: wake the ranks that sleep on it (one read per rank
        when none does)."""
        if self._anchor is None or self.futex is None:
            return
        words, target = self.words, index + 1
        for mark in self._sleep_words:
            if words[mark] == target:
                self.futex.wake(self._address + 8 * index)
                return

    def set_abort(
        self, rank: int | None, kind: int, *, reporter: int | None = None, signum: int = 0
    ) -> None:
        """Tell every rank to stop because of ``rank`` (None: nobody's fault); first wins."""
        if self.words[0] == 0:
            culprit = 0 if rank is None else rank + 1
            by = 0 if reporter is None else reporter + 1
            self.words[0] = kind | culprit << 8 | by << 24 | signum << 40

    def abort_state(self) -> AbortState | None:
        """Why the run stops, or ``None`` while nothing failed."""
        value = self.words[0]
        if value == 0:
            return None
        culprit, by = (value >> 8) & 0xFFFF, (value >> 24) & 0xFFFF
        return AbortState(
            value & 0xFF, culprit - 1 if culprit else None, by - 1 if by else None, value >> 40
        )

    def hung_rank(self, peer: int) -> tuple[int, list[int], bool]:
        """Follow "waiting for" from ``peer`` to a rank that is not waiting.

        Returns that rank, the chain of ranks from ``peer`` to it, and whether the chain closed
        into a cycle instead (ranks waiting for each other: then the rank is ``peer`` and the
        chain ends with the rank it closes on).
        """
        chain = [peer]
        while (nxt := self.words[self.waiting_index(chain[-1])] - 1) >= 0:
            chain.append(nxt)
            if nxt in chain[:-1]:
                return peer, chain, True
        return chain[-1], chain, False

    def release(self) -> None:
        self._anchor = None  # the ctypes view exports the buffer: gone before the views close
        self.words.release()
        self._base.release()


_WHAT = {ABORT_DIED: "died", ABORT_TIMEOUT: "made no progress", ABORT_RAISED: "raised"}


@dataclass(frozen=True)
class Backoff:
    """What a waiter does on poll ``k`` of one wait: spin, yield the CPU, or sleep.

    Spinning answers fastest while the peer has a core of its own; yielding (``sched_yield``)
    lets a peer on this core run but keeps the waiter runnable, so on a busy machine the two
    still share the core with every other task; sleeping takes the waiter off the run queue.
    Sleeps double from ``min_sleep_s`` up to ``max_sleep_s``, so a flag set during a sleep is
    seen within ``max_sleep_s`` (plus the kernel's timer slack, 50 us by default on Linux).
    The spin budget adapts (:meth:`next_spin_polls`): a wait that had to sleep halves it, down
    to ``min_spin_polls``, since spinning while the peer has no core only delays it; a wait
    answered before sleeping doubles it back, up to ``spin_polls``.
    """

    #: most polls that only spin (0: yield at once, for threads and oversubscribed ranks).
    spin_polls: int = 2000
    #: fewest, once waits keep ending asleep (a poll is about 0.1 us of Python).
    min_spin_polls: int = 50
    #: polls after the spinning that yield before the first sleep: a wait under ~1 ms never
    #: sleeps (a timer wakeup costs 60-200 us on a VM, up to a scheduler slice under load).
    yield_polls: int = 1000
    min_sleep_s: float = 1e-6
    max_sleep_s: float = 64e-6
    #: where futexes exist (:mod:`scaleup.runtime.futex`) a sleep blocks until the peer's store
    #: wakes it, for at most this long (a missed wake, the abort and deadline checks)
    block_s: float = 2e-3

    def pause_s(self, poll: int, spin_polls: int) -> float | None:
        """For poll ``poll`` (1-based) under a spin budget of ``spin_polls``: None to spin, 0.0
        to yield, else seconds to sleep.

        Monotone in ``poll`` (None before 0.0 before any sleep) and never above ``max_sleep_s``.
        """
        if poll <= spin_polls:
            return None
        doublings = poll - spin_polls - self.yield_polls - 1
        if doublings < 0:
            return 0.0
        if self.min_sleep_s * 2.0 ** min(doublings, 64) >= self.max_sleep_s:
            return self.max_sleep_s
        return self.min_sleep_s * 2.0**doublings

    def next_spin_polls(self, spin_polls: int, polls: int) -> int:
        """The spin budget after a wait of ``polls`` polls under a budget of ``spin_polls``."""
        if polls > spin_polls + self.yield_polls:  # it slept
            return max(min(self.min_spin_polls, self.spin_polls), spin_polls // 2)
        return min(self.spin_polls, max(1, spin_polls) * 2)


class Waiter:
    """Bounded waits on control-block words: never a hang, and cheap on a busy machine.

    Polls one word following a :class:`Backoff`: spins for up to ``spin_polls`` polls (fewer
    while recent waits had to sleep), yields the CPU
    (``sched_yield`` for processes, ``time.sleep(0)`` for threads, which drops the GIL) for
    ``yield_polls`` more, then sleeps with an exponential backoff capped at ``max_sleep_s``, so
    a rank whose peer waits for a core gives its own away instead of competing for it. Every 256
    polls, and on every poll once it sleeps, it checks the abort word, the deadline and (for
    processes) whether the launcher is still alive. While blocked it publishes whom it waits
    for; on a timeout it blames the rank at the end of that chain (the one not waiting), sets
    the abort word and raises :class:`RankTimeout` naming it.
    """

    def __init__(
        self,
        control: ControlBlock,
        rank: int,
        timeout_s: float,
        *,
        threads: bool = False,
        oversubscribed: bool = False,
        launcher_pid: int | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.control = control
        self.words = control.words
        self.rank = rank
        self.timeout_s = timeout_s
        if backoff is None:
            backoff = Backoff(spin_polls=0) if (threads or oversubscribed) else Backoff()
        self.backoff = backoff
        self.spin_polls = backoff.spin_polls
        self._yield = (lambda: time.sleep(0)) if threads else os.sched_yield
        self.launcher_pid = launcher_pid
        self._waiting = control.waiting_index(rank)

    def check(self, peer: int | None = None) -> None:
        """Raise if some rank failed, the run was interrupted or the launcher is gone."""
        state = self.control.abort_state()
        if state is not None:
            if state.kind == ABORT_INTERRUPTED:
                raise Interrupted(
                    f"the launcher was interrupted; rank {self.rank} stops", signum=state.signum
                )
            raise RankFailed(
                f"rank {state.rank} {_WHAT.get(state.kind, 'failed')}; rank {self.rank} stops",
                rank=state.rank,
            )
        if self.launcher_pid is not None and os.getppid() != self.launcher_pid:
            raise RankFailed(
                f"launcher {self.launcher_pid} is gone; rank {self.rank} stops", rank=peer
            )

    def begin(self, peer: int) -> None:
        """Publish that this rank is now blocked on ``peer``."""
        self.words[self._waiting] = peer + 1

    def end(self) -> None:
        self.words[self._waiting] = 0

    def timed_out(self, peer: int) -> RankTimeout:
        """The error for a wait on ``peer`` past the timeout, blaming the hung rank (abort set)."""
        hung, chain, cycle = self.control.hung_rank(peer)
        self.control.set_abort(hung, ABORT_TIMEOUT, reporter=self.rank)
        if cycle:
            ranks = " -> ".join(map(str, chain))
            message = f"ranks wait for each other in a cycle ({ranks}) for {self.timeout_s:g} s"
        else:
            via = ", ".join(map(str, chain[:-1]))
            through = f" through rank{'s' * (len(chain) > 2)} {via}" if via else ""
            message = (
                f"rank {hung} made no progress for {self.timeout_s:g} s; "
                f"rank {self.rank} waited for it{through}"
            )
        return RankTimeout(message, rank=hung)

    def peer_gone(self, peer: int) -> RankFailed:
        """The error for a peer whose connection closed (abort set: it died)."""
        self.control.set_abort(peer, ABORT_DIED, reporter=self.rank)
        return RankFailed(f"rank {peer} closed its connection; rank {self.rank} stops", rank=peer)

    def wait_ge(self, index: int, value: int, peer: int) -> None:
        """Wait until ``words[index] >= value`` (``peer`` owns the word)."""
        words = self.words
        control = self.control
        backoff = self.backoff
        spin_polls = self.spin_polls
        sleep_after = spin_polls + backoff.yield_polls
        polls = 0
        deadline = 0.0
        self.begin(peer)
        try:
            while words[index] < value:
                polls += 1
                if polls > spin_polls:
                    pause_s = backoff.pause_s(polls, spin_polls)
                    if pause_s:
                        seen = words[index]
                        if seen >= value:
                            break
                        if not control.sleep(self.rank, index, seen, backoff.block_s):
                            time.sleep(pause_s)
                    else:
                        self._yield()
                if polls & 255 == 0 or polls > sleep_after:
                    self.check(peer)
                    now = time.monotonic()
                    if deadline == 0.0:
                        deadline = now + self.timeout_s
                    elif now > deadline:
                        raise self.timed_out(peer)
        finally:
            self.end()
        self.spin_polls = backoff.next_spin_polls(spin_polls, polls)
