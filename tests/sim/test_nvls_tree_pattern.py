"""NVLS-Tree patterns (scaleup.sim.nvls_tree_pattern): representative slices time the whole table.

The pattern builds one lane per chunk (channel 0, or 0 and 1 without the mirror) with the first
head (every head where the fabric follows no rotation), and runs the flow-class quotient over
the head rotation, the channel copies and the mirror, those the fabric follows; the issue allows
0.5 % against the exact per-flow run, and the two agree to rounding. Heads that are no residue
class (NCCL's 32 heads of an NVL72 rack) keep every head as a representative; one server gives
no pattern.
"""

from __future__ import annotations

import pytest
from test_symmetry import _degraded

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim.nvls_tree_pattern import NvlsTreePattern
from scaleup.topology import resolve_topology
from scaleup.tune.checks import operands
from scaleup.tune.question import Question
from scaleup.tune.search import TuneSession

RTOL = 1e-9  # same flows, added in another order; the issue allows 0.5 %


def _spec_params(topology, channels: int, chunks: int, **override):
    """The tuner's NVLS-Tree spec and parameters for (channels, chunks) on every accelerator."""
    q = Question(TuneSession(), topology, ("all_reduce", None, "float32", "sum", 0))
    params = {"channels": channels, "chunks": chunks, **q.params("nvls_tree", channels)}
    params.update(override)
    return CollectiveSpec("all_reduce", q.nranks, q.reference_count(channels, chunks)), params


@pytest.mark.parametrize(
    ("topology", "channels", "chunks", "moves", "heads"),
    [
        ("4xdgx-h100", 16, 4, 3, None),  # rotation, copies, mirror
        ("3xdgx-h100", 16, 2, 2, None),  # odd servers: tree 1 is tree 0 shifted, no involution
        ("4xdgx-h100", 1, 2, 1, None),  # one channel: the rotation alone
        ("5xdgx-h100", 3, 2, 2, None),  # odd channels: copies within a tree parity
        ("4xdgx-h100:nics=4", 16, 2, 3, None),  # heads 0, 2, 4, 6: rotation by two
        # 72 heads (more than NCCL's 32) on 72 rails in pods of 24: no rotation by one GPU maps
        # the pods, by 24 does
        ("2xgb200-nvl72:rail_optimized=true", 4, 1, 3, tuple(range(72))),
        # NCCL's 32 heads of 72: no rotation, every head a representative
        ("2xgb200-nvl72:rail_optimized=true", 4, 1, 2, None),
    ],
)
def test_pattern_times_nvls_tree_as_the_whole_table(topology, channels, chunks, moves, heads):
    topo = resolve_topology(topology)
    spec, params = _spec_params(topo, channels, chunks, **({"heads": heads} if heads else {}))
    pattern = NvlsTreePattern.of(spec, params, topo)
    assert pattern is not None
    assert len(pattern.moves) == moves
    whole = compile_schedule(build_schedule("nvls_tree", spec, **params), topo)
    assert pattern.n_ops_full == whole.n_ops
    assert pattern.n_operands_full == operands(whole.schedule)
    # heads one representative stands for: the pods' three, NCCL's 32 none, else every head
    orbit = (3 if heads else 1) if "rail" in topology else len(params["heads"])
    assert pattern.schedule.n_ops * orbit <= whole.n_ops // max(channels // 2, 1)
    for scale in (0.0, 1e-3, 1.0):
        for step in (None, 524288.0):
            fast = pattern.run("simple", scale=scale, step_bytes=step)
            exact = whole.run("simple", scale=scale, step_bytes=step, exact=True)
            assert fast.time_s == pytest.approx(exact.time_s, rel=RTOL)
        assert pattern.lower_bound_s("simple", scale=scale) == pytest.approx(
            whole.lower_bound_s("simple", scale=scale), rel=1e-9
        )


def test_heads_that_are_no_residue_class_are_every_one_a_representative():
    """Heads 0, 1, 2, 4 of 8 (as NCCL's 32 of an NVL72 rack's 72: no rotation permutes them):
    every head is built, the copies and the mirror still join lanes, and the time is the whole
    table's."""
    four = resolve_topology("4xdgx-h100")
    spec, params = _spec_params(four, 16, 2, heads=(0, 1, 2, 4))
    pattern = NvlsTreePattern.of(spec, params, four)
    assert pattern is not None
    assert len(pattern.moves) == 2  # copies and mirror, no rotation
    whole = compile_schedule(build_schedule("nvls_tree", spec, **params), four)
    assert pattern.n_ops_full == whole.n_ops
    assert pattern.schedule.n_ops * 16 == whole.n_ops  # every head, one channel of 16
    for scale in (0.0, 1e-3, 1.0):
        for step in (None, 524288.0):
            fast = pattern.run("simple", scale=scale, step_bytes=step)
            exact = whole.run("simple", scale=scale, step_bytes=step, exact=True)
            assert fast.time_s == pytest.approx(exact.time_s, rel=RTOL)


def test_no_pattern_where_the_construction_does_not_give_one():
    four = resolve_topology("4xdgx-h100")
    one = resolve_topology("dgx-h100")
    spec, params = _spec_params(one, 16, 2)  # one server: no tree
    assert NvlsTreePattern.of(spec, params, one) is None
    spec, params = _spec_params(four, 16, 2)
    assert NvlsTreePattern.of(spec, params, four) is not None


def _degraded_four():
    four = resolve_topology("4xdgx-h100")
    return _degraded(four, next(i for i, link in enumerate(four.links) if link.tech == "ib-ndr"))


@pytest.mark.parametrize(
    ("make", "channels", "chunks"),
    [
        # leaves of 42 ports down hold five servers and two NICs of the sixth: no rotation
        # maps the leaves onto themselves, and nine servers have no mirror
        (lambda: resolve_topology("9xdgx-h100:oversubscription=2"), 16, 2),
        (lambda: resolve_topology("9xdgx-h100:oversubscription=2"), 3, 2),
        # a degraded NIC link: neither the rotation nor the mirror holds
        (_degraded_four, 16, 2),
        # 144 NICs on leaves of 32: the second rack straddles two leaves
        (lambda: resolve_topology("2xgb200-nvl72"), 4, 1),
    ],
)
def test_fabric_that_breaks_the_rotation_keeps_every_head(make, channels, chunks):
    """Where the fabric follows no head rotation (nor mirror), every head and both trees are
    representatives and the channel copies alone join lanes; still the whole table's time."""
    topo = make()
    spec, params = _spec_params(topo, channels, chunks)
    pattern = NvlsTreePattern.of(spec, params, topo)
    assert pattern is not None
    assert len(pattern.moves) == 1  # the channel copies alone
    whole = compile_schedule(build_schedule("nvls_tree", spec, **params), topo)
    assert pattern.n_ops_full == whole.n_ops
    built = min(channels, 2)
    assert pattern.schedule.n_ops * channels == whole.n_ops * built  # every head, two trees
    for scale in (0.0, 1e-3, 1.0):
        for step in (None, 524288.0):
            fast = pattern.run("simple", scale=scale, step_bytes=step)
            exact = whole.run("simple", scale=scale, step_bytes=step, exact=True)
            assert fast.time_s == pytest.approx(exact.time_s, rel=RTOL)


def test_nvls_tree_pays_nccls_one_nvls_step_for_its_two_in_switch_phases():
    """tuning.cc lines 424-428: NCCL charges NVLS (all_reduce, all_gather, reduce_scatter) its
    NVLS hwLat (25 us) once, and NVLS_TREE ``intraLat + 2 log2(nNodes) interLat``: the
    ld_reduce into the head and the multicast from it share one NVLS step. Worked by hand on two
    DGX H100 at 8 B: launch 4 us + 25 us + 2 x 20.9 us (NET NVLSTree) is NCCL's 66.8 us plus the
    launch; the simulator adds only the routes' link latencies (under 1 us)."""
    from scaleup.sim.simulate import switch_latency_share
    from scaleup.tune import BenchRequest
    from scaleup.tune.nccl_inputs import model_inputs
    from scaleup.tune.nccl_model import algo_time_us

    two = resolve_topology("2xdgx-h100:nic=ib-ndr")
    spec, params = _spec_params(two, 16, 1)
    share = switch_latency_share(build_schedule("nvls_tree", spec, **params).table)
    assert sorted(set(share.tolist())) == [0.5, 1.0]  # the switch ops halve, the NIC ops not
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        one = build_schedule("nvls", CollectiveSpec(op, 8, 64), channels=2)
        assert set(switch_latency_share(one.table).tolist()) == {1.0}
    [choice] = TuneSession().sweep(two, BenchRequest(sizes_bytes=(8,), algorithm="nvls_tree"))
    model_us = algo_time_us(model_inputs(two), "all_reduce", "nvls_tree", "simple", 8)
    assert model_us == pytest.approx(25 + 2 * 20.9, abs=0.1)
    assert 0 < choice.time_s * 1e6 - (model_us + 4.0) < 1.0


def test_two_server_nvls_tree_leg_runs_at_nccls_per_head_rate():
    """NCCL's perChMaxNVLSTreeBws (tuning.cc lines 205-211): a Hopper NVLS-Tree head carries at
    most 57.7 GB/s of bus bandwidth on two nodes. By hand on 2 x DGX H100 (8 heads, N = 16
    ranks): algbw 8 x 57.7 x 16 / 30 = 246.1 GB/s, busbw 461.6, under the NVLink bound (S (1 +
    1/8) over 0.85 x 370.8 GB/s a direction: 525.3) and the NICs' (8 x 50 GB/s: 750), so at
    8 GiB the cap is what binds. Each head roots 8 of the 16 channels' trees and issues their
    leg: 57.7e9 x 16 / 30 / 8 = 3.85 GB/s a leg thread block. From three servers no cap applies
    (the NIC binds first: 4 x DGX H100 runs at its NIC bound, 367 GB/s)."""
    import numpy as np

    from scaleup.bench import busbw_gb_per_s
    from scaleup.tune import BenchRequest

    two = resolve_topology("2xdgx-h100:nic=ib-ndr")
    spec, params = _spec_params(two, 16, 2)
    compiled = compile_schedule(build_schedule("nvls_tree", spec, **params), two)
    caps = compiled.tree_leg_caps()
    leg = compiled.cta_channel % 2 == 1
    assert leg.any()
    assert (~leg).any()
    assert np.allclose(caps[leg], 57.7e9 * 16 / 30 / 8)
    assert np.isinf(caps[~leg]).all()
    [choice] = TuneSession().sweep(two, BenchRequest(sizes_bytes=(8 << 30,), algorithm="nvls_tree"))
    _, busbw = busbw_gb_per_s("all_reduce", 8 << 30, choice.time_s, 16)
    assert 0.98 * 461.6 < busbw <= 461.6 * 1.0001
    four = resolve_topology("4xdgx-h100:nic=ib-ndr")
    spec4, params4 = _spec_params(four, 16, 1)
    whole4 = compile_schedule(build_schedule("nvls_tree", spec4, **params4), four)
    assert np.isinf(whole4.tree_leg_caps()).all()
