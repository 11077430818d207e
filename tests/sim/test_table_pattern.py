"""Table patterns (scaleup.sim.table_pattern): one op per orbit, routed alone, times the table.

The pattern finds the symmetry on the bare op table, compiles only the representatives (their
dependencies pointed at representatives) and runs the flow-class quotient; the issue allows
0.5 % against the exact per-flow run, and the two agree to rounding. Where the symmetry breaks
(a degraded link) the pattern refuses or stays exact; sessions take it only from
PATTERN_MIN_RANKS ranks and never when exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_symmetry import _degraded

from scaleup.sim import compile_schedule
from scaleup.sim.table_pattern import TablePattern, representatives
from scaleup.topology import resolve_topology
from scaleup.tune.question import Question
from scaleup.tune.rules import step_bytes_for
from scaleup.tune.search import TuneSession

RTOL = 1e-9  # same flows, added in another order; the issue allows 0.5 %


def _schedule(topology, algorithm: str, channels: int, chunks: int, collective: str = "all_reduce"):
    """The tuner's schedule of (algorithm, channels, chunks) on every accelerator."""
    q = Question(TuneSession(), topology, (collective, None, "float32", "sum", 0))
    return q.build(algorithm, q.reference_count(channels, chunks), channels, chunks)


def _agree(pattern, whole, proto: str, scale: float, step: float | None) -> None:
    fast = pattern.run(proto, scale=scale, step_bytes=step)
    exact = whole.run(proto, scale=scale, step_bytes=step, exact=True)
    assert fast.time_s == pytest.approx(exact.time_s, rel=RTOL)
    np.testing.assert_allclose(
        fast.constraint_bytes[: len(exact.channel_bytes)], exact.channel_bytes,
        rtol=1e-6, atol=1e-3 * max(exact.channel_bytes.max(), 1.0),
    )  # fmt: skip
    assert pattern.lower_bound_s(proto, scale=scale) == pytest.approx(
        whole.lower_bound_s(proto, scale=scale), rel=1e-9
    )


@pytest.mark.parametrize(
    ("topology", "algorithm", "channels", "chunks"),
    [
        ("4xdgx-h100", "nvls_tree", 16, 1),  # in-switch reductions and a tree over servers
        ("4xdgx-h100", "tree", 8, 4),  # pipelined: cut-through and connection order
        ("2xdgx-h100", "hierarchical", 8, 2),
        ("2xmi300x-8", "tree", 4, 2),  # a mesh: RCCL's chains
        ("gb200-nvl72", "nvls", 16, 1),  # every rank alike: one representative
    ],
)
def test_pattern_times_the_schedule_as_the_whole_table(topology, algorithm, channels, chunks):
    topo = resolve_topology(topology)
    schedule = _schedule(topo, algorithm, channels, chunks)
    pattern = TablePattern.of(schedule, topo)
    assert pattern is not None
    assert pattern.n_ops_full == schedule.n_ops
    assert pattern.schedule.n_ops < schedule.n_ops
    assert pattern.multiplicity.sum() == schedule.n_ops  # the orbits partition the ops
    whole = compile_schedule(schedule, topo)
    protocols = ("simple",) if algorithm.startswith("nvls") else ("simple", "ll128", "ll")
    for proto in protocols:
        step = step_bytes_for(algorithm, "all_reduce", proto)
        for scale in (0.0, 1e-3, 1.0, 1e2):
            _agree(pattern, whole, proto, scale, step)


def test_representatives_point_their_dependencies_at_representatives():
    topo = resolve_topology("4xdgx-h100")
    schedule = _schedule(topo, "tree", 8, 2)
    whole = compile_schedule(schedule, topo)
    sym = whole.symmetry()
    assert sym is not None
    reps = representatives(schedule, sym)
    t, r = schedule.table, reps.table
    assert reps.n_ops == len(sym.rep_ops)
    np.testing.assert_array_equal(r.kind, t.kind[sym.rep_ops])
    np.testing.assert_array_equal(r.count, t.count[sym.rep_ops])
    for q, op in enumerate(sym.rep_ops.tolist()):  # dependency q -> the orbit of op's deps
        mine = sorted(r.dep_idx[r.dep_ptr[q] : r.dep_ptr[q + 1]].tolist())
        theirs = sorted(sym.rep_of_op[t.dep_idx[t.dep_ptr[op] : t.dep_ptr[op + 1]]].tolist())
        assert mine == theirs


@pytest.mark.parametrize("tech", ["pcie5", "ib-ndr", "nvlink4"])
def test_a_degraded_link_keeps_the_generators_that_fix_it_and_stays_exact(tech):
    """Server 0's first link of ``tech`` down to 1 GB/s: no generator that moves ranks holds,
    the parallel copies of each channel (ranks fixed) still do, and the run stays exact."""
    good = resolve_topology("4xdgx-h100")
    bad = _degraded(good, next(i for i, link in enumerate(good.links) if link.tech == tech))
    schedule = _schedule(bad, "nvls_tree", 16, 1)
    pattern = TablePattern.of(schedule, bad)
    healthy = TablePattern.of(schedule, good)
    assert pattern is not None
    assert healthy is not None
    assert all((m.sigma == np.arange(32)).all() for m in pattern.moves)
    assert any((m.sigma != np.arange(32)).any() for m in healthy.moves)
    assert pattern.schedule.n_ops > healthy.schedule.n_ops
    _agree(pattern, compile_schedule(schedule, bad), "simple", 1.0, None)


def test_a_rooted_schedule_without_symmetry_has_no_pattern():
    topo = resolve_topology("4xdgx-h100")
    schedule = _schedule(topo, "ring", 1, 1, collective="broadcast")
    assert TablePattern.of(schedule, topo) is None


def test_nvls_pattern_runs_simple_only():
    topo = resolve_topology("4xdgx-h100")
    pattern = TablePattern.of(_schedule(topo, "nvls_tree", 16, 1), topo)
    assert pattern is not None
    with pytest.raises(Exception, match="simple protocol only"):
        pattern.run("ll")
    for kwargs in ({"exact": True}, {"solver": "equal_share"}, {"step_bytes": 0.0}):
        with pytest.raises(Exception, match="pattern|step_bytes"):
            pattern.run("simple", **kwargs)


@pytest.mark.parametrize(
    ("topology", "algorithm", "channels", "chunks", "collective"),
    [
        ("4xdgx-h100", "ring", 1, 1, "broadcast"),  # no symmetry: nothing to hand over
        ("2xdgx-h100", "tree", 8, 2, "all_reduce"),
        ("2xmi300x-8", "tree", 4, 2, "all_reduce"),
    ],
)
def test_the_bare_table_symmetry_is_the_compiled_schedules(
    topology, algorithm, channels, chunks, collective
):
    """What the table pattern's search finds before any route is what the compiled schedule
    would find, so a whole compile adopts it instead of searching again."""
    from scaleup.sim.network import Network
    from scaleup.sim.symmetry import find_symmetry

    topo = resolve_topology(topology)
    schedule = _schedule(topo, algorithm, channels, chunks, collective)
    net = Network(topo)
    bare = TablePattern.symmetry(schedule, topo, net)
    searched = find_symmetry(compile_schedule(schedule, topo, network=net))
    assert (bare is None) == (searched is None)
    if bare is not None and searched is not None:
        assert len(bare.generators) == len(searched.generators)
        for a, b in zip(bare.generators, searched.generators, strict=True):
            np.testing.assert_array_equal(a.sigma, b.sigma)
            np.testing.assert_array_equal(a.con_image, b.con_image)
            assert a.kappa == b.kappa
        np.testing.assert_array_equal(bare.rep_ops, searched.rep_ops)
        np.testing.assert_array_equal(bare.multiplicity, searched.multiplicity)
    adopted = compile_schedule(schedule, topo, network=net)
    adopted.adopt_symmetry(bare)
    assert adopted.symmetry() is bare


def test_a_group_refuses_a_symmetry_found_on_the_first_ranks():
    topo = resolve_topology("dgx-h100")
    schedule = _schedule(resolve_topology("dgx-h100"), "ring", 1, 1)
    grouped = compile_schedule(schedule, topo, ranks=list(range(7, -1, -1)))
    with pytest.raises(Exception, match="group"):
        grouped.adopt_symmetry(None)
