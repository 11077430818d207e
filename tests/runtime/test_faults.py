"""A rank that raises, dies or hangs makes the others fail fast, naming it; nothing is left over.

(Signals to the launcher: test_launcher_signals.py; ``scaleup run``: test_run_cli.py.)
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from scaleup import runtime as rt
from scaleup.errors import RankFailed, RankTimeout
from scaleup.runtime.control import ABORT_TIMEOUT, ControlBlock, Waiter
from scaleup.runtime.shm import PREFIX, list_segments, shm_dir

TIMEOUT_S = 5.0


def _raise_on_1() -> None:
    rt.init()
    x = rt.alloc(1000, "float32")
    if rt.rank() == 1:
        raise ValueError("boom")
    rt.all_reduce(x)


def _die_on_1() -> None:
    rt.init()
    x = rt.alloc(1000, "float32")
    if rt.rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    rt.all_reduce(x)


def _hang(rank: int, algo: str | None = None) -> None:
    rt.init()
    x = rt.alloc(1000, "float32")
    if rt.rank() == rank:
        time.sleep(60)
    rt.all_reduce(x, algo=algo)


def _leftovers() -> set[str]:
    """Segments of the runs this process launched."""
    return set(list_segments(f"{PREFIX}{os.getpid()}-"))


@pytest.mark.parametrize("transport", ["shm", "pipe", "local"])
def test_raising_worker_is_named(transport: str) -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed, match="rank 1 raised ValueError: boom") as info:
        rt.launch(_raise_on_1, 3, transport=transport, timeout_s=TIMEOUT_S)
    assert info.value.rank == 1
    assert time.monotonic() - start < TIMEOUT_S
    assert "boom" in info.value.remote_traceback


@pytest.mark.parametrize("transport", ["shm", "pipe"])
@pytest.mark.parametrize("world", [2, 3])
def test_killed_worker_is_named(transport: str, world: int) -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed, match=r"rank 1 died \(signal 9, SIGKILL\)") as info:
        rt.launch(_die_on_1, world, transport=transport, timeout_s=TIMEOUT_S)
    assert info.value.rank == 1
    assert time.monotonic() - start < TIMEOUT_S


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_hung_rank_is_named_not_the_rank_waiting_for_it(transport: str) -> None:
    # on a ring rank 0 waits for rank 3, which waits for the hung rank 2
    with pytest.raises(RankTimeout, match="rank 2 made no progress for 1 s") as info:
        rt.launch(_hang, 4, 2, "ring", transport=transport, timeout_s=1.0)
    assert info.value.rank == 2


def test_hang_ends_within_timeout_plus_5_s() -> None:
    timeout_s = 6.0  # the hung rank used to be killed only after twice the timeout
    start = time.monotonic()
    with pytest.raises(RankTimeout) as info:
        rt.launch(_hang, 2, 1, transport="shm", timeout_s=timeout_s)
    assert info.value.rank == 1
    assert time.monotonic() - start < timeout_s + 5.0
    assert not multiprocessing.active_children()


def test_local_hang_names_the_hung_thread() -> None:
    with pytest.raises(RankTimeout, match="rank 1 made no progress") as info:
        rt.launch(_hang, 3, 1, "ring", transport="local", timeout_s=0.5)
    assert info.value.rank == 1


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_segments_unlinked_after_failures(transport: str) -> None:
    before = _leftovers()
    for fn in (_raise_on_1, _die_on_1):
        with pytest.raises(RankFailed):
            rt.launch(fn, 2, transport=transport, timeout_s=TIMEOUT_S)
    with pytest.raises(RankTimeout):
        rt.launch(_hang, 2, 1, transport=transport, timeout_s=0.5)
    assert _leftovers() <= before
    assert not multiprocessing.active_children()


def test_segments_are_private_and_unique() -> None:
    def modes() -> list[tuple[str, int]]:
        rt.init()
        rt.alloc(10, "int32")
        rt.barrier()
        prefix = rt.group().transport.prefix
        names = list_segments(prefix)
        result = [(name, os.stat(shm_dir() / name).st_mode & 0o777) for name in names]
        rt.barrier()
        return result

    first = rt.launch(modes, 2)[0]
    second = rt.launch(modes, 2)[0]
    assert first
    assert all(mode == 0o600 for _, mode in first)
    assert {n for n, _ in first}.isdisjoint({n for n, _ in second})
    assert all(str(os.getpid()) in name for name, _ in first)


def test_timeout_follows_the_waiting_chain_to_the_hung_rank() -> None:
    control = ControlBlock(bytearray(ControlBlock.size_bytes(5)), 5)
    for rank, peer in [(0, 3), (3, 4), (4, 2)]:  # rank 2 waits for nobody
        control.words[control.waiting_index(rank)] = peer + 1
    error = Waiter(control, 0, 1.5, threads=True).timed_out(3)
    assert error.rank == 2
    assert (
        str(error) == "rank 2 made no progress for 1.5 s; rank 0 waited for it through ranks 3, 4"
    )
    state = control.abort_state()
    assert (state.kind, state.rank, state.reporter) == (ABORT_TIMEOUT, 2, 0)


def test_ranks_waiting_for_each_other_are_a_cycle() -> None:
    control = ControlBlock(bytearray(ControlBlock.size_bytes(3)), 3)
    for rank, peer in [(0, 1), (1, 2), (2, 1)]:
        control.words[control.waiting_index(rank)] = peer + 1
    error = Waiter(control, 0, 1.0, threads=True).timed_out(1)
    assert error.rank == 1
    assert "in a cycle (1 -> 2 -> 1)" in str(error)


def _mismatched() -> None:
    rt.init()
    x = np.ones(4)
    rt.all_reduce(x)
    if rt.rank() == 0:  # rank 1 returns and waits in the launcher's final barrier
        rt.all_reduce(x)


def test_mismatched_collectives_are_reported_as_a_cycle() -> None:
    with pytest.raises(RankTimeout, match=r"in a cycle \((0 -> 1 -> 0|1 -> 0 -> 1)\)"):
        rt.launch(_mismatched, 2, transport="local", timeout_s=0.5)
