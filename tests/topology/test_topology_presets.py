"""Every preset builds and validates; each machine's known properties; Nx; the resolver."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaleup.errors import TopologyFileError, UnknownPreset, UsageError
from scaleup.topology import NodeKind, Topology, list_presets, resolve_topology
from scaleup.topology import analysis as A
from scaleup.topology.generators import full_mesh, multi_node, pcie_tree, switched
from scaleup.topology.machines import DGX1V_LINKS, MI250X_16_LINKS
from scaleup.topology.presets import PRESETS, parse_params


def _ualink_available() -> bool:
    from scaleup import hardware

    return any(a.link_tech == "ualink1" for a in hardware.catalog().accelerators.values())


needs_ualink = pytest.mark.skipif(
    not _ualink_available(), reason="no UALink accelerator in the catalog yet"
)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds(name: str) -> None:
    t = resolve_topology(name)
    assert isinstance(t, Topology)
    assert t.name == name
    assert t.description
    assert len(t.channels) == 2 * len({frozenset((x.a, x.b)) for x in t.links})
    assert all(d.id == f"g{r}" for r, d in enumerate(t.accelerators))
    assert list_presets()[name]


def test_dgx1_v100() -> None:
    t = resolve_topology("dgx1-v100")
    table = A.pair_table(t)
    assert {row["hops"] for row in table} == {1, 2}
    doubled = [x for x in t.links if x.count == 2]
    assert len(doubled) == 8
    assert all(sum(row) == 6 for row in DGX1V_LINKS)
    assert A.hops(t, 0, 5) == 2
    assert A.bottleneck_gb_per_s(t, 0, 1) == pytest.approx(50.0)
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(150.0)
    assert not A.is_uniform(t)


def test_dgx1_p100() -> None:
    t = resolve_topology("dgx1-p100")
    assert all(sum(x.count for x in t.links if d.id in (x.a, x.b)) == 4 for d in t.accelerators)
    assert A.max_hops(t) == 2


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-h200"])
def test_dgx_hopper_uniform_at_450(name: str) -> None:
    t = resolve_topology(name)
    assert len(t.accelerators) == 8
    assert len(t.switches) == 4
    assert A.is_uniform(t)
    assert A.max_hops(t) == 2
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(450.0)
    assert sorted(x.count for x in t.links if x.a == "g0") == [4, 4, 5, 5]
    assert A.bottleneck_gb_per_s(t, 0, 7) == pytest.approx(
        125.0
    )  # widest single path: a 5-link plane
    assert A.max_flow_gb_per_s(t, 0, 7) == pytest.approx(450.0)
    assert A.bisection_gb_per_s(t) == pytest.approx(4 * 450.0)


def test_gb200_nvl72() -> None:
    t = resolve_topology("gb200-nvl72")
    assert len(t.accelerators) == 72
    assert len(t.switches) == 18
    assert {d.type for d in t.switches} == {"nvswitch4"}
    assert A.is_uniform(t)
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(900.0)
    assert A.bisection_gb_per_s(t) == pytest.approx(36 * 900.0)
    hosts = resolve_topology("gb200-nvl72:hosts=true")
    assert len(hosts.hosts) == 36
    assert A.per_accelerator_gb_per_s(hosts) == pytest.approx(900.0)


def test_pcie_8_peer_bandwidth_bounded_by_pcie() -> None:
    t = resolve_topology("pcie-8")
    assert len(t.hosts) == 2
    assert len(t.switches) == 4
    assert not any(x.a.startswith("g") and x.b.startswith("g") for x in t.links)  # no peer links
    pcie = t.channels[t.channel_index[("g0", "pcisw0")]].bandwidth_bytes_per_s / 1e9
    upi = t.channels[t.channel_index[("cpu0", "cpu1")]].bandwidth_bytes_per_s / 1e9
    assert A.max_flow_gb_per_s(t, 0, 1) == pytest.approx(pcie)  # same PCIe switch
    assert A.max_flow_gb_per_s(t, 0, 7) == pytest.approx(min(pcie, upi))  # across sockets
    assert A.hops(t, 0, 1) == 2
    assert A.hops(t, 0, 2) == 4
    assert A.hops(t, 0, 7) == 5
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(pcie)


def test_dgx2_and_a100_and_b200() -> None:
    dgx2 = resolve_topology("dgx2")
    assert len(dgx2.accelerators) == 16
    assert len(dgx2.switches) == 12
    assert A.max_hops(dgx2) == 3
    assert A.per_accelerator_gb_per_s(dgx2) == pytest.approx(150.0)
    assert A.bisection_gb_per_s(dgx2) == pytest.approx(8 * 150.0)  # the 48 trunk links carry it
    a100 = resolve_topology("dgx-a100")
    assert len(a100.switches) == 6
    assert A.per_accelerator_gb_per_s(a100) == pytest.approx(300.0)
    b200 = resolve_topology("hgx-b200")
    assert len(b200.switches) == 2
    assert A.per_accelerator_gb_per_s(b200) == pytest.approx(900.0)
    assert A.is_uniform(b200)


def test_amd_presets() -> None:
    mi300 = resolve_topology("mi300x-8")
    assert not mi300.switches
    assert len(mi300.links) == 28
    assert A.is_uniform(mi300)
    assert A.max_hops(mi300) == 1
    mi250 = resolve_topology("mi250x-8")
    assert len(mi250.accelerators) == 16
    per_gcd = {
        d.id: sum(x.count for x in mi250.links if d.id in (x.a, x.b)) for d in mi250.accelerators
    }
    assert set(per_gcd.values()) == {7}
    assert all(c == 4 for a, b, c in MI250X_16_LINKS if b == a + 1 and a % 2 == 0)
    assert not A.is_uniform(mi250)


def test_h100_nvl_pair() -> None:
    t = resolve_topology("h100-nvl-pair")
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(300.0)
    assert A.bottleneck_gb_per_s(t, 0, 1) == pytest.approx(300.0)


@needs_ualink
def test_ualink_pod() -> None:
    t = resolve_topology("ualink-pod")
    assert len(t.accelerators) == 128
    assert len(t.switches) == 8
    assert A.is_uniform(t)
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(800.0)
    big = resolve_topology("ualink-pod:n=1024")  # how fast: bench/, not a timed test
    assert len(big.channels) > 0
    assert len(big.accelerators) == 1024
    assert A.max_hops(big) == 4


def test_ualink_pod_limit() -> None:
    with pytest.raises(UsageError, match="at most 1024"):
        resolve_topology("ualink-pod:n=2048")


def test_large_switched_builds() -> None:
    t = switched(1024, "GB200", "nvswitch4", planes=4)
    assert len(t.channels) > 8000
    assert len(t.channel_index) == len(t.channels)
    assert any(d.id == "p0.spine0" for d in t.switches)


def test_multi_node() -> None:
    t = resolve_topology("2xdgx-h100")
    assert t.name == "2xdgx-h100"
    assert len(t.accelerators) == 16
    assert t.ranks_per_node == 8
    assert [d.id for d in t.accelerators[7:9]] == ["n0.g7", "n1.g0"]
    assert t.accelerators[8].node == 1
    assert len(t.nics) == 16
    assert t.device("n1.nic3").node == 1
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(450.0)  # NIC links are not scale-up
    assert A.bottleneck_gb_per_s(t, "n0.g0", "n1.g0") == pytest.approx(50.0)  # one 400G NIC each
    assert A.max_flow_gb_per_s(t, "n0.g0", "n1.g0") == pytest.approx(8 * 50.0)  # via all 8 NICs
    assert A.bisection_gb_per_s(t) == pytest.approx(8 * 50.0)
    rail = resolve_topology("2xdgx-h100:rail_optimized=true")
    assert any(d.id == "net.rail0" for d in rail.switches)
    assert A.hops(rail, "n0.g0", "n1.g0") < A.hops(rail, "n0.g0", "n1.g1")
    xdr = resolve_topology("4xhgx-b200:nic=ib-xdr")
    assert {d.type for d in xdr.nics} == {"ib-xdr"}
    assert xdr.nodes == (0, 1, 2, 3)


def test_multi_node_large_fabric_is_two_tier() -> None:
    t = multi_node(resolve_topology("dgx-h100"), 16)
    assert any(d.id.startswith("net.spine") for d in t.switches)
    assert A.bottleneck_gb_per_s(t, "n0.g0", "n15.g7") == pytest.approx(50.0)


def test_generators() -> None:
    assert len(full_mesh(4, "MI300X", links_per_pair=2).links) == 6
    tree = pcie_tree(4, "H100-PCIe", per_switch=2, sockets=1)
    assert len(tree.hosts) == 1
    with pytest.raises(UsageError):
        switched(0, "H100", "nvswitch3")
    with pytest.raises(UsageError, match="planes"):
        switched(8, "H100", "nvswitch3", planes=2, links_per_plane=[1, 2, 3])


def test_resolver_forms(tmp_path: Path) -> None:
    assert resolve_topology("dgx-h100") is resolve_topology(" dgx-h100 ")  # cached, immutable
    assert resolve_topology("dgx-h100:gpu=H800").accelerators[0].type == "H800"
    path = Path(__file__).resolve().parents[2] / "examples" / "two-h100.toml"
    assert resolve_topology(str(path)).name == "two-h100"
    with pytest.raises(TopologyFileError, match="cannot read"):
        resolve_topology(str(tmp_path / "missing.toml"))


def test_resolver_errors() -> None:
    with pytest.raises(UnknownPreset, match="did you mean dgx-h100"):
        resolve_topology("dgx-h10")
    with pytest.raises(UsageError, match="unknown parameter 'bogus'") as info:
        resolve_topology("dgx-h100:bogus=1")
    assert info.value.entry == "bogus"
    with pytest.raises(UsageError, match="not key=value"):
        resolve_topology("ualink-pod:n")
    with pytest.raises(UnknownPreset):
        resolve_topology("2xnothing")
    with pytest.raises(UsageError, match="unknown parameter 'bogus'"):
        resolve_topology("2xdgx-h100:bogus=2")


def test_parse_params() -> None:
    assert parse_params("n=8, x=1.5, flag=false, s=abc") == {
        "n": 8,
        "x": 1.5,
        "flag": False,
        "s": "abc",
    }


def test_nics_and_hosts_are_their_kinds() -> None:
    t = resolve_topology("2xpcie-8")
    assert {d.kind for d in t.devices} == set(NodeKind)


@pytest.mark.parametrize("rack", ["gb200-nvl72", "gb300-nvl72", "vr-nvl72"])
def test_nvl_rack_partitions(rack: str) -> None:
    """``gpus=k``: an NVLink partition of a rack's first k GPUs, each still on every switch chip,
    so the per-GPU rate is the whole rack's."""
    whole = resolve_topology(rack)
    part = resolve_topology(f"{rack}:gpus=4")
    assert len(part.accelerators) == 4
    assert len(part.switches) == len(whole.switches)
    assert A.is_uniform(part)
    assert A.per_accelerator_gb_per_s(part) == pytest.approx(A.per_accelerator_gb_per_s(whole))
    assert "partition of 4 GPUs" in part.description
    assert len(resolve_topology(f"{rack}:gpus=8,hosts=true").hosts) == 4
    assert len(resolve_topology(f"3x{rack}:gpus=4").accelerators) == 12


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ("gb200-nvl72:gpus=73", "from 1 to 72"),
        ("gb200-nvl72:gpus=0", "from 1 to 72"),
        ("gb300-nvl72:gpus=3,hosts=true", "even with hosts"),
    ],
)
def test_nvl_rack_partition_bad_sizes(spec: str, rule: str) -> None:
    with pytest.raises(UsageError, match=rule) as info:
        resolve_topology(spec)
    assert "gpus" in info.value.one_line()
