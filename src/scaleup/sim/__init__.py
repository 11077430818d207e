"""The fabric simulator: time a Schedule on a Topology.

``simulate(schedule, topology, dtype=, protocol=, ranks=, solver=)`` returns a :class:`SimResult`;
:func:`compile_schedule` binds a schedule to a topology once for many runs (protocols, sizes).
The tuner (:mod:`scaleup.sim.tuner`) and ``collective_time_s`` (:mod:`scaleup.sim.collective_time`,
re-exported lazily here:
the tuner imports the algorithm library, which must not be imported by the simulator core).
"""

from __future__ import annotations

from typing import Any

from scaleup.sim.simulate import (
    CompiledSchedule,
    compile_schedule,
    itemsize,
    simulate,
    simulate_many,
)
from scaleup.sim.timeline import SimResult, render_timeline

__all__ = [
    "CompiledSchedule",
    "SimResult",
    "collective_time_s",
    "compile_schedule",
    "itemsize",
    "render_timeline",
    "simulate",
    "simulate_many",
]


def __getattr__(name: str) -> Any:
    if name == "collective_time_s":
        from scaleup.sim import collective_time  # noqa: PLC0415 - lazy: avoids an import cycle

        return collective_time.collective_time_s
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
