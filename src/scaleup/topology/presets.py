"""Named machines, wired as shipped: a registry ``name -> (builder, one-line description)``.

Every builder returns the same :class:`~scaleup.topology.model.Topology` a file would. Presets
model the accelerator fabric (GPUs and the switch chips between them); hosts appear only where
peer traffic crosses them (``pcie-8``, ``h100-nvl-pair``, ``gb200-nvl72:hosts=true``).
Ids: accelerators ``g{rank}``, NVSwitch / UALink switches ``sw{i}``, PCIe switches ``pcisw{i}``,
CPU sockets ``cpu{i}``. ``Nx<preset>`` (see :func:`resolve_topology`) prefixes ids per server
with ``n{i}.``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleup import hardware, limits
from scaleup.errors import ScaleupError, UnknownPreset, UsageError
from scaleup.topology.generators import full_mesh, multi_node, pcie_tree, switched
from scaleup.topology.model import Device, Link, NodeKind, Topology

__all__ = ["PRESETS", "Preset", "build_preset", "list_presets", "parse_params", "resolve_topology"]


@dataclass(frozen=True)
class Preset:
    """A registry entry: the builder (keyword parameters only) and one line saying what it is."""

    builder: Callable[..., Topology]
    description: str


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
    desc = f"HGX B200: 8 x {gpu}, 2 NVLink5 switch chips, 9 links per GPU per chip"
    return switched(
        8, gpu, "nvswitch4", planes=2, links_per_plane=9, name="hgx-b200", description=desc
    )


def gb200_nvl72(hosts: bool = False) -> Topology:
    """GB200 NVL72: 72 GPUs, 18 NVLink5 switch chips (9 switch trays x 2); each GPU has one link
    to every chip (18 links, 900 GB/s per direction), 72 ports per chip. With ``hosts`` the 36
    Grace CPUs are added, each joined to its 2 GPUs by NVLink-C2C. Source: NVIDIA GB200 NVL72
    product page and NVLink page ("72 Blackwell GPUs", "130 TB/s").

    Racks (``8xgb200-nvl72``) get one NIC per GPU, ``ib-ndr`` by default: one ConnectX-7 NDR
    400G per GPU, four per 4-GPU compute tray (NVIDIA DGX GB200 SuperPOD reference architecture,
    as cited in ai-dynamo/aisimulate PR #192); ``nic=ib-xdr`` for ConnectX-8 builds."""
    desc = "GB200 NVL72: 72 x GB200, 18 NVLink5 switch chips, one link per GPU per chip"
    t = switched(
        72, "GB200", "nvswitch4", planes=18, links_per_plane=1, name="gb200-nvl72", description=desc
    )
    if not hosts:
        return t
    grace = [Device(f"cpu{i}", "host", NodeKind.HOST) for i in range(36)]
    c2c = [Link(f"g{i}", f"cpu{i // 2}", "c2c") for i in range(72)]
    return Topology(
        t.name, (*t.devices, *grace), (*t.links, *c2c), description=desc + ", 36 Grace hosts"
    )


def mi300x_8(accelerator: str = "MI300X") -> Topology:
    """8 x MI300X (AMD Instinct platform): full Infinity Fabric mesh, one xGMI link per pair
    (7 links per GPU), no switch. Source: AMD Instinct MI300X platform data sheet; ROCm docs."""
    desc = f"8 x {accelerator}: full xGMI mesh, one link per pair, no switch"
    return full_mesh(8, accelerator, name="mi300x-8", description=desc)


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


PRESETS: dict[str, Preset] = {
    "pcie-8": Preset(
        pcie_8, "8 PCIe accelerators under 4 PCIe switches and 2 CPU sockets, no peer links"
    ),
    "dgx1-p100": Preset(dgx1_p100, "DGX-1 P100: hybrid cube-mesh, NVLink1"),
    "dgx1-v100": Preset(dgx1_v100, "DGX-1 V100: hybrid cube-mesh, NVLink2, some pairs doubled"),
    "dgx2": Preset(dgx2, "DGX-2: 16 V100, 12 NVSwitch gen1 on two baseboards"),
    "dgx-a100": Preset(dgx_a100, "DGX A100: 8 A100, 6 NVSwitch gen2"),
    "dgx-h100": Preset(dgx_h100, "DGX H100: 8 H100, 4 NVSwitch gen3, 450 GB/s per GPU"),
    "dgx-h200": Preset(dgx_h200, "DGX H200: 8 H200, 4 NVSwitch gen3"),
    "hgx-b200": Preset(hgx_b200, "HGX B200: 8 B200, 2 NVLink5 switch chips, 900 GB/s per GPU"),
    "gb200-nvl72": Preset(gb200_nvl72, "GB200 NVL72: 72 GPUs, 18 NVLink5 switch chips"),
    "mi300x-8": Preset(mi300x_8, "8 MI300X: full Infinity Fabric mesh, no switch"),
    "mi250x-8": Preset(
        mi250x_8, "8 MI250X = 16 GCDs on Infinity Fabric (Frontier-class node wiring)"
    ),
    "ualink-pod": Preset(
        ualink_pod, "UALink 1.0 pod: n accelerators (default 128, up to 1024), 8 switch planes"
    ),
    "h100-nvl-pair": Preset(h100_nvl_pair, "2 H100 PCIe joined by NVLink bridges"),
}


def list_presets() -> dict[str, str]:
    """Preset names -> one-line descriptions, in registry order."""
    return {name: p.description for name, p in PRESETS.items()}


#: Keys of an ``Nx<preset>:...`` spec that go to :func:`multi_node`; the others go to the preset.
MULTI_NODE_KEYS = ("nic", "rail_optimized", "switch", "oversubscription")
_NX = re.compile(r"^(\d+)x(.+)$")


def parse_params(text: str, *, source: str | None = None) -> dict[str, Any]:
    """``"n=1024,hosts=true"`` -> ``{"n": 1024, "hosts": True}`` (int, float, bool, else str).

    >>> parse_params("n=8,x=0.5,rail_optimized=true,nic=ib-xdr")
    {'n': 8, 'x': 0.5, 'rail_optimized': True, 'nic': 'ib-xdr'}
    """
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(
                f"preset parameter {item!r} is not key=value", source=source, entry=item
            )
        params[key] = _value(raw.strip())
    return params


def _value(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def _check_keys(builder: Callable[..., Any], params: dict[str, Any], source: str) -> None:
    signature = inspect.signature(builder).parameters
    accepted = [p for p in signature if p not in ("topology",)]
    for key, value in params.items():
        if key not in accepted:
            hint = f"; it takes {', '.join(accepted)}" if accepted else "; it takes no parameters"
            raise UsageError(f"unknown parameter {key!r}{hint}", source=source, entry=key)
        default = signature[key].default
        if not _same_kind(default, value):
            kind = type(default).__name__
            raise UsageError(
                f"parameter {key!r} must be {kind}, got {value!r}", source=source, entry=key
            )


def _same_kind(default: Any, value: Any) -> bool:
    """A parameter whose default is a flag or a number must be given as one (``n=abc`` is not)."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def build_preset(name: str, **params: Any) -> Topology:
    """Build the preset ``name`` with builder keyword ``params`` (cached: topologies are
    immutable, and the simulator asks for the same ones often)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, list(PRESETS), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `scaleup topo list`)"
        raise UnknownPreset(f"no preset named {name!r}{hint}", source=name)
    _check_keys(PRESETS[name].builder, params, name)
    try:
        return _build_cached(name, tuple(sorted(params.items())))
    except ScaleupError as error:
        raise _naming(error, name, params) from None


def _naming(error: ScaleupError, spec: str, keys: Any) -> ScaleupError:
    """``error`` from a builder, re-pointed at the spec the user typed when it names one of the
    builder's parameters (``source="planes"`` -> ``ualink-pod:planes=0: planes: ...``)."""
    field = error.source if error.source is not None else error.entry
    if field in keys:
        error.source, error.entry = spec, field
        error.args = (error.one_line(),)
    return error


@functools.lru_cache(maxsize=64)
def _build_cached(name: str, items: tuple[tuple[str, Any], ...]) -> Topology:
    return PRESETS[name].builder(**dict(items))


def resolve_topology(text: str) -> Topology:
    """A topology from what a user typed: a preset name, ``name:key=value,...``,
    ``Nx<preset>[:key=value,...]`` or a path to a ``.toml`` file.

    In an ``Nx`` spec the keys ``nic``, ``rail_optimized``, ``switch`` and ``oversubscription``
    go to :func:`~scaleup.topology.generators.multi_node` (e.g.
    ``2048xdgx-h100:oversubscription=2``: a three-tier fat tree of 16,384 NICs whose leaves have
    twice as many ports down as up), the others to the preset's builder.

    >>> resolve_topology("2xdgx-h100").ranks_per_node
    8
    """
    text = text.strip()
    limits.check_at_most(
        len(text), limits.MAX_SPEC_CHARS, source="topology", name="MAX_SPEC_CHARS",
        what="characters",
    )  # fmt: skip
    if text.endswith(".toml") or _is_file(text):
        from scaleup.topology.io import load_topology  # noqa: PLC0415 - io imports this module

        return load_topology(text)
    head, _, rest = text.partition(":")
    limits.check_at_most(
        len(head), limits.MAX_NAME_CHARS, source="topology", name="MAX_NAME_CHARS",
        what="characters in the preset name",
    )  # fmt: skip
    params = parse_params(rest, source=text)
    match = _NX.match(head)
    if match and head not in PRESETS:
        n, base = int(match.group(1)), match.group(2)
        node_params = {k: params.pop(k) for k in list(params) if k in MULTI_NODE_KEYS}
        _check_keys(multi_node, node_params, text)
        try:
            return _multi_cached(
                n, base, tuple(sorted(params.items())), tuple(sorted(node_params.items()))
            )
        except ScaleupError as error:
            raise _naming(error, text, ("n", *node_params)) from None
    return build_preset(head, **params)


def _is_file(text: str) -> bool:
    """Whether ``text`` names an existing file (False for what cannot be a path at all)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


@functools.lru_cache(maxsize=32)
def _multi_cached(
    n: int, base: str, items: tuple[tuple[str, Any], ...], node_items: tuple[tuple[str, Any], ...]
) -> Topology:
    return multi_node(build_preset(base, **dict(items)), n, **dict(node_items))
