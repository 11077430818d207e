"""Analysis functions: hand-worked answers on small fabrics, and the summary's keys."""

from __future__ import annotations

import pytest

from scaleup.topology import Device, Link, Topology, resolve_topology
from scaleup.topology import analysis as A
from scaleup.topology.generators import full_mesh


def _line(n: int) -> Topology:
    """g0 - g1 - ... in a line, link i has i+1 NVLink4 links (25 GB/s each)."""
    devices = [Device.of(f"g{i}", "H100") for i in range(n)]
    return Topology(
        "line", devices, [Link(f"g{i}", f"g{i + 1}", "nvlink4", i + 1) for i in range(n - 1)]
    )


def test_line_hand_worked() -> None:
    t = _line(4)
    assert A.hops(t, "g0", "g3") == 3
    assert A.max_hops(t) == 3
    assert A.bottleneck_gb_per_s(t, 0, 3) == pytest.approx(25.0)
    assert A.bottleneck_gb_per_s(t, 1, 3) == pytest.approx(50.0)
    assert A.max_flow_gb_per_s(t, 3, 0) == pytest.approx(25.0)
    assert A.bisection_gb_per_s(t) == pytest.approx(50.0)  # {g0,g1} | {g2,g3} cuts the 2-link hop
    assert A.bisection(t)[1] is True
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(25.0)  # g0 has only one link
    assert not A.is_uniform(t)
    rows = A.pair_table(t)
    assert len(rows) == 6
    assert rows[0] == {"a": "g0", "b": "g1", "hops": 1, "bottleneck_gb_per_s": 25.0}


def test_full_mesh_bisection_exact() -> None:
    t = full_mesh(6, "MI300X")
    per_link = t.channels[0].bandwidth_bytes_per_s / 1e9
    assert A.bisection(t) == (pytest.approx(9 * per_link), True)  # 3 x 3 links cross the cut
    assert A.is_uniform(t)


def test_bound_used_beyond_the_exact_limit() -> None:
    t = resolve_topology("dgx2")
    value, exact = A.bisection(t)
    assert not exact
    assert value == pytest.approx(1200.0)


def test_pooled_memory_and_summary_keys() -> None:
    t = resolve_topology("dgx-h100")
    assert A.pooled_memory_bytes(t) == 8 * 80_000_000_000
    facts = A.summary(t)
    for key in (
        "name",
        "accelerators",
        "switches",
        "links",
        "per_accelerator_gb_per_s",
        "bisection_gb_per_s",
        "uniform",
        "max_hops",
        "pooled_memory_bytes",
    ):
        assert key in facts
    assert facts["accelerators"] == 8
    assert facts["switches"] == 4
    assert facts["links"] == 144
    assert facts["uniform"] is True
    assert facts["max_hops"] == 2


def test_single_accelerator() -> None:
    t = Topology("one", [Device.of("g0", "H100")], [])
    assert A.bisection_gb_per_s(t) == 0.0
    assert A.is_uniform(t)
    assert A.max_hops(t) == 0


# ---- the tuner's predicates -------------------------------------------------------------------


def test_nvls_capable_needs_reducing_nvlink_switches_in_one_server() -> None:
    dgx = resolve_topology("dgx-h100")
    assert A.nvls_capable(dgx)
    assert A.nvls_capable(dgx, [0, 3, 5])
    assert not A.nvls_capable(dgx.with_peer_access(False))
    assert not A.nvls_capable(resolve_topology("dgx-a100"))  # NVSwitch gen2: no SHARP
    assert not A.nvls_capable(resolve_topology("mi300x-8"))  # no switch at all
    two = resolve_topology("2xdgx-h100")
    assert not A.nvls_capable(two)
    assert A.nvls_capable(two, [8, 9, 15])  # a group inside the second server


def test_nvlink_class_reads_the_link_family() -> None:
    assert A.nvlink_class(resolve_topology("dgx-h100"))
    assert A.nvlink_class(resolve_topology("h100-nvl-pair"))
    assert not A.nvlink_class(resolve_topology("pcie-8"))
    assert not A.nvlink_class(resolve_topology("mi300x-8"))  # xGMI is not NVLink
    assert not A.nvlink_class(resolve_topology("dgx-h100").with_peer_access(False))


def test_links_per_accelerator_counts_scale_up_links_only() -> None:
    assert A.links_per_accelerator(resolve_topology("dgx-h100")) == 18
    assert A.links_per_accelerator(resolve_topology("2xdgx-h100")) == 18  # NICs left out
    assert A.links_per_accelerator(resolve_topology("pcie-8")) == 0  # PCIe is a host link
    mesh = full_mesh(4, "MI300X", tech="xgmi-mi300x", links_per_pair=2)
    assert A.links_per_accelerator(mesh) == 6


def test_full_mesh_and_rank_nodes() -> None:
    assert A.is_full_mesh(resolve_topology("mi300x-8"))
    assert not A.is_full_mesh(resolve_topology("dgx-h100"))  # through switches
    assert not A.is_full_mesh(resolve_topology("mi300x-8"), [0, 1])  # two ranks: a pair
    assert A.rank_nodes(resolve_topology("2xdgx-h100"), [0, 7, 8]) == (0, 0, 1)
