"""The tuner: NCCL's enable rules, overrides, and never slower than a candidate it knows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import (
    BenchRequest,
    TuneSession,
    candidates,
    channel_counts,
    enabled_algorithms,
    enabled_protocols,
    tune,
)
from scaleup.tune.size_channels import ChannelTrim

DGX = resolve_topology("dgx-h100")


def _trimmed(topology, collective, nbytes):
    """The candidates with the channels NCCL gives them at ``nbytes`` (tune.size_channels)."""
    trim = ChannelTrim.of(topology)
    return {trim.trim(c, nbytes) for c in candidates(topology, collective, ranks=None)}


def _exhaustive_min(topology, collective, nbytes, **kw):
    """The least simulated time over every candidate (with the channels NCCL gives it at this
    size), each simulated on its own (pinned)."""
    times = []
    for c in _trimmed(topology, collective, nbytes):
        choice = tune(
            topology,
            collective,
            nbytes,
            algo=c.algorithm,
            proto=c.protocol,
            channels=c.channels,
            **kw,
        )
        times.append(choice.time_s)
    return min(times)


@pytest.mark.parametrize("nbytes", [8, 64 * 1024, 1 << 30])
def test_tune_is_the_simulators_fastest(nbytes):
    choice = tune(DGX, "all_reduce", nbytes, selection="fastest")
    assert choice.time_s <= _exhaustive_min(DGX, "all_reduce", nbytes) * (1 + 1e-12)
    assert {c for c, _ in choice.considered} == _trimmed(DGX, "all_reduce", nbytes)


@settings(max_examples=6, deadline=None)
@given(
    exps=st.lists(st.integers(min_value=3, max_value=33), min_size=1, max_size=6, unique=True),
    collective=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "broadcast"]),
)
def test_sweep_branch_and_bound_matches_exhaustive(exps, collective):
    sizes = sorted(2**e for e in exps)
    swept = TuneSession().sweep(DGX, BenchRequest(op=collective, sizes_bytes=tuple(sizes)))
    for nbytes, choice in zip(sizes, swept, strict=True):
        best = tune(DGX, collective, nbytes)
        assert choice.time_s <= best.time_s * (1 + 1e-12)


def test_nvls_at_large_all_reduce_not_at_tiny():
    assert tune(DGX, "all_reduce", 1 << 30).algorithm == "nvls"
    assert tune(DGX, "all_reduce", 8).algorithm != "nvls"


def test_overrides_pin_the_choice():
    choice = tune(DGX, "all_reduce", 1 << 20, algo="ring", proto="ll", channels=2)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("ring", "ll", 2)
    with pytest.raises(UsageError):
        tune(DGX, "all_reduce", 1 << 20, proto="bogus")
    with pytest.raises(UsageError):
        tune(DGX, "all_reduce", 1 << 20, algo="no-such-algorithm")


def test_enable_rules():
    pcie = resolve_topology("pcie-8")
    assert "nvls" in enabled_algorithms(DGX, "all_reduce")
    assert enabled_protocols(DGX, "nvls") == ["simple"]
    assert "ll128" in enabled_protocols(DGX, "ring")
    assert "nvls" not in enabled_algorithms(pcie, "all_reduce")
    assert "ll128" not in enabled_protocols(pcie, "ring")
    assert "nvls" not in enabled_algorithms(resolve_topology("dgx-a100"), "all_reduce")
    assert "nvls" not in enabled_algorithms(resolve_topology("mi300x-8"), "all_reduce")
    assert "nvls" not in enabled_algorithms(DGX.with_peer_access(False), "all_reduce")
    assert "hierarchical" not in enabled_algorithms(DGX, "all_reduce")
    two = resolve_topology("2xdgx-h100")
    assert "nvls" not in enabled_algorithms(two, "all_reduce")
    assert channel_counts(DGX) == (1, 2, 4, 8, 16)


@pytest.mark.parametrize(
    ("spec", "ranks", "off_removes_it"),
    [
        ("2xgb200-nvl72:gpus=4,nic=ib-ndr", None, True),  # C2C-hosted GPUs across servers
        ("2xgb200-nvl72:gpus=4,nic=ib-ndr", [0, 1, 2, 3], False),  # one server
        ("gb200-nvl72", None, False),  # one NVLink domain: no network path
        ("2xdgx-h100", None, False),  # PCIe-hosted GPUs: NICs on their PCIe switches (PXB)
    ],
)
def test_ll128_c2c_is_the_nic_path_rule_of_nccl_2_26(spec, ranks, off_removes_it):
    """NCCL_LL128_C2C=0 (NCCL 2.26 and earlier) keeps LL128 off the network paths of
    C2C-hosted GPUs (tuning.cc typeInter rule): across GB200 servers only."""
    topo = resolve_topology(spec)
    assert "ll128" in enabled_protocols(topo, "ring", ranks)
    off = enabled_protocols(topo, "ring", ranks, ll128_c2c=False)
    assert ("ll128" not in off) == off_removes_it
    assert set(off) >= {"ll", "simple"}
    assert enabled_protocols(topo, "nvls_tree", ranks, ll128_c2c=False) == ["simple"]


def test_ll128_c2c_reaches_the_tuner():
    """A two-tray GB200 all_reduce where NCCL's model picks LL128 at 2.27+ picks another
    protocol with NCCL_LL128_C2C=0, as NCCL 2.26 did."""
    topo = resolve_topology("2xgb200-nvl72:gpus=4,nic=ib-ndr")
    now = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(1 << 20,)))[0]
    old = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(1 << 20,), ll128_c2c=False))[0]
    assert now.protocol == "ll128"
    assert old.protocol != "ll128"
    with pytest.raises(UsageError, match="ll128_c2c"):
        BenchRequest(ll128_c2c="no")  # type: ignore[arg-type]


def test_ranks_subset():
    choice = tune(DGX, "all_reduce", 1 << 20, nranks=4)
    assert choice.result is not None
    with pytest.raises(UsageError):
        tune(DGX, "all_reduce", 1 << 20, nranks=9)


def test_scaled_structure_matches_a_direct_simulation():
    from scaleup.collectives.algorithms import build_schedule
    from scaleup.collectives.spec import CollectiveSpec
    from scaleup.sim import simulate

    choice = tune(DGX, "all_reduce", 1 << 28, algo="ring", proto="simple", channels=4)
    schedule = build_schedule(
        "ring", CollectiveSpec("all_reduce", 8, (1 << 28) // 4), channels=4, chunks=choice.chunks
    )
    assert simulate(schedule, DGX, protocol="simple").time_s == pytest.approx(
        choice.time_s, rel=1e-6
    )
