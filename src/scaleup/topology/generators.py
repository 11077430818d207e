"""Pure builders of common fabric shapes, as NetworkX's generators build graphs.

Each returns a validated :class:`~scaleup.topology.model.Topology`. Device ids: accelerators
``g0 .. g{n-1}`` (listed first, so rank ``r`` is ``g{r}``), switches ``sw{i}`` (or
``p{plane}.leaf{i}`` / ``p{plane}.spine{i}`` in a two-tier plane), PCIe switches ``pcisw{i}``,
hosts ``cpu{i}``, NICs ``nic{i}``. :func:`multi_node` prefixes every id of server ``i`` with
``n{i}.`` and names the scale-out fabric's switches ``net.*``.

Multi-tier planes (:func:`switched`, the scale-out fabric of :func:`multi_node`): when the links
of one plane exceed one switch chip's ``port_count`` R, the plane becomes a fat tree of two tiers
(leaves with at most R/2 ports down and as many up, every leaf wired to every spine with an equal
number of links: up to R*R/2 endpoint links) or three (pods of leaves and spines under a core
tier: up to R*R*R/4); see :mod:`scaleup.topology.fabric`.

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
from scaleup.topology.elements import bulk
from scaleup.topology.fabric import build_fat_tree, leaf_down_ports, plan_fat_tree
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
    endpoints: Sequence[tuple[str, int]],
    switch: str,
    tech: str,
    prefix: str,
    *,
    oversubscription: float = 1.0,
) -> tuple[list[Device], list[Link]]:
    """Switches and links joining ``endpoints`` ``(device id, links)`` in a fat tree.

    One switch ``{prefix}sw0`` when the links fit its ports, else leaves ``{prefix}leaf{i}``
    filled in order (an endpoint's links all go to one leaf) under the fewest spine and core
    tiers of :func:`~scaleup.topology.fabric.plan_fat_tree` (see :mod:`scaleup.topology.fabric`).
    """
    radix = int(hardware.switch_chip(switch).port_count)
    groups, leaf_ids = _pack(endpoints, radix, oversubscription, prefix)
    plan = plan_fat_tree([sum(c for _, c in g) for g in groups], radix, oversubscription)
    return build_fat_tree(groups, leaf_ids, plan, switch, tech, prefix)


def _pack(
    endpoints: Sequence[tuple[str, int]], radix: int, oversubscription: float, prefix: str
) -> tuple[list[list[tuple[str, int]]], list[str]]:
    """Endpoints in order into leaves of :func:`leaf_down_ports` ports down (one switch
    ``{prefix}sw0`` when all fit ``radix``)."""
    if sum(c for _, c in endpoints) <= radix:
        return [list(endpoints)], [f"{prefix}sw0"]
    down = leaf_down_ports(radix, oversubscription)
    groups: list[list[tuple[str, int]]] = [[]]
    used = 0
    for e, c in endpoints:
        if c > down:
            raise UsageError(
                f"{e} has {c} links into one plane, more than a leaf's {down} down ports"
            )
        if used + c > down:
            groups.append([])
            used = 0
        groups[-1].append((e, c))
        used += c
    return groups, [f"{prefix}leaf{i}" for i in range(len(groups))]


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
    oversubscription: float = 1.0,
    nics: int | None = None,
) -> Topology:
    """``n`` copies of ``topology`` joined by one ``nic`` per accelerator into a fat tree.

    Server ``i``'s ids get the prefix ``n{i}.`` and ``Device.node = i``; its accelerator
    ``n{i}.{id}`` gets NIC ``n{i}.nic{r}`` (``r`` its local rank) over the NIC's host link
    (GPUDirect RDMA, the PCIe switch between GPU and NIC not modelled). With ``nics=k`` (a
    divisor of the accelerators per server) a server has ``k`` NICs, each shared by ``g = rpn / k``
    consecutive local ranks: NIC ``n{i}.nic{j}`` has a host link to each of ranks ``j*g`` ..
    ``j*g + g - 1``, as on servers where a pair of GPUs and one NIC sit behind one PCIe switch
    (DGX A100 / AWS p4d with four NICs per eight GPUs; ``nvidia-smi topo -m`` of NVIDIA/nccl
    #1357: NIC0 PIX to GPU0, NIC1 to GPU2, ...). The fabric is built of
    ``switch`` chips (default ``ib-switch`` for InfiniBand NICs, ``eth-switch`` for Ethernet)
    with the fewest tiers that hold the NICs (:mod:`scaleup.topology.fabric`):

    * one switch ``net.sw0`` while every NIC fits its ports, else leaves ``net.leaf{i}`` filled
      with the NICs in rank order, under spines (and cores) as needed;
    * with ``rail_optimized``, one rail leaf per local rank ``r`` and group of servers: NIC ``r``
      of every server of the group goes to ``net.rail{r}`` (one group) or
      ``net.group{g}.rail{r}`` (groups of at most a leaf's ports down, sizes as even as
      possible), so traffic between equal local ranks of one group crosses one switch; spines
      (and cores) join the rail leaves, rail by rail in the pods of three tiers.

    ``oversubscription`` is the leaves' ratio of ports down to ports up (1: non-blocking, 2:
    half the uplinks); the spine and core tiers are non-blocking. Sizes (servers, devices,
    links, tiers) are checked before any server is built.

    >>> t = multi_node(full_mesh(8, "MI300X"), 2)
    >>> len(t.nics), [d.id for d in t.switches]
    (16, ['net.sw0'])
    """
    _positive(n=n)
    rpn = len(topology.accelerators)
    _check_size("n", accelerators=n * rpn)
    per_node = _nics_per_node(nics, rpn)
    share = rpn // per_node  # local ranks per NIC
    spec = hardware.nic_spec(nic)
    net_tech = str(spec.link_tech)
    if switch is None:
        family = hardware.link_tech(net_tech).family
        switch = "eth-switch" if family == "ethernet" else "ib-switch"
    radix = int(hardware.switch_chip(switch).port_count)
    nic_ids = [[f"n{i}.nic{r}" for r in range(per_node)] for i in range(n)]
    if rail_optimized:
        groups, leaf_ids = _rail_groups(nic_ids, radix, oversubscription)
    else:
        flat = [(x, 1) for ids in nic_ids for x in ids]
        groups, leaf_ids = _pack(flat, radix, oversubscription, "net.")
    plan = plan_fat_tree([len(g) for g in groups], radix, oversubscription)
    _check_size(
        "n",
        accelerators=n * rpn,
        devices=n * (len(topology.devices) + per_node) + sum(plan.switches_per_tier),
        links=n * (len(topology.links) + rpn + per_node) + plan.links_between_switches,
    )  # before building n servers
    with bulk():  # ~600,000 acyclic objects at 16,384 GPUs
        nic_kind = NodeKind(hardware.device_kind(nic))
        devices: list[Device] = []
        links: list[Link] = []
        for i in range(n):
            pre = f"n{i}."
            devices += [Device(pre + d.id, d.type, d.kind, i) for d in topology.devices]
            links += [
                Link(pre + x.a, pre + x.b, x.tech, x.count, x.bandwidth_gb_per_s)
                for x in topology.links
            ]
        host_tech = str(spec.host_link_tech)
        for i, ids in enumerate(nic_ids):
            pre = f"n{i}."
            devices += [Device(x, nic, nic_kind, i) for x in ids]
            links += [
                Link(pre + a.id, ids[r // share], host_tech)
                for r, a in enumerate(topology.accelerators)
            ]
        fabric, fabric_links = build_fat_tree(groups, leaf_ids, plan, switch, net_tech, "net.")
    name = f"{n}x{topology.name}"
    per = (
        f"one {nic} NIC per accelerator"
        if share == 1
        else (f"{per_node} {nic} NICs per server (one per {share} accelerators)")
    )
    desc = f"{n} x {topology.name} joined by {per}" + (
        " (rail-optimised)" if rail_optimized else ""
    )
    if plan.tiers > 1 and oversubscription != 1:
        desc += f", {oversubscription:g}:1 oversubscribed leaves"
    return Topology(name, (*devices, *fabric), (*links, *fabric_links), topology.peer_access, desc)


def _rail_groups(
    nic_ids: list[list[str]], radix: int, oversubscription: float
) -> tuple[list[list[tuple[str, int]]], list[str]]:
    """Rail leaves, rail by rail: NIC ``r`` of the servers of one group per leaf (see
    :func:`multi_node`)."""
    n_nodes, n_rails = len(nic_ids), len(nic_ids[0])
    n_groups = math.ceil(n_nodes / leaf_down_ports(radix, oversubscription))
    bounds = [g * n_nodes // n_groups for g in range(n_groups + 1)]  # sizes differ by <= 1
    groups = [
        [(nic_ids[i][r], 1) for i in range(bounds[g], bounds[g + 1])]
        for r in range(n_rails)
        for g in range(n_groups)
    ]
    if n_groups == 1:
        return groups, [f"net.rail{r}" for r in range(n_rails)]
    return groups, [f"net.group{g}.rail{r}" for r in range(n_rails) for g in range(n_groups)]


def _nics_per_node(nics: int | None, rpn: int) -> int:
    """NICs per server: ``rpn`` (one per accelerator) when ``nics`` is None, else ``nics``, which
    must be a positive divisor of ``rpn`` (a one-line error naming ``nics`` otherwise)."""
    if nics is None:
        return rpn
    if isinstance(nics, bool) or not isinstance(nics, int) or nics <= 0 or rpn % nics:
        divisors = [d for d in range(1, rpn + 1) if rpn % d == 0]
        raise UsageError(
            f"must divide the {rpn} accelerators per server "
            f"(one of {', '.join(map(str, divisors))}), got {nics!r}",
            entry="nics",
        )
    return nics


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
