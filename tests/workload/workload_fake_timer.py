"""A local alpha-beta stand-in for ``scaleup.tune.collective_time_s`` (tests only).

The planner's communication comes from the simulator; these tests check the planner's own
bookkeeping, so they use a closed-form timer that is fast and easy to reason about:
``alpha + volume / bw`` with nccl-tests' bus-bandwidth factors, 400 GB/s inside a server and
50 GB/s (400 Gb/s NIC) when a group spans servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def fake_collective_time_s(
    topology: Any, collective: str, nbytes: int, ranks: Sequence[int], dtype: str
) -> float:
    """Closed-form time of one collective over ``ranks`` (see module docstring)."""
    n = len(ranks)
    if n <= 1:
        return 0.0
    accs = topology.accelerators
    nodes = {accs[r].node for r in ranks}
    bw = 400e9 if len(nodes) == 1 else 50e9
    return 5e-6 + FACTOR[collective](n) * nbytes / bw


def constant_timer(value: float):
    """A timer that answers ``value`` for every call."""

    def timer(
        topology: Any, collective: str, nbytes: int, ranks: Sequence[int], dtype: str
    ) -> float:
        return value

    return timer
