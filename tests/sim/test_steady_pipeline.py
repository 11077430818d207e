"""The pipelined tree in steady state (scaleup.sim.steady_pipeline): the span by hand,
agreement with the event loop where both run (the tuner's switch to it: test_steady_ring.py)."""

from __future__ import annotations

import pytest

from scaleup.sim import compile_schedule
from scaleup.sim.steady_pipeline import SteadyPipeline
from scaleup.topology import resolve_topology
from scaleup.tune.question import Question
from scaleup.tune.rules import Candidate
from scaleup.tune.search import TuneSession


def _steady_and_event(spec: str, proto: str, channels: int, nbytes: int) -> tuple[float, float]:
    """The tree all_reduce on the tuner's trees timed both ways (the event loop at the tuner's
    pipeline depth), in seconds."""
    topo = resolve_topology(spec)
    session = TuneSession()
    q = Question(session, topo, ("all_reduce", None, "float32", "sum", 0))
    cand = Candidate("tree", proto, channels)
    ref = q.reference_count(channels, 1)
    one = compile_schedule(q.build("tree", ref, channels, 1), topo, network=session.network(topo))
    step = q.step_bytes(cand, nbytes)
    assert step is not None
    fast = SteadyPipeline(one).run(proto, dtype="float32", scale=nbytes / 4 / ref, step_bytes=step)
    event = q.simulate(cand, nbytes, nbytes // 4)
    assert event is not None
    return fast.time_s, event.time_s


def test_span_is_the_nvlink_bound_of_the_chains_by_hand() -> None:
    """One DGX H100, 16 channels of NCCL's chain (two mirrored trees each): every GPU sends
    each tree's bytes up and down once but the chain's ends, 2 x 7/8 x S over its 18 NVLink4
    links at 20.6 GB/s of payload each: 5.067 ms at 1 GiB, the time but for launch and fill."""
    fast, _ = _steady_and_event("dgx-h100", "simple", 16, 1 << 30)
    span = 2 * 7 / 8 * (1 << 30) / (18 * 20.6e9)
    assert span == pytest.approx(5.067e-3, rel=1e-3)
    assert 0 < fast - span < 0.1e-3


@pytest.mark.parametrize(
    ("spec", "channels"),
    [
        ("dgx-h100", 16),
        ("2xdgx-h100", 16),
        ("4xdgx-h100", 16),
        ("dgx1-v100", 6),
        ("2xmi300x-8", 8),
        ("3xgb200-nvl72:gpus=8,nic=ib-ndr", 16),
    ],
)
def test_agrees_with_the_event_loop_where_bandwidth_dominates(spec: str, channels: int) -> None:
    """At 1 GiB within 5% of the event loop on a switched node, two and four of them, a mesh, an
    AMD mesh across nodes and NVL72 partitions across racks (docs/models.md has the table)."""
    fast, event = _steady_and_event(spec, "simple", channels, 1 << 30)
    assert fast == pytest.approx(event, rel=0.05)
