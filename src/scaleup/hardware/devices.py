"""End devices of a fabric: accelerators, host CPU sockets (root complexes) and NICs.

Bandwidths are GB/s = 1e9 bytes/s; every ``*_bytes_per_s`` property converts. An accelerator's
scale-up bandwidth is ``link_count`` times ONE link's bandwidth in ONE direction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scaleup.units import GB

if TYPE_CHECKING:
    from scaleup.hardware.links import LinkTech

__all__ = ["AcceleratorSpec", "HostSpec", "NicSpec"]


def _link(name: str) -> LinkTech:
    from scaleup.hardware.catalog import link_tech  # late import: catalog imports this module

    return link_tech(name)


@dataclass(frozen=True, slots=True)
class AcceleratorSpec:
    """One accelerator as the runtime sees it (one rank).

    Attributes
    ----------
    name, vendor, arch
        Catalog name (``"H100"``), vendor (``"nvidia"``/``"amd"``), architecture (``"hopper"``).
    hbm_bytes
        Device memory capacity in bytes (decimal GB or binary GiB as the vendor states it; the
        ``sources`` entry says which).
    hbm_gb_per_s
        Peak device memory bandwidth, GB/s.
    link_tech
        Scale-up link technology (catalog link name), or ``None`` for a card without one.
    link_count
        Scale-up links per accelerator (0 without a scale-up link).
    host_link_tech
        Link to the host or PCIe switch (``pcie4``, ``pcie5``, ``c2c``).
    peak_bf16_tflops
        Dense (no sparsity) BF16 tensor throughput; FP16 where the chip lacks BF16 (P100, V100).
    sources
        Field name -> where the figure came from.
    link_gb_per_s
        One scale-up link's bandwidth per direction, copied from the link catalog the spec was
        loaded with; ``None`` (the default for hand-made specs) looks it up in the packaged one.
    """

    name: str
    vendor: str
    arch: str
    hbm_bytes: int
    hbm_gb_per_s: float
    link_tech: str | None
    link_count: int
    host_link_tech: str
    peak_bf16_tflops: float
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)
    link_gb_per_s: float | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def link(self) -> LinkTech | None:
        """The scale-up :class:`LinkTech`, or ``None`` for a card without one."""
        return None if self.link_tech is None else _link(self.link_tech)

    @property
    def host_link(self) -> LinkTech:
        """The host :class:`LinkTech` (PCIe or NVLink-C2C)."""
        return _link(self.host_link_tech)

    @property
    def scaleup_gb_per_s(self) -> float:
        """Scale-up bandwidth per direction: ``link_count`` x one link's GB/s per direction."""
        if self.link_tech is None:
            return 0.0
        per_link = self.link_gb_per_s
        if per_link is None:
            per_link = _link(self.link_tech).bandwidth_gb_per_s
        return self.link_count * per_link

    @property
    def scaleup_bytes_per_s(self) -> float:
        """Scale-up bandwidth per direction in bytes per second."""
        return self.scaleup_gb_per_s * GB

    @property
    def hbm_bytes_per_s(self) -> float:
        """Peak device memory bandwidth in bytes per second."""
        return self.hbm_gb_per_s * GB

    @property
    def peak_bf16_flops(self) -> float:
        """Dense BF16 (FP16 on P100/V100) throughput in FLOP/s."""
        return self.peak_bf16_tflops * 1e12


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One CPU socket with its root complex: memory bandwidth and the link to the other socket.

    Attributes
    ----------
    name
        Catalog name (``"host"``).
    memory_gb_per_s
        Peak DRAM bandwidth of the socket, GB/s.
    socket_link_tech
        Link technology between sockets (catalog link name, ``"upi"``).
    latency_s
        Traversal of the root complex (PCIe in, PCIe or socket link out), seconds.
    sources
        Field name -> where the figure came from.
    """

    name: str
    memory_gb_per_s: float
    socket_link_tech: str
    latency_s: float
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def memory_bytes_per_s(self) -> float:
        """Peak DRAM bandwidth in bytes per second."""
        return self.memory_gb_per_s * GB


@dataclass(frozen=True, slots=True)
class NicSpec:
    """One scale-out network adapter, named after its link technology (``"ib-ndr"``).

    Attributes
    ----------
    name
        Catalog name, equal to its ``link_tech``.
    link_tech
        Network link technology (catalog link name).
    host_link_tech
        Its host interface (``pcie5`` ...).
    latency_s
        Traversal of the adapter (host interface to wire), seconds.
    reported_latency_s
        The latency its NCCL network plugin reports to NCCL (``ncclNetProperties_t.latency``),
        seconds: an input of NCCL's cost model only, which adds it to every inter-node step of
        its prediction (``latencyInter``, twice for Simple: src/graph/tuning.cc lines 389-391),
        so it steers NCCL's choice without being a time anything takes. 0 for NCCL's own
        InfiniBand / RoCE transport (``net_ib.cc`` leaves it unset).
    sources
        Field name -> where the figure came from.
    """

    name: str
    link_tech: str
    host_link_tech: str
    latency_s: float
    reported_latency_s: float = 0.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Line rate of the adapter's network port, one direction, bytes per second."""
        return _link(self.link_tech).bandwidth_bytes_per_s
