"""Memory semantics vs message passing, measured in one run on this machine.

Compares, for a float32 sum all_reduce on N local ranks (default 2):

- ``shm``: scaleup's runtime, direct loads/stores into peers' shared memory (zero-copy symmetric
  buffers, two-shot direct schedule above 64 KiB, one-shot below);
- ``pipe``: the same runtime and schedules by message passing through the kernel;
- ``gloo``: ``torch.distributed`` all_reduce on the gloo backend (skipped without torch);
- ``mpi``: ``MPI.Allreduce`` (mpi4py + the mpich wheel) under mpiexec (skipped without MPI);
- the memory-bandwidth bound: numpy copy bandwidth measured here with N concurrent processes;
  the direct algorithm moves S(3n-1)/n bytes per rank (reduce: read n slices of S/n, write one;
  gather: read and write n-1 slices), so ``time >= S(3n-1)/n / B`` and
  ``busbw <= 2(n-1)/n * S / time``.

Every figure is the median over iterations of the slowest rank (each iteration after a barrier).
Usage: ``python bench/bench_runtime.py [--ranks 2] [--out results.md]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np

from scaleup.runtime.measure import bench_rows, default_iters, mpiexec_path

SIZES = [4 << 10, 1 << 20, 16 << 20, 64 << 20]


def _copy_rate(nbytes: int, barrier: Any, out: Any) -> None:
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.zeros_like(a)
    np.copyto(b, a)
    samples = []
    for _ in range(7):
        barrier.wait()
        start = time.perf_counter()
        np.copyto(b, a)
        samples.append(time.perf_counter() - start)
    out.put(2 * nbytes / float(np.median(samples)))


def copy_bandwidth(processes: int, nbytes: int = 256 << 20) -> float:
    """Per-process numpy copy bandwidth (read + write bytes/s), ``processes`` running at once."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_copy_rate, args=(nbytes, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return float(np.mean(rates))


def _gloo_worker(rank: int, world: int, port: int, sizes: list[int], out: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    times = []
    for size in sizes:
        x = torch.zeros(size // 4, dtype=torch.float32)
        warmup, iters = default_iters(size)
        for _ in range(warmup):
            dist.all_reduce(x)
        samples = []
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            samples.append(time.perf_counter() - start)
        times.append(samples)
    out.put((rank, times))
    dist.destroy_process_group()


def gloo_times(world: int, sizes: list[int]) -> list[float] | None:
    """Median slowest-rank seconds per size for gloo, or None without torch."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return None
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_gloo_worker, args=(r, world, port, sizes, out)) for r in range(world)
    ]
    for p in procs:
        p.start()
    per_rank = dict(out.get(timeout=1200) for _ in procs)
    for p in procs:
        p.join()
    return _slowest_median([per_rank[r] for r in range(world)])


def _slowest_median(per_rank: list[list[list[float]]]) -> list[float]:
    return [
        float(np.median(np.max(np.array([t[k] for t in per_rank]), axis=0)))
        for k in range(len(per_rank[0]))
    ]


def _mpi_allreduce_main(sizes: list[int]) -> None:
    """Under mpiexec: out-of-place MPI.Allreduce timings; rank 0 prints JSON."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    times = []
    for size in sizes:
        x = np.zeros(size // 4, dtype=np.float32)
        y = np.zeros_like(x)
        warmup, iters = default_iters(size)
        for _ in range(warmup):
            comm.Allreduce(x, y, MPI.SUM)
        samples = []
        for _ in range(iters):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(x, y, MPI.SUM)
            samples.append(time.perf_counter() - start)
        times.append(samples)
    gathered = comm.gather(times, root=0)
    if comm.Get_rank() == 0:
        print(json.dumps(_slowest_median(gathered)))


def mpi_times(world: int, sizes: list[int]) -> list[float] | None:
    mpiexec = mpiexec_path()
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    if mpiexec is None:
        return None
    proc = subprocess.run(
        [mpiexec, "-n", str(world), sys.executable, __file__, "--mpi-allreduce", json.dumps(sizes)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument("--mpi-allreduce", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mpi_allreduce is not None:
        _mpi_allreduce_main(json.loads(args.mpi_allreduce))
        return
    n = args.ranks
    load_before = _load()
    copy_bw = copy_bandwidth(n)
    copy_bw_1 = copy_bandwidth(1)
    results: dict[str, list[float] | None] = {}
    for transport in ("shm", "pipe"):
        rows = bench_rows(transport, n, "all_reduce", SIZES)
        results[transport] = [r.time_us * 1e-6 for r in rows]
    results["gloo"] = gloo_times(n, SIZES)
    results["mpi"] = mpi_times(n, SIZES)
    load_after = _load()
    factor = 2 * (n - 1) / n
    bound = [size * (3 * n - 1) / n / copy_bw for size in SIZES]
    names = [k for k, v in results.items() if v is not None]
    lines = [
        "## Runtime: memory semantics vs message passing (bench/bench_runtime.py)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}. Load average (1/5/15 min) "
        f"before: {load_before}, after: {load_after} (the machine is shared).",
        f"Command: `python bench/bench_runtime.py --ranks {n}`; "
        f"all_reduce, float32, sum, {n} ranks; "
        "median over iterations of the slowest rank.",
        f"numpy copy bandwidth (read+write counted): {copy_bw_1 / 1e9:.1f} GB/s one process, "
        f"{copy_bw / 1e9:.1f} GB/s per process with {n} at once. "
        "Bound: direct moves S(3n-1)/n bytes "
        f"per rank, so time >= S(3n-1)/n / {copy_bw / 1e9:.1f} GB/s.",
        "",
        "| size | "
        + " | ".join(f"{k} time (us)" for k in names)
        + " | bound time (us) | "
        + " | ".join(f"{k} busbw" for k in names)
        + " | bound busbw |",
        "|---|" + "---|" * (2 * len(names) + 2),
    ]
    for k, size in enumerate(SIZES):
        times = [results[name][k] for name in names]  # type: ignore[index]
        lines.append(
            f"| {size // 1024} KiB | "
            + " | ".join(f"{t * 1e6:,.1f}" for t in times)
            + f" | {bound[k] * 1e6:,.1f} | "
            + " | ".join(f"{size / t / 1e9 * factor:.2f}" for t in times)
            + f" | {size / bound[k] / 1e9 * factor:.2f} |"
        )
    shm = results["shm"]
    assert shm is not None
    lines += ["", "Targets (64 MiB, 4 KiB):"]
    lines.append(
        f"- shm 64 MiB: {shm[-1] * 1e3:.1f} ms = {bound[-1] / shm[-1]:.0%} of the bound "
        "(target >= 50%)"
    )
    for other, target in (("mpi", 2), ("gloo", 3)):
        if results.get(other):
            ratio = results[other][-1] / shm[-1]  # type: ignore[index]
            lines.append(f"- {other} / shm at 64 MiB: {ratio:.2f}x (target >= {target}x)")
    lines.append(f"- shm 4 KiB: {shm[0] * 1e6:.1f} us (target <= 50 us)")
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(report)


if __name__ == "__main__":
    main()
