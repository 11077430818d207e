"""Validation of a Topology on construction: sizes, device kinds, links, budgets, connectivity.

Split from :mod:`scaleup.topology.model` (whose docstring lists the rules) so that the Topology
class holds the data and its derived views while these checks, which only read it, stand alone.
Each failure raises :class:`~scaleup.errors.TopologyFileError` (or a subclass) naming the entry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scaleup import hardware, limits
from scaleup.errors import UnknownCatalogEntry, UnknownTopologyEntry
from scaleup.topology.elements import Link, NodeKind, _kind_of, _known, _tech

if TYPE_CHECKING:
    from scaleup.topology.model import Topology

__all__ = ["validate"]


def _check_sizes(t: Topology) -> None:
    """The limits of :mod:`scaleup.limits` on the whole topology and on each link and node."""
    source = t.name or None
    n_accs = sum(1 for d in t.devices if d.kind is NodeKind.ACCELERATOR)
    for value, limit, name, what in (
        (n_accs, limits.MAX_RANKS, "MAX_RANKS", "accelerators"),
        (len(t.devices), limits.MAX_DEVICES, "MAX_DEVICES", "devices"),
        (len(t.links), limits.MAX_LINKS, "MAX_LINKS", "links"),
    ):
        limits.check_at_most(value, limit, source=source, name=name, what=what)
    for dev in t.devices:
        if isinstance(dev.node, int):
            limits.check_at_most(
                dev.node, limits.MAX_DEVICES, source=source, entry=dev.id,
                name="MAX_DEVICES", what="(node index)",
            )  # fmt: skip
    for i, link in enumerate(t.links):
        entry = f"links[{i}]"
        if isinstance(link.count, int):
            limits.check_at_most(
                link.count, limits.MAX_LINK_COUNT, source=source, entry=entry,
                name="MAX_LINK_COUNT", what="links (count)",
            )  # fmt: skip
        if isinstance(link.bandwidth_gb_per_s, (int, float)):
            limits.check_at_most(
                link.bandwidth_gb_per_s, limits.MAX_LINK_GB_PER_S, source=source, entry=entry,
                name="MAX_LINK_GB_PER_S", what="GB/s (bandwidth_gb_per_s)",
            )  # fmt: skip


def validate(t: Topology) -> None:
    """Every rule of :mod:`scaleup.topology.model`'s docstring not checked by ``Topology`` itself
    (unique, non-empty ids are); the first broken one raises."""
    _check_sizes(t)
    _check_devices(t)
    parent = list(range(len(t.devices)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    techs: set[str] = set()
    pair_tech: dict[tuple[str, str], str] = {}
    used: dict[tuple[str, str], int] = {}  # (device id, tech) -> links used
    for i, link in enumerate(t.links):
        _check_link(t, i, link, techs, pair_tech)
        for end in (link.a, link.b):
            used[(end, link.tech)] = used.get((end, link.tech), 0) + link.count
        ra, rb = root(t._by_id[link.a]), root(t._by_id[link.b])
        parent[ra] = rb
    _check_link_budgets(t, used)
    accs = [t._by_id[d.id] for d in t.devices if d.kind is NodeKind.ACCELERATOR]
    first = root(accs[0])
    for i in accs[1:]:
        if root(i) != first:
            lone = t.devices[i].id
            raise t._error(
                f"accelerator {lone!r} is not connected to {t.devices[accs[0]].id!r}", lone
            )


def _check_devices(t: Topology) -> None:
    """Each device's kind matches its catalog type, its node is an integer >= 0, and there is at
    least one accelerator."""
    err = t._error
    kinds: dict[str, NodeKind] = {}
    for dev in t.devices:
        if dev.type not in kinds:
            kinds[dev.type] = _kind_of(dev.type, dev.id, t.name or None)
        if kinds[dev.type] is not dev.kind:
            raise err(
                f"device type {dev.type!r} is of kind {kinds[dev.type]}, not {dev.kind}", dev.id
            )
        if isinstance(dev.node, bool) or not isinstance(dev.node, int) or dev.node < 0:
            raise err(f"node must be an integer >= 0, got {dev.node!r}", dev.id)
    if not any(k is NodeKind.ACCELERATOR for k in kinds.values()):
        raise err("a topology needs at least one accelerator", None)


def _check_link(
    t: Topology,
    i: int,
    link: Link,
    techs: set[str],
    pair_tech: dict[tuple[str, str], str],
) -> None:
    """One link entry: defined, distinct ends; a positive count and bandwidth; a catalog
    technology (``techs``: those already found), the same one as other links of its pair."""
    err = t._error
    entry = f"links[{i}]"
    for end in (link.a, link.b):
        if end not in t._by_id:
            raise err(
                f"link endpoint {end!r} is not a defined device{_known(t._by_id, end)}", entry
            )
    if link.a == link.b:
        raise err(f"a link must join two different devices, got {link.a!r} twice", entry)
    if isinstance(link.count, bool) or not isinstance(link.count, int) or link.count <= 0:
        raise err(f"count must be a positive integer, got {link.count!r}", entry)
    bw = link.bandwidth_gb_per_s
    if bw is not None and (isinstance(bw, bool) or not math.isfinite(bw) or bw <= 0):
        raise err(f"bandwidth_gb_per_s must be a positive number, got {bw!r}", entry)
    if link.tech not in techs:
        try:
            _tech(link.tech)
        except UnknownCatalogEntry as error:
            raise UnknownTopologyEntry(
                f"unknown link technology {link.tech!r}: {error.message}",
                source=t.name or None,
                entry=entry,
            ) from None
        techs.add(link.tech)
    pair = (link.a, link.b) if link.a < link.b else (link.b, link.a)
    if pair_tech.setdefault(pair, link.tech) != link.tech:
        raise err(
            f"links between {link.a!r} and {link.b!r} use two technologies "
            f"({pair_tech[pair]!r}, {link.tech!r}); one pair needs one technology",
            entry,
        )


def _check_link_budgets(t: Topology, used: dict[tuple[str, str], int]) -> None:
    """Per device, the catalog's ``max_links(type, tech)``: an accelerator's own scale-up links
    <= ``link_count``, host-side links (PCIe, C2C, socket) unbounded, other scale-up or scale-out
    links not allowed; a switch's links of its family share ``port_count``; a NIC has one
    network port."""
    per_device: dict[str, list[tuple[str, int]]] = {}
    for (dev_id, tech), n in used.items():
        per_device.setdefault(dev_id, []).append((tech, n))
    for dev_id, uses in per_device.items():
        dev = t.device(dev_id)
        if dev.kind is NodeKind.NIC:
            spec = hardware.nic_spec(dev.type)
            n = sum(n for tech, n in uses if tech == spec.link_tech)
            if n > 1:
                raise t._error(
                    f"a {dev.type} NIC has one {spec.link_tech} port, this device uses {n}", dev_id
                )
            continue
        if dev.kind is NodeKind.HOST:
            continue
        bounded: dict[int, int] = {}
        for tech, n in uses:
            bound = hardware.max_links(dev.type, tech)
            if bound == 0:
                raise t._error(f"a {dev.type} has no {tech} links", dev_id)
            if bound is not None:
                bounded[bound] = bounded.get(bound, 0) + n
        for bound, n in bounded.items():
            if n > bound:
                what = "ports" if dev.kind is NodeKind.SWITCH else "links"
                raise t._error(f"a {dev.type} has {bound} {what}, this device uses {n}", dev_id)
