"""put, get, get_buffer, atomic_fetch_add, barrier, async work, argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup import runtime as rt
from scaleup.errors import RankFailed, TransportError, UsageError

TRANSPORTS = ["shm", "pipe", "local"]


def _one_sided() -> tuple[list[int], int, bool]:
    rt.init()
    me, n = rt.rank(), rt.world_size()
    cell = rt.alloc(2, "int64")
    x = rt.alloc((2, 3), "float64")
    rt.barrier()
    olds = [rt.atomic_fetch_add(cell, 1, 0, index=1) for _ in range(25)]
    right = (me + 1) % n
    rt.put(x, np.full((2, 3), me), right)
    rt.fence()
    rt.quiet()
    rt.barrier()
    got = rt.get(x, right)
    ok = bool(np.all(x == (me - 1) % n) and np.all(got == me))
    total = int(cell[1])
    rt.barrier()
    return olds, total, ok


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_put_get_atomic(transport: str) -> None:
    world = 3
    results = rt.launch(_one_sided, world, transport=transport, timeout_s=10)
    olds = sorted(o for per_rank, _, _ in results for o in per_rank)
    assert olds == list(range(25 * world))  # every fetch saw a distinct value: atomic
    assert results[0][1] == 25 * world
    assert all(ok for _, _, ok in results)


def _views() -> bool:
    rt.init()
    me, n = rt.rank(), rt.world_size()
    x = rt.alloc(8, "int32")
    x[:] = me
    rt.barrier()
    ok = all(np.all(rt.get_buffer(x, p) == p) for p in range(n))
    rt.barrier()  # everyone has looked before anyone stores into a peer
    sub = x[2:5]
    rt.get_buffer(sub, (me + 1) % n)[:] = 100 + me  # a store into the peer's memory
    rt.barrier()
    ok = ok and bool(np.all(x[2:5] == 100 + (me - 1) % n)) and bool(np.all(x[:2] == me))
    rt.barrier()
    return ok


@pytest.mark.parametrize("transport", ["shm", "local"])
def test_get_buffer_is_a_live_view(transport: str) -> None:
    assert all(rt.launch(_views, 3, transport=transport, timeout_s=10))


def _no_views() -> None:
    rt.init()
    rt.get_buffer(rt.alloc(4, "int32"), 0)


def test_pipe_has_no_load_store_views() -> None:
    with pytest.raises(RankFailed, match="TransportError"):
        rt.launch(_no_views, 2, transport="pipe", timeout_s=5)
    assert issubclass(TransportError, Exception)


def _async() -> bool:
    rt.init()
    me, n = rt.rank(), rt.world_size()
    a = rt.alloc(1000, "float32")
    b = np.full(10, me, dtype=np.int64)
    a[:] = me
    w1 = rt.all_reduce(a, async_op=True)
    w2 = rt.all_reduce(b, op="max", async_op=True)
    assert w1 is not None
    assert w2 is not None
    w1.wait()
    w2.wait()
    rt.barrier()
    return bool(np.all(a == sum(range(n))) and np.all(b == n - 1) and w1.is_completed())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_op_returns_work(transport: str) -> None:
    assert all(rt.launch(_async, 2, transport=transport, timeout_s=10))


def test_single_rank_init_without_launcher() -> None:
    results = rt.launch(lambda: (rt.rank(), rt.world_size()), 1, transport="local")
    assert results == [(0, 1)]


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda: rt.all_reduce(np.ones(3), op="mean"), "unknown reduction"),
        (lambda: rt.all_gather(np.ones(3), np.ones(2)), "all_gather"),
        (lambda: rt.broadcast(np.ones(3), src=5), "root"),
        (lambda: rt.put(np.ones(3), np.ones(3), 0), "symmetric"),
        (lambda: rt.alloc((-1,), "float32"), "non-negative"),
    ],
)
def test_bad_arguments_raise_usage_errors(fn, match: str) -> None:  # noqa: ANN001
    def body() -> str:
        rt.init()
        with pytest.raises(UsageError, match=match):
            fn()
        return "ok"

    assert rt.launch(body, 1, transport="local") == ["ok"]


def test_launch_rejects_bad_arguments() -> None:
    with pytest.raises(UsageError):
        rt.launch(lambda: None, 0)
    with pytest.raises(UsageError, match="mpiexec"):
        rt.launch(lambda: None, 2, transport="mpi")
