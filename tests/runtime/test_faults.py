"""A rank that raises, dies or hangs makes the others fail fast, naming it; nothing is left over."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from scaleup import runtime as rt
from scaleup.errors import RankFailed, RankTimeout
from scaleup.runtime.shm import PREFIX, list_segments

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


def _hang_on_1() -> None:
    rt.init()
    if rt.rank() == 1:
        time.sleep(60)
    rt.all_reduce(np.ones(10))


@pytest.mark.parametrize("transport", ["shm", "pipe", "local"])
def test_raising_worker_is_named(transport: str) -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed, match="rank 1 raised ValueError: boom") as info:
        rt.launch(_raise_on_1, 3, transport=transport, timeout_s=TIMEOUT_S)
    assert info.value.rank == 1
    assert time.monotonic() - start < TIMEOUT_S
    assert "boom" in info.value.remote_traceback


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_killed_worker_is_named(transport: str) -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed, match="rank 1 died") as info:
        rt.launch(_die_on_1, 2, transport=transport, timeout_s=TIMEOUT_S)
    assert info.value.rank == 1
    assert time.monotonic() - start < TIMEOUT_S


def test_hanging_worker_times_out() -> None:
    start = time.monotonic()
    with pytest.raises(RankTimeout) as info:
        rt.launch(_hang_on_1, 2, transport="shm", timeout_s=1.0)
    assert info.value.rank == 1
    assert time.monotonic() - start < 1.0 + 3.0  # timeout + grace to kill the sleeper


def test_segments_unlinked_after_failures() -> None:
    before = set(list_segments(PREFIX))
    for fn in (_raise_on_1, _die_on_1):
        with pytest.raises(RankFailed):
            rt.launch(fn, 2, transport="shm", timeout_s=TIMEOUT_S)
    assert set(list_segments(PREFIX)) <= before


def test_segments_are_private_and_unique() -> None:
    def modes() -> list[tuple[str, int]]:
        rt.init()
        rt.alloc(10, "int32")
        rt.barrier()
        prefix = rt.group().transport.prefix
        names = list_segments(prefix)
        result = [(name, os.stat(f"/dev/shm/{name}").st_mode & 0o777) for name in names]
        rt.barrier()
        return result

    first = rt.launch(modes, 2)[0]
    second = rt.launch(modes, 2)[0]
    assert first and all(mode == 0o600 for _, mode in first)
    assert {n for n, _ in first}.isdisjoint({n for n, _ in second})
    assert all(str(os.getpid()) in name for name, _ in first)
