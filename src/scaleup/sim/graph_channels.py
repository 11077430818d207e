"""NCCL's per-channel throughput caps, shared by the thread blocks one graph channel runs on.

Why. NCCL's cost model caps ring LL128, tree LL128 and tree all_reduce at a per-channel rate
times the *searched graph's* channel count (tuning.cc lines 305-308,
:data:`~scaleup.sim.params.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S`), and its runtime then runs each
graph channel on two thread blocks (``ncclTopoPostset``, src/graph/connect.cc line 452). Across
nodes those rates are below what a channel's NIC carries: they are what NVIDIA measured one
channel of the algorithm to move over the network. Applied per thread block, as the simulator
applied them before, they doubled NCCL's own cap and never bound; AWS p5 on 4-32 nodes runs
ring LL128 at 269-280 GB/s busbw, 0.76-0.81 of ring Simple, where 8 graph channels x 36.7 is
294, and tree LL128 at about half the rate its NICs allow (docs/validation.md).

What. A schedule whose builder parameters carry ``graph_channels`` ``g`` (the tuner sets it
from NCCL's graph, :meth:`scaleup.tune.question.Question.params`) and runs ``K`` lanes moves at
most ``min(g, K) x F`` of bus bandwidth, as NCCL's model has it, shared evenly by its lanes:
a lane's share is ``w = min(g, K) / K`` of one graph channel's ``F``. (An even share, not one
per copy: with 16 lanes on 12 graph channels NCCL's model still gives 12 x F, where halving
four copied channels would hold every lane to the slowest.) The cap is the network's: it
bounds the payload a thread block's transfers *over the network* move per second, while its
NVLink hops keep the block's own rate (:func:`network_cta_use`; a cap on every hop slowed the
pipeline's fill through a node's chain and moved mid-size rows by -10%). In those units:

- ring (LL128): a thread block sends its lane's share of the bus bytes, so its cap is ``w F``;
- tree (LL128): NCCL converts the tree's bus bandwidth to algorithm bandwidth by 1/2
  (tuning.cc line 379), so the lanes move ``S`` bytes at most at ``min(g, K) F / 2``; a lane's
  two thread blocks (one per tree) each carry a slice of ``S / 2 K`` through their tree, so
  each moves its slice at ``w F / 4`` at most, and a rank that sends that slice over the
  network ``s`` times (to its parent and its children on other nodes) is capped at
  ``s w F / 4`` there.

Where not. On one node: LL128 runs near Simple at large sizes there (Hu et al., "Demystifying
NCCL", arXiv 2507.04786, 2025: LL128 "consistently strong" intra-node, near Simple for large
messages, while Simple dominates across nodes at large sizes), and no single-node row here runs
ring or tree LL128 where the cap would bind, so the per-thread-block caps stay
(:data:`~scaleup.sim.params.CTA_BYTES_PER_S`). NCCL's tree cap at every protocol
(``perChMaxTreeBws``, the all_reduce line 306) is not applied either: the GB200 NVL72 rows run
tree Simple at 2-3x it (3x NVL8 partitions at 16 GiB: 254 GB/s of algbw measured, where 8
graph channels x 24 GB/s / 2 give 96); it is NCCL's selection model, not a rate. NCCL only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from scaleup import hardware
from scaleup.arrays import unique
from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.sim import params as P
from scaleup.sim.network import LINK_CLASSES
from scaleup.topology.model import Topology

__all__ = ["SHARED_CAPS", "graph_channel_caps", "network_cta_use"]

#: The (algorithm, protocol) pairs whose cap is shared per graph channel here (see module).
SHARED_CAPS: Final = frozenset({("ring", "ll128"), ("tree", "ll128")})


def graph_channel_caps(
    algorithm: str,
    params: Mapping[str, Any],
    protocol: str,
    library: str,
    topology: Topology,
    rank_map: Sequence[int] | np.ndarray,
    cta_rank: np.ndarray,
    cta_channel: np.ndarray,
) -> np.ndarray:
    """Per thread block (accelerator ``cta_rank``, channel tag ``cta_channel``) of a schedule
    of ``algorithm`` built with ``params`` whose rank ``r`` runs on
    accelerator ``rank_map[r]``, its share of its graph channel's cap for ``protocol`` of
    ``library``, in payload bytes/s; inf where none applies (see module)."""
    caps = np.full(len(cta_rank), np.inf)
    g = params.get("graph_channels")
    key = (algorithm, protocol)
    if library != "nccl" or not g or key not in SHARED_CAPS:
        return caps
    accs = topology.accelerators
    nodes = len({int(accs[int(r)].node) for r in np.asarray(rank_map).tolist()})
    if nodes < 2:  # one node: LL128 runs near Simple there (see module)
        return caps
    column = min(nodes, 3) - 1
    table = P.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S[key]
    ranks = np.asarray(cta_rank, dtype=np.int64)
    accels = unique(ranks)
    of_cta = np.searchsorted(accels, ranks)
    per_accel = np.full(len(accels), np.inf)
    for i, r in enumerate(accels.tolist()):
        row = P.NCCL_ARCH_ROW.get(str(hardware.accelerator(accs[int(r)].type).arch))
        if row is not None:
            per_accel[i] = table[row][column] * 1e9
    bus = per_accel[of_cta]
    lanes = int(params.get("channels") or 1)
    share = min(int(g), lanes) / lanes  # of one graph channel's cap, per lane
    tag = np.asarray(cta_channel, dtype=np.int64)
    if algorithm == "ring":
        return bus * share
    lane, tree = tag // 2, tag % 2
    node = np.array([int(accs[int(a)].node) for a in np.asarray(rank_map).tolist()])
    sends = _tree_network_sends(params.get("parents"), node, lane, tree, cta_rank, rank_map)
    return bus * share * np.maximum(sends, 1) / 4.0


def _tree_network_sends(
    parents: list[list[list[int]]] | None,
    node: np.ndarray,
    lane: np.ndarray,
    tree: np.ndarray,
    cta_rank: np.ndarray,
    rank_map: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """Per thread block, how many times its rank sends its tree's slice over the network: to
    its parent and to each child on another node (``node[rank]``)."""
    pairs = parents or [list(dtree_parents(len(node)))]
    accel = np.asarray(rank_map, dtype=np.int64)
    rank_of = np.full(int(accel.max()) + 1, -1, dtype=np.int64)
    rank_of[accel] = np.arange(len(accel))
    rank = rank_of[np.asarray(cta_rank, dtype=np.int64)]
    key = (lane % len(pairs)) * 2 + tree
    out = np.ones(len(cta_rank))
    for k in unique(key).tolist():
        up = np.asarray(pairs[k // 2][k % 2], dtype=np.int64)
        child = np.flatnonzero(up >= 0)
        remote = child[node[child] != node[up[child]]]
        sends = np.zeros(len(up))
        sends[remote] += 1.0  # to the parent
        np.add.at(sends, up[remote], 1.0)  # to each remote child
        mine = (key == k) & (rank >= 0)
        out[mine] = sends[rank[mine]]
    return out


def network_cta_use(
    shared: np.ndarray,
    cta_cap: np.ndarray,
    var_cta: np.ndarray,
    var_route: np.ndarray,
    routes: Sequence[Any],
) -> np.ndarray | None:
    """Per variable, what one byte/s of it uses of its thread block's capacity ``cta_cap``:
    ``cta_cap / shared`` (at least 1) for a transfer over the network of a block with a shared
    cap, so that such transfers alone move at most ``shared``; 1 for every other, which keep the
    block's own rate (NVLink hops of the same ring or tree). None where no block has a cap."""
    if not np.isfinite(shared).any():
        return None
    net_class = LINK_CLASSES.index("net")
    used = unique(var_route)
    route_class = np.array([routes[int(r)].link_class for r in used.tolist()], dtype=np.int64)
    on_net = np.zeros(int(var_route.max()) + 1 if len(var_route) else 0, dtype=bool)
    on_net[used] = route_class == net_class
    weight = np.maximum(cta_cap[var_cta] / shared[var_cta], 1.0)
    return np.where(on_net[var_route] & np.isfinite(shared[var_cta]), weight, 1.0)
