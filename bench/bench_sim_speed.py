"""Simulator speed: one ring all_reduce of 1 GB on ualink-pod at 64..1024 ranks, and a
31-size sweep (8 B .. 8 GB, x2) of every (algorithm, protocol, channels) candidate on a preset.

    python bench/bench_sim_speed.py                       # both parts
    python bench/bench_sim_speed.py --ranks 64,128 --no-sweep

``--schedule library`` (default) times ``build_schedule("ring", ...)`` (NCCL's dataflow: 2(n-1)
dependent hops per block, each receiver's own block copied just in time); ``--schedule dataflow``
times a bare dataflow ring without the local copies (timing only, not verifiable). Schedule build
time is included in the reported total. ``--bench`` times the real ``scaleup bench`` sweep
(tuner included) per preset, in this process. Every table line notes the 1-minute load average
(the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScaleupError
from scaleup.sim import compile_schedule
from scaleup.topology import resolve_topology


def dataflow_ring(n: int, count: int) -> Schedule:
    """Ring all_reduce dataflow in one add_batch (timing only; see module docstring)."""
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=n, count=count), "dataflow-ring")
    steps = 2 * (n - 1)
    block = np.tile(np.arange(n), steps)
    t = np.repeat(np.arange(steps), n)
    src = (block + t) % n
    ids = np.arange(steps * n)
    deps = np.where(t > 0, ids - n, -1)[:, None]
    per = count // n
    b.add_batch(
        OpKind.REDUCE,
        src_rank=src,
        src_buffer=Buffer.OUTPUT,
        src_offset=block * per,
        dst_rank=(src + 1) % n,
        dst_buffer=Buffer.OUTPUT,
        dst_offset=block * per,
        count=per,
        deps=deps,
        step=t,
    )
    # copies for the all-gather half: REDUCE kind for the first n-1 steps only
    schedule = b.build()
    kind = np.where(schedule.table.step < n - 1, int(OpKind.REDUCE), int(OpKind.COPY)).astype(
        np.int8
    )
    table = schedule.table
    fields = {f: getattr(table, f) for f in table.__dataclass_fields__}
    fields["kind"] = kind
    return Schedule(schedule.spec, schedule.algorithm, type(table)(**fields))


def scaling(ranks: list[int], kind: str) -> None:
    print(
        "| ranks | ops | build s | compile s | run s | total s | events "
        "| events/(ranks*steps) | busbw GB/s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in ranks:
        topo = resolve_topology(f"ualink-pod:n={n}")
        t0 = time.perf_counter()
        spec = CollectiveSpec("all_reduce", nranks=n, count=2**28)
        s = dataflow_ring(n, 2**28) if kind == "dataflow" else build_schedule("ring", spec)
        t1 = time.perf_counter()
        c = compile_schedule(s, topo)
        t2 = time.perf_counter()
        r = c.run("simple")
        t3 = time.perf_counter()
        per = r.n_events / (n * 2 * (n - 1))
        busbw = 4 * 2**28 / r.time_s * 2 * (n - 1) / n / 1e9
        print(
            f"| {n} | {s.n_ops} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} "
            f"| {t3 - t0:.2f} | {r.n_events} "
            f"| {per:.4f} | {busbw:.1f} | {load()} |"
        )


def load() -> str:
    """The 1-minute load average (the machine is shared; figures are wall-clock)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def tuned(preset: str) -> None:
    """The real ``scaleup bench`` sweep (8 B .. 8 GiB, x2, all_reduce), tuner included."""
    from scaleup.bench import bench_rows

    t0 = time.perf_counter()
    rows = bench_rows(preset)  # the default request: all_reduce, 8 B .. 8 GiB, x2
    el = time.perf_counter() - t0
    big = rows[-1]
    print(
        f"| {preset} | {len(rows)} | {el:.2f} | {big.algo} {big.proto} "
        f"| {big.busbw_gb_per_s:.1f} | {load()} |"
    )


def sweep(preset: str) -> None:
    topo = resolve_topology(preset)
    n = len(topo.accelerators)
    sizes = [8 * 2**k for k in range(31)]
    t0 = time.perf_counter()
    runs = 0
    for algo in ("ring", "direct", "nvls"):
        for channels in (1, 2, 4, 8, 16):
            try:
                s = build_schedule(
                    algo, CollectiveSpec("all_reduce", nranks=n, count=2**28), channels=channels
                )
                c = compile_schedule(s, topo)
            except ScaleupError:
                continue
            for proto in ("simple", "ll", "ll128"):
                for size in sizes:
                    try:
                        c.run(proto, scale=size / 2**30)
                    except ScaleupError:
                        break
                    runs += 1
    el = time.perf_counter() - t0
    print(f"| {preset} | {runs} | {el:.2f} | {el / max(runs, 1) * 1e3:.2f} | {load()} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", default="64,128,256,512,1024")
    parser.add_argument("--schedule", choices=("dataflow", "library"), default="library")
    parser.add_argument(
        "--bench", default="dgx-h100,gb200-nvl72", help="presets for the tuned sweep ('' = skip)"
    )
    parser.add_argument("--sweep", default="dgx-h100,gb200-nvl72")
    parser.add_argument("--no-sweep", action="store_true")
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    print(f"\nring all_reduce 1 GiB on ualink-pod ({args.schedule} schedule):\n")
    if args.ranks:
        scaling([int(x) for x in args.ranks.split(",")], args.schedule)
    if args.bench:
        print("\n`scaleup bench` sweep (all_reduce 8 B..8 GiB, -f 2, tuner included):\n")
        print("| preset | rows | total s | 8 GiB choice | 8 GiB busbw GB/s | load |")
        print("|---|---|---|---|---|---|")
        for preset in args.bench.split(","):
            tuned(preset)
    if not args.no_sweep:
        print("\nall-candidate sweep (no tuner pruning), 31 sizes 8 B..8 GiB:\n")
        print("| preset | simulations | total s | ms each | load |")
        print("|---|---|---|---|---|")
        for preset in args.sweep.split(","):
            sweep(preset)


if __name__ == "__main__":
    main()
