"""bench_rows for the runtime, and the mpi transport under mpiexec (skipped without MPI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaleup.report import BenchRow
from scaleup.runtime.measure import bench_rows, mpiexec_path


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
    assert rows[0].count == 125 and rows[0].bytes == 1000


def _mpi_or_skip() -> str:
    pytest.importorskip("mpi4py")
    mpiexec = mpiexec_path()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    probe = subprocess.run(
        [mpiexec, "-n", "1", sys.executable, "-c", "pass"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("mpiexec does not run here")
    return mpiexec


@pytest.mark.mpi
def test_mpi_transport_two_ranks() -> None:
    mpiexec = _mpi_or_skip()
    here = Path(__file__).resolve().parent
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, str(here / "mpi_worker.py")],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.mpi
def test_mpi_bench_rows() -> None:
    _mpi_or_skip()
    rows = bench_rows("mpi", 2, "all_reduce", [4096], iters=3, warmup=1)
    assert rows[0].runtime == "mpi" and rows[0].time_us > 0
