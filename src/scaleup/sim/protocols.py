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

>>> protocol("ll").payload_efficiency
0.5
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import UsageError
from scaleup.sim import params as P

__all__ = ["PROTOCOLS", "Protocol", "protocol"]


@dataclass(frozen=True)
class Protocol:
    """The cost figures of one protocol (see the module docstring)."""

    name: str
    payload_efficiency: float
    launch_latency_s: float
    step_latency_s: Mapping[str, float]

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
