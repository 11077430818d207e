"""Every collective x dtype x op on world sizes 1-4, sizes 0, 1, odd, 64 MiB: equal to numpy."""

from __future__ import annotations

import pytest
import runtime_workers as _workers

from scaleup.runtime import launch

SIZES = [0, 1, 7, 1000]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("transport", ["shm", "local"])
def test_every_collective_dtype_op(transport: str, world: int) -> None:
    results = launch(_workers.sweep, world, SIZES, transport=transport, timeout_s=20)
    failures = [f for per_rank in results for f in per_rank]
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("world", [1, 2, 3])
def test_every_collective_dtype_op_pipe(world: int) -> None:
    results = launch(_workers.sweep, world, SIZES, transport="pipe", timeout_s=20)
    failures = [f for per_rank in results for f in per_rank]
    assert not failures, "\n".join(failures[:10])


def test_pipe_world_4_sum() -> None:
    results = launch(
        _workers.sweep,
        4,
        [1, 7, 1000],
        ["float32", "int64"],
        redops=("sum",),
        transport="pipe",
        timeout_s=20,
    )
    assert not [f for per_rank in results for f in per_rank]


@pytest.mark.parametrize("algo", ["ring", "tree", "recursive"])
def test_library_algorithms(algo: str) -> None:
    pytest.importorskip("scaleup.collectives.algorithms")
    from scaleup.collectives.algorithms import algorithms_for

    collectives = [c for c in _workers.ALL if algo in algorithms_for(c)]
    if not collectives:
        pytest.skip(f"{algo} offers none of the runtime's collectives")
    for world in (2, 3, 4):
        results = launch(
            _workers.sweep,
            world,
            [1, 7, 1000],
            ["float32", "int32"],
            collectives,
            ("sum", "max"),
            algo,
            transport="shm",
            timeout_s=20,
        )
        failures = [f for per_rank in results for f in per_rank]
        assert not failures, "\n".join(failures[:10])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("transport", "dtype"), [("shm", "float32"), ("shm", "int32"), ("pipe", "float32")]
)
def test_64_mib_all_reduce(transport: str, dtype: str) -> None:
    results = launch(_workers.big_all_reduce, 2, 16 << 20, dtype, transport=transport, timeout_s=60)
    assert results == [None, None]
