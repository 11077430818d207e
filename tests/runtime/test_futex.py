"""Futex sleeps in the control block (:mod:`scaleup.runtime.futex`): a blocked waiter runs when
its peer's store wakes it, across threads and across processes sharing a mapping, and a missed
wake costs at most the block timeout."""

from __future__ import annotations

import mmap
import os
import threading
import time

import pytest

from scaleup.runtime.control import Backoff, ControlBlock, Waiter
from scaleup.runtime.futex import futex

pytestmark = pytest.mark.skipif(futex() is None, reason="no futex(2) on this machine")

#: sleep at once, and block for far longer than the test waits: only a wake can end it early
BLOCKING = Backoff(spin_polls=0, min_spin_polls=0, yield_polls=0, block_s=5.0)


def _wait_after_store(control: ControlBlock, *, wake: bool, backoff: Backoff) -> float:
    waiter = Waiter(control, 0, 30.0, threads=True, backoff=backoff)
    index = control.progress_index(1)

    def writer() -> None:
        time.sleep(0.2)
        control.words[index] = 7
        if wake:
            control.wake(index)

    thread = threading.Thread(target=writer)
    thread.start()
    start = time.perf_counter()
    waiter.wait_ge(index, 7, 1)
    elapsed = time.perf_counter() - start
    thread.join()
    return elapsed


def test_a_store_and_wake_ends_a_five_second_block_at_once() -> None:
    control = ControlBlock(bytearray(ControlBlock.size_bytes(2)), 2)
    try:
        assert 0.19 < _wait_after_store(control, wake=True, backoff=BLOCKING) < 2.0
        assert control.words[control.sleeping_index(0)] == 0  # the mark is cleared
    finally:
        control.release()


def test_a_missed_wake_costs_at_most_the_block_timeout() -> None:
    control = ControlBlock(bytearray(ControlBlock.size_bytes(2)), 2)
    short = Backoff(spin_polls=0, min_spin_polls=0, yield_polls=0, block_s=0.05)
    try:
        assert _wait_after_store(control, wake=False, backoff=short) < 1.0
    finally:
        control.release()


def test_a_wake_crosses_processes_on_a_shared_mapping() -> None:
    """A forked child blocks on the parent's word (a MAP_SHARED mapping, as /dev/shm is); the
    parent's store and wake end the child's 5 s block within a fraction of it."""
    size = ControlBlock.size_bytes(2)
    mm = mmap.mmap(-1, size)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait, report the time, exit without pytest's teardown
        code = 1
        try:
            control = ControlBlock(mm, 2)
            waiter = Waiter(control, 0, 30.0, backoff=BLOCKING)
            os.write(write_fd, b"r")
            start = time.perf_counter()
            waiter.wait_ge(control.progress_index(1), 7, 1)
            os.write(write_fd, f"{time.perf_counter() - start:.6f}".encode())
            control.release()
            code = 0
        finally:
            os._exit(code)
    control = ControlBlock(mm, 2)
    try:
        assert os.read(read_fd, 1) == b"r"
        time.sleep(0.2)
        index = control.progress_index(1)
        control.words[index] = 7
        control.wake(index)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert float(os.read(read_fd, 64)) < 2.0
    finally:
        control.release()
        os.close(read_fd)
        os.close(write_fd)
        mm.close()
