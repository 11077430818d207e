"""Link technologies: one physical link of a fabric, with its rate and traversal latency.

A :class:`LinkTech` describes ONE link (for PCIe: one x16 link; for UALink: one x4 port) and its
bandwidth in ONE direction, as the raw line/data rate the vendor or the standard quotes (GB/s =
1e9 bytes/s). Encoding or framing overhead the standard imposes on that rate (128b/130b, FLIT)
is kept apart in ``encoding_efficiency``, so that the catalog figure can be checked against the
vendor's number and the simulator can still apply the overhead where it belongs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scaleup.units import GB

__all__ = ["LinkFamily", "LinkScope", "LinkTech"]

LinkFamily = Literal[
    "nvlink", "pcie", "xgmi", "ualink", "infiniband", "ethernet", "socket", "c2c",
    "ici", "neuronlink",
]  # fmt: skip
LinkScope = Literal["scale-up", "host", "scale-out"]


@dataclass(frozen=True, slots=True)
class LinkTech:
    """One link technology: ONE link's bandwidth per direction and one traversal's latency.

    Attributes
    ----------
    name
        Catalog name, e.g. ``"nvlink4"``.
    family
        Technology family (``nvlink``, ``pcie``, ``xgmi``, ``ualink``, ``infiniband``,
        ``ethernet``, ``socket``, ``c2c``, ``ici`` (TPU), ``neuronlink`` (Trainium)).
    scope
        ``scale-up`` (accelerator fabric), ``host`` (CPU/root complex side) or ``scale-out``.
    bandwidth_gb_per_s
        Raw rate of one link in one direction, GB/s (1e9 B/s).
    latency_s
        One traversal of the link (PHY + controller + wire), seconds.
    encoding_efficiency
        Fraction of the raw rate left after line encoding / framing (1.0 where the quoted rate
        already is the data rate).
    sources
        Field name -> where the figure came from (or the reasoning of an estimate).
    """

    name: str
    family: LinkFamily
    scope: LinkScope
    bandwidth_gb_per_s: float
    latency_s: float
    encoding_efficiency: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Raw bandwidth of one link, one direction, in bytes per second."""
        return self.bandwidth_gb_per_s * GB

    @property
    def effective_gb_per_s(self) -> float:
        """Bandwidth after line encoding / framing overhead, GB/s per direction."""
        return self.bandwidth_gb_per_s * self.encoding_efficiency

    @property
    def effective_bytes_per_s(self) -> float:
        """Bandwidth after line encoding / framing overhead, bytes/s per direction."""
        return self.effective_gb_per_s * GB
