"""``tune.explain``: every candidate the search considered, what bounds it, its channels."""

from __future__ import annotations

import re

import pytest

from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession, candidates
from scaleup.tune.choose import TIE_RTOL
from scaleup.tune.explain import explain_sweep
from scaleup.tune.explain_paths import ChannelPath, _describe
from scaleup.tune.size_channels import ChannelTrim

DGX = resolve_topology("dgx-h100")
GIB = 1 << 30


@pytest.fixture(scope="module")
def ring_1g():
    return explain_sweep(DGX, BenchRequest(sizes_bytes=(GIB,), algorithm="ring"))[1][0]


@pytest.fixture(scope="module")
def sweep():
    # the least simulated time (--select fastest): nccl-model's explanations are in
    # tests/tune/test_nccl_cost_model.py
    request = BenchRequest(sizes_bytes=(8, 64 << 10, 16 << 20, GIB), selection="fastest")
    return explain_sweep(DGX, request)


def test_ring_all_reduce_1g_by_hand(ring_1g):
    """8 x H100 behind NVSwitch, ring all_reduce of S = 1 GiB: every GPU sends 2(n-1)/n x S over
    its 18 NVLinks (NCCL's 20.6 GB/s each = 370.8 GB/s); the busiest is a GPU->NVSwitch link
    bundle carrying its share, busy 2(n-1)/n x S / 370.8 GB/s, the rest latency."""
    chosen = ring_1g.chosen
    assert (chosen.algorithm, chosen.status) == ("ring", "simulated")
    bound = chosen.bound
    assert bound.kind == "link"
    assert bound.constraint_kind == "link"
    src, dst = bound.constraint.split("->")
    kinds = {d.id: str(d.kind) for d in DGX.devices}
    assert (kinds[src], kinds[dst]) == ("accelerator", "switch")  # an NVLink port bundle
    assert bound.constraint in {f"{c.src}->{c.dst}" for c in DGX.channels}
    n, nvlink_bw = 8, 18 * 20.6e9
    by_hand = 2 * (n - 1) / n * GIB / nvlink_bw
    assert bound.busy_s == pytest.approx(by_hand, rel=1e-3)
    share = bound.capacity_bytes_per_s / nvlink_bw  # this bundle's share of the GPU's links
    assert bound.payload_bytes == pytest.approx(2 * (n - 1) / n * GIB * share, rel=1e-3)
    assert by_hand <= chosen.time_s <= 1.05 * by_hand
    assert bound.utilisation == pytest.approx(bound.busy_s / chosen.time_s)
    assert len(chosen.channel_paths) == chosen.channels
    for path in chosen.channel_paths:
        assert path.kind == "ring"
        assert sorted(path.orders[0]) == list(range(n))


def test_every_candidate_is_listed_once_and_the_choice_is_the_least(sweep):
    choices, explained = sweep
    listed_all = {c for c in candidates(DGX, "all_reduce")}
    trim = ChannelTrim.of(DGX)  # NCCL gives a small message fewer channels (size_channels)
    for choice, e in zip(choices, explained, strict=True):
        listed = [c.candidate for c in e.candidates]
        assert len(listed) == len(set(listed))
        assert set(listed) == {trim.trim(c, e.nbytes) for c in listed_all}
        assert [c.chosen for c in e.candidates].count(True) == 1
        chosen = e.chosen
        assert chosen.candidate == choice.candidate
        assert chosen.time_s == choice.time_s
        times = [c.time_s for c in e.candidates if c.status == "simulated"]
        assert chosen.time_s <= min(times) * (1 + TIE_RTOL)  # a tie goes to candidate order
        for c in e.candidates:
            if c.status == "pruned":
                assert c.time_s is None
                assert c.bound_s >= chosen.time_s * (1 - TIE_RTOL)
            assert c.bound is not None
            assert c.channel_paths


def test_bounds_name_latency_and_in_switch_reduction(sweep):
    _, explained = sweep
    small, big = explained[0], explained[-1]
    assert small.nbytes == 8
    assert small.chosen.bound.kind == "latency"
    assert small.chosen.bound.constraint  # the busiest is still named
    assert big.algorithm == "nvls"
    assert big.chosen.bound.kind == "in-switch reduction"
    assert re.fullmatch(r"g\d->sw\d|sw\d->g\d", big.chosen.bound.constraint)
    assert all(p.kind == "switch" for p in big.chosen.channel_paths)


def test_explain_leaves_the_session_as_it_was():
    session = TuneSession()
    assert session.observer is None
    choices, _ = explain_sweep(DGX, BenchRequest(sizes_bytes=(1 << 20,)), session=session)
    assert session.observer is None
    assert session.sweep(DGX, BenchRequest(sizes_bytes=(1 << 20,)))[0].time_s == choices[0].time_s


def test_to_dict_is_plain_data(ring_1g):
    data = ring_1g.to_dict()
    assert data["candidates"][0]["chosen"] is True
    assert data["candidates"][0]["bound"]["constraint"] == ring_1g.chosen.bound.constraint
    assert data["candidates"][0]["channel_paths"][0]["kind"] == "ring"


@pytest.mark.parametrize(
    ("edges", "kind", "text"),
    [
        ([(0, 1), (1, 2), (2, 0)], "ring", "ring 0>1>2>0"),
        ([(2, 0), (0, 1), (1, 2)], "ring", "ring 0>1>2>0"),
        ([(0, 1), (1, 0), (1, 2), (2, 1)], "chain", "chain 0-1-2"),
        ([(0, 1), (2, 3)], "chain", "chain 0-1 | 2-3"),
        ([(0, 4), (4, 0), (4, 2), (2, 4), (4, 6), (6, 4)], "tree", "tree 0-4 4-2 4-6"),
        ([(0, 1), (0, 2), (1, 2)], "edges", "edges 0>1 0>2 1>2"),
        ([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)], "ring", "ring 0>1>2>0 | 3>4>5>3"),
    ],
)
def test_channel_layouts_read_back(edges, kind, text):
    (path,) = _describe(0, edges)
    assert (path.kind, path.text()) == (kind, text)


def test_long_orders_are_cut_in_text_only():
    path = ChannelPath(0, "ring", (tuple(range(64)),))
    assert path.text().endswith(">...>0")
    assert len(path.orders[0]) == 64


def test_rings_inside_servers_and_hops_between_are_told_apart():
    rings = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)]
    hops = [(0, 3), (3, 0), (1, 4), (4, 1)]
    paths = _describe(2, rings + hops)
    assert [p.text() for p in paths] == ["ring 0>1>2>0 | 3>4>5>3", "chain 0-3 | 1-4"]
