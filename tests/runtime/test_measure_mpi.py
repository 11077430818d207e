"""bench_rows for the runtime, and the mpi transport under mpiexec (skipped without MPI)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from scaleup.report import BenchRow
from scaleup.runtime.measure import bench_rows


@pytest.mark.parametrize("transport", ["shm", "pipe"])
def test_bench_rows(transport: str) -> None:
    rows = bench_rows(transport, 2, "all_reduce", [4096, 1 << 16], iters=5, warmup=1)
    assert [r.bytes for r in rows] == [4096, 1 << 16]
    assert all(isinstance(r, BenchRow) and r.runtime == transport and r.time_us > 0 for r in rows)
    assert rows[0].busbw_gb_per_s == pytest.approx(rows[0].algbw_gb_per_s)  # 2(n-1)/n = 1 at n=2
    assert rows[0].topology == f"local-{transport}"


def test_bench_rows_blocked_collective() -> None:
    """The count column is the per-rank block, as nccl-tests and the simulated rows print it."""
    rows = bench_rows("shm", 2, "all_gather", [1000], iters=3, warmup=1)
    assert rows[0].count == 125
    assert rows[0].bytes == 1000


@pytest.mark.mpi
def test_mpi_transport_two_ranks(run_mpi: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    proc = run_mpi(2, "mpi_worker.py")
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.mpi
@pytest.mark.usefixtures("mpiexec")
def test_mpi_bench_rows() -> None:
    rows = bench_rows("mpi", 2, "all_reduce", [4096], iters=3, warmup=1)
    assert rows[0].runtime == "mpi"
    assert rows[0].time_us > 0
