"""Channels: how many parallel lanes to try, and how each lane is laid on the fabric.

NCCL's graph search decides how many channels (rings, trees) a communicator gets and which
links each uses. Here:

- :func:`channel_counts`: 1, 2, 4, ... up to the scale-up links of one accelerator (NCCL builds
  at most one ring per link's worth of bandwidth; 18 NVLinks -> up to 16 channels), capped at
  :data:`MAX_CHANNELS`; on a full mesh also one ring per link and two channels per ring, as RCCL
  runs on xGMI;
- :class:`GroupShape`: the facts about a group of ranks the builders' parameters depend on, and
  :meth:`GroupShape.params`, the parameters of one (algorithm, channel count): rings spread over
  distinct links on a full mesh, rings crossing between servers on one rail per channel, the
  server size for the hierarchical compositions. The orders themselves are the algorithm
  library's (:mod:`scaleup.collectives.algorithms.ring_orders`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scaleup.collectives.algorithms.ring_orders import mesh_ring_orders, rail_ring_orders
from scaleup.topology import analysis
from scaleup.topology.model import Topology

__all__ = ["MAX_CHANNELS", "GroupShape", "channel_counts"]

#: NCCL_MAX_NCHANNELS-like cap on the channel counts tried.
MAX_CHANNELS = 32


def channel_counts(topology: Topology, ranks: Sequence[int] | None = None) -> tuple[int, ...]:
    """Channel counts tried: 1, 2, 4, ... up to the links of one accelerator (at least 1, 2).

    On a full mesh each ring covers one link per direction, so one ring per link (n - 1) and two
    channels per ring are tried too; behind a switch every ring spreads over all links already.

    >>> from scaleup.topology import resolve_topology
    >>> channel_counts(resolve_topology("dgx-h100"))
    (1, 2, 4, 8, 16)
    """
    links = analysis.links_per_accelerator(topology, ranks)
    top = min(MAX_CHANNELS, max(2, links))
    counts = [1]
    while counts[-1] * 2 <= top:
        counts.append(counts[-1] * 2)
    if analysis.is_full_mesh(topology, ranks):
        # one ring per link (n - 1 directed rings) and two channels per ring, as RCCL runs
        # several channels per ring on xGMI meshes where one thread block cannot fill a link
        rings = len(topology.accelerators if ranks is None else ranks) - 1
        counts += [c for c in (rings, 2 * rings) if c <= MAX_CHANNELS]
    return tuple(sorted(set(counts)))


@dataclass(frozen=True)
class GroupShape:
    """What the builders' parameters depend on, for one group of ranks on one topology.

    ``full_mesh``: every pair of ranks directly linked (MI300X); ``rail_nodes``: the server of
    every rank when the ranks span several servers evenly, else None; ``ranks_per_node``: the
    topology's server size (for ``hierarchical``).
    """

    nranks: int
    full_mesh: bool
    rail_nodes: tuple[int, ...] | None
    ranks_per_node: int

    @classmethod
    def of(cls, topology: Topology, ranks: Sequence[int] | None = None) -> GroupShape:
        """The shape of ``ranks`` (default: every accelerator) on ``topology``."""
        nodes = analysis.rank_nodes(topology, ranks)
        even = len(set(nodes)) >= 2 and rail_ring_orders(nodes, 1) is not None
        return cls(
            nranks=len(nodes),
            full_mesh=analysis.is_full_mesh(topology, ranks),
            rail_nodes=nodes if even else None,
            ranks_per_node=topology.ranks_per_node,
        )

    def params(self, algorithm: str, channels: int = 1) -> dict[str, Any]:
        """Builder parameters of ``algorithm`` with ``channels`` lanes on this group (besides
        ``channels`` and ``chunks``)."""
        if algorithm == "hierarchical":
            return {"ranks_per_node": self.ranks_per_node}
        if algorithm == "ring" and self.full_mesh:
            return {"orders": mesh_ring_orders(self.nranks, channels)}
        if algorithm == "ring" and self.rail_nodes is not None:
            return {"orders": rail_ring_orders(self.rail_nodes, channels)}
        return {}

    def params_key(self, algorithm: str, channels: int = 1) -> tuple[Any, ...]:
        """:meth:`params` as a hashable key (orders as tuples)."""
        params = self.params(algorithm, channels)
        orders = params.get("orders")
        return (
            params.get("ranks_per_node", 0),
            None if orders is None else tuple(tuple(o) for o in orders),
        )
