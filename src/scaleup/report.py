"""Result rows as nccl-tests prints them, shared by the simulator, the runtime and sweeps.

A :class:`BenchRow` is one line of an ``all_reduce_perf`` table plus what scaleup adds: the
algorithm and protocol chosen, and ``linkbw`` (bytes on the busiest channel divided by time: what
the wires really carried, which nccl-tests' busbw stops meaning under in-switch reduction).
``to_dict()`` is what ``--json`` prints, so table and JSON never diverge.

nccl-tests prints two column groups, out-of-place and in-place, each with ``#wrong``. A simulated
row has one time for both and nothing checked; a measured row (``--runtime``) may carry the
in-place time and the wrong-element counts. Those fields are left out of ``to_dict()`` when unset,
so the simulator's JSON is what it always was.
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
    #: ``sim`` (the event loop), ``sim-steady`` (a ring or tree in steady state, an
    #: approximation: :mod:`scaleup.sim.steady_ring`), or the measuring transport
    runtime: str = "sim"
    #: The in-place group's time (None: the same as ``time_us``, as simulated).
    in_place_time_us: float | None = None
    #: Wrong elements over every rank and checked iteration, out of place (None: not checked).
    wrong: int | None = None
    #: The same, in place.
    in_place_wrong: int | None = None

    @property
    def in_place_us(self) -> float:
        """The in-place group's time in microseconds."""
        return self.time_us if self.in_place_time_us is None else self.in_place_time_us

    def in_place_bw(self) -> tuple[float, float]:
        """(algbw, busbw) of the in-place group in GB/s, by the out-of-place group's factors."""
        us = self.in_place_us
        if us == self.time_us:
            return self.algbw_gb_per_s, self.busbw_gb_per_s
        if us <= 0 or self.time_us <= 0:
            return 0.0, 0.0
        scale = self.time_us / us
        return self.algbw_gb_per_s * scale, self.busbw_gb_per_s * scale

    def to_dict(self) -> dict[str, object]:
        """The row as a plain dict (the ``--json`` form); the in-place and check fields only
        when set."""
        row = asdict(self)
        for key in _OPTIONAL:
            if row[key] is None:
                del row[key]
        return row


_OPTIONAL = ("in_place_time_us", "wrong", "in_place_wrong")
