"""A measured correction of the catalog figures: what a calibration profile changes in a fabric.

A :class:`Calibration` travels with a :class:`~scaleup.topology.model.Topology`
(:meth:`Topology.with_calibration <scaleup.topology.model.Topology.with_calibration>`), so every
cache keyed on the topology (networks, compiled schedules, timings) sees it, and the simulator is
still a pure interpreter of (Schedule, Topology). It changes four figures, each where the
simulator already reads the catalog's:

==========================  ==========================================================  =======
field                       replaces / adds to                                           seam
==========================  ==========================================================  =======
``link_efficiency``         payload fraction of every scale-up link (encoding x          paths
                            ``params.LINK_EFFICIENCY``, e.g. 0.824 for NVLink4)
``nic_efficiency``          payload fraction of every network link (InfiniBand,          paths
                            Ethernet scale-out; 0.95 x encoding by default)
``net_latency_s``           added to the library's per-step latency of the network       protocols
                            link class (NCCL hwLat NET)
``launch_latency_s``        added to the host launch of every collective                 protocols
                            (``params.KERNEL_LAUNCH_S``, 4 us)
==========================  ==========================================================  =======

``None`` efficiencies keep the catalog's; the latencies are offsets (0 keeps the model's). Host
links (PCIe, socket) are left alone: the calibration logs of a collective say little about them.

>>> Calibration(link_efficiency=0.8).describe()
'link efficiency 0.800'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaleup.errors import UsageError

__all__ = ["EFFICIENCY_RANGE", "LATENCY_RANGE_S", "LAUNCH_RANGE_S", "Calibration"]

#: Physically plausible payload fractions of a link: below 0.3 a link is broken, not inefficient;
#: above 1.0 it would carry more than its raw rate.
EFFICIENCY_RANGE = (0.3, 1.0)
#: Plausible offsets of the network step latency, seconds: down to -2 us (NCCL's smallest NET
#: step, 2.7 us, stays positive), up to +100 us (a slow proxy thread, a congested fabric).
LATENCY_RANGE_S = (-2.0e-6, 100.0e-6)
#: Plausible offsets of the host launch, seconds: down to -4 us (the 4 us
#: ``params.KERNEL_LAUNCH_S`` is then all gone: a CUDA-graph launch), up to +100 us.
LAUNCH_RANGE_S = (-4.0e-6, 100.0e-6)


@dataclass(frozen=True)
class Calibration:
    """Measured corrections of one fabric's figures (see the module docstring); validated."""

    link_efficiency: float | None = None
    nic_efficiency: float | None = None
    net_latency_s: float = 0.0
    launch_latency_s: float = 0.0

    def __post_init__(self) -> None:
        lo, hi = EFFICIENCY_RANGE
        for name in ("link_efficiency", "nic_efficiency"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and lo <= value <= hi):
                raise UsageError(f"must lie in [{lo}, {hi}], not {value}", entry=name)
        for name, (lo, hi) in (("net_latency_s", LATENCY_RANGE_S),
                               ("launch_latency_s", LAUNCH_RANGE_S)):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and lo <= value <= hi):
                raise UsageError(f"must lie in [{lo}, {hi}] s, not {value}", entry=name)

    def describe(self) -> str:
        """The fields that differ from the model, in words (empty: none)."""
        parts = []
        if self.link_efficiency is not None:
            parts.append(f"link efficiency {self.link_efficiency:.3f}")
        if self.nic_efficiency is not None:
            parts.append(f"NIC efficiency {self.nic_efficiency:.3f}")
        if self.net_latency_s:
            parts.append(f"net latency {self.net_latency_s * 1e6:+.2f} us")
        if self.launch_latency_s:
            parts.append(f"launch latency {self.launch_latency_s * 1e6:+.2f} us")
        return ", ".join(parts)
