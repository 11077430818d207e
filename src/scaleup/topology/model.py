"""The Topology: devices, physical links, and the directed channels derived from them.

A :class:`Topology` is a frozen dataclass validated on construction against the hardware catalog.
It holds what a file holds (devices and links, in file order) and derives, once and cached, what
the simulator and the analysis need:

* ``accelerators`` in **rank order** (rank ``r`` is ``accelerators[r]``: the order of the devices
  in the file or builder), ``switches``, ``hosts``, ``nics``;
* ``channels``: two directed channels per pair of linked devices. **Parallel links between one
  pair are merged into one channel per direction whose bandwidth is the sum** of the links'
  bandwidths (``count`` links of a technology give ``count x`` its per-link, per-direction rate);
  several link entries between one pair are merged the same way and must share one technology;
* ``channel_index`` ``{(src, dst): i}`` and :meth:`Topology.to_networkx`, a frozen NetworkX view
  (never the source of truth).

Rules checked on construction (each raises :class:`~scaleup.errors.TopologyFileError` naming the
entry): unique ids; a link joins two defined, distinct devices; ``count`` > 0; a bandwidth override
> 0; sizes within :mod:`scaleup.limits` (devices, accelerators, links, ``count``, bandwidth, node
index; a :class:`~scaleup.errors.LimitError`); device types and link technologies exist in the
catalog; an accelerator uses at most its catalog ``link_count`` scale-up links and a switch at
most its ``port_count`` ports; a switch's links use its own link family; every accelerator is
connected to the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import enum
import gc
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scaleup import hardware, limits
from scaleup.errors import TopologyFileError, UnknownCatalogEntry, UnknownTopologyEntry

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "HOST_LATENCY_S",
    "Channel",
    "Device",
    "Link",
    "NodeKind",
    "Topology",
    "UnknownTopologyEntry",
]

#: Fallback traversal latency of a host CPU / root complex, used only when the catalog's host
#: entry has no ``latency_s``. An estimate, not sourced: PCIe P2P through a root complex is
#: commonly a few hundred ns above a PCIe switch hop.
HOST_LATENCY_S = 0.5e-6


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while many acyclic objects are made.

    Building a 16,384-GPU fabric makes ~600,000 devices, links and channels, none of which can
    form a reference cycle; each allocation burst still triggers full collections that walk every
    live object, which doubled the build time (1.8 s -> 0.9 s without them). The collector is
    turned back on when the block ends, if it was on before.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class NodeKind(enum.StrEnum):
    """What a device is; values as ``scaleup.hardware.device_kind`` returns them."""

    ACCELERATOR = "accelerator"
    SWITCH = "switch"
    HOST = "host"
    NIC = "nic"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Device:
    """One node of the fabric: an accelerator, a switch chip, a host (CPU/root complex) or a NIC.

    ``node`` is the server index in a multi-node topology (0 in a single machine).
    """

    id: str
    type: str
    kind: NodeKind
    node: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, NodeKind):
            object.__setattr__(self, "kind", NodeKind(self.kind))

    @classmethod
    def of(cls, id: str, type: str, node: int = 0) -> Device:  # noqa: A002 - field name
        """A device whose kind is looked up in the catalog (what files and builders use)."""
        return cls(id, type, _kind_of(type, id), node)


@dataclass(frozen=True)
class Link:
    """``count`` parallel physical links of technology ``tech`` between devices ``a`` and ``b``.

    ``bandwidth_gb_per_s`` optionally overrides the catalog's per-link, per-direction bandwidth
    (GB/s as written in the file, kept as written so files round-trip exactly).
    """

    a: str
    b: str
    tech: str
    count: int = 1
    bandwidth_gb_per_s: float | None = None


@dataclass(frozen=True)
class Channel:
    """One direction of the merged links between two devices."""

    src: str
    dst: str
    tech: str
    count: int
    bandwidth_bytes_per_s: float
    latency_s: float


@dataclass(frozen=True)
class Topology:
    """A scale-up (and optionally scale-out) fabric, validated on construction.

    Examples
    --------
    >>> g = [Device.of(f"g{i}", "H100") for i in range(2)]
    >>> t = Topology("pair", g, [Link("g0", "g1", "nvlink4", 18)])
    >>> round(t.channels[0].bandwidth_bytes_per_s / 1e9)
    450
    """

    name: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    peer_access: bool = True
    description: str = ""
    _by_id: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "links", tuple(self.links))
        by_id: dict[str, int] = {}
        for i, dev in enumerate(self.devices):
            if dev.id in by_id:
                raise self._error(f"duplicate device id {dev.id!r}", dev.id)
            if not dev.id:
                raise self._error("a device id must not be empty", f"devices[{i}]")
            by_id[dev.id] = i
        object.__setattr__(self, "_by_id", by_id)
        with bulk():
            _validate(self)

    def __hash__(self) -> int:
        # Cached: analysis caches results per topology, and hashing thousands of links per call
        # would cost more than the lookup saves.
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash((self.name, self.devices, self.links, self.peer_access, self.description))

    def __getstate__(self) -> dict[str, Any]:
        # Pickle (dask, multiprocessing) only the data; derived views are rebuilt on demand.
        keep = ("name", "devices", "links", "peer_access", "description", "_by_id")
        return {k: self.__dict__[k] for k in keep}

    def _error(self, message: str, entry: str | None) -> TopologyFileError:
        return TopologyFileError(message, source=self.name or None, entry=entry)

    # -- lookups ---------------------------------------------------------------------------
    def device(self, device_id: str) -> Device:
        """The device with that id (``KeyError`` if none)."""
        return self.devices[self._by_id[device_id]]

    def index(self, device_id: str) -> int:
        """Position of the device in ``devices``."""
        return self._by_id[device_id]

    def rank(self, device_id: str) -> int:
        """Rank of an accelerator (``KeyError`` if it is not one)."""
        return self._rank_of[device_id]

    def _of_kind(self, kind: NodeKind) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind is kind)

    @cached_property
    def accelerators(self) -> tuple[Device, ...]:
        """Accelerators in rank order (file order)."""
        return self._of_kind(NodeKind.ACCELERATOR)

    @cached_property
    def switches(self) -> tuple[Device, ...]:
        """Switch chips (NVSwitch, PCIe, UALink, scale-out)."""
        return self._of_kind(NodeKind.SWITCH)

    @cached_property
    def hosts(self) -> tuple[Device, ...]:
        """Host CPUs / root complexes."""
        return self._of_kind(NodeKind.HOST)

    @cached_property
    def nics(self) -> tuple[Device, ...]:
        """Scale-out NICs."""
        return self._of_kind(NodeKind.NIC)

    @cached_property
    def _rank_of(self) -> dict[str, int]:
        return {d.id: r for r, d in enumerate(self.accelerators)}

    @cached_property
    def nodes(self) -> tuple[int, ...]:
        """Distinct server indices holding accelerators, ascending."""
        return tuple(sorted({d.node for d in self.accelerators}))

    @cached_property
    def ranks_per_node(self) -> int:
        """Accelerators per server (those on the server of rank 0)."""
        first = self.accelerators[0].node
        return sum(1 for d in self.accelerators if d.node == first)

    # -- channels --------------------------------------------------------------------------
    @cached_property
    def channels(self) -> tuple[Channel, ...]:
        """Directed channels: for each linked pair (first-seen order) a->b then b->a, merged."""
        with bulk():
            return self._merge_links()

    def _merge_links(self) -> tuple[Channel, ...]:
        merged: dict[tuple[str, str], list[Any]] = {}
        per_tech: dict[str, tuple[float, float]] = {}  # tech -> (bytes/s per link, latency)
        for link in self.links:
            key = (link.a, link.b) if (link.b, link.a) not in merged else (link.b, link.a)
            spec = per_tech.get(link.tech)
            if spec is None:
                tech = _tech(link.tech)
                spec = per_tech[link.tech] = (float(tech.bandwidth_bytes_per_s), tech.latency_s)
            bw = spec[0] if link.bandwidth_gb_per_s is None else _link_bandwidth_bytes_per_s(link)
            entry = merged.get(key)
            if entry is not None:
                entry[1] += link.count
                entry[2] += bw * link.count
            else:
                merged[key] = [link.tech, link.count, bw * link.count, spec[1]]
        out: list[Channel] = []
        for (a, b), (tech, count, bw, lat) in merged.items():
            out.append(Channel(a, b, tech, count, bw, lat))
            out.append(Channel(b, a, tech, count, bw, lat))
        return tuple(out)

    @cached_property
    def channel_index(self) -> dict[tuple[str, str], int]:
        """``{(src, dst): position in channels}``."""
        return {(c.src, c.dst): i for i, c in enumerate(self.channels)}

    def with_peer_access(self, peer_access: bool) -> Topology:
        """The same fabric with peer (P2P load/store) access on or off (``--no-p2p``)."""
        return dataclasses.replace(self, peer_access=peer_access)

    def device_latency_s(self, device_id: str) -> float:
        """Traversal latency of a device: switch/NIC port to port and a host's root complex from
        the catalog (:data:`HOST_LATENCY_S` if the host entry has none), 0 for an accelerator."""
        return self._device_latency[self._by_id[device_id]]

    @cached_property
    def _device_latency(self) -> tuple[float, ...]:
        return tuple(_latency_of(d) for d in self.devices)

    def to_networkx(self) -> nx.DiGraph:
        """A frozen ``networkx.DiGraph`` view: nodes in device order with ``kind`` (str),
        ``type``, ``node``, ``latency_s``; one edge per channel with ``bandwidth_bytes_per_s``,
        ``latency_s``, ``tech``, ``count`` and ``channel`` (its index). Copy it to modify."""
        return self._graph

    @cached_property
    def _graph(self) -> nx.DiGraph:
        import networkx as nx

        graph = nx.DiGraph(name=self.name)
        for d, lat in zip(self.devices, self._device_latency, strict=True):
            graph.add_node(d.id, kind=d.kind.value, type=d.type, node=d.node, latency_s=lat)
        for i, c in enumerate(self.channels):
            graph.add_edge(
                c.src,
                c.dst,
                bandwidth_bytes_per_s=c.bandwidth_bytes_per_s,
                latency_s=c.latency_s,
                tech=c.tech,
                count=c.count,
                channel=i,
            )
        return nx.freeze(graph)


# -- catalog access (lazy, so this module imports before the catalog is complete) -----------
def _known(names: Iterable[str], name: str) -> str:
    close = difflib.get_close_matches(name, list(names), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _kind_of(type_name: str, entry: str, source: str | None = None) -> NodeKind:
    try:
        return NodeKind(hardware.device_kind(type_name))
    except UnknownCatalogEntry as error:
        raise UnknownTopologyEntry(
            f"unknown device type {type_name!r}: {error.message}", source=source, entry=entry
        ) from None


def _tech(name: str) -> Any:
    return hardware.link_tech(name)


def _link_bandwidth_bytes_per_s(link: Link) -> float:
    if link.bandwidth_gb_per_s is not None:
        return float(link.bandwidth_gb_per_s) * 1e9
    return float(_tech(link.tech).bandwidth_bytes_per_s)


def _latency_of(dev: Device) -> float:
    if dev.kind is NodeKind.SWITCH:
        return float(hardware.switch_chip(dev.type).latency_s)
    if dev.kind is NodeKind.NIC:
        return float(hardware.nic_spec(dev.type).latency_s)
    if dev.kind is NodeKind.HOST:
        return float(getattr(hardware.host_spec(dev.type), "latency_s", HOST_LATENCY_S))
    return 0.0


def _family(tech_name: str) -> str:
    return str(getattr(_tech(tech_name), "family", tech_name))


# -- validation ------------------------------------------------------------------------------
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


def _validate(t: Topology) -> None:
    err = t._error
    _check_sizes(t)
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
    techs: set[str] = set()
    pair_tech: dict[tuple[str, str], str] = {}
    used: dict[tuple[str, str], int] = {}  # (device id, tech) -> links used
    parent = list(range(len(t.devices)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, link in enumerate(t.links):
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
            raise err(f"accelerator {lone!r} is not connected to {t.devices[accs[0]].id!r}", lone)


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


def _family_or(tech: str | None) -> str | None:
    return _family(tech) if tech else None
