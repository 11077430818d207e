"""The runtime correctness matrix: every algorithm x collective x root x transport x world size 2-5.

Each (transport, world size) is one launch that runs every case inside the ranks
(:mod:`matrix_workers`); integers must match the numpy reference bit for bit. The base matrix
covers every registered algorithm on every transport (mpi at world sizes 2 and 3, when mpiexec
runs here; ``slow`` adds 4 and 5). ``slow`` also runs the extra cases (channels/chunks variants
and a third count) on shm at every world size, and on pipe, local and mpi at world size 3: the
variants change the schedule, which every transport runs the same way, and the base matrix
already runs every transport; running the extras everywhere cost ~100 s of a ~6 min suite.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import matrix_workers
import pytest

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.runtime import launch

WORLDS = [2, 3, 4, 5]
RunMpi = Callable[..., subprocess.CompletedProcess[str]]
#: (transport, world size) pairs that run the extra cases.
EXTRA_RUNS = [
    *(("shm", w) for w in WORLDS),
    ("pipe", 3),
    ("local", 3),
]


def _run(transport: str, world: int, extra: bool) -> None:
    results = launch(matrix_workers.run_matrix, world, extra, transport=transport, timeout_s=60)
    failures = [f for per_rank in results for f in per_rank["failures"]]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:15])
    assert results[0]["algorithms"] == sorted(ALGORITHMS)  # no algorithm was filtered out


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("transport", ["shm", "pipe", "local"])
def test_matrix(transport: str, world: int) -> None:
    _run(transport, world, extra=False)


@pytest.mark.slow
@pytest.mark.parametrize(("transport", "world"), EXTRA_RUNS)
def test_matrix_extra(transport: str, world: int) -> None:
    _run(transport, world, extra=True)


@pytest.mark.mpi
@pytest.mark.parametrize(
    "world", [2, 3, *(pytest.param(w, marks=pytest.mark.slow) for w in WORLDS[2:])]
)  # mpiexec ranks busy-poll: 4 and 5 of them on 2 cores take ~10-20 s each
def test_matrix_mpi(run_mpi: RunMpi, world: int) -> None:
    proc = run_mpi(world, "matrix_workers.py")
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.mpi
@pytest.mark.slow
def test_matrix_mpi_extra(run_mpi: RunMpi) -> None:
    proc = run_mpi(3, "matrix_workers.py", "--extra")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_every_runtime_collective_of_every_algorithm_is_a_case() -> None:
    """The matrix is not silently smaller than the registry: each offered pair appears."""
    offered = {
        (name, c)
        for name, a in ALGORITHMS.items()
        for c in a.collectives
        if c in matrix_workers.RUNTIME_COLLECTIVES
    }
    covered = {
        (case.algo.partition(":")[0], case.collective)
        for world in WORLDS
        for case in matrix_workers.cases(world)
    }
    assert covered == offered
    roots = {case.root for case in matrix_workers.cases(5) if case.collective == "reduce"}
    assert roots == set(range(5))


@pytest.mark.parametrize("world", WORLDS)
def test_extra_cases_are_new_and_vary_every_algorithm(world: int) -> None:
    """The slow run adds cases, never repeats a base one, and varies channels/chunks of every
    algorithm that takes them (hierarchical's variants are its node sizes, all in the base)."""

    def key(c: matrix_workers.Case) -> tuple[object, ...]:
        return (c.algo, c.collective, c.count, c.root, c.redop, c.dtype)

    base = {key(c) for c in matrix_workers.cases(world)}
    extra = [key(c) for c in matrix_workers.cases(world, extra=True)]
    assert extra
    assert not base & set(extra)
    varied = {str(k[0]).partition(":")[0] for k in extra if "channels=2" in str(k[0])}
    assert varied == set(ALGORITHMS) - {"hierarchical"}
    assert {k[2] for k in extra} == {1, 3 * world + 1, 7 * world}
