"""Benchmark: a ~2,000-point sweep, serial against a local Dask cluster.

Default workload: 4 topologies x 7 collectives x 72 sizes (1 KiB .. 1 GiB, factor 2^(20/71)) with
a fixed algorithm/protocol (``direct``/``simple``: cheap, a few ms a point), i.e. 2,016 points.
It times three runs of the same points into fresh outputs and checks they agree point for point:

- ``serial``: no Dask, one process;
- ``cluster (cold)``: ``run_sweep`` starting its own ``LocalCluster`` (processes, 1 thread each),
  start-up and shut-down included, i.e. what ``scaleup sweep`` costs;
- ``cluster (warm)``: the same on an already-running cluster (``client=``), only the sweep.

Usage::

    python bench/bench_sweep.py                      # the default 2,016 points, 2 workers
    python bench/bench_sweep.py --algo tuned --sizes 6   # fewer, expensive (tuned) points
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from scaleup.sweep import read_rows, run_sweep, size_range

TOPOLOGIES = "dgx-h100,hgx-b200,dgx-a100,mi300x-8"
COLLECTIVES = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,send_recv"


def _points(args: argparse.Namespace) -> list[dict[str, Any]]:
    factor = 2 ** (20 / max(args.sizes - 1, 1))
    sizes = size_range(1024, 1 << 30, factor)[: args.sizes]
    return [
        {
            "kind": "bench",
            "topology": t,
            "collective": c,
            "bytes": b,
            "dtype": "float32",
            "nranks": 0,
            "algo": args.algo,
            "proto": args.proto,
        }
        for t in args.topologies.split(",")
        for c in args.collectives.split(",")
        for b in sizes
    ]


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    return {
        r["point_id"]: {k: v for k, v in r.items() if k != "elapsed_s"} for r in read_rows(path)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default=TOPOLOGIES)
    parser.add_argument("--collectives", default=COLLECTIVES)
    parser.add_argument("--sizes", type=int, default=72)
    parser.add_argument("--algo", default="direct")
    parser.add_argument("--proto", default="simple")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    points = _points(args)
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        timings: dict[str, float] = {}
        summaries = {}
        start = time.perf_counter()
        summaries["serial"] = run_sweep(points, out / "serial.parquet", serial=True)
        timings["serial"] = time.perf_counter() - start
        start = time.perf_counter()
        summaries["cluster (cold)"] = run_sweep(
            points, out / "cold.parquet", n_workers=args.workers
        )
        timings["cluster (cold)"] = time.perf_counter() - start
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            silence_logs=logging.ERROR,
            dashboard_address=None,
        )
        with cluster, Client(cluster, set_as_default=False) as client:
            start = time.perf_counter()
            summaries["cluster (warm)"] = run_sweep(points, out / "warm.parquet", client=client)
            timings["cluster (warm)"] = time.perf_counter() - start
        reference = _rows(out / "serial.parquet")
        agree = True
        for name in ("cold", "warm"):
            got = _rows(out / f"{name}.parquet")
            for pid, row in reference.items():
                other = got.get(pid, {})
                diff = {k: (v, other.get(k)) for k, v in row.items() if other.get(k) != v}
                if diff:
                    agree = False
                    print(f"{name} differs from serial at point {pid}: {diff}")
                    break
        errors = summaries["serial"].errors
    load = os.getloadavg()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average after: {load[0]:.2f} (1 min), "
        f"{load[1]:.2f} (5 min)"
    )
    print(
        f"points: {len(points)} ({args.topologies} x {args.collectives} x {args.sizes} sizes, "
        f"algo={args.algo}, proto={args.proto}); errors: {errors}; "
        f"results agree point for point: {agree}"
    )
    print()
    print("| run | wall (s) | points/s | speed-up vs serial | workers | points/task |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, wall in timings.items():
        s = summaries[name]
        print(
            f"| {name} | {wall:.2f} | {len(points) / wall:,.0f} | "
            f"{timings['serial'] / wall:.2f}x | "
            f"{s.workers} | {s.batch_size} |"
        )


if __name__ == "__main__":
    main()
