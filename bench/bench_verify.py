"""Benchmark: build and verify a 64-rank ring all_reduce of 1M float32 elements (target < 2 s).

Usage: ``python bench/bench_verify.py [--ranks 64] [--count 1048576] [--repeat 3]``; prints the
machine, then the best build, verify and total times over the repeats.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--count", type=int, default=1 << 20)
    parser.add_argument("--algorithm", default="ring")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spec = CollectiveSpec("all_reduce", nranks=args.ranks, count=args.count)
    builds, verifies = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        schedule = build_schedule(args.algorithm, spec)
        built = time.perf_counter()
        verify(schedule, args.dtype)
        builds.append(built - start)
        verifies.append(time.perf_counter() - built)
    total = np.array(builds) + np.array(verifies)
    best = int(np.argmin(total))
    print(
        f"machine: {_cpu()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(
        f"{args.algorithm} all_reduce n={args.ranks} count={args.count} {args.dtype}: "
        f"{schedule.n_ops} ops; "
        f"build {builds[best]:.3f} s + verify {verifies[best]:.3f} s = {total[best]:.3f} s "
        f"(best of {args.repeat}; target < 2 s)"
    )


if __name__ == "__main__":
    main()
