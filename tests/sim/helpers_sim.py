"""Small topologies and schedules for the simulator tests (built here, not presets)."""

from __future__ import annotations

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
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
