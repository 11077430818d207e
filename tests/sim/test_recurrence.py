"""Steady-state fast-forward (scaleup.sim.recurrence): the same run, whole periods skipped."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms import algorithms_for, build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScaleupError
from scaleup.sim import compile_schedule
from scaleup.sim.fairshare import get_solver
from scaleup.sim.pattern import RingPattern
from scaleup.sim.protocols import protocol
from scaleup.sim.recurrence import MIN_OPS, Recurrence, _lists_moved
from scaleup.sim.run import Run
from scaleup.sim.straggler import Stragglers
from scaleup.topology import resolve_topology

RTOL = 1e-9  # copied times are t + jΔ, not sums of j periods: rounding only
#: the module whose MIN_OPS the tests lower, so that small quotients fast-forward
sim_run = importlib.import_module("scaleup.sim.run")


def _quotient(topology: str, collective: str, channels: int = 1, count_per_rank: int = 2**20):
    topo = resolve_topology(topology)
    n = len(topo.accelerators)
    spec = CollectiveSpec(collective, nranks=n, count=n * count_per_rank)
    compiled = compile_schedule(build_schedule("ring", spec, channels=channels), topo)
    return compiled.quotient(protocol("simple"))


def _both(target, proto: str = "simple") -> tuple:
    """(plain result, fast-forwarded result, the fast Run) of one compiled system."""
    p = protocol(proto)
    plain = Run(target, p, 4.0, get_solver("maxmin")).result()
    fast_run = Run(target, p, 4.0, get_solver("maxmin"), fast_forward=True)
    return plain, fast_run.result(), fast_run


def _assert_same(plain, fast) -> None:
    assert fast.time_s == pytest.approx(plain.time_s, rel=RTOL)
    assert fast.n_events == plain.n_events
    for name in ("op_start_s", "op_end_s"):
        np.testing.assert_allclose(getattr(fast, name), getattr(plain, name), rtol=RTOL, atol=0)
    for name in ("constraint_bytes", "constraint_busy_s"):
        got, want = getattr(fast, name), getattr(plain, name)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * max(want.max(), 1e-300))


@pytest.mark.parametrize(
    ("topology", "collective"),
    [
        ("ualink-pod:n=16", "all_gather"),
        ("ualink-pod:n=64", "all_gather"),
        ("ualink-pod:n=64", "all_reduce"),
        ("ualink-pod:n=64", "reduce_scatter"),
    ],
)
def test_a_ring_skips_its_steady_state_and_times_it_as_every_event(
    monkeypatch, topology, collective
):
    """A ring's chain on a switched pod advances one hop per step at one rate: the run skips
    periods (all_reduce twice: reduce-scatter, then all-gather) and agrees with every event."""
    monkeypatch.setattr(sim_run, "MIN_OPS", 0)
    q = _quotient(topology, collective)
    plain, fast, fast_run = _both(q)
    rec = fast_run.recurrence
    assert rec.jumps >= (2 if collective == "all_reduce" else 1)
    assert rec.skipped_periods >= 10
    _assert_same(plain, fast)


def test_the_ring_pattern_on_a_large_pod_skips_and_agrees():
    """The issue's workload at 512 ranks (the pattern's own run fast-forwards)."""
    topo = resolve_topology("ualink-pod:n=512")
    spec = CollectiveSpec("all_reduce", nranks=512, count=2**28)
    pattern = RingPattern.of("ring", spec, {"channels": 2}, topo)
    assert pattern is not None
    q = pattern.quotient(protocol("simple"))
    assert q.n_ops >= MIN_OPS
    plain, fast, fast_run = _both(q)
    assert fast_run.recurrence.skipped_periods >= 4
    _assert_same(plain, fast)
    assert pattern.run("simple").time_s == pytest.approx(plain.time_s, rel=RTOL)


TOPOLOGIES = ("ualink-pod:n=16", "ualink-pod:n=32", "dgx-h100", "dgx1-v100", "mi300x-8",
              "trn2-16", "2xdgx-h100")  # fmt: skip
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


@settings(max_examples=25, deadline=None)
@given(
    topology=st.sampled_from(TOPOLOGIES),
    collective=st.sampled_from(COLLECTIVES),
    pick=st.integers(0, 99),
    channels=st.integers(1, 3),
    per_rank=st.sampled_from([1024, 4096 + 7, 2**16, 2**18 + 3]),
    proto=st.sampled_from(["simple", "ll", "ll128"]),
    quotient=st.booleans(),
)
def test_fast_forward_never_changes_a_run(
    topology, collective, pick, channels, per_rank, proto, quotient
):
    """Every algorithm, odd sizes, every protocol, whole tables and flow-class quotients: the
    run with fast-forward is the run without it, whether or not a period is skipped."""
    mp = pytest.MonkeyPatch()
    mp.setattr(sim_run, "MIN_OPS", 0)
    try:
        topo = resolve_topology(topology)
        n = len(topo.accelerators)
        algos = algorithms_for(collective)
        algo = algos[pick % len(algos)]
        params = {"channels": channels} if algo == "ring" else {}
        spec = CollectiveSpec(collective, nranks=n, count=n * per_rank)
        try:
            compiled = compile_schedule(build_schedule(algo, spec, **params), topo)
            target = compiled.quotient(protocol(proto)) if quotient else compiled
            if target is None:
                return
            plain, fast, _ = _both(target, proto)
        except ScaleupError:
            return  # an algorithm that does not run here (the plain run refuses it too)
        _assert_same(plain, fast)
    finally:
        mp.undo()


def test_exact_runs_never_fast_forward(monkeypatch):
    """``--exact`` is the reference: it steps every event; the default path may skip."""
    made: list[Recurrence] = []
    original = Recurrence.__init__

    def spy(self, run):
        made.append(self)
        original(self, run)

    monkeypatch.setattr(Recurrence, "__init__", spy)
    monkeypatch.setattr(sim_run, "MIN_OPS", 0)  # not for want of ops
    topo = resolve_topology("ualink-pod:n=64")
    spec = CollectiveSpec("all_reduce", nranks=64, count=64 * 2**20)
    compiled = compile_schedule(build_schedule("ring", spec), topo)
    compiled.run("simple", exact=True)
    assert not made
    compiled.run("simple")
    assert made


def test_pipelined_straggling_and_small_runs_step_every_event(monkeypatch):
    q = _quotient("ualink-pod:n=64", "all_reduce")
    p, maxmin = protocol("simple"), get_solver("maxmin")
    assert q.n_ops < MIN_OPS
    assert Run(q, p, 4.0, maxmin, fast_forward=True).recurrence is None  # too small
    monkeypatch.setattr(sim_run, "MIN_OPS", 0)
    assert Run(q, p, 4.0, maxmin, fast_forward=True).recurrence is not None
    assert Run(q, p, 4.0, maxmin, 2**16, fast_forward=True).recurrence is None  # pipelined
    topo = resolve_topology("ualink-pod:n=16")
    spec = CollectiveSpec("all_reduce", nranks=16, count=16 * 2**16)
    compiled = compile_schedule(build_schedule("ring", spec), topo)
    slowed = compiled.slowed(p, Stragglers(factors={3: 2.0}))
    assert Run(compiled, p, 4.0, maxmin, 1e30, slowed, fast_forward=True).recurrence is None


@pytest.mark.parametrize("limit", ["_MAX_MISSES", "_MAX_FAILED_ARMS"])
def test_a_run_without_a_steady_state_stops_looking(monkeypatch, limit):
    """After _MAX_MISSES observations without a skip, or _MAX_FAILED_ARMS moves armed and not
    confirmed, the run stops paying for signatures (and for arming, which reads every op)."""
    monkeypatch.setattr(sim_run, "MIN_OPS", 0)
    monkeypatch.setattr(f"scaleup.sim.recurrence.{limit}", 3 if limit == "_MAX_MISSES" else 0)
    q = _quotient("ualink-pod:n=64", "all_gather")
    plain, fast, fast_run = _both(q)
    assert not fast_run.recurrence.enabled
    assert fast_run.recurrence.jumps == 0
    _assert_same(plain, fast)


def test_periods_alike_counts_each_chain_up_to_its_first_difference():
    """Worked by hand: 20 ops, a move of 3, op 10 unlike op 13; ops 17-19 have nothing 3
    further on. From 1: 1~4, 4~7, 7~10, then 10 !~ 13: three. From 2: 2~5 ... 14~17, then 17
    has no op 20: five. From 11: 11~14, 14~17: two. From 16: 16~19: one. 10, 17, 19: none."""
    rec = Recurrence(SimpleNamespace(c=SimpleNamespace(n_ops=20)))
    alike = np.ones(17, dtype=bool)
    alike[10] = False
    rec._alike[3] = alike
    got = rec._runs(3, np.array([1, 2, 10, 11, 16, 17, 19]))
    assert got.tolist() == [3, 5, 0, 2, 1, 0, 0]


def test_lists_moved_compares_each_entry_shifted():
    """Successor lists: op 0 -> [2], op 1 -> [3], op 2 -> [5] (not [4]), op 3 -> [], op 4 ->
    []. Under a move of 1: 0 ~ 1 (2 + 1 = 3); 1 !~ 2 (3 + 1 != 5); 3 ~ 4 (both empty)."""
    ptr = np.array([0, 1, 2, 3, 3, 3])
    idx = np.array([2, 3, 5])
    same_length = np.array([True, True, False, True])  # op 2 has one entry, op 3 none
    got = _lists_moved(ptr, idx, 1, np.arange(4), same_length)
    assert got.tolist() == [True, False, False, True]


def test_ops_are_alike_only_with_their_lists_moved():
    """Two interleaved chains X (even ops) and Y (odd ops), each step on the previous step of
    its own chain, except that X's and Y's 5th steps (ops 10, 11) swap predecessors: counts,
    sizes and classes stay alike under a move of 2, the lists do not, around the swap."""
    n = 16
    preds = [[] if k < 2 else [k - 2] for k in range(n)]
    preds[10], preds[11] = [9], [8]
    dep_ptr = np.cumsum([0] + [len(p) for p in preds])
    dep_idx = np.array([d for p in preds for d in p])
    succs = [[k for k in range(n) if j in preds[k]] for j in range(n)]
    succ_ptr = np.cumsum([0] + [len(s) for s in succs])
    succ_idx = np.array([s for ss in succs for s in ss])
    c = SimpleNamespace(
        n_ops=n, var_of_op=np.arange(n) % 2, n_deps=np.diff(dep_ptr),
        dep_ptr=dep_ptr, dep_idx=dep_idx, succ_ptr=succ_ptr, succ_idx=succ_idx,
    )  # fmt: skip
    run = SimpleNamespace(c=c, var_class=np.array([0, 1]), nbytes=np.ones(n), latency=np.zeros(n))
    alike = Recurrence(run)._alike_at(2)
    # 0, 1: roots, unlike 2, 3 (no predecessor); 6 -> 8 and 7 -> 9 (6 and 7 feed their own
    # chain, 8 and 9 the other one); 8 -> 10 ... 11 -> 13 (10 and 11 follow the other chain);
    # 12, 13: their successors 14, 15 have none (the table ends)
    unlike = np.flatnonzero(~alike).tolist()
    assert unlike == [0, 1, 6, 7, 8, 9, 10, 11, 12, 13]
