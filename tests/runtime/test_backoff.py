"""The flag waits' backoff: spin, then yield, then bounded exponential sleeps (issue 14)."""

from __future__ import annotations

import threading
import time

import pytest

from scaleup.errors import RankTimeout
from scaleup.runtime.control import Backoff, ControlBlock, Waiter


def _rank(pause: float | None) -> float:
    """Order of the actions: spin < yield < sleep (by length)."""
    return -1.0 if pause is None else pause


@pytest.mark.parametrize("spin_polls", [0, 50, 2000])
def test_schedule_is_monotone_and_bounded(spin_polls: int) -> None:
    backoff = Backoff()
    last = spin_polls + backoff.yield_polls + 100
    pauses = [backoff.pause_s(poll, spin_polls) for poll in range(1, last)]
    assert all(_rank(a) <= _rank(b) for a, b in zip(pauses, pauses[1:], strict=False))
    assert max(_rank(p) for p in pauses) == backoff.max_sleep_s
    assert pauses[:spin_polls] == [None] * spin_polls
    assert pauses[spin_polls : spin_polls + backoff.yield_polls] == [0.0] * backoff.yield_polls
    assert pauses[spin_polls + backoff.yield_polls] == backoff.min_sleep_s
    assert backoff.pause_s(10**9, spin_polls) == backoff.max_sleep_s  # no overflow


def test_spin_budget_shrinks_after_sleeping_and_recovers() -> None:
    backoff = Backoff()
    spin = backoff.spin_polls
    for _ in range(20):  # waits that slept
        spin = backoff.next_spin_polls(spin, spin + backoff.yield_polls + 1)
    assert spin == backoff.min_spin_polls
    for _ in range(20):  # waits answered while spinning
        spin = backoff.next_spin_polls(spin, 1)
    assert spin == backoff.spin_polls
    # threads never spin
    assert Backoff(spin_polls=0).next_spin_polls(0, 1) == 0
    assert Backoff(spin_polls=0).next_spin_polls(0, 10**6) == 0


def _waiter(timeout_s: float, **kwargs: object) -> Waiter:
    control = ControlBlock(bytearray(ControlBlock.size_bytes(2)), 2)
    return Waiter(control, 0, timeout_s, threads=True, **kwargs)  # type: ignore[arg-type]


def test_flag_set_while_sleeping_is_seen_promptly() -> None:
    waiter = _waiter(30.0, backoff=Backoff(spin_polls=0, yield_polls=10, max_sleep_s=1e-3))
    index = waiter.control.progress_index(1)
    woke: list[float] = []

    def wait() -> None:
        waiter.wait_ge(index, 1, peer=1)
        woke.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)  # long past the yields: the waiter sleeps at the cap now
    assert not woke
    set_at = time.monotonic()
    waiter.words[index] = 1
    thread.join(timeout=10)
    assert woke, "the waiter did not return"
    assert woke[0] - set_at < 0.5  # the cap is 1 ms; generous for a loaded machine
    assert waiter.words[waiter.control.waiting_index(0)] == 0  # no longer "waiting for"


def test_deadline_still_checked_while_sleeping() -> None:
    waiter = _waiter(0.2)
    start = time.monotonic()
    with pytest.raises(RankTimeout, match="rank 1 made no progress"):
        waiter.wait_ge(waiter.control.progress_index(1), 1, peer=1)
    assert time.monotonic() - start < 5.0
    assert waiter.control.abort_state() is not None
