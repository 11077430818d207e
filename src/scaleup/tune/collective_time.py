"""The tuned time of one collective over any group of accelerators: the planner's entry point.

A training step issues collectives over groups of ranks: a tensor-parallel group inside one
server, a data-parallel group strided across servers, a pipeline pair. The planner asks for the
time NCCL's tuner would achieve for each; this answers with the tuner's own choice (the least
simulated time over the enabled candidates, found by the session's branch and bound, which
never builds a candidate whose lower bound already loses: the same choice as simulating all).
A :class:`CollectiveTimer` keeps one :class:`~scaleup.tune.search.TuneSession` across its
questions, so a question asked twice, or a structure timed at another size, is not built or
compiled again.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleup.topology.model import Topology
from scaleup.tune.request import BenchRequest
from scaleup.tune.search import TuneSession, resolve_group

__all__ = ["CollectiveTimer", "collective_time_s"]


def collective_time_s(
    topology: Topology,
    collective: str,
    nbytes: int,
    *,
    ranks: Sequence[int] | None = None,
    dtype: str = "float32",
    session: TuneSession | None = None,
) -> float:
    """Seconds one tuned ``collective`` of ``nbytes`` (nccl-tests' size: bytes of the larger
    buffer) of ``dtype`` takes on ``topology`` over ``ranks``: indices into its accelerators in
    the group's rank order (default all; a group of one takes no time). ``session``: the session
    to tune in (default a new one; :class:`CollectiveTimer` keeps one)."""
    request = BenchRequest(op=collective, sizes_bytes=(int(nbytes),), dtype=dtype)
    group = resolve_group(topology, request, ranks)
    if len(topology.accelerators if group is None else group) == 1:
        return 0.0
    return (session or TuneSession()).sweep(topology, request, group=group)[0].time_s


class CollectiveTimer:
    """:func:`collective_time_s` with one session for all its calls: the planner's timer
    (``timer(topology, collective, nbytes, ranks=..., dtype=...) -> seconds``)."""

    def __init__(self, session: TuneSession | None = None) -> None:
        self.session = session or TuneSession()

    def __call__(
        self,
        topology: Topology,
        collective: str,
        nbytes: int,
        *,
        ranks: Sequence[int] | None = None,
        dtype: str = "float32",
    ) -> float:
        return collective_time_s(
            topology, collective, nbytes, ranks=ranks, dtype=dtype, session=self.session
        )
