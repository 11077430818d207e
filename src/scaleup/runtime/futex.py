"""Blocking on a word of shared memory until its writer says it changed: Linux futexes.

A rank whose peer is slow sleeps in :meth:`Futex.wait` on the control-block word it waits for,
and the peer, after storing a new value there, calls :meth:`Futex.wake` on the same address, so
the sleeper runs as soon as there is something to read instead of at its next timer tick (which,
on a loaded machine, is a scheduler slice away). This is what ``futex(2)`` is for, and it works
across processes on a ``MAP_SHARED`` mapping (the non-private operations are used). It is
reached through ``ctypes``' ``syscall``; where that is not possible (not Linux, an unknown
architecture, no libc) :func:`futex` returns None and the waiter sleeps on a timer as before.

A wait always has a timeout: a wake that is missed (the writer checked for sleepers just before
the sleeper announced itself) costs at most that timeout, never a hang.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform
import sys
from collections.abc import Callable

__all__ = ["Futex", "futex"]

#: ``SYS_futex`` by machine (asm/unistd.h).
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "arm64": 98}
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_WAKE_ALL = 0x7FFFFFFF


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Futex:
    """``futex(2)`` WAIT and WAKE on 32-bit words at raw addresses (see the module)."""

    def __init__(self, syscall: Callable[..., int], number: int) -> None:
        self._syscall = syscall
        self._number = number

    def wait(self, address: int, expected: int, timeout_s: float) -> None:
        """Sleep while the 32-bit word at ``address`` holds ``expected``: until a wake, the
        timeout, a signal, or at once if it already differs."""
        seconds = max(0.0, timeout_s)
        spec = _Timespec(int(seconds), int((seconds % 1.0) * 1e9))
        self._syscall(
            self._number, ctypes.c_void_p(address), _FUTEX_WAIT,
            ctypes.c_uint32(expected & 0xFFFFFFFF), ctypes.byref(spec), None, 0,
        )  # fmt: skip

    def wake(self, address: int) -> None:
        """Wake every sleeper on the word at ``address``."""
        self._syscall(self._number, ctypes.c_void_p(address), _FUTEX_WAKE, _WAKE_ALL, None, None, 0)


@functools.cache
def futex() -> Futex | None:
    """The futex calls of this machine, or None where they cannot be reached (or
    ``SCALEUP_NO_FUTEX=1`` turns them off)."""
    if not sys.platform.startswith("linux") or os.environ.get("SCALEUP_NO_FUTEX") == "1":
        return None
    number = _SYS_FUTEX.get(platform.machine())
    name = ctypes.util.find_library("c")
    if number is None or name is None:
        return None
    try:
        syscall = ctypes.CDLL(name, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    return Futex(syscall, number)
