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

``--astra 64,256,1024`` runs the ASTRA-sim comparison workload (docs: BENCHMARKS.md, "Issue 13"):
ring all-reduce of 1 GiB on (a) a 1-D ring of N NPUs, each linked to its two neighbours, and (b)
one switch of N NPUs, at 400 GB/s per direction per NPU. Each case runs in a subprocess of its
own, so wall time and peak RSS (``ru_maxrss``) are the case's alone (topology build + tuning +
simulation, interpreter start excluded). The tuner is pinned to ``ring``; it picks the channels
and the protocol as NCCL would, unless ``--astra-channels N`` pins the channel count (one channel
is one thread block, capped at NCCL's per-channel rate, ~40 GB/s here). The closed form printed
next to it is ``2(N-1)/N * S/B + 2(N-1) * alpha`` with alpha = 936.25 ns per hop, ASTRA-sim's
setting; scaleup has no per-link latency override, so its hops carry the catalog's (see
:func:`astra_topology`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScaleupError
from scaleup.sim import compile_schedule
from scaleup.topology import resolve_topology
from scaleup.topology.generators import switched
from scaleup.topology.model import Device, Link, Topology
from scaleup.tune import BenchRequest, TuneSession

#: ASTRA-sim's comparison setting (research notes, wave 2, section 3): 1 GiB, 400 GB/s per
#: direction per NPU, 936.25 ns per hop.
ASTRA_BYTES = 1 << 30
ASTRA_GB_PER_S = 400.0
ASTRA_HOP_S = 936.25e-9
#: The NPU and link of the comparison fabrics: the catalog's generic UALink accelerator and its
#: link (payload efficiency 0.93, the closest to ASTRA-sim's ideal link of the scale-up techs),
#: every link overridden to 400 GB/s per direction; hop latency stays the catalog's.
ASTRA_NPU, ASTRA_LINK, ASTRA_SWITCH = "UALink-XPU", "ualink1", "ualink-switch"


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


def astra_topology(kind: str, n: int) -> Topology:
    """(a) ``ring``: N NPUs, NPU i linked to i+1 (mod N), one 400 GB/s link each way; (b)
    ``switch``: N NPUs with one 400 GB/s link each into ``ualink-switch`` (128 ports: one chip
    up to N = 128, beyond it :func:`~scaleup.topology.generators.switched` builds a non-blocking
    two-tier Clos of that chip, as no catalog switch has N ports)."""
    if kind == "ring":
        devices = [Device.of(f"g{i}", ASTRA_NPU) for i in range(n)]
        links = [Link(f"g{i}", f"g{(i + 1) % n}", ASTRA_LINK, 1, ASTRA_GB_PER_S) for i in range(n)]
        return Topology(f"astra-ring-{n}", tuple(devices), tuple(links))
    topo = switched(n, ASTRA_NPU, ASTRA_SWITCH, tech=ASTRA_LINK, name=f"astra-switch-{n}")
    # every physical link at 400 GB/s: one per NPU, and the Clos stays non-blocking
    links = tuple(Link(x.a, x.b, x.tech, x.count, ASTRA_GB_PER_S) for x in topo.links)
    return Topology(topo.name, topo.devices, links)


def astra_case(kind: str, n: int, channels: int) -> dict[str, object]:
    """One case, in this process: build, tune (ring pinned), simulate; figures as a dict."""
    t0 = time.perf_counter()
    topo = astra_topology(kind, n)
    request = BenchRequest(
        op="all_reduce",
        sizes_bytes=(ASTRA_BYTES,),
        dtype="float32",
        algorithm="ring",
        channels=channels or None,
    )
    choice = TuneSession().sweep(topo, request)[0]
    wall = time.perf_counter() - t0
    hops = 2 * (n - 1)
    closed = hops / n * ASTRA_BYTES / (ASTRA_GB_PER_S * 1e9) + hops * ASTRA_HOP_S
    return {
        "kind": kind,
        "n": n,
        "wall_s": wall,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "time_s": choice.time_s,
        "busbw_gb_per_s": ASTRA_BYTES / choice.time_s * hops / n / 1e9,
        "closed_s": closed,
        "closed_busbw_gb_per_s": ASTRA_BYTES / closed * hops / n / 1e9,
        "choice": f"{choice.algorithm} {choice.protocol} x{choice.channels}",
        "switches": len(topo.switches),
        "hop_latency_s": sorted({c.latency_s for c in topo.channels}),
    }


def astra(sizes: list[int], channels: int, timeout_s: float) -> None:
    """Every (fabric, N) in a subprocess of its own; one table row each."""
    print(
        "| fabric | N | wall s | peak RSS MiB | simulated ms | busbw GB/s "
        "| closed form ms | closed busbw GB/s | choice | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in ("ring", "switch"):
        for n in sizes:
            cmd = [sys.executable, __file__, "--astra-case", f"{kind}:{n}:{channels}"]
            try:
                out = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=timeout_s, check=True
                )
            except subprocess.TimeoutExpired:
                print(f"| {kind} | {n} | > {timeout_s:.0f} (stopped) | | | | | | | {load()} |")
                continue
            except subprocess.CalledProcessError as error:
                last = (error.stderr.strip().splitlines() or ["?"])[-1]
                print(f"| {kind} | {n} | failed: {last} | | | | | | | {load()} |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"| {kind}{' (Clos)' if r['switches'] > 1 else ''} | {n} | {r['wall_s']:.2f} "
                f"| {r['peak_rss_mib']:.0f} | {r['time_s'] * 1e3:.3f} "
                f"| {r['busbw_gb_per_s']:.1f} | {r['closed_s'] * 1e3:.3f} "
                f"| {r['closed_busbw_gb_per_s']:.1f} | {r['choice']} | {load()} |",
                flush=True,
            )


def curve(servers: list[int], timeout_s: float) -> None:
    """Whole ``scaleup bench --topology {N}xdgx-h100 -b 1G -e 1G`` commands (tuner included),
    each a process of its own: wall time, CPU time and peak RSS (``wait4``), as a user would
    see them."""
    print("| GPUs | preset | wall s | CPU s | peak MiB | choice | busbw GB/s | load |")
    print("|---|---|---|---|---|---|---|---|")
    for n in servers:
        preset = f"{n}xdgx-h100"
        argv = [sys.executable, "-m", "scaleup", "bench", "--topology", preset,
                "-b", "1G", "-e", "1G", "--json"]  # fmt: skip
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=err)
            timer = threading.Timer(timeout_s, proc.kill)
            timer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            text, why = out.read(), err.read().strip()
        cpu = usage.ru_utime + usage.ru_stime
        peak_mib = usage.ru_maxrss / 1024  # Linux: KiB
        if proc.returncode != 0:
            reason = why.splitlines()[-1] if why else f"exit {proc.returncode} (killed?)"
            print(f"| {8 * n} | {preset} | {wall:.1f} | {cpu:.1f} | {peak_mib:.0f} "
                  f"| failed: {reason} | - | {load()} |")  # fmt: skip
            continue
        row = json.loads(text)[0]
        print(
            f"| {8 * n} | {preset} | {wall:.2f} | {cpu:.2f} | {peak_mib:.0f} "
            f"| {row['algo']} {row['proto']} {row['channels']} "
            f"| {row['busbw_gb_per_s']:.1f} | {load()} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", default="64,128,256,512,1024")
    parser.add_argument("--schedule", choices=("dataflow", "library"), default="library")
    parser.add_argument(
        "--bench", default="dgx-h100,gb200-nvl72", help="presets for the tuned sweep ('' = skip)"
    )
    parser.add_argument("--sweep", default="dgx-h100,gb200-nvl72")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--astra", default="", help="ASTRA-sim workload sizes, e.g. 64,256")
    parser.add_argument("--astra-channels", type=int, default=0, help="0: the tuner picks")
    parser.add_argument("--astra-timeout", type=float, default=600.0, help="seconds per case")
    parser.add_argument("--astra-case", help=argparse.SUPPRESS)
    parser.add_argument(
        "--curve", default="", help="servers of Nxdgx-h100 for the whole-command curve, e.g. 8,16"
    )
    parser.add_argument("--curve-timeout", type=float, default=600.0, help="seconds per size")
    args = parser.parse_args()
    if args.astra_case:  # a child of --astra: one case, one JSON line
        kind, n, channels = args.astra_case.split(":")
        print(json.dumps(astra_case(kind, int(n), int(channels))))
        return
    if args.curve:
        print("\n`scaleup bench --topology Nxdgx-h100 -b 1G -e 1G`, whole commands:\n")
        curve([int(x) for x in args.curve.split(",")], args.curve_timeout)
        return
    if args.astra:
        print("\nASTRA-sim comparison: ring all-reduce of 1 GiB, 400 GB/s per direction per NPU\n")
        astra([int(x) for x in args.astra.split(",")], args.astra_channels, args.astra_timeout)
        return
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
