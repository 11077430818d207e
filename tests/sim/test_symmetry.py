"""Flow classes (scaleup.sim.symmetry): the quotient run agrees with the exact per-flow run.

The quotient is found only where the compiled system is invariant; where it is, every op's start
and end and every constraint's bytes must equal the exact run's (up to rounding); where the
symmetry is broken (a degraded link, a subset of ranks) there is no quotient.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers_sim import uniform_switch
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim.protocols import protocol
from scaleup.topology import resolve_topology
from scaleup.topology.model import Link, Topology

RTOL = 1e-9  # the quotient adds the same flows in another order; the issue allows 0.5 %


def _ring(n: int, channels: int = 2, chunks: int = 2, **params: object):
    spec = CollectiveSpec("all_reduce", n, n * channels * chunks * 64)
    return build_schedule("ring", spec, channels=channels, chunks=chunks, **params)


def _same_runs(compiled, proto: str, scale: float, step_bytes: float | None) -> None:
    fast = compiled.run(proto, scale=scale, step_bytes=step_bytes)
    exact = compiled.run(proto, scale=scale, step_bytes=step_bytes, exact=True)
    assert fast.time_s == pytest.approx(exact.time_s, rel=RTOL)
    np.testing.assert_allclose(fast.op_end_s, exact.op_end_s, rtol=RTOL)
    np.testing.assert_allclose(fast.op_start_s, exact.op_start_s, rtol=RTOL)
    np.testing.assert_allclose(fast.constraint_bytes, exact.constraint_bytes, rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("n", [2, 5, 16])
@pytest.mark.parametrize("proto", ["simple", "ll128", "ll"])
@pytest.mark.parametrize("step_bytes", [None, 512 * 1024])
def test_ring_on_a_switch_is_one_rank_times_n(n, proto, step_bytes):
    compiled = compile_schedule(_ring(n), uniform_switch(n))
    sym = compiled.symmetry()
    assert sym is not None
    assert sym.order == n
    assert len(sym.rep_ops) * n == compiled.n_ops
    assert compiled.quotient(protocol(proto)) is not None
    for scale in (1e-4, 1.0, 1e3):
        _same_runs(compiled, proto, scale, step_bytes)


def test_two_servers_single_channel_ring_swaps_the_servers():
    topo = resolve_topology("2xdgx-h100")
    order = [*range(8), *range(15, 7, -1)]  # the rail-aligned ring the channel search builds
    compiled = compile_schedule(_ring(16, channels=1, orders=[order]), topo)
    sym = compiled.symmetry()
    assert sym is not None
    assert sym.order == 2
    _same_runs(compiled, "simple", 1e3, 512 * 1024)


def _degraded(t: Topology, index: int) -> Topology:
    """``t`` with link ``index`` down to 1 GB/s per link."""
    link = t.links[index]
    slow = Link(link.a, link.b, link.tech, link.count, 1.0)
    links = (*t.links[:index], slow, *t.links[index + 1 :])
    return Topology(t.name + "-degraded", t.devices, links, t.peer_access)


def test_a_degraded_link_breaks_the_symmetry_and_the_run_is_exact():
    good = uniform_switch(4)
    bad = _degraded(good, 0)
    schedule = _ring(4)
    assert compile_schedule(schedule, good).quotient(protocol("simple")) is not None
    compiled = compile_schedule(schedule, bad)
    assert compiled.quotient(protocol("simple")) is None
    fast, exact = compiled.run("simple", scale=1e3), compiled.run("simple", scale=1e3, exact=True)
    assert fast.time_s == exact.time_s


def test_a_subset_of_ranks_has_no_quotient():
    compiled = compile_schedule(_ring(3), uniform_switch(4), ranks=[0, 2, 3])
    assert compiled.symmetry() is None


def test_bench_exact_flag_prints_the_same_table():
    args = ["bench", "--topology", "ualink-pod:n=16", "-b", "1K", "-e", "64M", "-f", "64", "--json"]
    fast = CliRunner().invoke(app, args)
    exact = CliRunner().invoke(app, [*args, "--exact"])
    assert fast.exit_code == 0, fast.output
    assert exact.exit_code == 0, exact.output
    assert fast.output == exact.output
