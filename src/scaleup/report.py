"""Result rows as nccl-tests prints them, shared by the simulator, the runtime and sweeps.

A :class:`BenchRow` is one line of an ``all_reduce_perf`` table plus what scaleup adds: the
algorithm and protocol chosen, and ``linkbw`` (bytes on the busiest channel divided by time: what
the wires really carried, which nccl-tests' busbw stops meaning under in-switch reduction).
``to_dict()`` is what ``--json`` prints, so table and JSON never diverge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["BenchRow"]


@dataclass(frozen=True)
class BenchRow:
    """One measured or simulated collective at one size.

    Bandwidths are GB/s (1e9 bytes/s) per direction, as nccl-tests prints them:
    ``algbw = bytes / time`` and ``busbw = algbw * factor`` (2(n-1)/n for all_reduce,
    (n-1)/n for all_gather / reduce_scatter / all_to_all, 1 otherwise).
    """

    topology: str
    collective: str
    bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    linkbw_gb_per_s: float | None
    algo: str
    proto: str
    channels: int
    nranks: int
    runtime: str = "sim"

    def to_dict(self) -> dict[str, object]:
        """The row as a plain dict (the ``--json`` form)."""
        return asdict(self)
