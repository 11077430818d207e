"""How a launch ends: ranks die with their launcher; SIGINT and SIGTERM stop the launch cleanly.

- **Ranks die with their launcher.** On Linux every rank asks the kernel for SIGKILL when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``, through ctypes; kept across ``exec``, so ``scaleup
  run`` sets it between fork and exec). Elsewhere a daemon thread polls ``os.getppid()`` and
  kills its own process when the parent changes. So a SIGKILLed launcher leaves no orphan, even
  a rank busy outside any collective; its segments are reclaimed by the next launch or by
  ``scaleup run --cleanup`` (:func:`scaleup.runtime.shm.reclaim_dead_runs`).
- **The launcher catches SIGINT and SIGTERM** (:class:`SignalGuard`, as torchrun turns both into
  one exception): the handler only records the signal; the supervision loop sees it within one
  poll, sets the abort word, lets the ranks stop, kills what is left, removes every segment and
  raises :class:`~scaleup.errors.Interrupted`. A signal that arrives once the ranks are gone is
  delivered again when the guard is left, to the handler that was there before.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["SignalGuard", "die_with_parent", "pdeathsig_preexec", "reset_worker_signals"]

_PR_SET_PDEATHSIG = 1
_WATCH_S = 0.2
#: The signals a launch stops on; anything else keeps its default meaning.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULTS: dict[int, Any] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGTERM: signal.SIG_DFL,
}


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` on Linux, else None (resolved before any fork: no dlopen in a child)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def _set_pdeathsig(parent_pid: int) -> bool:
    """SIGKILL this process when its parent dies; False when the kernel offers no such thing."""
    prctl = _prctl()
    if prctl is None or prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:  # the parent died before the call: nobody will signal us
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_WATCH_S)
    os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(parent_pid: int) -> None:
    """Make this process die (SIGKILL) when ``parent_pid``, its launcher, dies."""
    if not _set_pdeathsig(parent_pid):
        threading.Thread(
            target=_watch_parent, args=(parent_pid,), name="scaleup-watch-parent", daemon=True
        ).start()


def pdeathsig_preexec(parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess`` that sets the parent-death signal, or None off Linux."""
    if _prctl() is None:
        return None

    def preexec() -> None:
        _set_pdeathsig(parent_pid)

    return preexec


class SignalGuard:
    """Records SIGINT/SIGTERM during a launch instead of dying or raising at a random point.

    Installed only in the main thread and only over default handlers (a program that ignores
    SIGINT, or handles it itself, keeps its choice). ``signum`` is the first signal caught;
    :meth:`consume` marks it handled (the launcher raised :class:`Interrupted` for it).
    """

    def __init__(self) -> None:
        self.signum = 0
        self._consumed = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.signum:
            self.signum = signum

    def consume(self) -> int:
        """The signal caught (0 if none), now handled: leaving the guard will not deliver it."""
        self._consumed = True
        return self.signum

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is _DEFAULTS[signum]:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self.signum and not self._consumed and self.signum in self._previous:
            signal.raise_signal(self.signum)


def reset_worker_signals() -> None:
    """In a forked rank: the default SIGINT/SIGTERM handlers, not the launcher's guard."""
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if isinstance(getattr(handler, "__self__", None), SignalGuard):
            signal.signal(signum, _DEFAULTS[signum])
