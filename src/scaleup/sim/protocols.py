"""NCCL-style protocols: what each costs in bandwidth and saves in latency.

=========  =================  =========================================================
protocol   payload per wire   latency
=========  =================  =========================================================
simple     ~1                 highest per step (bulk copy, then a flag and a fence)
ll         0.5                lowest (8-byte stores carry 4 B data + 4 B flag: no fence)
ll128      120/128            between (128-byte lines carry 120 B data + 8 B flag)
=========  =================  =========================================================

A :class:`Protocol` bundles the figures of :mod:`scaleup.sim.params` for one protocol; the
simulator divides fabric coefficients by ``payload_efficiency``, pays ``launch_latency_s`` once
per collective and ``step_latency_s[link class]`` per op, and caps each (rank, channel) thread
block at ``cta_bytes_per_s(arch)``.

The latency figures are the vendor library's: NCCL's tables for NVIDIA systems, RCCL's for AMD
systems (:mod:`scaleup.sim.params`, "library constants"). :func:`library_for` picks the library
from the catalog's accelerator vendor; :func:`for_library` turns the NCCL-default
:class:`Protocol` into the one a library runs on a given communicator.

>>> protocol("ll").payload_efficiency
0.5
>>> for_library(protocol("ll"), "rccl", arch="cdna3").launch_latency_s  # RCCL baseLat, LL
1.2e-05
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from scaleup import hardware
from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import UsageError
from scaleup.sim import params as P
from scaleup.topology.model import Topology

__all__ = [
    "LIBRARIES",
    "PROTOCOLS",
    "Protocol",
    "for_library",
    "for_topology",
    "host_launch_s",
    "library_for",
    "protocol",
]

#: The collective libraries whose constants the simulator knows, by accelerator vendor.
LIBRARIES: Mapping[str, str] = {"nvidia": "nccl", "amd": "rccl"}


@dataclass(frozen=True)
class Protocol:
    """The cost figures of one protocol (see the module docstring)."""

    name: str
    payload_efficiency: float
    launch_latency_s: float
    step_latency_s: Mapping[str, float]
    library: str = "nccl"

    def cta_bytes_per_s(self, arch: str) -> float:
        """Most payload one channel (thread block) of a GPU of ``arch`` moves per second."""
        row = P.CTA_BYTES_PER_S.get(
            P.ARCH_ALIASES.get(arch, "default"), P.CTA_BYTES_PER_S["default"]
        )
        return float(row[self.name])


def _make(name: str) -> Protocol:
    return Protocol(
        name=name,
        payload_efficiency=float(P.PAYLOAD_EFFICIENCY[name]),
        launch_latency_s=float(P.LAUNCH_LATENCY_S[name]),
        step_latency_s={cls: float(row[name]) for cls, row in P.STEP_LATENCY_S.items()},
    )


#: The protocols by NCCL's names.
PROTOCOLS: dict[str, Protocol] = {name: _make(name) for name in PROTOCOL_NAMES}


def protocol(name: str) -> Protocol:
    """The protocol called ``name`` (``simple``, ``ll``, ``ll128``; case-insensitive)."""
    try:
        return PROTOCOLS[str(name).lower()]
    except KeyError:
        raise UsageError(
            f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}", source="proto"
        ) from None


def library_for(topology: Topology, ranks: Iterable[int] | None = None) -> str:
    """The collective library the accelerators' vendor ships (``nccl`` or ``rccl``), from the
    catalog's ``vendor`` of the ranks' accelerator types (default: all accelerators). AMD parts
    run RCCL; NVIDIA and generic parts (and mixed sets) NCCL.

    >>> from scaleup.topology import resolve_topology
    >>> library_for(resolve_topology("mi300x-8")), library_for(resolve_topology("dgx-h100"))
    ('rccl', 'nccl')
    """
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    vendors = {str(hardware.accelerator(a.type).vendor) for a in chosen}
    return LIBRARIES.get(vendors.pop(), "nccl") if len(vendors) == 1 else "nccl"


def _pick(table: Mapping[str, Mapping[str, float]], algo: str, name: str, fallback: float) -> float:
    value = float(table[algo][name])
    return value if value > 0.0 else fallback


def _library_protocol(name: str, library: str, arch: str, multi_node: bool) -> Protocol:
    base = PROTOCOLS[name]
    if library == "nccl":  # the NCCL Ring rows (params.LAUNCH_LATENCY_S, STEP_LATENCY_S)
        return _with_net_overhead(base, P.NCCL_NET_OVERHEAD_S, name) if multi_node else base
    if library != "rccl":
        raise UsageError(f"unknown library {library!r}; known: nccl, rccl", source="library")
    tuning = P.RCCL_TUNING_SET.get((arch, multi_node), 0)
    hw, generic = P.RCCL_HW_LATENCY_S[tuning], P.RCCL_HW_LATENCY_S[0]
    rows = P.STEP_LATENCY_ROW["rccl"]
    step = {}
    for cls, row in base.step_latency_s.items():
        if cls not in rows:  # "local": no library latency
            step[cls] = row
            continue
        algo = rows[cls]
        value = _pick(hw[cls], algo, name, float(generic[cls][algo][name]))
        step[cls] = value
    launch = float(P.RCCL_BASE_LATENCY_S["ring"][name])
    out = replace(base, launch_latency_s=launch, step_latency_s=step, library="rccl")
    return _with_net_overhead(out, P.RCCL_NET_OVERHEAD_S, name) if multi_node else out


def _with_net_overhead(proto: Protocol, overhead: Mapping[str, float], name: str) -> Protocol:
    """``proto`` whose intra-node steps (NVLink-class and PCI) take at least the library's net
    overhead: NCCL and RCCL charge a multi-node ring ``max(intra-node hwLat, netOverhead)`` on
    every intra-node step, netOverhead tripled for Simple ("Inter-node rings still have to launch
    nsteps * net overhead": NVIDIA/nccl tuning.cc lines 404-412; ROCm/rccl tuning.cc lines
    445-452). The simulator charges it on every intra-node step of a multi-node communicator,
    whatever the algorithm (its step latency is per link class, not per algorithm)."""
    step = {
        cls: max(value, float(overhead[name])) if cls in _INTRA_NODE else value
        for cls, value in proto.step_latency_s.items()
    }
    return replace(proto, step_latency_s=step)


#: Link classes of intra-node steps (the "local" class is a copy inside one GPU: no step).
_INTRA_NODE = frozenset({"nvlink", "pci"})


def for_library(
    proto: Protocol, library: str, *, arch: str = "", multi_node: bool = False
) -> Protocol:
    """``proto`` with the latency constants ``library`` uses on a communicator of accelerators of
    architecture ``arch`` (selects RCCL's platform set) spanning one or several nodes (both
    libraries' multi-node rings pay the net overhead on every intra-node step).

    >>> for_library(protocol("ll"), "nccl", multi_node=True).step_latency_s["nvlink"]  # 0.6 -> 1
    1e-06
    >>> for_library(protocol("simple"), "nccl", multi_node=True).step_latency_s["nvlink"]  # 3.4
    3.4e-06
    """
    return _library_protocol(proto.name, library, arch, multi_node)


def for_topology(
    proto: Protocol, topology: Topology, ranks: Iterable[int] | None = None
) -> Protocol:
    """``proto`` with the constants of the library the ranks' vendor ships (:func:`library_for`),
    for their architecture and node span (default ranks: all accelerators)."""
    accs = topology.accelerators
    index = None if ranks is None else [int(r) for r in ranks]
    chosen = accs if index is None else [accs[r] for r in index]
    library = library_for(topology, index)
    arch = str(hardware.accelerator(chosen[0].type).arch) if chosen else ""
    multi_node = len({a.node for a in chosen}) > 1
    out = for_library(proto, library, arch=arch, multi_node=multi_node)
    cal = topology.calibration
    if cal is None or not cal.net_latency_s:
        return out
    step = dict(out.step_latency_s)  # a profile's offset of the network step (NCCL hwLat NET)
    step["net"] = step.get("net", 0.0) + cal.net_latency_s
    return replace(out, step_latency_s=step)


def host_launch_s(topology: Topology) -> float:
    """Host cost of launching one collective on ``topology``: :data:`~scaleup.sim.params
    .KERNEL_LAUNCH_S` plus a calibration profile's offset (:mod:`scaleup.topology.model_profile`).

    >>> from scaleup.topology import resolve_topology
    >>> from scaleup.topology.model_profile import Calibration
    >>> t = resolve_topology("dgx-h100")
    >>> round(host_launch_s(t.with_calibration(Calibration(launch_latency_s=5e-6))) * 1e6, 6)
    9.0
    """
    cal = topology.calibration
    return P.KERNEL_LAUNCH_S + (cal.launch_latency_s if cal is not None else 0.0)
