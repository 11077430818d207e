"""Speed of the full ``scaleup bench`` sweep (8 B - 8 GB, -f 2, tuner included).

Usage (from the repository root)::

    python bench/bench_bench_sweep.py [--repeat 3] [PRESET ...]

Targets (issue 4): dgx-h100 <= 2 s, gb200-nvl72 <= 5 s. Each run tunes in a fresh
:class:`~scaleup.tune.TuneSession` (the tuner keeps no state outside it), so the figure is what a
fresh ``scaleup bench`` process pays after import. Prints one line per preset; the best of
``--repeat`` runs counts.
"""

from __future__ import annotations

import argparse
import platform
import time

from scaleup.bench import bench_rows
from scaleup.topology import resolve_topology

TARGETS_S = {"dgx-h100": 2.0, "gb200-nvl72": 5.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", default=list(TARGETS_S))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    for name in args.presets:
        topo = resolve_topology(name)
        best = float("inf")
        rows = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            rows = bench_rows(topo)  # all_reduce, 8 B .. 8 GiB, x2, in a fresh session
            best = min(best, time.perf_counter() - start)
        target = TARGETS_S.get(name)
        verdict = (
            "" if target is None else (" OK" if best <= target else f" OVER {target:.0f} s target")
        )
        print(
            f"{name}: {len(rows)} sizes in {best:.2f} s (best of {args.repeat}){verdict}; "
            f"8 GB: {rows[-1].algo}/{rows[-1].proto}/{rows[-1].channels} "
            f"busbw {rows[-1].busbw_gb_per_s:.1f} GB/s"
        )


if __name__ == "__main__":
    main()
