"""The 2025-26 fabrics (issue 15): each new preset's wiring against its source, the Tomahawk
Ultra switch chip in a topology file, the vendor library of each new part, and one hand-worked
known answer (vr-nvl72 ring all_reduce busbw at 1 GiB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaleup import hardware
from scaleup.bench import bench_rows
from scaleup.sim import params as P
from scaleup.sim.protocols import library_for
from scaleup.topology import NodeKind, load_topology, resolve_topology
from scaleup.topology import analysis as A
from scaleup.tune.channels import uses_chains
from scaleup.tune.request import BenchRequest

GB = 1_000_000_000
GIB = 1 << 30

#: preset -> (accelerator type, accelerators, scale-up links per accelerator, switch chips,
#: hops g0 -> g{last}, GB/s per accelerator per direction, bisection GB/s per direction,
#: pooled HBM bytes). Sources: the builders' docstrings and the catalog entries they use.
WIRING = {
    # 36 NVLink 6 links x 50 GB/s = 1.8 TB/s per direction (NVIDIA: 3.6 TB/s bidirectional);
    # 9 trays x 4 NVLink 6 switch chips; 72 x 288 GB HBM4 = 20.7 TB; half the rack x 1.8 TB/s.
    "vr-nvl72": ("Rubin", 72, 36, 36, 2, 1800.0, 36 * 1800.0, 72 * 288 * GB),
    # GB200 NVL72 wiring: 18 NVLink5 x 50 GB/s, 18 switch chips; 72 x 288 GB HBM3e.
    "gb300-nvl72": ("GB300", 72, 18, 18, 2, 900.0, 36 * 900.0, 72 * 288 * GB),
    # HGX B200 wiring: 2 switch chips, 9 links per GPU per chip; 8 x 288 GB = 2.3 TB.
    "hgx-b300": ("B300", 8, 18, 2, 2, 900.0, 4 * 900.0, 8 * 288 * GB),
    # 7 xGMI links x 76.8 GB/s, full mesh, no switch; 4 x 4 pairs cross a 4/4 cut; 288 GiB each.
    "mi355x-8": ("MI355X", 8, 7, 0, 1, 7 * 76.8, 16 * 76.8, 8 * 288 * GIB),
    "mi355x-8:accelerator=MI350X": ("MI350X", 8, 7, 0, 1, 7 * 76.8, 16 * 76.8, 8 * 288 * GIB),
    # ESTIMATE: 36 x 400G UALink-over-Ethernet ports, 36 Tomahawk Ultra planes; 432 GB HBM4.
    "helios-72": ("MI455X", 72, 36, 36, 2, 1800.0, 36 * 1800.0, 72 * 432 * GB),
    # 21 x 200GbE = 3 to each of 7 peers, no switch; 16 pairs x 3 x 25 GB/s cross a 4/4 cut.
    "gaudi3-8": ("Gaudi3", 8, 21, 0, 1, 525.0, 16 * 3 * 25.0, 8 * 128 * GB),
}


@pytest.mark.parametrize("spec", sorted(WIRING))
def test_wiring_matches_the_source(spec: str) -> None:
    acc, n, links, switches, hops, per_acc, bisect, pooled = WIRING[spec]
    t = resolve_topology(spec)
    assert {d.type for d in t.accelerators} == {acc}
    assert len(t.accelerators) == n
    assert A.links_per_accelerator(t) == links
    assert len(t.switches) == switches
    assert A.hops(t, 0, n - 1) == hops
    assert A.max_hops(t) == hops
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(per_acc)
    assert A.bisection_gb_per_s(t) == pytest.approx(bisect, rel=1e-9)
    assert A.pooled_memory_bytes(t) == pooled
    assert A.is_uniform(t)


def test_switched_presets_put_one_link_per_gpu_on_every_chip() -> None:
    for spec, chip, per_chip in (
        ("vr-nvl72", "nvswitch5", 1),
        ("gb300-nvl72", "nvswitch4", 1),
        ("hgx-b300", "nvswitch4", 9),
        ("helios-72", "tomahawk-ultra-400g", 1),
    ):
        t = resolve_topology(spec)
        assert {s.type for s in t.switches} == {chip}
        for link in t.links:
            assert link.count == per_chip
        ports = hardware.switch_chip(chip).port_count
        assert len(t.accelerators) * per_chip <= ports, spec


def test_meshes_join_every_pair() -> None:
    for spec, per_pair in (("mi355x-8", 1), ("gaudi3-8", 3)):
        t = resolve_topology(spec)
        assert A.is_full_mesh(t)
        assert {x.count for x in t.links} == {per_pair}
        assert len(t.links) == 28


def test_hosts_option_adds_the_superchip_cpus() -> None:
    for spec in ("vr-nvl72:hosts=true", "gb300-nvl72:hosts=true"):
        t = resolve_topology(spec)
        assert len(t.hosts) == 36
        assert sum(1 for x in t.links if x.tech == "c2c") == 72


def test_catalog_figures_of_the_new_parts() -> None:
    assert hardware.link_tech("nvlink6").bandwidth_gb_per_s == 50.0
    assert hardware.accelerator("Rubin").scaleup_gb_per_s == pytest.approx(1800.0)
    assert hardware.accelerator("B300").scaleup_gb_per_s == pytest.approx(900.0)
    assert hardware.accelerator("MI350X").link_count == 7
    assert hardware.accelerator("Gaudi3").scaleup_gb_per_s == pytest.approx(525.0)
    assert hardware.switch_chip("nvswitch5").port_count == 72
    for name in ("B300", "GB300", "Rubin", "MI350X", "MI455X", "Gaudi3"):
        assert hardware.accelerator(name).sources, name
    # Unpublished figures are labelled.
    assert "ESTIMATE" in hardware.accelerator("MI455X").sources["link_count"]
    assert "ESTIMATE" in hardware.accelerator("Rubin").sources["peak_bf16_tflops"]
    assert "ESTIMATE" in hardware.link_tech("ualink-eth").sources["bandwidth_gb_per_s"]


def test_tomahawk_ultra_is_a_reducing_250ns_switch() -> None:
    for name, ports in (("tomahawk-ultra", 64), ("tomahawk-ultra-400g", 128)):
        chip = hardware.switch_chip(name)
        assert chip.port_count == ports
        assert chip.latency_s == pytest.approx(250e-9)
        assert chip.in_switch_reduction
        # 51.2 Tb/s either way
        assert ports * chip.port_bandwidth_bytes_per_s * 8 == pytest.approx(51.2e12)


def test_a_topology_file_with_tomahawk_ultra_loads(tmp_path: Path) -> None:
    lines = ['name = "sue-4"', "[[devices]]", 'id = "sw0"', 'type = "tomahawk-ultra"']
    for i in range(4):
        lines += ["[[devices]]", f'id = "g{i}"', 'type = "MI455X"']
        lines += ["[[links]]", f'a = "g{i}"', 'b = "sw0"', 'tech = "ualink-eth"', "count = 4"]
    path = tmp_path / "sue-4.toml"
    path.write_text("\n".join(lines) + "\n")
    t = load_topology(path)
    assert [d.kind for d in t.switches] == [NodeKind.SWITCH]
    assert A.links_per_accelerator(t) == 4
    assert A.hops(t, 0, 3) == 2
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(200.0)


def test_vendor_libraries() -> None:
    """NVIDIA parts run NCCL; AMD's CDNA 4/5 RCCL (CDNA 4 has an RCCL tuning set, CDNA 5 falls
    back to the generic one); Gaudi 3's HCCL has no constants here: NCCL's protocol model with
    the textbook tree, as for generic parts."""
    assert library_for(resolve_topology("vr-nvl72")) == "nccl"
    assert library_for(resolve_topology("hgx-b300")) == "nccl"
    assert library_for(resolve_topology("mi355x-8")) == "rccl"
    assert ("cdna4", False) in P.RCCL_TUNING_SET
    assert library_for(resolve_topology("helios-72")) == "rccl"
    assert library_for(resolve_topology("gaudi3-8")) == "nccl"
    assert not uses_chains(resolve_topology("gaudi3-8"))


def test_vr_nvl72_ring_all_reduce_busbw_by_hand() -> None:
    """Hand check: a ring all_reduce moves 2(n-1)/n x S out of every GPU, spread over its 36
    NVLink 6 links (one per switch plane) at 50 GB/s x 40.1/50 (NVLink payload efficiency,
    measured on NVLink 5, assumed for NVLink 6): busbw -> 36 x 40.1 = 1,443.6 GB/s, the time
    2(n-1)/n x 8 GiB / 1,443.6 GB/s = 11.74 ms. The simulator adds ~0.55 ms of launch and
    per-step latency over the 142 ring steps of 72 ranks (found at 1 GiB: 2,020.6 us of which
    1,466.9 us on the wire), so at 8 GiB busbw is within 5% below the wire bound."""
    size = 8 * GIB
    row = bench_rows(
        "vr-nvl72", BenchRequest(sizes_bytes=(size,), algorithm="ring", protocol="simple")
    )[0]
    n = 72
    wire_gb_per_s = 36 * 50.0 * (40.1 / 50.0)
    wire_us = 2 * (n - 1) / n * size / (wire_gb_per_s * 1e9) * 1e6
    assert row.algo == "ring"
    assert wire_us == pytest.approx(11_735.0, rel=1e-3)
    assert row.time_us == pytest.approx(wire_us + 553.6, rel=0.02)
    assert row.busbw_gb_per_s <= wire_gb_per_s
    assert row.busbw_gb_per_s == pytest.approx(wire_gb_per_s, rel=0.05)


def test_in_network_reduction_beyond_nvswitch() -> None:
    """Issue 15 item 3: any scale-up switch the catalog marks as reducing enables the in-switch
    reduction algorithm (``nvls``), not only NVLink SHARP; a scale-up Ethernet link is a
    scale-up link class (no NET step latency) and not a scale-out link."""
    from scaleup.sim.paths import link_class
    from scaleup.topology import analysis
    from scaleup.tune import BenchRequest, TuneSession
    from scaleup.tune.channel_graph import is_network

    helios = resolve_topology("helios-72")
    assert analysis.nvls_capable(helios)  # 36 Tomahawk Ultra planes, in-switch AllReduce
    assert not analysis.nvls_capable(resolve_topology("ualink-pod:n=16"))  # UALink 1.0: none
    assert not analysis.nvls_capable(resolve_topology("gaudi3-8"))  # no switch at all
    assert link_class("ualink-eth") == link_class("nvlink5") == 1
    assert link_class("eth-400g") == 3  # a NIC's Ethernet stays the network class
    assert not is_network("ualink-eth")
    assert is_network("eth-400g")
    (choice,) = TuneSession().sweep(helios, BenchRequest(sizes_bytes=(1 << 30,)))
    assert choice.algorithm == "nvls"
    # by hand: without in-network reduction no algorithm's busbw exceeds what a GPU's links
    # carry (36 x 50 GB/s x Ethernet payload efficiency 0.95 = 1,710 GB/s); the switch
    # reduction moves S(1 + 1/N) per link instead of 2S(N-1)/N, so busbw goes above it
    busbw = (1 << 30) / choice.time_s * 2 * 71 / 72 / 1e9
    assert busbw > 36 * 50 * 0.95
