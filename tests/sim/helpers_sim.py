"""Small topologies and schedules for the simulator tests (built here, not presets)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaleup import hardware
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import params as P
from scaleup.sim.network import LINK_CLASSES, Network
from scaleup.sim.protocols import protocol as get_protocol
from scaleup.topology.generators import switched
from scaleup.topology.model import Device, Link, Topology


def pair(links: int = 1, tech: str = "nvlink4", accelerator: str = "H100") -> Topology:
    """Two accelerators joined by ``links`` direct links."""
    devices = [Device.of("g0", accelerator), Device.of("g1", accelerator)]
    return Topology("pair", devices, [Link("g0", "g1", tech, links)])


def uniform_switch(n: int, links: int = 2) -> Topology:
    """n H100 on one NVSwitch, ``links`` NVLink4 each (per-GPU rate below one channel's cap)."""
    return switched(n, "H100", "nvswitch3", planes=1, links_per_plane=links, name=f"uniform-{n}")


def copies(n_copies: int, count: int, *, channels_distinct: bool = True) -> Schedule:
    """``n_copies`` concurrent copies r0 -> r1 of ``count`` elements each."""
    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=count * n_copies), "copies")
    for k in range(n_copies):
        b.copy(
            b.input(0, k * count, count),
            b.output(1, k * count, count),
            deps=[],
            channel=k if channels_distinct else 0,
        )
    return b.build()


def ring_all_reduce(n: int, count: int, channels: int = 1) -> Schedule:
    """The library's ring all_reduce (NCCL dataflow: per-step block copies just in time)."""
    return build_schedule(
        "ring", CollectiveSpec("all_reduce", nranks=n, count=count), channels=channels
    )


@dataclass(frozen=True)
class AlphaBeta:
    """``launch_s``, per-step ``alpha_s`` and per-rank ``beta_bytes_per_s`` of a fabric."""

    launch_s: float
    alpha_s: float
    beta_bytes_per_s: float


def alpha_beta(
    topology: Topology,
    *,
    protocol: str = "simple",
    channels: int = 1,
    ranks: Sequence[int] | None = None,
) -> AlphaBeta:
    """Alpha-beta figures of a uniform topology from the simulator's parameters, for the oracle
    (:func:`scaleup.collectives.cost.time_s`).

    ``alpha`` is the protocol step latency plus the hardware latency of the route from the first
    to the second rank; ``beta`` the smaller of rank 0's injection bandwidth (its channels at
    their achievable rate, times the payload efficiency) and ``channels`` thread-block caps.
    """
    proto = get_protocol(protocol)
    net = Network(topology)
    order = list(ranks) if ranks is not None else [0, 1]
    route = net.routes[net.transfer_route(order[0], order[1])]
    alpha = proto.step_latency_s[LINK_CLASSES[route.link_class]] + route.latency_s
    dev = int(net.acc_devices[order[0]])
    inject = float(net.ch_capacity[net.ch_src == dev].sum()) * proto.payload_efficiency
    arch = str(hardware.accelerator(topology.accelerators[order[0]].type).arch)
    beta = min(inject, channels * proto.cta_bytes_per_s(arch))
    return AlphaBeta(P.KERNEL_LAUNCH_S + proto.launch_latency_s, alpha, beta)


def structure_kinds(session) -> set[str]:
    """The class names of every structure a tuning session compiled (patterns or whole tables)."""
    return {type(c).__name__ for q in session._questions.values() for c in q.compiled.values()}
