"""The named machines' builders, wired as shipped: DGX, HGX, NVL72, MI300X/MI250X, UALink, PCIe.

Split from :mod:`scaleup.topology.presets` (the registry, which re-exports these builders and
resolves what users type) so that each machine's wiring, with its sources, reads on its own.
Every builder returns the same :class:`~scaleup.topology.model.Topology` a file would; ids follow
the conventions in :mod:`~scaleup.topology.presets`.
"""

from __future__ import annotations

import itertools

from scaleup import hardware
from scaleup.errors import UsageError
from scaleup.topology.generators import full_mesh, pcie_tree, switched
from scaleup.topology.model import Device, Link, NodeKind, Topology

__all__ = [
    "DGX1V_LINKS",
    "MI250X_16_LINKS",
    "dgx1_p100",
    "dgx1_v100",
    "dgx2",
    "dgx_a100",
    "dgx_h100",
    "dgx_h200",
    "gb200_nvl72",
    "h100_nvl_pair",
    "hgx_b200",
    "hgx_blackwell",
    "mi250x_8",
    "mi300x_8",
    "pcie_8",
    "ualink_pod",
    "with_superchip_hosts",
    "xgmi_mesh",
]


def pcie_8(accelerator: str = "H100-PCIe", tech: str = "pcie5", per_switch: int = 2) -> Topology:
    """8 PCIe cards, 2 per PCIe switch, 4 switches, 2 per CPU socket, sockets joined by UPI.

    The common 8-GPU PCIe server (e.g. Supermicro SYS-420GP-TNR, dual-socket with PLX/Broadcom
    PEX switches): no peer links; P2P crosses the shared PCIe switch, the root complex, or both
    sockets and the UPI link. ``peer_access`` True means that P2P path is allowed (``--no-p2p``
    turns it off).
    """
    desc = (
        f"8 x {accelerator} under PCIe switches ({per_switch} each), "
        "2 CPU sockets joined by UPI, no peer links"
    )
    return pcie_tree(
        8, accelerator, per_switch=per_switch, sockets=2, tech=tech, name="pcie-8", description=desc
    )


def _edges(
    name: str, accelerator: str, tech: str, pairs: list[tuple[int, int, int]], desc: str
) -> Topology:
    kind = NodeKind.ACCELERATOR
    n = 1 + max(max(a, b) for a, b, _ in pairs)
    devices = [Device(f"g{i}", accelerator, kind) for i in range(n)]
    return Topology(
        name,
        tuple(devices),
        tuple(Link(f"g{a}", f"g{b}", tech, c) for a, b, c in pairs),
        description=desc,
    )


def dgx1_p100() -> Topology:
    """DGX-1 (Pascal): hybrid cube-mesh. GPUs 0-3 and 4-7 form two fully connected quads
    (3 NVLink1 links each), plus one link from GPU i to GPU i+4: all 4 P100 links used.

    Source: NVIDIA, "NVIDIA DGX-1 System Architecture" white paper (WP-08437-001), fig. 3.
    """
    pairs = [(a + q, b + q, 1) for q in (0, 4) for a, b in itertools.combinations(range(4), 2)]
    pairs += [(i, i + 4, 1) for i in range(4)]
    return _edges(
        "dgx1-p100",
        "P100",
        "nvlink1",
        pairs,
        "DGX-1 P100: hybrid cube-mesh, 8 x P100, 4 NVLink1 each",
    )


#: DGX-1V NVLink adjacency (links per GPU pair); every V100 uses all 6 NVLink2 links. Sources:
#: NVIDIA DGX-1 (Volta) white paper fig. 4; the same matrix in microsoft/msccl-tools
#: msccl/topologies/nvidia.py (dgx1) and in `nvidia-smi topo -m` on a DGX-1V (NV1/NV2).
DGX1V_LINKS = (
    (0, 2, 1, 1, 2, 0, 0, 0),
    (2, 0, 1, 2, 0, 1, 0, 0),
    (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 2, 1, 1),
    (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2),
    (0, 0, 0, 1, 1, 2, 2, 0),
)


def dgx1_v100() -> Topology:
    """DGX-1 (Volta): the hybrid cube-mesh with doubled links (NV2) on the pairs of
    :data:`DGX1V_LINKS`; some pairs (e.g. 0-5) have no link and are 2 hops apart."""
    pairs = [
        (a, b, DGX1V_LINKS[a][b]) for a in range(8) for b in range(a + 1, 8) if DGX1V_LINKS[a][b]
    ]
    return _edges(
        "dgx1-v100",
        "V100",
        "nvlink2",
        pairs,
        "DGX-1 V100: hybrid cube-mesh, 6 NVLink2 per GPU, some doubled",
    )


def dgx2() -> Topology:
    """DGX-2 / HGX-2: 16 V100 on two baseboards of 8, 6 NVSwitch (gen 1) per board.

    Each GPU has one NVLink2 link to each of its board's 6 switches (6 links); switch j of board
    0 and switch j of board 1 are joined by 8 links (the 8 remaining of each chip's 18 ports are
    used as 8 to GPUs, 8 across, 2 reserved). Sources: NVIDIA DGX-2 System Architecture white
    paper; Li et al., "Evaluating Modern GPU Interconnect", TPDS 2020 (arXiv 1903.04611).
    """
    kind = NodeKind.ACCELERATOR
    devices = [Device(f"g{i}", "V100", kind) for i in range(16)]
    devices += [Device(f"sw{j}", "nvswitch1", NodeKind.SWITCH) for j in range(12)]
    links = [Link(f"g{i}", f"sw{(i // 8) * 6 + j}", "nvlink2") for i in range(16) for j in range(6)]
    links += [Link(f"sw{j}", f"sw{j + 6}", "nvlink2", 8) for j in range(6)]
    return Topology(
        "dgx2",
        tuple(devices),
        tuple(links),
        description="DGX-2: 16 x V100, 12 NVSwitch gen1 on two baseboards",
    )


def dgx_a100() -> Topology:
    """DGX A100 / HGX A100 8-GPU: 6 NVSwitch (gen 2); each A100 has 2 NVLink3 links to each
    switch (12 links, 300 GB/s per direction). Source: NVIDIA DGX A100 System Architecture
    white paper (WP-10083-001)."""
    desc = "DGX A100: 8 x A100, 6 NVSwitch gen2, 2 links per GPU per switch"
    return switched(
        8, "A100", "nvswitch2", planes=6, links_per_plane=2, name="dgx-a100", description=desc
    )


def _dgx_hopper(name: str, gpu: str) -> Topology:
    # 18 NVLink4 links per GPU spread 5/4/4/5 over the 4 NVSwitch chips of the HGX H100
    # baseboard. Source: NVIDIA DGX H100 user guide / Hot Chips 34 NVSwitch talk (Ishii & Wells).
    # A GPU with fewer links (H800: 8) spreads them evenly, 2/2/2/2.
    count = int(hardware.accelerator(gpu).link_count)
    spread = (
        (5, 4, 4, 5)
        if count == 18
        else tuple(count // 4 + (1 if p < count % 4 else 0) for p in range(4))
    )
    shares = "/".join(map(str, spread))
    desc = f"{name.upper()}: 8 x {gpu}, 4 NVSwitch gen3, {count} NVLink4 per GPU spread {shares}"
    return switched(
        8, gpu, "nvswitch3", planes=4, links_per_plane=spread, name=name, description=desc
    )


def dgx_h100(gpu: str = "H100") -> Topology:
    """DGX H100 / HGX H100 8-GPU: 4 NVSwitch gen 3 chips, links 5/4/4/5 (450 GB/s per GPU)."""
    return _dgx_hopper("dgx-h100", gpu)


def dgx_h200() -> Topology:
    """DGX H200: the HGX H100 baseboard wiring with H200 GPUs."""
    return _dgx_hopper("dgx-h200", "H200")


def hgx_b200(gpu: str = "B200") -> Topology:
    """HGX B200 8-GPU: 2 NVLink5 switch chips; each B200 has 9 links to each chip (18 links,
    900 GB/s per direction); 8 x 9 = 72 ports fill each chip. Source: NVIDIA HGX B200 / DGX B200
    datasheet ("2x NVLink switch chips", "1.8 TB/s per GPU")."""
    return hgx_blackwell("hgx-b200", gpu)


def hgx_blackwell(name: str, gpu: str) -> Topology:
    """An 8-GPU HGX Blackwell baseboard named ``name``: 2 NVLink5 switch chips, 9 links from each
    GPU to each chip (the wiring of :func:`hgx_b200`, shared by HGX B300)."""
    label = name.upper().replace("-", " ")
    desc = f"{label}: 8 x {gpu}, 2 NVLink5 switch chips, 9 links per GPU per chip"
    return switched(8, gpu, "nvswitch4", planes=2, links_per_plane=9, name=name, description=desc)


def gb200_nvl72(hosts: bool = False, gpus: int = 72) -> Topology:
    """GB200 NVL72: 72 GPUs, 18 NVLink5 switch chips (9 switch trays x 2); each GPU has one link
    to every chip (18 links, 900 GB/s per direction), 72 ports per chip. With ``hosts`` the 36
    Grace CPUs are added, each joined to its 2 GPUs by NVLink-C2C. Source: NVIDIA GB200 NVL72
    product page and NVLink page ("72 Blackwell GPUs", "130 TB/s").

    ``gpus=k``: an NVLink partition of the rack, its first k GPUs (k / 4 compute trays) on every
    switch chip, as NVIDIA Fabric Manager partitions a rack; racks of NVL4 or NVL8 partitions
    joined by InfiniBand are ``3xgb200-nvl72:gpus=4``.

    Racks (``8xgb200-nvl72``) get one NIC per GPU, ``ib-ndr`` by default: one ConnectX-7 NDR
    400G per GPU, four per 4-GPU compute tray (NVIDIA DGX GB200 SuperPOD reference architecture,
    as cited in ai-dynamo/aisimulate PR #192); ``nic=ib-xdr`` for ConnectX-8 builds."""
    desc = "GB200 NVL72: {n} x GB200, 18 NVLink5 switch chips, one link per GPU per chip"
    return nvl_rack("gb200-nvl72", desc, "GB200", "Grace", "nvswitch4", 18, hosts, gpus)


def nvl_rack(
    name: str, desc: str, gpu: str, cpu: str, switch: str, chips: int, hosts: bool, gpus: int
) -> Topology:
    """An NVL72-class rack named ``name`` (``desc`` with ``{n}`` for the GPU count): ``gpus``
    (at most 72) ``gpu`` accelerators with one link into each of ``chips`` ``switch`` chips;
    with ``hosts`` one ``cpu`` per 2 GPUs."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 72:
        raise UsageError(f"gpus must be an integer from 1 to 72 (the rack's GPUs), got {gpus!r}",
                         entry="gpus")  # fmt: skip
    if hosts and gpus % 2:
        raise UsageError(f"gpus must be even with hosts (2 GPUs per {cpu} superchip), got {gpus}",
                         entry="gpus")  # fmt: skip
    desc = desc.format(n=gpus) + ("" if gpus == 72 else f" (an NVLink partition of {gpus} GPUs)")
    t = switched(gpus, gpu, switch, planes=chips, links_per_plane=1, name=name, description=desc)
    return with_superchip_hosts(t, cpu) if hosts else t


def with_superchip_hosts(t: Topology, cpu: str) -> Topology:
    """``t`` with one CPU socket (``host``, ids ``cpu{i}``) per 2 accelerators, joined to each of
    them by NVLink-C2C: the Grace (or Vera) CPUs of an NVL72 rack's superchips."""
    n = len(t.accelerators)
    grace = [Device(f"cpu{i}", "host", NodeKind.HOST) for i in range(n // 2)]
    c2c = [Link(f"g{i}", f"cpu{i // 2}", "c2c") for i in range(n)]
    desc = f"{t.description}, {n // 2} {cpu} hosts"
    return Topology(t.name, (*t.devices, *grace), (*t.links, *c2c), description=desc)


def mi300x_8(accelerator: str = "MI300X") -> Topology:
    """8 x MI300X (AMD Instinct platform): full Infinity Fabric mesh, one xGMI link per pair
    (7 links per GPU), no switch. Source: AMD Instinct MI300X platform data sheet; ROCm docs."""
    return xgmi_mesh("mi300x-8", accelerator)


def xgmi_mesh(name: str, accelerator: str) -> Topology:
    """8 AMD Instinct OAMs on one baseboard, named ``name``: one xGMI link per pair (7 per GPU),
    no switch (the wiring of :func:`mi300x_8`, shared by the MI350 series)."""
    desc = f"8 x {accelerator}: full xGMI mesh, one link per pair, no switch"
    return full_mesh(8, accelerator, name=name, description=desc)


#: xGMI links between the 16 GCDs of an 8 x MI250X node (rank = GCD index), from ROCm/rccl
#: tools/topo_expl/models/topo_16p1h.xml (an RCCL topology dump of a 16-GCD gfx90a node): the two
#: GCDs of one package (0-1, 2-3, ...) share 4 links; every GCD uses 7 xGMI links (its 8th
#: Infinity Fabric link is the PCIe link to the host).
MI250X_16_LINKS = (
    (0, 1, 4),
    (0, 2, 1),
    (0, 4, 2),
    (1, 2, 1),
    (1, 3, 1),
    (1, 5, 1),
    (2, 3, 4),
    (2, 6, 1),
    (3, 7, 2),
    (4, 5, 4),
    (4, 12, 1),
    (5, 13, 1),
    (5, 14, 1),
    (6, 7, 4),
    (6, 13, 1),
    (6, 14, 1),
    (7, 15, 1),
    (8, 9, 4),
    (8, 10, 1),
    (8, 12, 2),
    (9, 10, 1),
    (9, 11, 1),
    (9, 13, 1),
    (10, 11, 4),
    (10, 14, 1),
    (11, 15, 2),
    (12, 13, 4),
    (14, 15, 4),
)


def mi250x_8() -> Topology:
    """8 x MI250X = 16 GCDs (one rank each), wired as :data:`MI250X_16_LINKS`: 4 links inside a
    package, 1 or 2 between packages; not every pair is linked (up to 3 xGMI hops)."""
    return _edges(
        "mi250x-8",
        "MI250X",
        "xgmi-mi250x",
        list(MI250X_16_LINKS),
        "8 x MI250X: 16 GCDs on xGMI, 4-link in-package pairs",
    )


def ualink_pod(
    n: int = 128, planes: int = 8, links_per_plane: int = 1, accelerator: str = "UALink-XPU"
) -> Topology:
    """A UALink 1.0 pod: ``n`` accelerators (up to 1,024 by the spec), each with
    ``links_per_plane`` x4 UALink ports into each of ``planes`` switch planes (default: the
    catalog's ``UALink-XPU``, an estimate, with its 8 x4 ports on 8 planes, one port each).

    A plane is one 128-port ``ualink-switch`` while ``n * links_per_plane <= 128``, else a
    non-blocking two-tier Clos (64 ports down and 64 up per leaf; ids ``p{plane}.leaf{i}``,
    ``p{plane}.spine{j}``): 1,024 accelerators take 16 leaves + 8 spines per plane.
    With ``accelerator=""`` the first catalog accelerator with ``ualink1`` links is used.
    Sources: UALink 200G 1.0 specification (x4 ports, 1,024 accelerators per pod), see the catalog.
    """
    if n > 1024:
        raise UsageError(
            f"UALink 1.0 pods hold at most 1024 accelerators, got n={n}",
            source="ualink-pod",
            entry="n",
        )
    accelerator = accelerator or _ualink_accelerator()
    desc = f"UALink pod: {n} x {accelerator}, {planes} switch planes x {links_per_plane} x4 ports"
    return switched(
        n,
        accelerator,
        "ualink-switch",
        planes=planes,
        links_per_plane=links_per_plane,
        name="ualink-pod",
        description=desc,
    )


def _ualink_accelerator() -> str:
    for name, spec in hardware.catalog().accelerators.items():
        if spec.link_tech == "ualink1":
            return str(name)
    raise UsageError(
        "the catalog has no accelerator with ualink1 links; pass accelerator=", source="ualink-pod"
    )


def h100_nvl_pair() -> Topology:
    """Two H100 PCIe cards joined by NVLink bridges (12 NVLink4 links, 300 GB/s per direction)
    under one host, for the calibration rows measured on such a pair."""
    devices = [
        Device.of("g0", "H100-PCIe"),
        Device.of("g1", "H100-PCIe"),
        Device.of("cpu0", "host"),
    ]
    links = [
        Link("g0", "g1", "nvlink4", 12),
        Link("g0", "cpu0", "pcie5"),
        Link("g1", "cpu0", "pcie5"),
    ]
    return Topology(
        "h100-nvl-pair",
        tuple(devices),
        tuple(links),
        description="2 x H100 PCIe with NVLink bridges",
    )
