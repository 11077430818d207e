"""Builders of the 2025-26 scale-up machines: Blackwell Ultra, Vera Rubin (NVLink 6), AMD CDNA 4
and Helios (UALink over Ethernet), Intel Gaudi 3 (RoCE mesh).

Split from :mod:`scaleup.topology.machines` (the earlier DGX/HGX/NVL72/MI300X builders, whose
wiring helpers these reuse) so that each module stays one screen of wiring with its sources.
Every builder returns the same :class:`~scaleup.topology.model.Topology` a file would; ids follow
the conventions in :mod:`~scaleup.topology.presets`. Figures marked as estimates in the catalog
(Rubin's link count, MI455X's ports, the NVLink 6 switch radix) make the wiring an estimate too;
the docstrings say which.
"""

from __future__ import annotations

from scaleup.topology.generators import full_mesh, switched
from scaleup.topology.machines import hgx_blackwell, nvl_rack, xgmi_mesh
from scaleup.topology.model import Topology

__all__ = ["gaudi3_8", "gb300_nvl72", "helios_72", "hgx_b300", "mi355x_8", "vr_nvl72"]


def vr_nvl72(hosts: bool = False, gpus: int = 72) -> Topology:
    """Vera Rubin NVL72: 72 Rubin GPUs, 36 NVLink 6 switch chips (9 switch trays x 4); each GPU
    has one NVLink 6 link to every chip (36 links, 1.8 TB/s per direction = NVIDIA's 3.6 TB/s
    bidirectional), 72 ports per chip. With ``hosts`` the 36 Vera CPUs are added, each joined to
    its 2 GPUs by NVLink-C2C. Sources: NVIDIA "Inside the NVIDIA Rubin Platform" (72 GPUs,
    3.6 TB/s per GPU, 260 TB/s per rack); wheelersnetwork.com "Decoding Nvidia's Rubin Networking
    Math" (4 NVLink ASICs per switch tray). The 36 links per GPU and 72 ports per chip are the
    catalog's derivation from those figures (see ``nvlink6``, ``nvswitch5``).

    Racks (``4xvr-nvl72``) get one NIC per GPU; ``nic=ib-xdr`` for 800G (the rack carries two
    ConnectX-9 800G per GPU, wheelersnetwork.com, which one NIC per GPU does not model).
    ``gpus=k``: an NVLink partition of its first k GPUs, as for ``gb200-nvl72``."""
    desc = "Vera Rubin NVL72: {n} x Rubin, 36 NVLink 6 switch chips, one link per GPU per chip"
    return nvl_rack("vr-nvl72", desc, "Rubin", "Vera", "nvswitch5", 36, hosts, gpus)


def gb300_nvl72(hosts: bool = False, gpus: int = 72) -> Topology:
    """GB300 NVL72: 72 Blackwell Ultra GPUs wired as :func:`~scaleup.topology.machines.gb200_nvl72`
    (18 NVLink5 switch chips, one link per GPU per chip, 1.8 TB/s bidirectional per GPU); with
    ``hosts`` the 36 Grace CPUs over NVLink-C2C. One ConnectX-8 800G NIC per GPU: racks as
    ``4xgb300-nvl72:nic=ib-xdr``. Sources: NVIDIA GB300 NVL72 figures as listed by
    glennklockwood.com/garden/processors/B300 ("18 NVLink Switches at 130 TB/s", "72 ConnectX-8
    NICs"). ``gpus=k``: an NVLink partition of its first k GPUs, as for ``gb200-nvl72``."""
    desc = "GB300 NVL72: {n} x GB300, 18 NVLink5 switch chips, one link per GPU per chip"
    return nvl_rack("gb300-nvl72", desc, "GB300", "Grace", "nvswitch4", 18, hosts, gpus)


def hgx_b300(gpu: str = "B300") -> Topology:
    """HGX B300 8-GPU: the HGX B200 baseboard wiring (2 NVLink5 switch chips, 9 links per GPU per
    chip, 1.8 TB/s bidirectional per GPU) with B300 GPUs; a ConnectX-8 800G SuperNIC per GPU on
    the baseboard (``Nxhgx-b300:nic=ib-xdr``). Sources: acecloud.ai and fibermall.com HGX B300
    spec tables ("NVLink 5, 1.8 TB/s bidirectional per GPU", "14.4 TB/s" total)."""
    return hgx_blackwell("hgx-b300", gpu)


def mi355x_8(accelerator: str = "MI355X") -> Topology:
    """8 x MI355X (or ``accelerator=MI350X``, the air-cooled part) on the MI350-series UBB: one
    xGMI link of 76.8 GB/s per direction between every pair (7 per GPU; the 8th Infinity Fabric
    link is PCIe 5 to the host), no switch. Sources: AMD Hot Chips 2025 CDNA 4 talk ("7 IF links
    per socket", "up to 8 GPUs in a fully connected topology"), the catalog's ``xgmi-mi355x``."""
    return xgmi_mesh("mi355x-8", accelerator)


def helios_72() -> Topology:
    """AMD Helios: 72 MI455X on UALink over Ethernet, one hop through 36 Broadcom Tomahawk Ultra
    chips run as 128 x 400G (``tomahawk-ultra-400g``); each GPU has one 400G port into every chip
    (36 ports, ~1.8 TB/s per direction), 72 ports of 128 used per chip. An ESTIMATE: AMD publishes
    72 GPUs, 432 GB HBM4 each and ~260 TB/s of scale-up bandwidth, and first racks on Broadcom
    Ethernet switches (Computex 2026 coverage), not the switch count or port speed; in-switch
    collectives of the chip are not modelled."""
    desc = "AMD Helios: 72 x MI455X, UALink over Ethernet, 36 Tomahawk Ultra (128 x 400G) planes"
    return switched(
        72,
        "MI455X",
        "tomahawk-ultra-400g",
        planes=36,
        links_per_plane=1,
        name="helios-72",
        description=desc,
    )


def gaudi3_8() -> Topology:
    """Intel Gaudi 3 HLS-3: 8 Gaudi 3, all-to-all over the on-die RoCE ports, 3 x 200GbE between
    every pair (21 scale-up ports per chip), no switch; the 3 scale-out ports per chip are left to
    ``Nxgaudi3-8`` (one NIC per accelerator). Source: docs.habana.ai "Intel Gaudi Network
    Configuration" ("21/7=3 scale-up ports for each connection inside the box")."""
    desc = "Gaudi 3 HLS-3: 8 x Gaudi3, all-to-all RoCE mesh, 3 x 200GbE per pair, no switch"
    return full_mesh(8, "Gaudi3", links_per_pair=3, name="gaudi3-8", description=desc)
