"""Flow classes (scaleup.sim.symmetry): the quotient run agrees with the exact per-flow run.

The quotient is found only where the compiled system is invariant; where it is, every op's start
and end and every constraint's bytes must equal the exact run's (up to rounding); where the
symmetry is broken (a degraded link, a subset of ranks) there is no quotient.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers_sim import uniform_switch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim.network import Network
from scaleup.sim.protocols import protocol
from scaleup.sim.symmetry import _match_neighbours, device_image
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
def test_ring_on_a_switch_is_one_rank_times_n_times_its_alike_channels(n, proto, step_bytes):
    compiled = compile_schedule(_ring(n), uniform_switch(n))
    sym = compiled.symmetry()
    assert sym is not None
    assert sym.order == 2 * n  # a rank rotation, and the second channel is the first's copy
    assert len(sym.rep_ops) * 2 * n == compiled.n_ops
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
    # the same table; link loads are sums of the same flows in another order (last digits)
    fast_rows, exact_rows = json.loads(fast.output), json.loads(exact.output)
    assert len(fast_rows) == len(exact_rows)
    for ours, theirs in zip(fast_rows, exact_rows, strict=True):
        numbers = {k for k, v in theirs.items() if isinstance(v, float)}
        assert {k: v for k, v in ours.items() if k not in numbers} == {
            k: v for k, v in theirs.items() if k not in numbers
        }
        for key in numbers:
            assert ours[key] == pytest.approx(theirs[key], rel=1e-12), key


def _nvls_tree(topology: str, channels: int = 4, chunks: int = 2):
    """NVLS-Tree all_reduce over every GPU of ``topology`` (one head per NIC, NCCL's)."""
    from scaleup.tune.channel_search import nvls_heads
    from scaleup.tune.nvls import nvls_tree_params

    topo = resolve_topology(topology)
    n = len(topo.accelerators)
    params = nvls_tree_params(topo, None, nvls_heads(topo, None))
    spec = CollectiveSpec("all_reduce", n, n * channels * chunks * 64)
    schedule = build_schedule("nvls_tree", spec, channels=channels, chunks=chunks, **params)
    return compile_schedule(schedule, topo)


def test_nvls_tree_rotates_every_server_and_cycles_its_copied_channels():
    """An in-switch reduction's sources are a set, so no permutation follows from the ops; the
    rotation of every server's eight GPUs is tried as it stands, the servers in reverse order
    take tree 0 onto tree 1 (NCCL's mirror), and the channels that copy one another cycle:
    8 x 2 x 2 (the two copies of each of the double tree's trees on 4 channels)."""
    compiled = _nvls_tree("4xdgx-h100")
    sym = compiled.symmetry()
    assert sym is not None
    rotation = next(g for g in sym.generators if not np.array_equal(g.sigma, np.arange(32)))
    assert rotation.sigma[:9].tolist() == [1, 2, 3, 4, 5, 6, 7, 0, 9]
    mirror = next(g for g in sym.generators if g.sigma[0] >= 24)
    assert (mirror.sigma // 8).tolist() == [3 - s for s in range(4) for _ in range(8)]
    assert sorted(mirror.kappa.items()) != sorted((k, k) for k in mirror.kappa)  # trees swap
    assert sym.order == 32
    assert len(sym.rep_ops) * 32 == compiled.n_ops
    _same_runs(compiled, "simple", 1e3, None)
    _same_runs(compiled, "simple", 1e3, 512 * 1024)


def test_channels_that_differ_are_not_cycled():
    """One channel of each tree: no copies to cycle; the rotation, and the two servers swapped
    with the two trees (the only generator that moves a channel tag)."""
    compiled = _nvls_tree("2xdgx-h100", channels=2)
    sym = compiled.symmetry()
    assert sym is not None
    moving = [g for g in sym.generators if g.kappa and any(a != b for a, b in g.kappa.items())]
    assert len(moving) == 1
    assert moving[0].sigma[0] >= 8
    assert sym.order == 16
    _same_runs(compiled, "simple", 1e2, 512 * 1024)


@given(
    lens=st.lists(st.integers(0, 6), min_size=1, max_size=30),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_sorting_within_columns_is_lexsort_by_column_then_key(lens, data):
    """The quotient check's per-column sort (short sorts of columns of one length side by
    side) is ``np.lexsort((key, column))``, ties in entry order."""
    from scaleup.collectives.op_table import csr_sort_order

    n = sum(lens)
    key = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=np.int64)
    lengths = np.array(lens, dtype=np.int64)
    owner = np.repeat(np.arange(len(lens)), lengths)
    assert np.array_equal(csr_sort_order(lengths, key), np.lexsort((key, owner)))


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_rows_match_is_a_multiset_test(data):
    """``rank_ops._rows_match`` (rows compared in place, else rows of one length sorted side by
    side) says whether row ``img[i]`` holds row ``i``'s mapped entries as a multiset."""
    from scaleup.sim.rank_ops import _rows_match

    lens = np.array(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=12)))
    n = len(lens)
    img = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    total = int(ptr[-1])
    vals = np.array(data.draw(st.lists(st.integers(0, 3), min_size=total, max_size=total)))
    mapped = np.array(data.draw(st.lists(st.integers(0, 3), min_size=total, max_size=total)))
    if data.draw(st.booleans()):  # a true case: every row i holds row img[i] in some order
        rows = [vals[ptr[img[i]] : ptr[img[i]] + lens[i]] for i in range(n)]
        mapped = np.concatenate([data.draw(st.permutations(list(r))) for r in rows])
        mapped = mapped if len(mapped) == total else np.zeros(total, dtype=np.int64)
    want = all(
        lens[img[i]] == lens[i]
        and sorted(mapped[ptr[i] : ptr[i + 1]]) == sorted(vals[ptr[img[i]] : ptr[img[i] + 1]])
        for i in range(n)
    )
    assert _rows_match(ptr, mapped, vals, img) == want


@pytest.mark.parametrize("name", ["dgx-h100", "2xdgx-h100", "ualink-pod:n=64", "dgx1-v100"])
def test_fixed_ranks_fix_every_device_as_the_neighbour_matching_does(name):
    """device_image's shortcut for a rank permutation that moves nothing is what matching every
    other device to its neighbours' images gives."""
    topo = resolve_topology(name)
    net = Network(topo)
    n = len(topo.accelerators)
    tau = np.full(net.n_devices, -1, dtype=np.int64)
    tau[net.acc_devices] = net.acc_devices
    matched = _match_neighbours(net, topo, tau)
    assert matched is not None
    np.testing.assert_array_equal(device_image(net, topo, np.arange(n)), matched)
    np.testing.assert_array_equal(matched, np.arange(net.n_devices))
