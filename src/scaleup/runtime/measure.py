"""Timing real collectives as nccl-tests does: rows for ``scaleup bench --runtime shm|pipe|mpi``.

Per size: ``warmup`` untimed calls, then ``iters`` timed ones, each started right after a barrier;
an iteration's time is the slowest rank's, and the row reports the median over iterations.
Iterations scale with size (:func:`default_iters`). Buffers are symmetric (``alloc``), so the
memory-semantic path is zero-copy, and are touched once before timing so that page faults are
not measured. ``mpi`` rows run ``python -m scaleup.runtime.measure`` under ``mpiexec``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from scaleup.collectives.spec import (
    BLOCKED_COLLECTIVES,
    CollectiveSpec,
    busbw_factor,
    nccl_size_and_count,
    numpy_dtype,
)
from scaleup.errors import TransportError, UsageError
from scaleup.report import BenchRow

__all__ = ["bench_rows", "default_iters", "mpiexec_path"]


def default_iters(nbytes: int) -> tuple[int, int]:
    """(warm-up, timed) iterations for a message of ``nbytes``."""
    if nbytes <= 64 * 1024:
        return 20, 200
    if nbytes <= 1 << 20:
        return 5, 50
    if nbytes <= 16 << 20:
        return 3, 15
    return 2, 7


def mpiexec_path() -> str | None:
    """The mpiexec next to this Python (the mpich wheel puts it there), else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def _count(collective: str, nbytes: int, itemsize: int, n: int) -> int:
    return nccl_size_and_count(collective, nbytes, itemsize, n)[2]


def _time_sizes(
    collective: str,
    sizes: list[int],
    dtype_name: str,
    algo: str | None,
    iters: int | None,
    warmup: int | None,
    redop: str,
    root: int = 0,
) -> list[list[float]]:
    """On every rank: the per-iteration seconds for each size (called inside a launched rank)."""
    from scaleup import runtime as rt

    rt.init()
    n = rt.world_size()
    dtype = numpy_dtype(dtype_name)
    counts = [_count(collective, s, dtype.itemsize, n) for s in sizes]
    biggest = max([*counts, 1])
    small = biggest // n + 1 if collective == "all_gather" else biggest
    inp = rt.alloc(biggest if collective != "all_gather" else small, dtype)
    out = (
        rt.alloc(biggest if collective != "reduce_scatter" else small, dtype)
        if collective in BLOCKED_COLLECTIVES
        else inp
    )
    inp[:] = 1 if redop == "prod" else 0
    out[:] = 1 if redop == "prod" else 0
    times = []
    for count in counts:
        spec = CollectiveSpec(collective, n, count, root=root, redop=redop)
        i, o = inp[: spec.input_count], out[: spec.output_count]
        calls: dict[str, Callable[[], object]] = {
            "all_reduce": partial(rt.all_reduce, i, redop, algo=algo),
            "reduce": partial(rt.reduce, i, root, redop, algo=algo),
            "broadcast": partial(rt.broadcast, i, root, algo=algo),
            "reduce_scatter": partial(rt.reduce_scatter, o, i, redop, algo=algo),
            "all_gather": partial(rt.all_gather, o, i, algo=algo),
            "all_to_all": partial(rt.all_to_all, o, i, algo=algo),
        }
        call = calls[collective]
        w, k = default_iters(count * dtype.itemsize)
        w, k = (w if warmup is None else warmup), (k if iters is None else iters)
        for _ in range(w):
            call()
        samples = []
        for _ in range(k):
            rt.barrier()
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        times.append(samples)
    return times


def _rows(
    transport: str,
    nranks: int,
    collective: str,
    sizes: list[int],
    dtype_name: str,
    algo: str | None,
    redop: str,
    root: int,
    per_rank: list[list[list[float]]],
) -> list[BenchRow]:
    dtype = numpy_dtype(dtype_name)
    rows = []
    for k, size in enumerate(sizes):
        nbytes, count, _ = nccl_size_and_count(collective, size, dtype.itemsize, nranks)
        slowest = np.max(np.array([rank_times[k] for rank_times in per_rank]), axis=0)
        time_s = float(np.median(slowest)) if len(slowest) else float("nan")
        algbw = nbytes / time_s / 1e9 if time_s > 0 else 0.0
        rows.append(BenchRow(
            topology=f"local-{transport}", collective=collective, bytes=nbytes, count=count,
            dtype=dtype_name, redop=redop if collective in _REDUCING else "none",
            root=root if collective in ("broadcast", "reduce") else -1,  # as nccl-tests prints them
            time_us=time_s * 1e6, algbw_gb_per_s=algbw,
            busbw_gb_per_s=algbw * busbw_factor(collective, nranks), linkbw_gb_per_s=None,
            algo=algo or "direct", proto="simple", channels=1, nranks=nranks, runtime=transport,
        ))  # fmt: skip
    return rows


_REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})


def bench_rows(
    transport: str,
    nranks: int,
    collective: str,
    sizes_bytes: list[int],
    dtype: str = "float32",
    algo: str | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    redop: str = "sum",
    root: int = 0,
) -> list[BenchRow]:
    """Measure ``collective`` on ``nranks`` real ranks over ``transport``; one row per size.

    Parameters
    ----------
    transport
        ``shm``, ``pipe``, ``local`` or ``mpi`` (runs under mpiexec).
    nranks
        World size.
    collective, sizes_bytes, dtype, algo, redop, root
        As ``scaleup bench``: sizes are nccl-tests sizes (bytes of the size column); ``root``
        is the root of broadcast and reduce.
    iters, warmup
        Timed and untimed iterations per size; default scaled by size (:func:`default_iters`).
    """
    if collective == "send_recv":
        raise UsageError("the runtime does not implement send_recv", source="op")
    sizes = [int(s) for s in sizes_bytes]
    numpy_dtype(dtype)
    if transport == "mpi":
        per_rank = _mpi_times(nranks, collective, sizes, dtype, algo, iters, warmup, redop, root)
    else:
        from scaleup.runtime.launch import launch

        per_rank = launch(
            _time_sizes,
            nranks,
            collective,
            sizes,
            dtype,
            algo,
            iters,
            warmup,
            redop,
            root,
            transport=transport,
            timeout_s=120.0,
        )
    return _rows(transport, nranks, collective, sizes, dtype, algo, redop, root, per_rank)


def _mpi_times(nranks: int, *args: Any) -> list[list[list[float]]]:
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise TransportError("no mpiexec found (pip install mpich mpi4py)", source="mpi")
    proc = subprocess.run(
        [
            mpiexec,
            "-n",
            str(nranks),
            sys.executable,
            "-m",
            "scaleup.runtime.measure",
            json.dumps(args),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise TransportError(
            f"mpiexec failed ({proc.returncode}): {proc.stderr.strip()[-500:]}", source="mpi"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _mpi_main(argv: list[str]) -> int:
    """Entry under mpiexec: time the sizes, gather every rank's samples, rank 0 prints JSON."""
    from scaleup import runtime as rt

    args = json.loads(argv[0])
    pg = rt.init(transport="mpi")
    times = _time_sizes(*args)
    gathered = pg.transport.comm.gather(times, root=0)  # type: ignore[attr-defined]
    rt.shutdown()
    if pg.rank == 0:
        sys.stdout.write(json.dumps(gathered) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_mpi_main(sys.argv[1:]))
