"""Channels: how many parallel lanes to try, and how each lane is laid on the fabric.

NCCL's graph search decides how many channels (rings, trees) a communicator gets and which
links each uses; here that is :mod:`scaleup.tune.channel_search`, and this module maps its plans
onto the algorithm builders' parameters:

- :func:`channel_counts`: the searched channel count ``n``, its duplicate ``2n`` (NCCL duplicates
  the searched channels, up to twice as many) and the powers of two up to ``n`` or up to the
  scale-up links of one accelerator, capped at :data:`MAX_CHANNELS`, so the tuner still
  chooses the best count by simulation;
- :class:`GroupShape`: the plans of one group of ranks (searched once per tuning session, see
  :class:`scaleup.tune.search.TuneSession`) and :meth:`GroupShape.params`, the parameters of one
  (algorithm, channel count): ring channel ``k`` follows the searched ring ``k mod n``; a tree
  channel is the searched chain in each server under NCCL's double binary tree over the servers
  (on one server the tree is that chain alone: NCCL's ``ncclTopoPreset``, src/graph/connect.cc
  lines 43-62, links every rank of a tree channel to the previous and next rank of the tree
  graph's intra-node order, ``tree.up = treeIntra[i-1]``, ``tree.down[0] = treeIntra[i+1]``, and
  the double binary tree of src/graph/trees.cc spans nodes, so one node adds nothing to it), or,
  on a node whose RCCL node model defines trees, defined tree ``k mod x``
  (:mod:`scaleup.tune.rccl_trees`, RCCL's ``ncclTreeBasePostset``); the hierarchical
  algorithm's intra-node ring is a searched ring of one server; the torus algorithm's ``dims``
  are the fabric's grid (:func:`torus_group`) and its channel counts
  :func:`torus_channel_counts`.

Every search is capped at :data:`CHANNEL_BW_CAP` per channel: NCCL tries per-channel speeds from
a descending array whose first entry on sm90 is 60 GB/s (``sm90SpeedArrayIntra`` in
``src/graph/search.cc``), so a switched node gets several channels, not one channel at the whole
switch port bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scaleup import hardware
from scaleup.errors import NoRouteError
from scaleup.sim.protocols import LIBRARIES
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.topology.torus import torus_group
from scaleup.tune.channel_plan import ChannelPlan
from scaleup.tune.channel_search import (
    NCCL_MAX_NVLS_ARITY,
    Wiring,
    nvidia_parts,
    search_rings,
    search_trees,
)
from scaleup.tune.rccl_trees import defined_trees

__all__ = [
    "CHANNEL_BW_CAP", "MAX_CHANNELS", "GroupShape", "channel_counts", "torus_channel_counts",
    "torus_group", "uses_chains",
]  # fmt: skip

#: NCCL_MAX_NCHANNELS-like cap on the channel counts tried.
MAX_CHANNELS = 32
#: Per-channel speed ceiling of the search: 60 GB/s, the first entry of NCCL's sm90 intra-node
#: speed array (``sm90SpeedArrayIntra = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3}``,
#: NVIDIA/nccl ``src/graph/search.cc``). Applied to every accelerator (see docs/models.md §12).
CHANNEL_BW_CAP = 60e9


def channel_counts(
    topology: Topology, ranks: Sequence[int] | None = None, *, plan: ChannelPlan | None = None
) -> tuple[int, ...]:
    """Channel counts tried: the searched count ``n`` (``plan``, else searched here), ``2n``
    and the powers of two up to ``n`` or to the scale-up links of one accelerator (at least 2),
    at most :data:`MAX_CHANNELS`.

    >>> from scaleup.topology import resolve_topology
    >>> channel_counts(resolve_topology("dgx-h100"))
    (1, 2, 4, 8, 16)
    >>> channel_counts(resolve_topology("dgx1-v100"))
    (1, 2, 4, 6, 12)
    """
    if plan is None:
        plan = search_rings(topology, ranks, max_channel_bw_bytes_per_s=CHANNEL_BW_CAP)
    n = max(1, min(plan.n_channels, MAX_CHANNELS))
    top = min(MAX_CHANNELS, max(2, n, analysis.links_per_accelerator(topology, ranks)))
    counts = {1 << i for i in range(top.bit_length()) if 1 << i <= top}
    counts |= {c for c in (n, 2 * n) if c <= MAX_CHANNELS}
    return tuple(sorted(counts))


def torus_channel_counts(dims: Sequence[int], counts: Sequence[int]) -> tuple[int, ...]:
    """Channel counts tried for the torus algorithm on a grid of ``dims``: ``counts`` (those of
    every algorithm) and ``2 D``, ``4 D``, ``8 D`` ... up to :data:`MAX_CHANNELS`, ``D`` the
    dimensions of size > 1: with ``2 D`` lanes every (dimension order, direction) pair of
    :func:`~scaleup.collectives.algorithms.torus.lane_plan` has a lane, so every directed link
    of a chip is busy, and the multiples spread a chip's egress over more channels than one
    channel's cap (:data:`~scaleup.sim.params.CTA_BYTES_PER_S`) carries.

    >>> torus_channel_counts((4, 4, 4), (1, 2, 4)), torus_channel_counts((4, 4), (1, 2, 4))
    ((1, 2, 4, 6, 12, 24), (1, 2, 4, 8, 16, 32))
    """
    lanes = 2 * max(1, sum(1 for k in dims if k > 1))
    extra = {lanes << i for i in range(MAX_CHANNELS.bit_length()) if lanes << i <= MAX_CHANNELS}
    return tuple(sorted(set(counts) | extra))


@dataclass(frozen=True)
class GroupShape:
    """The channel plans of one group of ranks on one topology, and the builder parameters
    they give.

    ``rings``: the searched ring channels of the whole group; ``trees``: its tree channels, a
    chain inside each server (:func:`uses_chains`; None where the tree builder keeps its binary
    trees over the ranks, or where ``defined`` holds the library's own); ``defined``: the trees
    RCCL's node model defines for the group (:func:`~scaleup.tune.rccl_trees.defined_trees`),
    tree ``k mod x`` on channel ``k``, else None; ``local_rings``:
    the rings of one server's ranks, for the hierarchical algorithm's intra-node phase (None
    when the group is not whole servers of ``ranks_per_node`` consecutive ranks); ``counts``:
    :func:`channel_counts` of ``rings``; ``torus_dims``: the grid when the group is a whole
    torus (:func:`torus_group`), else None.
    """

    nranks: int
    ranks_per_node: int
    rings: ChannelPlan | None
    trees: ChannelPlan | None
    local_rings: ChannelPlan | None
    counts: tuple[int, ...]
    torus_dims: tuple[int, ...] | None = None
    #: the group spans more than one server (NCCL's nNodes > 1: its p2p channel bases)
    multi_node: bool = False
    defined: tuple[tuple[int, ...], ...] | None = None
    #: the NVLS all_reduce's heads where NCCL has fewer than the ranks (one NVIDIA NVLink domain
    #: of more than :data:`~scaleup.tune.channel_search.NCCL_MAX_NVLS_ARITY` ranks), else 0
    nvls_heads: int = 0

    @classmethod
    def of(
        cls, topology: Topology, ranks: Sequence[int] | None = None, *,
        wiring: Wiring | None = None,
    ) -> GroupShape:  # fmt: skip
        """Search the plans of ``ranks`` (default: every accelerator) on ``topology``; a plan the
        search cannot make (no channel fits the links) is None and the builders' defaults stand.
        ``wiring``: the topology's :class:`~scaleup.tune.channel_search.Wiring`, shared by its
        searches (default: one made here)."""
        wiring = Wiring(topology) if wiring is None else wiring
        group = tuple(range(len(topology.accelerators))) if ranks is None else tuple(ranks)
        nodes = analysis.rank_nodes(topology, ranks)
        multi = len(set(nodes)) > 1
        g = topology.ranks_per_node
        whole = (
            multi
            and len(group) % g == 0
            and all(len(set(nodes[s : s + g])) == 1 for s in range(0, len(group), g))
        )
        rings = _searched(search_rings, topology, ranks, wiring)
        defined = defined_trees(topology, ranks)
        chains = defined is None and uses_chains(topology, ranks)
        trees = _searched(search_trees, topology, ranks, wiring) if chains else None
        local = _searched(search_rings, topology, group[:g], wiring) if whole else None
        counts = channel_counts(topology, ranks, plan=rings or ChannelPlan("ring", group, ()))
        torus = torus_group(topology, ranks)
        heads = _nvls_head_count(topology, ranks, len(group), multi)
        return cls(len(group), g, rings, trees, local, counts, torus, multi, defined, heads)

    def params(self, algorithm: str, channels: int = 1) -> dict[str, Any]:
        """Builder parameters of ``algorithm`` with ``channels`` lanes on this group (besides
        ``channels`` and ``chunks``): channel ``k`` uses the plan's channel ``k mod n``; both
        halves of tree channel ``k`` ride defined tree ``k mod x`` where the node model defines
        trees, as both halves of a chain channel ride its chain (RCCL gives a channel one tree)."""
        if algorithm == "ring" and self.rings is not None and self.nranks > 1:
            orders = self.rings.orders()
            return {"orders": [orders[k % len(orders)] for k in range(channels)]}
        if algorithm == "tree" and self.defined:
            trees = [list(self.defined[k % len(self.defined)]) for k in range(channels)]
            return {"parents": [[t, t] for t in trees]}
        if algorithm == "tree" and self.trees is not None:
            n = self.trees.n_channels
            pairs = [
                [list(self.trees.tree_parents(k % n, t)) for t in (0, 1)] for k in range(channels)
            ]
            return {"parents": pairs}
        if algorithm == "hierarchical":
            out: dict[str, Any] = {"ranks_per_node": self.ranks_per_node}
            if self.local_rings is not None:
                local = self.local_rings.orders()
                out["local_orders"] = [local[k % len(local)] for k in range(channels)]
            return out
        if algorithm == "direct":  # ncclP2pChannelBaseForRound: a base per round on one node
            return {"p2p_base": "group" if self.multi_node else "round"}
        if algorithm == "torus" and self.torus_dims is not None:
            return {"dims": list(self.torus_dims)}
        if algorithm == "nvls" and self.nvls_heads:
            return {"heads": self.nvls_heads}
        return {}


def _nvls_head_count(
    topology: Topology, ranks: Sequence[int] | None, nranks: int, multi: bool
) -> int:
    """:attr:`GroupShape.nvls_heads`: NCCL's cap on one NVLink domain of NVIDIA parts (the
    in-switch reduction of a part with no vendor library keeps a head per rank: no library is
    known to cap it)."""
    if multi or nranks <= NCCL_MAX_NVLS_ARITY or not nvidia_parts(topology, ranks):
        return 0
    return NCCL_MAX_NVLS_ARITY


def uses_chains(topology: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether the library's tree inside a server is the searched chain (where RCCL's node model
    defines no trees, :func:`~scaleup.tune.rccl_trees.defined_trees`): always across servers,
    and on one server unless the accelerators have no vendor library at all (``vendor =
    "generic"``, the UALink estimate): the chain is NCCL's and RCCL's topology search's
    (``ncclTopoPreset``), which no library of a generic part is known to build, and such a part
    keeps the textbook double binary tree over its ranks. (A 128-rank chain also costs 10-30 s
    per simulation, where the binary tree is cheap.)

    >>> from scaleup.topology import resolve_topology
    >>> [uses_chains(resolve_topology(p)) for p in ("dgx-h100", "mi250x-8", "ualink-pod")]
    [True, True, False]
    """
    if len(set(analysis.rank_nodes(topology, ranks))) > 1:
        return True
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    return all(str(hardware.accelerator(a.type).vendor) in LIBRARIES for a in chosen)


def _searched(
    search: Callable[..., ChannelPlan], topology: Topology, ranks: Sequence[int] | None,
    wiring: Wiring,
) -> ChannelPlan | None:  # fmt: skip
    """``search(topology, ranks)`` under :data:`CHANNEL_BW_CAP`, or None when no channel fits."""
    try:
        return search(topology, ranks, max_channel_bw_bytes_per_s=CHANNEL_BW_CAP, wiring=wiring)
    except NoRouteError:
        return None
