"""Pure builders of common fabric shapes, as NetworkX's generators build graphs.

Each returns a validated :class:`~scaleup.topology.model.Topology`. Device ids: accelerators
``g0 .. g{n-1}`` (listed first, so rank ``r`` is ``g{r}``), switches ``sw{i}`` (or
``p{plane}.leaf{i}`` / ``p{plane}.spine{i}`` in a two-tier plane), PCIe switches ``pcisw{i}``,
hosts ``cpu{i}``, NICs ``nic{i}``. :func:`multi_node` prefixes every id of server ``i`` with
``n{i}.`` and names the scale-out fabric's switches ``net.*``.

Multi-tier planes (:func:`switched`, the scale-out fabric of :func:`multi_node`): when the links
of one plane exceed one switch chip's ``port_count`` R, the plane becomes a non-blocking two-tier
Clos: leaves with at most R/2 ports down and as many up, every leaf wired to every spine with an
equal number of links. Two tiers hold up to R*R/2 endpoint links per plane; beyond that the
builder raises :class:`~scaleup.errors.UsageError`.

Sizes are checked before anything is built: a shape with more accelerators, devices or links
than :mod:`scaleup.limits` allows raises :class:`~scaleup.errors.LimitError` naming the
parameter that grew it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from scaleup import hardware, limits
from scaleup.errors import UsageError
from scaleup.topology.model import Device, Link, NodeKind, Topology

__all__ = ["clos", "full_mesh", "multi_node", "pcie_tree", "switched"]


def _devices(prefix: str, type_name: str, n: int, start: int = 0, node: int = 0) -> list[Device]:
    kind = NodeKind(hardware.device_kind(type_name))
    return [Device(f"{prefix}{i}", type_name, kind, node) for i in range(start, start + n)]


def _scaleup_tech(accelerator: str, tech: str | None) -> str:
    if tech is not None:
        return tech
    link_tech = hardware.accelerator(accelerator).link_tech
    if link_tech is None:
        raise UsageError(f"{accelerator} has no scale-up link; pass tech=", source=accelerator)
    return str(link_tech)


def full_mesh(
    n: int,
    accelerator: str,
    *,
    tech: str | None = None,
    links_per_pair: int = 1,
    name: str | None = None,
    description: str = "",
) -> Topology:
    """``n`` accelerators, every pair joined by ``links_per_pair`` direct links (no switch).

    >>> full_mesh(4, "MI300X").accelerators[3].id
    'g3'
    """
    _positive(n=n, links_per_pair=links_per_pair)
    _check_size("n", accelerators=n, links=n * (n - 1) // 2)
    tech = _scaleup_tech(accelerator, tech)
    devices = _devices("g", accelerator, n)
    links = [
        Link(f"g{i}", f"g{j}", tech, links_per_pair) for i, j in itertools.combinations(range(n), 2)
    ]
    return Topology(name or f"full-mesh-{n}", tuple(devices), tuple(links), description=description)


def clos(
    endpoints: Sequence[tuple[str, int]], switch: str, tech: str, prefix: str
) -> tuple[list[Device], list[Link]]:
    """Switches and links joining ``endpoints`` ``(device id, links)`` non-blockingly.

    One switch ``{prefix}sw0`` when the links fit its ports, else a two-tier Clos of
    ``{prefix}leaf{i}`` and ``{prefix}spine{j}`` (see the module docstring). An endpoint's links
    all go to one leaf.
    """
    radix = int(hardware.switch_chip(switch).port_count)
    total = sum(c for _, c in endpoints)
    if total <= radix:
        sw = _devices(f"{prefix}sw", switch, 1)
        return sw, [Link(e, sw[0].id, tech, c) for e, c in endpoints]
    down = radix // 2
    groups: list[list[tuple[str, int]]] = [[]]
    for e, c in endpoints:
        if c > down:
            raise UsageError(
                f"{e} has {c} links into one plane, more than a leaf's {down} down ports"
            )
        if sum(x for _, x in groups[-1]) + c > down:
            groups.append([])
        groups[-1].append((e, c))
    n_leaves = len(groups)
    up = max(sum(x for _, x in g) for g in groups)
    n_spines = next(
        (s for s in range(1, up + 1) if up % s == 0 and n_leaves * (up // s) <= radix), None
    )
    if n_spines is None:
        raise _two_tier_error(total, switch)
    leaves = _devices(f"{prefix}leaf", switch, n_leaves)
    spines = _devices(f"{prefix}spine", switch, n_spines)
    links = [Link(e, leaves[i].id, tech, c) for i, g in enumerate(groups) for e, c in g]
    links += [Link(leaf.id, spine.id, tech, up // n_spines) for leaf in leaves for spine in spines]
    return leaves + spines, links


def switched(
    n: int,
    accelerator: str,
    switch: str,
    *,
    planes: int = 1,
    links_per_plane: int | Sequence[int] = 1,
    tech: str | None = None,
    name: str | None = None,
    description: str = "",
) -> Topology:
    """``n`` accelerators, each with ``links_per_plane[p]`` links into each of ``planes`` planes.

    A plane is one switch chip (``sw{p}``) when its links fit the chip's ports, else a two-tier
    Clos (``p{p}.leaf*``, ``p{p}.spine*``). ``links_per_plane`` may differ per plane (DGX H100
    spreads 18 links as 5/4/4/5 over its four NVSwitch chips).
    """
    _positive(n=n, planes=planes)
    _check_size("planes", accelerators=n, devices=n + planes, links=n * planes)
    per_plane = (
        [links_per_plane] * planes if isinstance(links_per_plane, int) else list(links_per_plane)
    )
    if len(per_plane) != planes:
        raise UsageError(f"links_per_plane has {len(per_plane)} entries for {planes} planes")
    _positive(links_per_plane=min(per_plane))
    tech = _scaleup_tech(accelerator, tech)
    devices = _devices("g", accelerator, n)
    links: list[Link] = []
    radix = int(hardware.switch_chip(switch).port_count)
    single = all(n * c <= radix for c in per_plane)
    switches: list[Device] = []
    for p, count in enumerate(per_plane):
        endpoints = [(f"g{i}", count) for i in range(n)]
        if single:
            sw, ln = (
                _devices("sw", switch, 1, start=p),
                [Link(f"g{i}", f"sw{p}", tech, count) for i in range(n)],
            )
        else:
            sw, ln = clos(endpoints, switch, tech, f"p{p}.")
        switches += sw
        links += ln
    return Topology(
        name or f"switched-{n}", (*devices, *switches), tuple(links), description=description
    )


def pcie_tree(
    n: int,
    accelerator: str,
    *,
    per_switch: int = 2,
    sockets: int = 2,
    tech: str | None = None,
    host: str = "host",
    name: str | None = None,
    description: str = "",
) -> Topology:
    """``n`` accelerators under PCIe switches (``per_switch`` each), the switches spread evenly
    over ``sockets`` CPU sockets, the sockets joined pairwise by their socket link (``upi``).

    No peer links: accelerator-to-accelerator traffic crosses a PCIe switch (same switch) or the
    root complex (same socket), or both sockets and the socket link.
    """
    _positive(n=n, per_switch=per_switch, sockets=sockets)
    _check_size("n", accelerators=n, devices=n, links=n)
    _check_size("sockets", accelerators=0, devices=sockets, links=sockets * (sockets - 1) // 2)
    tech = tech or str(hardware.accelerator(accelerator).host_link_tech)
    socket_tech = str(hardware.host_spec(host).socket_link_tech)
    n_switches = math.ceil(n / per_switch)
    if n_switches < sockets:
        raise UsageError(f"{n_switches} PCIe switches cannot be spread over {sockets} sockets")
    devices = (
        _devices("g", accelerator, n)
        + _devices("pcisw", "pcie-switch", n_switches)
        + _devices("cpu", host, sockets)
    )
    links = [Link(f"g{i}", f"pcisw{i // per_switch}", tech) for i in range(n)]
    links += [Link(f"pcisw{s}", f"cpu{s * sockets // n_switches}", tech) for s in range(n_switches)]
    links += [
        Link(f"cpu{a}", f"cpu{b}", socket_tech)
        for a, b in itertools.combinations(range(sockets), 2)
    ]
    return Topology(name or f"pcie-tree-{n}", tuple(devices), tuple(links), description=description)


def multi_node(
    topology: Topology,
    n: int,
    *,
    nic: str = "ib-ndr",
    rail_optimized: bool = False,
    switch: str | None = None,
) -> Topology:
    """``n`` copies of ``topology`` joined by one ``nic`` per accelerator into a non-blocking
    scale-out fabric.

    Server ``i``'s ids get the prefix ``n{i}.`` and ``Device.node = i``; its accelerator
    ``n{i}.{id}`` gets NIC ``n{i}.nic{r}`` (``r`` its local rank) over the NIC's host link
    (GPUDirect RDMA, the PCIe switch between GPU and NIC not modelled). The fabric
    (``switch``: ``ib-switch`` for InfiniBand NICs, ``eth-switch`` for Ethernet) is one Clos of
    all NICs, or with ``rail_optimized`` one rail switch ``net.rail{r}`` per local rank joined by
    spines ``net.spine{j}`` sized non-blocking.
    """
    _positive(n=n)
    rpn = len(topology.accelerators)
    per_node = len(topology.devices) + rpn  # its devices plus one NIC per accelerator
    _check_size(
        "n", accelerators=n * rpn, devices=n * per_node, links=n * (len(topology.links) + 2 * rpn)
    )
    spec = hardware.nic_spec(nic)
    net_tech = str(spec.link_tech)
    if switch is None:
        family = hardware.link_tech(net_tech).family
        switch = "eth-switch" if family == "ethernet" else "ib-switch"
    nic_kind = NodeKind(hardware.device_kind(nic))
    if not rail_optimized and n * rpn > _two_tier_capacity(switch):
        raise _two_tier_error(n * rpn, switch, source="n")  # before building n servers
    devices: list[Device] = []
    links: list[Link] = []
    nic_ids: list[list[str]] = []
    for i in range(n):
        pre = f"n{i}."
        devices += [Device(pre + d.id, d.type, d.kind, i) for d in topology.devices]
        links += [
            Link(pre + x.a, pre + x.b, x.tech, x.count, x.bandwidth_gb_per_s)
            for x in topology.links
        ]
    for i in range(n):
        pre = f"n{i}."
        ids = [f"{pre}nic{r}" for r in range(rpn)]
        nic_ids.append(ids)
        devices += [Device(x, nic, nic_kind, i) for x in ids]
        links += [
            Link(pre + a.id, x, str(spec.host_link_tech))
            for a, x in zip(topology.accelerators, ids, strict=True)
        ]
    if rail_optimized:
        fabric, fabric_links = _rails(nic_ids, switch, net_tech)
    else:
        fabric, fabric_links = clos(
            [(x, 1) for ids in nic_ids for x in ids], switch, net_tech, "net."
        )
    name = f"{n}x{topology.name}"
    desc = f"{n} x {topology.name} joined by one {nic} NIC per accelerator" + (
        " (rail-optimised)" if rail_optimized else ""
    )
    return Topology(name, (*devices, *fabric), (*links, *fabric_links), topology.peer_access, desc)


def _rails(nic_ids: list[list[str]], switch: str, tech: str) -> tuple[list[Device], list[Link]]:
    """One switch per rail (local rank), spines carrying cross-rail traffic non-blockingly."""
    radix = int(hardware.switch_chip(switch).port_count)
    n_nodes, n_rails = len(nic_ids), len(nic_ids[0])
    if n_nodes > radix // 2:
        raise UsageError(
            f"rail_optimized supports at most {radix // 2} servers with {switch} (radix {radix})"
        )
    rails = _devices("net.rail", switch, n_rails)
    links = [Link(nic_ids[i][r], rails[r].id, tech) for r in range(n_rails) for i in range(n_nodes)]
    if n_rails == 1:
        return rails, links
    n_spines = next(
        (
            s
            for s in range(1, n_nodes + 1)
            if n_nodes % s == 0 and n_rails * (n_nodes // s) <= radix
        ),
        None,
    )
    if n_spines is None:
        raise UsageError(f"{n_rails} rails of {switch} (radix {radix}) cannot share one spine tier")
    spines = _devices("net.spine", switch, n_spines)
    links += [Link(r.id, s.id, tech, n_nodes // n_spines) for r in rails for s in spines]
    return rails + spines, links


def _two_tier_capacity(switch: str) -> int:
    """Single-link endpoints a non-blocking two-tier Clos of ``switch`` holds: R * R/2."""
    radix = int(hardware.switch_chip(switch).port_count)
    return radix * (radix // 2)


def _two_tier_error(total: int, switch: str, source: str | None = None) -> UsageError:
    radix = int(hardware.switch_chip(switch).port_count)
    return UsageError(
        f"{total} links need more than two tiers of {switch} (radix {radix}); "
        f"two tiers hold at most {_two_tier_capacity(switch)}",
        source=source,
    )


def _check_size(source: str, *, accelerators: int, devices: int = 0, links: int = 0) -> None:
    """Refuse a shape beyond :mod:`scaleup.limits` before it is built (``source``: the
    parameter that grew it)."""
    for value, limit, name, what in (
        (accelerators, limits.MAX_RANKS, "MAX_RANKS", "accelerators"),
        (devices, limits.MAX_DEVICES, "MAX_DEVICES", "devices"),
        (links, limits.MAX_LINKS, "MAX_LINKS", "links"),
    ):
        limits.check_at_most(value, limit, source=source, name=name, what=what)


def _positive(**values: int) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"{key} must be a positive integer, got {value!r}", entry=key)
