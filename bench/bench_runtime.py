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

``--load idle,busy`` measures each size on an idle machine and again while a background load
runs: one busy-loop process per CPU (``while True: pass``, default priority), started by this
script before the busy measurements and killed after them. The report puts the loads side by
side; a library that is not installed (torch for gloo, mpi4py/mpiexec for MPI) gets a
"not installed" cell rather than a missing column.

Usage: ``python bench/bench_runtime.py [--ranks 2] [--load idle,busy] [--sizes 4K,64M]
[--iters N] [--out results.md]``.
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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from scaleup.runtime.measure import bench_rows, default_iters, mpiexec_path

SIZES = [4 << 10, 1 << 20, 16 << 20, 64 << 20]
LOADS = ("idle", "busy")
#: The cell of a library that is not installed.
NOT_INSTALLED = "not installed"
#: Per library: seconds per size, or why there are none (``NOT_INSTALLED``, ``failed``).
Times = list[float] | str


def _iters(size: int, iters: int | None) -> tuple[int, int]:
    """(warm-up, timed) iterations: the defaults, or ``iters`` timed after 2 warm-ups."""
    return default_iters(size) if iters is None else (2, iters)


def _spin() -> None:
    while True:
        pass


@contextmanager
def background_load(processes: int) -> Iterator[None]:
    """Keep ``processes`` busy-loop processes running inside the block; kill them after."""
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_spin, daemon=True) for _ in range(processes)]
    for p in procs:
        p.start()
    try:
        time.sleep(0.5)  # let the scheduler see them
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.join()


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
    """Per-process numpy copy bandwidth (read + write bytes/s) with ``processes``
    running at once."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_copy_rate, args=(nbytes, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return float(np.mean(rates))


def _gloo_worker(
    rank: int, world: int, port: int, sizes: list[int], iters: int | None, out: Any
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    times = []
    for size in sizes:
        x = torch.zeros(size // 4, dtype=torch.float32)
        warmup, timed = _iters(size, iters)
        for _ in range(warmup):
            dist.all_reduce(x)
        samples = []
        for _ in range(timed):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            samples.append(time.perf_counter() - start)
        times.append(samples)
    out.put((rank, times))
    dist.destroy_process_group()


def gloo_times(world: int, sizes: list[int], iters: int | None = None) -> Times:
    """Median slowest-rank seconds per size for gloo, or ``NOT_INSTALLED`` without torch."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return NOT_INSTALLED
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_gloo_worker, args=(r, world, port, sizes, iters, out))
        for r in range(world)
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


def _mpi_allreduce_main(sizes: list[int], iters: int | None) -> None:
    """Under mpiexec: out-of-place MPI.Allreduce timings; rank 0 prints JSON."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    times = []
    for size in sizes:
        x = np.zeros(size // 4, dtype=np.float32)
        y = np.zeros_like(x)
        warmup, timed = _iters(size, iters)
        for _ in range(warmup):
            comm.Allreduce(x, y, MPI.SUM)
        samples = []
        for _ in range(timed):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(x, y, MPI.SUM)
            samples.append(time.perf_counter() - start)
        times.append(samples)
    gathered = comm.gather(times, root=0)
    if comm.Get_rank() == 0:
        print(json.dumps(_slowest_median(gathered)))


def mpi_times(world: int, sizes: list[int], iters: int | None = None) -> Times:
    """Median slowest-rank seconds per size for ``MPI.Allreduce``, or why there are none."""
    mpiexec = mpiexec_path()
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return NOT_INSTALLED
    if mpiexec is None:
        return NOT_INSTALLED
    command = [mpiexec, "-n", str(world), sys.executable, __file__]
    proc = subprocess.run(
        [*command, "--mpi-allreduce", json.dumps([sizes, iters])],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if proc.returncode != 0:
        return "failed"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _parse_size(text: str) -> int:
    """``4K``, ``4KiB``, ``64M``, ``1G`` or plain bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _size_label(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def measure(n: int, sizes: list[int], iters: int | None) -> dict[str, Times]:
    """Seconds per size for every library, at whatever load the machine has now."""
    results: dict[str, Times] = {}
    for transport in ("shm", "pipe"):
        rows = bench_rows(transport, n, "all_reduce", sizes, iters=iters, warmup=iters and 2)
        results[transport] = [r.time_us * 1e-6 for r in rows]
    results["mpi"] = mpi_times(n, sizes, iters)
    results["gloo"] = gloo_times(n, sizes, iters)
    return results


def _cell(times: Times, k: int, scale: float = 1e6, fmt: str = ",.1f") -> str:
    return times if isinstance(times, str) else format(times[k] * scale, fmt)


def _busbw(times: Times, k: int, size: int, factor: float) -> str:
    return times if isinstance(times, str) else f"{size / times[k] / 1e9 * factor:.2f}"


def report(
    n: int,
    sizes: list[int],
    by_load: dict[str, dict[str, Times]],
    loads: dict[str, str],
    copy_bw: float,
    copy_bw_1: float,
    command: str,
) -> str:
    """The markdown report: one table per load, then the loads side by side, then targets."""
    factor = 2 * (n - 1) / n
    bound = [size * (3 * n - 1) / n / copy_bw for size in sizes]
    names = ["shm", "pipe", "mpi", "gloo"]
    lines = [
        "## Runtime: memory semantics vs message passing (bench/bench_runtime.py)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        f"(nproc {len(os.sched_getaffinity(0))}), Python {platform.python_version()}, "
        f"numpy {np.__version__}. Load average (1/5/15 min) per phase: "
        + "; ".join(f"{load}: {text}" for load, text in loads.items())
        + " (the machine is shared).",
        f"Command: `{command}`; all_reduce, float32, sum, {n} ranks; "
        "median over iterations of the slowest rank. busy = one busy-loop process per CPU "
        f"({os.cpu_count()}) running throughout.",
        f"numpy copy bandwidth (read+write counted): {copy_bw_1 / 1e9:.1f} GB/s one process, "
        f"{copy_bw / 1e9:.1f} GB/s per process with {n} at once (idle). "
        "Bound: direct moves S(3n-1)/n bytes "
        f"per rank, so time >= S(3n-1)/n / {copy_bw / 1e9:.1f} GB/s.",
    ]
    for load, results in by_load.items():
        lines += [
            "",
            f"Load: {load}",
            "",
            "| size | "
            + " | ".join(f"{k} time (us)" for k in names)
            + " | bound time (us) | "
            + " | ".join(f"{k} busbw" for k in names)
            + " | bound busbw |",
            "|---|" + "---|" * (2 * len(names) + 2),
        ]
        for k, size in enumerate(sizes):
            lines.append(
                f"| {_size_label(size)} | "
                + " | ".join(_cell(results[name], k) for name in names)
                + f" | {bound[k] * 1e6:,.1f} | "
                + " | ".join(_busbw(results[name], k, size, factor) for name in names)
                + f" | {size / bound[k] / 1e9 * factor:.2f} |"
            )
    if len(by_load) > 1:
        columns = [(name, load) for name in names for load in by_load]
        lines += [
            "",
            "Side by side, time (us):",
            "",
            "| size | " + " | ".join(f"{name} {load}" for name, load in columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for k, size in enumerate(sizes):
            lines.append(
                f"| {_size_label(size)} | "
                + " | ".join(_cell(by_load[load][name], k) for name, load in columns)
                + " |"
            )
    lines += ["", "Targets (largest and smallest size):"]
    for load, results in by_load.items():
        shm = results["shm"]
        if isinstance(shm, str):
            continue
        lines.append(
            f"- {load}: shm {_size_label(sizes[-1])}: {shm[-1] * 1e3:.1f} ms = "
            f"{bound[-1] / shm[-1]:.0%} of the bound (target >= 50%)"
        )
        for other, target in (("mpi", 2), ("gloo", 3)):
            theirs = results[other]
            if isinstance(theirs, str):
                lines.append(f"- {load}: {other}: {theirs}")
            else:
                ratio = theirs[-1] / shm[-1]
                lines.append(
                    f"- {load}: {other} / shm at {_size_label(sizes[-1])}: {ratio:.2f}x "
                    f"(target >= {target}x)"
                )
        lines.append(
            f"- {load}: shm {_size_label(sizes[0])}: {shm[0] * 1e6:.1f} us (target <= 50 us)"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument(
        "--load",
        default="idle,busy",
        help="comma-separated loads to measure under: idle, busy (one busy loop per CPU)",
    )
    parser.add_argument(
        "--sizes",
        default=",".join(f"{s >> 10}K" for s in SIZES),
        help="comma-separated message sizes, e.g. 4K,64M",
    )
    parser.add_argument("--iters", type=int, default=None, help="timed iterations per size")
    parser.add_argument("--mpi-allreduce", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mpi_allreduce is not None:
        _mpi_allreduce_main(*json.loads(args.mpi_allreduce))
        return
    loads = [load.strip() for load in args.load.split(",") if load.strip()]
    unknown = sorted(set(loads) - set(LOADS))
    if unknown or not loads:
        parser.error(f"--load takes {', '.join(LOADS)}, got {args.load!r}")
    n = args.ranks
    sizes = [_parse_size(text) for text in args.sizes.split(",")]
    copy_bw = copy_bandwidth(n)
    copy_bw_1 = copy_bandwidth(1)
    by_load: dict[str, dict[str, Times]] = {}
    load_avg: dict[str, str] = {}
    for load in loads:
        before = _load()
        if load == "busy":
            with background_load(os.cpu_count() or 1):
                by_load[load] = measure(n, sizes, args.iters)
        else:
            by_load[load] = measure(n, sizes, args.iters)
        load_avg[load] = f"{before} before, {_load()} after"
    command = "python bench/bench_runtime.py " + " ".join(sys.argv[1:])
    text = report(n, sizes, by_load, load_avg, copy_bw, copy_bw_1, command.strip())
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
