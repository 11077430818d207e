"""The steady-state ring and tree against the event loop, where both run: time and cost.

    python bench/bench_steady_state.py                 # the table of docs/models.md section 21
    python bench/bench_steady_state.py --big           # adds 2 x 36 GB200 (the event loop: ~4 min)

Each line times one (fabric, algorithm, protocol, channels, size) both ways on the tuner's
channels: the ring from its lanes (:class:`scaleup.sim.steady_ring.SteadyRing`) against the
whole one-chunk ring table in the event loop, built as the tuner builds it (at its reference
count, every block equal, then scaled to the size); the tree from its one-chunk table
(:class:`scaleup.sim.steady_pipeline.SteadyPipeline`) against the tuner's own pipelined run
(its chunk count and step). It prints both times, steady / event - 1 and the seconds each took
in this process (the machine is shared: the 1-minute load average is printed first).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from scaleup.collectives.algorithms import ring
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim.protocols import protocol
from scaleup.sim.steady_pipeline import SteadyPipeline
from scaleup.sim.steady_ring import SteadyRing
from scaleup.topology import resolve_topology
from scaleup.tune.question import Question
from scaleup.tune.rules import Candidate
from scaleup.tune.search import TuneSession

MIB = 1 << 20
CASES: list[tuple[str, str, str, int, int]] = [
    ("dgx-h100", "ring", "simple", 16, 1024 * MIB),
    ("dgx-h100", "tree", "simple", 16, 1024 * MIB),
    ("2xdgx-h100", "ring", "simple", 16, 1024 * MIB),
    ("2xdgx-h100", "tree", "simple", 16, 1024 * MIB),
    ("2xdgx-h100", "ring", "ll128", 16, 256 * MIB),
    ("2xdgx-h100", "tree", "ll128", 16, 256 * MIB),
    ("2xdgx-h100", "ring", "simple", 16, 64 * MIB),
    ("2xdgx-h100", "tree", "simple", 16, 64 * MIB),
    ("2xdgx-h100", "ring", "ll", 16, 1 * MIB),
    ("2xdgx-h100", "tree", "ll", 16, 1 * MIB),
    ("4xdgx-h100", "ring", "simple", 16, 1024 * MIB),
    ("4xdgx-h100", "tree", "simple", 16, 1024 * MIB),
    ("dgx1-v100", "ring", "simple", 6, 1024 * MIB),
    ("dgx1-v100", "tree", "simple", 6, 1024 * MIB),
    ("2xmi300x-8", "ring", "simple", 8, 1024 * MIB),
    ("2xmi300x-8", "tree", "simple", 8, 1024 * MIB),
    ("3xgb200-nvl72:gpus=8,nic=ib-ndr", "ring", "simple", 16, 1024 * MIB),
    ("3xgb200-nvl72:gpus=8,nic=ib-ndr", "tree", "simple", 16, 1024 * MIB),
    ("4xdgx-a100:nics=4", "ring", "simple", 4, 1024 * MIB),
    ("2xgb200-nvl72:gpus=24,nic=ib-ndr", "ring", "ll128", 24, 512 * MIB),
]
BIG: list[tuple[str, str, str, int, int]] = [
    ("2xgb200-nvl72:gpus=36,nic=ib-ndr", "ring", "ll128", 18, 512 * MIB),
    ("2xgb200-nvl72:gpus=36,nic=ib-ndr", "tree", "simple", 18, 1024 * MIB),
]


def both(spec: str, algorithm: str, proto: str, channels: int, nbytes: int) -> tuple[float, ...]:
    """(steady s, event s, steady wall s, event wall s) for one case."""
    topo = resolve_topology(spec)
    session = TuneSession()
    q = Question(session, topo, ("all_reduce", None, "float32", "sum", 0))
    net = session.network(topo)
    count = nbytes // 4
    t0 = time.perf_counter()
    if algorithm == "ring":
        params = ring.normalise(
            CollectiveSpec("all_reduce", q.nranks, count),
            {**q.params("ring", channels), "channels": channels, "chunks": 1},
        )
        lanes = ring.lanes(q.nranks, params)
        steady = SteadyRing("all_reduce", lanes, topo, np.arange(q.nranks), net)
        fast = steady.run(protocol(proto), q._ring_block_bytes(channels, count), nbytes).time_s
        t1 = time.perf_counter()
        ref = q.reference_count(channels, 1)  # the tuner's: equal blocks, scaled
        whole = compile_schedule(q.build("ring", ref, channels, 1), topo, network=net)
        event = whole.run(proto, scale=count / ref).time_s
    else:
        cand = Candidate("tree", proto, channels)
        ref = q.reference_count(channels, 1)
        one = compile_schedule(q.build("tree", ref, channels, 1), topo, network=net)
        step = float(q.step_bytes(cand, nbytes) or np.inf)
        pipeline = SteadyPipeline(one)
        fast = pipeline.run(proto, dtype="float32", scale=count / ref, step_bytes=step).time_s
        t1 = time.perf_counter()
        timed = q.simulate(cand, nbytes, count)
        assert timed is not None  # noqa: S101 - every case here runs
        event = timed.time_s
    t2 = time.perf_counter()
    return float(fast), float(event), t1 - t0, t2 - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", action="store_true", help="add the 2 x 36 GB200 cases")
    args = parser.parse_args()
    print(f"# load average (1 min): {os.getloadavg()[0]:.2f}")
    print(f"{'fabric':34} {'algo':5} {'proto':6} {'ch':>3} {'MiB':>5} {'steady us':>10} "
          f"{'event us':>10} {'diff':>7} {'steady s':>9} {'event s':>8}")  # fmt: skip
    for case in CASES + (BIG if args.big else []):
        spec, algorithm, proto, channels, nbytes = case
        fast, event, t_fast, t_event = both(*case)
        print(f"{spec:34} {algorithm:5} {proto:6} {channels:3d} {nbytes // MIB:5d} "
              f"{fast * 1e6:10.1f} {event * 1e6:10.1f} {100 * (fast / event - 1):+6.1f}% "
              f"{t_fast:9.2f} {t_event:8.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
