"""Switch chips: NVSwitch generations, PCIe, UALink, InfiniBand and Ethernet switches.

A :class:`SwitchSpec` is ONE switch chip (not a tray or a box): its port count in links of its
``link_tech`` (a PCIe switch counts x16 ports, a UALink switch x4 ports), its port-to-port
latency, and whether it can reduce data in the switch (NVLink SHARP / NVLS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaleup.units import GB

__all__ = ["SwitchSpec"]


@dataclass(frozen=True, slots=True)
class SwitchSpec:
    """One switch chip.

    Attributes
    ----------
    name
        Catalog name, e.g. ``"nvswitch3"``.
    link_tech
        Link technology of its ports (a catalog link name).
    port_count
        Ports of one chip, each one link of ``link_tech``.
    latency_s
        Port-to-port latency through the chip, seconds.
    in_switch_reduction
        Whether the chip reduces data in the switch and multicasts the result (NVLS).
    reduction_gb_per_s
        Reduction throughput of one chip in GB/s, where sourced or derived; ``None`` otherwise.
    sources
        Field name -> where the figure came from (or the reasoning of an estimate).
    """

    name: str
    link_tech: str
    port_count: int
    latency_s: float
    in_switch_reduction: bool = False
    reduction_gb_per_s: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def reduction_bytes_per_s(self) -> float | None:
        """Reduction throughput in bytes per second, or ``None`` where not known."""
        return None if self.reduction_gb_per_s is None else self.reduction_gb_per_s * GB

    @property
    def port_bandwidth_bytes_per_s(self) -> float:
        """Bandwidth of one port, one direction, bytes per second (from the link catalog)."""
        from scaleup.hardware.catalog import link_tech  # late import: catalog imports this module

        return link_tech(self.link_tech).bandwidth_bytes_per_s
