"""Shared-memory segments on ``/dev/shm`` and the control block that synchronises the ranks.

Segments are plain files in a tmpfs (``/dev/shm``, or ``$SCALEUP_SHM_DIR``) mapped with
``mmap(MAP_SHARED)``: every rank maps every peer's segment, so the mappings form one pooled
address space. We deliberately do not use ``multiprocessing.shared_memory``: under ``fork`` all
ranks share one ``resource_tracker`` and Python 3.11 has no ``track=False``, so attach/unregister
races log ``KeyError`` tracebacks and a killed run leaks segments. Instead names are predictable
and owned by the launcher::

    scaleup-<launcher pid>-<8 random hex>-ctrl          the control block
    scaleup-<launcher pid>-<8 random hex>-r<rank>-a<k>  allocation k of rank <rank>

A segment is created ``O_EXCL`` with mode 0600 (private to the user). Whoever creates a segment
unlinks it when freed or closed, and the launcher unlinks every name under its run prefix after
reaping the workers, which covers exceptions, SIGINT and SIGKILL of a worker.

The control block is an array of int64 words, one 64-byte cache line per slot so ranks never
share a line: the abort word, one progress counter and one barrier counter per rank. Flags are
written with single aligned 8-byte stores (atomic on every 64-bit CPU) and read by spinning; see
``docs/runtime.md`` for the memory-ordering argument.
"""

from __future__ import annotations

import mmap
import os
import secrets
import time
from pathlib import Path

from scaleup.errors import RankFailed, RankTimeout, TransportError

__all__ = [
    "PREFIX",
    "ControlBlock",
    "Segment",
    "Waiter",
    "list_segments",
    "new_run_prefix",
    "shm_dir",
    "unlink_run",
]

PREFIX = "scaleup-"
#: int64 words per cache line: every flag lives alone on its line.
LINE_WORDS = 8
#: abort kinds stored in word 1 of the control block.
ABORT_RAISED, ABORT_DIED, ABORT_TIMEOUT, ABORT_INTERRUPTED = 1, 2, 3, 4


def shm_dir() -> Path:
    """Directory holding the segments: ``$SCALEUP_SHM_DIR`` or ``/dev/shm``."""
    return Path(os.environ.get("SCALEUP_SHM_DIR", "/dev/shm"))


def new_run_prefix(pid: int | None = None) -> str:
    """A unique name prefix for one launch: ``scaleup-<pid>-<random>-``."""
    return f"{PREFIX}{os.getpid() if pid is None else pid}-{secrets.token_hex(4)}-"


def list_segments(prefix: str = PREFIX) -> list[str]:
    """Names of the segments in :func:`shm_dir` that start with ``prefix``."""
    directory = shm_dir()
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(prefix))


def unlink_run(prefix: str) -> int:
    """Unlink every segment whose name starts with ``prefix``; returns how many were removed."""
    if not prefix.startswith(PREFIX) or len(prefix) <= len(PREFIX):
        raise TransportError(f"refusing to unlink with prefix {prefix!r}")
    removed = 0
    for name in list_segments(prefix):
        try:
            os.unlink(shm_dir() / name)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


class Segment:
    """One mapped shared-memory file: create it (owner) or attach to it (peer)."""

    def __init__(self, name: str, nbytes: int, *, create: bool) -> None:
        self.name = name
        self.nbytes = int(nbytes)
        self.path = shm_dir() / name
        self.owner = create
        try:
            if create:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                os.fchmod(fd, 0o600)
                os.ftruncate(fd, max(self.nbytes, 8))  # sparse: pages are committed on first touch
            else:
                fd = os.open(self.path, os.O_RDWR)
        except OSError as error:
            raise TransportError(
                f"cannot {'create' if create else 'attach'} segment {name}: {error}"
            ) from error
        self.fd = fd
        self.mm = mmap.mmap(fd, max(self.nbytes, 8))

    def unlink(self) -> None:
        """Remove the name (the mapping stays valid until every process unmaps it)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unmap and close; numpy views still alive keep the mapping (then it is left to exit)."""
        try:
            self.mm.close()
        except BufferError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


class ControlBlock:
    """The shared int64 words: abort flag, per-rank progress and barrier counters."""

    def __init__(self, buffer: object, world_size: int) -> None:
        self.world_size = world_size
        self._base = memoryview(buffer)  # type: ignore[arg-type]
        self.words = self._base.cast("q")
        if len(self.words) < self.size_bytes(world_size) // 8:
            raise TransportError("control block too small for the world size")

    @staticmethod
    def size_bytes(world_size: int) -> int:
        return 8 * LINE_WORDS * (1 + 2 * world_size)

    @staticmethod
    def progress_index(rank: int) -> int:
        return LINE_WORDS * (1 + rank)

    def barrier_index(self, rank: int) -> int:
        return LINE_WORDS * (1 + self.world_size + rank)

    def set_abort(self, rank: int, kind: int) -> None:
        """Tell every rank to stop: ``rank`` failed (first writer wins)."""
        if self.words[0] == 0:
            self.words[1] = kind
            self.words[0] = rank + 1

    def abort_state(self) -> tuple[int, int] | None:
        """``(failed rank, kind)`` once some rank failed, else ``None``."""
        value = self.words[0]
        return None if value == 0 else (value - 1, self.words[1])

    def release(self) -> None:
        self.words.release()
        self._base.release()


class Waiter:
    """Bounded spin-waits on control-block words: never a hang.

    Spins on one word; after ``spin_limit`` polls it yields the CPU on every poll
    (``sched_yield`` for processes, ``time.sleep(0)`` for threads, which drops the GIL). Every
    256 polls it checks the abort word, the deadline and (for processes) whether the launcher is
    still alive, and raises :class:`RankFailed` or :class:`RankTimeout` naming the rank.
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
    ) -> None:
        self.control = control
        self.words = control.words
        self.rank = rank
        self.timeout_s = timeout_s
        self.spin_limit = 0 if (threads or oversubscribed) else 2000
        self._yield = (lambda: time.sleep(0)) if threads else os.sched_yield
        self.launcher_pid = launcher_pid

    def check(self, peer: int | None = None) -> None:
        """Raise if some rank failed or the launcher is gone."""
        state = self.control.abort_state()
        if state is not None:
            failed, kind = state
            what = {
                ABORT_DIED: "died",
                ABORT_TIMEOUT: "timed out",
                ABORT_INTERRUPTED: "was interrupted",
            }
            raise RankFailed(
                f"rank {failed} {what.get(kind, 'failed')}; rank {self.rank} stops", rank=failed
            )
        if self.launcher_pid is not None and os.getppid() != self.launcher_pid:
            raise RankFailed(
                f"launcher {self.launcher_pid} is gone; rank {self.rank} stops", rank=peer
            )

    def wait_ge(self, index: int, value: int, peer: int) -> None:
        """Wait until ``words[index] >= value`` (``peer`` owns the word)."""
        words = self.words
        polls = 0
        deadline = 0.0
        while words[index] < value:
            polls += 1
            if polls > self.spin_limit:
                self._yield()
            if polls & 255 == 0:
                self.check(peer)
                now = time.monotonic()
                if deadline == 0.0:
                    deadline = now + self.timeout_s
                elif now > deadline:
                    raise RankTimeout(
                        f"rank {self.rank} waited {self.timeout_s:g} s for rank {peer}", rank=peer
                    )
