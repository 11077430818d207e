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

The element types (:class:`NodeKind`, :class:`Device`, :class:`Link`, :class:`Channel`) are defined
in :mod:`~scaleup.topology.elements` and the rules checked in :mod:`~scaleup.topology.validate`;
this module re-exports the types and stays their public home.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scaleup import hardware
from scaleup.errors import TopologyFileError, UnknownTopologyEntry
from scaleup.topology.elements import Channel, Device, Link, NodeKind, _tech, bulk
from scaleup.topology.model_profile import Calibration
from scaleup.topology.validate import validate

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
    #: measured corrections of the catalog figures (a calibration profile); None: the catalog's
    calibration: Calibration | None = None
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
            validate(self)

    def __hash__(self) -> int:
        # Cached: analysis caches results per topology, and hashing thousands of links per call
        # would cost more than the lookup saves.
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(
            (
                self.name,
                self.devices,
                self.links,
                self.peer_access,
                self.description,
                self.calibration,
            )
        )

    def __getstate__(self) -> dict[str, Any]:
        # Pickle (dask, multiprocessing) only the data; derived views are rebuilt on demand.
        keep = ("name", "devices", "links", "peer_access", "description", "calibration", "_by_id")
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
    def channels_from(self) -> dict[str, tuple[Channel, ...]]:
        """The channels leaving each device that has any, in :attr:`channels` order (the
        predicates ask for every rank's: one pass, not one per question)."""
        out: dict[str, list[Channel]] = {}
        for c in self.channels:
            out.setdefault(c.src, []).append(c)
        return {d: tuple(cs) for d, cs in out.items()}

    @cached_property
    def channel_index(self) -> dict[tuple[str, str], int]:
        """``{(src, dst): position in channels}``."""
        return {(c.src, c.dst): i for i, c in enumerate(self.channels)}

    def with_peer_access(self, peer_access: bool) -> Topology:
        """The same fabric with peer (P2P load/store) access on or off (``--no-p2p``)."""
        return dataclasses.replace(self, peer_access=peer_access)

    def with_calibration(self, calibration: Calibration | None) -> Topology:
        """The same fabric with a profile's corrections of the catalog figures (None: none)."""
        return dataclasses.replace(self, calibration=calibration)

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


def _family_or(tech: str | None) -> str | None:
    return _family(tech) if tech else None
