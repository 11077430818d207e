"""The tuned time of one collective over any subset of accelerators (the planner's question).

A training step issues collectives over groups of ranks: a tensor-parallel group inside one
server, a data-parallel group strided across servers, a pipeline pair. The planner asks for the
time NCCL's tuner would achieve for each; this answers with the tuner's own choice (every enabled
candidate simulated on the topology, the least time wins), cached per question.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from scaleup.errors import UsageError
from scaleup.topology import Topology

__all__ = ["collective_time_s"]


def collective_time_s(
    topology: Topology,
    collective: str,
    nbytes: int,
    *,
    ranks: Sequence[int] | None = None,
    dtype: str = "float32",
) -> float:
    """Seconds one tuned ``collective`` of ``nbytes`` (nccl-tests' size) takes over ``ranks``.

    Parameters
    ----------
    topology
        The fabric.
    collective
        One of :data:`scaleup.collectives.spec.COLLECTIVES`.
    nbytes
        nccl-tests' size column: bytes of the larger buffer.
    ranks
        Indices into ``topology.accelerators`` forming the group (default: all of them), in the
        group's rank order.
    dtype
        Element type (only its size matters to the timing).
    """
    n_all = len(topology.accelerators)
    group = tuple(range(n_all)) if ranks is None else tuple(int(r) for r in ranks)
    if not group:
        raise UsageError("a collective needs at least one rank", source="ranks")
    if len(set(group)) != len(group) or not all(0 <= r < n_all for r in group):
        raise UsageError(
            f"ranks must be distinct accelerator indices in 0..{n_all - 1}, got {list(group)}",
            source="ranks",
        )
    if len(group) == 1:
        return 0.0
    return _cached_time_s(topology, collective, int(nbytes), group, dtype)


@functools.lru_cache(maxsize=4096)
def _cached_time_s(topology: Topology, collective: str, nbytes: int, group: tuple[int, ...], dtype: str) -> float:
    from scaleup.sim import tuner

    ranks = None if group == tuple(range(len(topology.accelerators))) else group
    ctx = tuner._cached_context(topology, collective, ranks, len(group), dtype, "sum", 0)
    cands = tuner.candidates(topology, collective, ranks=ctx.ranks)
    return float(tuner._choose(ctx, cands, nbytes, None, None).time_s)
