"""The fabric simulator: time a Schedule on a Topology, and nothing else.

``simulate(schedule, topology, dtype=, protocol=, ranks=, solver=)`` returns a :class:`SimResult`;
:func:`compile_schedule` binds a schedule to a topology once for many runs (protocols, sizes),
adding its routes to a :class:`Network` its caller may share between schedules. What a vendor
library would pick to run (algorithm, protocol, channels) is :mod:`scaleup.tune`, a layer above;
the simulator imports only the hardware catalog, topologies and schedules.
"""

from __future__ import annotations

from scaleup.collectives.spec import itemsize
from scaleup.sim.network import Network
from scaleup.sim.simulate import (
    CompiledSchedule,
    compile_schedule,
    simulate,
    simulate_many,
)
from scaleup.sim.timeline import SimResult, render_timeline

__all__ = [
    "CompiledSchedule",
    "Network",
    "SimResult",
    "compile_schedule",
    "itemsize",
    "render_timeline",
    "simulate",
    "simulate_many",
]
