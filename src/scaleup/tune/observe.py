"""What a search did with each candidate, for whoever explains it (:mod:`scaleup.tune.explain`).

A :class:`~scaleup.tune.search.TuneSession` whose ``observer`` is set calls it once per candidate
and size with a :class:`CandidateOutcome`; the search itself keeps nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaleup.sim import CompiledSchedule, SimResult
from scaleup.topology.model import Topology
from scaleup.tune.rules import Candidate

__all__ = ["CandidateOutcome", "Observer"]


@dataclass(frozen=True, eq=False)
class CandidateOutcome:
    """One candidate at one size: ``simulated`` (``time_s`` and ``result``), ``pruned``
    (``bound_s``: the lower bound that reached the best time found, the larger of its time at a
    smaller size and its congestion bound) or ``failed`` (``reason``). ``compiled`` is the
    structure it was timed on (pruned: the chunks=1 structure of its bound), when there is one."""

    topology: Topology
    group: tuple[int, ...] | None
    collective: str
    nbytes: int
    count: int
    candidate: Candidate
    chunks: int
    status: str
    time_s: float | None = None
    bound_s: float | None = None
    result: SimResult | None = None
    compiled: CompiledSchedule | None = None
    reason: str = ""
    #: the bytes each pipeline step moves (NCCL's slot or chunk; None: not pipelined)
    step_bytes: float | None = None


#: ``observer(outcome)``, called by the search for every candidate it decides on.
Observer = Callable[[CandidateOutcome], None]
