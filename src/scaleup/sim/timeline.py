"""The result of a simulation (:class:`SimResult`) and its ASCII timeline.

A timeline row per rank shows when that rank's ops were in flight (issued by it), one character
per time bucket: a digit is the op's channel tag, ``#`` several channels at once, ``.`` idle::

    r0 |00000000....11111111|
    r1 |....00000000........|
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SimResult", "render_timeline"]


@dataclass(frozen=True, eq=False)
class SimResult:
    """Timing of one schedule on one topology.

    Attributes
    ----------
    time_s
        Completion time of the last op (the collective's duration, launch included).
    op_start_s, op_end_s
        Per op: when its dependencies were met (it starts paying latency) and when it finished.
    channel_bytes, channel_busy_s
        Per topology channel (``topology.channels`` order): payload bytes carried and the time
        during which it carried any.
    busiest_channel, busiest_channel_bytes
        The channel that carried the most bytes, and how many (``linkbw`` = bytes / time).
    constraint_names, constraint_bytes, constraint_busy_s
        Every constraint (channels, virtual host links, HBMs, host memories), bytes (or memory
        accesses x bytes) and busy time.
    """

    time_s: float
    op_start_s: np.ndarray
    op_end_s: np.ndarray
    op_rank: np.ndarray
    op_channel: np.ndarray
    channel_bytes: np.ndarray
    channel_busy_s: np.ndarray
    constraint_names: tuple[str, ...]
    constraint_bytes: np.ndarray
    constraint_busy_s: np.ndarray
    protocol: str
    topology: str
    algorithm: str
    nbytes: float
    n_events: int
    channel_names: tuple[str, ...] = field(default=())
    #: ``"event"``: the event loop; ``"steady"``: a ring in steady state
    #: (:mod:`scaleup.sim.steady_ring`, an approximation without ops or events)
    model: str = "event"

    @property
    def busiest_channel(self) -> int:
        return int(np.argmax(self.channel_bytes)) if len(self.channel_bytes) else -1

    @property
    def busiest_channel_bytes(self) -> float:
        return float(self.channel_bytes.max()) if len(self.channel_bytes) else 0.0

    @property
    def time_us(self) -> float:
        return self.time_s * 1e6

    @property
    def linkbw_gb_per_s(self) -> float | None:
        """Bytes on the busiest channel / time, GB/s: what the wires really carried (the
        ``linkbw`` column of ``scaleup bench``). None when it says nothing: a zero time, or bytes
        that moved while no topology channel carried any (staged through virtual host memory)."""
        busiest = self.busiest_channel_bytes
        if self.time_s <= 0 or (busiest <= 0 and self.nbytes > 0):
            return None
        return busiest / self.time_s / 1e9

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (per-channel figures only for channels that carried bytes)."""
        used = np.flatnonzero(self.channel_bytes > 0)
        busiest = self.busiest_channel
        return {
            "topology": self.topology,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "bytes": self.nbytes,
            "time_s": self.time_s,
            "time_us": self.time_us,
            "n_ops": int(len(self.op_end_s)),
            "n_events": self.n_events,
            "model": self.model,
            "busiest_channel": self.channel_names[busiest]
            if busiest >= 0 and self.channel_names
            else busiest,
            "busiest_channel_bytes": self.busiest_channel_bytes,
            "linkbw_gb_per_s": self.linkbw_gb_per_s,
            "channels": [
                {
                    "channel": self.channel_names[i] if self.channel_names else int(i),
                    "bytes": float(self.channel_bytes[i]),
                    "busy_s": float(self.channel_busy_s[i]),
                }
                for i in used
            ],
        }

    def timeline(self, *, width: int = 60, ranks: int = 8, ops: int | None = None) -> str:
        """ASCII timeline of the first ``ranks`` ranks (see the module docstring)."""
        return render_timeline(self, width=width, ranks=ranks, ops=ops)


def render_timeline(
    result: SimResult, *, width: int = 60, ranks: int = 8, ops: int | None = None
) -> str:
    """Render which ops each rank had in flight over time, one row per rank."""
    n = len(result.op_end_s) if ops is None else min(ops, len(result.op_end_s))
    end = float(result.op_end_s[:n].max()) if n else 0.0
    if end <= 0:
        return "(empty timeline)"
    bucket = end / width
    lines = [f"t = 0 .. {end * 1e6:.3f} us, {bucket * 1e6:.3f} us per column"]
    for r in range(min(ranks, int(result.op_rank.max()) + 1 if n else 0)):
        row = ["."] * width
        mine = np.flatnonzero(result.op_rank[:n] == r)
        for i in mine:
            lo = int(result.op_start_s[i] / bucket)
            hi = max(lo + 1, int(np.ceil(result.op_end_s[i] / bucket)))
            mark = str(int(result.op_channel[i]) % 10)
            for c in range(lo, min(hi, width)):
                row[c] = mark if row[c] in (".", mark) else "#"
        lines.append(f"r{r:<3}|{''.join(row)}|")
    return "\n".join(lines)
