"""Where :mod:`scaleup.topology.draw` puts each device: servers as clusters in a row, in layers.

Bottom to top inside a server: accelerators (a row, or a circle when they are wired to each
other directly and have no NICs, as in DGX-1 or an MI300X platform; with NICs the direct links
are drawn as arcs below the row), the server's own switches (NVSwitch, PCIe,
UALink) placed between accelerator columns, hosts, then NICs straight above their accelerator,
so a NIC's uplink never crosses an accelerator. Network switches (those on a scale-out link or
joining servers) sit above every server, one row per tier. Pure geometry: no matplotlib here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from scaleup import hardware
from scaleup.topology.model import Device, NodeKind, Topology

__all__ = ["Placement", "place", "role_of"]

#: Roles a device is drawn as (legend order).
ROLES = ("accelerator", "switch", "host", "NIC", "network switch")
_SERVER_GAP = 2.0
_Y = {"accelerator": 0.0, "switch": 1.8, "host": 3.0}
_TIER_STEP = 2.2


@dataclass
class Placement:
    """Positions ``{id: (x, y)}``, each device's role, and each server's x span and label."""

    pos: dict[str, tuple[float, float]] = field(default_factory=dict)
    role: dict[str, str] = field(default_factory=dict)
    servers: dict[int, tuple[float, float]] = field(default_factory=dict)
    circular: set[int] = field(default_factory=set)

    @property
    def width(self) -> float:
        """The x extent of the drawing."""
        xs = [x for x, _ in self.pos.values()] or [0.0]
        return max(xs) - min(xs) + 1.0


def _scope(tech: str) -> str:
    return str(hardware.link_tech(tech).scope)


def role_of(t: Topology) -> dict[str, str]:
    """Each device's role: a switch on a scale-out link or joining servers is a network switch."""
    node = {d.id: d.node for d in t.devices}
    network: set[str] = set()
    servers: dict[str, set[int]] = defaultdict(set)
    for link in t.links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            servers[a].add(node[b])
            if _scope(link.tech) == "scale-out":
                network.add(a)
    roles: dict[str, str] = {}
    for d in t.devices:
        if d.kind is NodeKind.SWITCH:
            spans = len(servers[d.id]) > 1
            roles[d.id] = "network switch" if d.id in network or spans else "switch"
        else:
            roles[d.id] = {NodeKind.NIC: "NIC"}.get(d.kind, d.kind.value)
    return roles


def _neighbours(t: Topology) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for link in t.links:
        out[link.a].append(link.b)
        out[link.b].append(link.a)
    return out


def _place_server(
    p: Placement, devices: list[Device], x0: float, nbr: dict[str, list[str]], kind: dict[str, str]
) -> float:
    """Place one server's devices from ``x0``; return its width."""
    by_role: dict[str, list[Device]] = defaultdict(list)
    for d in devices:
        by_role[p.role[d.id]].append(d)
    accs = by_role["accelerator"]
    direct = any(kind.get(n) == "accelerator" for a in accs for n in nbr[a.id])
    width = float(max(len(accs), 1))
    if direct and not by_role["switch"] and not by_role["NIC"] and len(accs) > 2:
        radius = max(1.5, len(accs) / 4)
        width = 2 * radius + 1
        for i, d in enumerate(accs):
            angle = math.pi / 2 - 2 * math.pi * i / len(accs)
            p.pos[d.id] = (x0 + radius + radius * math.cos(angle), radius * math.sin(angle))
        p.circular.add(devices[0].node)
    else:
        for i, d in enumerate(accs):
            p.pos[d.id] = (x0 + i, _Y["accelerator"])
    for role in ("switch", "host"):
        group = by_role[role]
        for i, d in enumerate(group):
            p.pos[d.id] = (x0 + (i + 0.5) * width / len(group) - 0.5, _Y[role])
    nic_y = _Y["host"] + (1.0 if by_role["host"] else 0.0)
    if p.circular & {devices[0].node}:
        nic_y += width / 2
    spread = by_role["NIC"]
    for i, d in enumerate(spread):
        under = [n for n in nbr[d.id] if n in p.pos and p.role[n] == "accelerator"]
        x = p.pos[under[0]][0] if under else x0 + (i + 0.5) * width / len(spread) - 0.5
        p.pos[d.id] = (x, nic_y)
    return width


def _tiers(t: Topology, p: Placement, nbr: dict[str, list[str]]) -> list[list[str]]:
    """Network switches by tier: tier 0 touches NICs or servers, each next tier the one below."""
    remaining = [d.id for d in t.devices if p.role[d.id] == "network switch"]
    tiers: list[list[str]] = []
    placed = {i for i, r in p.role.items() if r != "network switch"}
    while remaining:
        tier = [s for s in remaining if any(n in placed for n in nbr[s])] or remaining
        tiers.append(tier)
        placed.update(tier)
        remaining = [s for s in remaining if s not in set(tier)]
    return tiers


def place(t: Topology) -> Placement:
    """The layout described in the module docstring."""
    p = Placement(role=role_of(t))
    nbr = _neighbours(t)
    by_server: dict[int, list[Device]] = defaultdict(list)
    for d in t.devices:
        if p.role[d.id] != "network switch":
            by_server[d.node].append(d)
    x0 = 0.0
    for node in sorted(by_server):
        width = _place_server(p, by_server[node], x0, nbr, p.role)
        p.servers[node] = (x0, x0 + width - 1)
        x0 += width + _SERVER_GAP
    top = max((y for _, y in p.pos.values()), default=0.0)
    total = max(x0 - _SERVER_GAP, 1.0)
    for level, tier in enumerate(_tiers(t, p, nbr)):
        y = top + _TIER_STEP * (level + 1)
        for i, s in enumerate(tier):
            p.pos[s] = ((i + 0.5) * total / len(tier) - 0.5, y)
    return p
