"""Facts about a fabric, as pure functions over a Topology (SciPy's sparse graph routines do the
graph work: breadth-first search, spanning trees, max-flow, all in C, so a 40,000-device fabric
takes seconds).

Conventions: accelerators are named by id (``"g3"``) or by rank (``3``); bandwidths leave as GB/s
(1e9 bytes/s) **per direction**; ``hops`` counts physical links traversed (GPU -> NVSwitch -> GPU
is 2 hops, a direct NVLink 1). Paths may cross any device, including other accelerators (GPU
forwarding, as NCCL does on DGX-1), hosts and NICs.

Bisection (:func:`bisection_gb_per_s`): the minimum, over balanced bipartitions (A, B) of the
accelerators (``|A| = n // 2``), of the max-flow from all of A to all of B. Exact (every
bipartition) when there are at most :data:`EXACT_BISECTION_LIMIT` of them (n <= 12); otherwise an
**upper bound**: the minimum over structured cuts (rank halves -- servers, boards --, even/odd
ranks, blocks of 2, 4, 8 ...) and, up to :data:`RANDOM_CUTS_MAX_N` accelerators,
:data:`RANDOM_CUTS` seeded random bipartitions. Link capacities are symmetric, so one direction's
flow is computed. On the
symmetric presets (NVSwitch, NVL72, UALink pods) the structured cuts are the worst ones, so the
bound is the bisection.

Predicates the tuner's enable rules ask (:func:`nvls_capable`, :func:`nvlink_class`,
:func:`links_per_accelerator`, :func:`is_full_mesh`, :func:`rank_nodes`) take an optional
``ranks`` (indices into ``accelerators``: the group the question is about, default all) and read
the catalog's typed link fields (``family``, ``scope``), never the spelling of a name.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import (
    breadth_first_order,
    maximum_flow,
    minimum_spanning_tree,
    shortest_path,
)

from scaleup import hardware, limits
from scaleup.topology.model import Channel, Device, NodeKind, Topology

__all__ = [
    "ALL_PAIRS_MAX_N",
    "EXACT_BISECTION_LIMIT",
    "RANDOM_CUTS",
    "RANDOM_CUTS_MAX_N",
    "SAMPLED_SOURCES",
    "bisection",
    "bisection_gb_per_s",
    "bottleneck_gb_per_s",
    "hops",
    "is_full_mesh",
    "is_uniform",
    "links_per_accelerator",
    "max_flow_gb_per_s",
    "max_hops",
    "nvlink_class",
    "nvls_capable",
    "nvls_tree_capable",
    "pair_table",
    "per_accelerator_gb_per_s",
    "pooled_memory_bytes",
    "rank_nodes",
    "sampled_sources",
    "scale_out",
    "summary",
]

EXACT_BISECTION_LIMIT = 512  #: balanced bipartitions enumerated at most (C(12, 6) / 2 = 462)
RANDOM_CUTS = 16  #: seeded random bipartitions added to the structured cuts ...
RANDOM_CUTS_MAX_N = 128  #: ... up to this many accelerators (beyond, structured cuts only)
#: Accelerators up to which :func:`is_uniform` and :func:`max_hops` read every pair; beyond,
#: :data:`SAMPLED_SOURCES` source ranks to every accelerator (``topo show`` of 16,384 GPUs).
ALL_PAIRS_MAX_N = 256
SAMPLED_SOURCES = 16
_GB = 1e9
_CAP = "bandwidth_bytes_per_s"
_REL = 1e-9  # relative tolerance when comparing bandwidths summed in different orders


def _id(t: Topology, acc: str | int) -> str:
    return t.accelerators[acc].id if isinstance(acc, int) else acc


class _Graph:
    """The fabric as SciPy sparse graphs: the undirected adjacency (hop counts) and a maximum
    spanning tree by channel bandwidth (on it the path between two devices is a widest,
    max-bottleneck path). SciPy's C breadth-first searches replace NetworkX's here: building a
    NetworkX graph of a 40,000-device fabric took 1.5 s and its spanning tree 1 s more.
    """

    def __init__(self, t: Topology) -> None:
        self.index = {d.id: i for i, d in enumerate(t.devices)}
        n = len(self.index)
        half = t.channels[::2]  # channels come in pairs a->b, b->a of equal bandwidth
        u = np.array([self.index[c.src] for c in half], dtype=np.int64)
        v = np.array([self.index[c.dst] for c in half], dtype=np.int64)
        cap = np.array([c.bandwidth_bytes_per_s for c in half], dtype=np.float64)
        ones = np.ones(2 * len(u))
        self.adjacency = csr_array((ones, (np.r_[u, v], np.r_[v, u])), shape=(n, n))
        # SciPy finds a minimum spanning tree: weight 1 for the widest bandwidth, 2 for the next
        # ..., so the tree is a maximum one and its bandwidths come back exactly.
        widths = np.unique(cap)
        weight = len(widths) - np.searchsorted(widths, cap)
        tree = minimum_spanning_tree(csr_array((weight, (u, v)), shape=(n, n))).tocoo()
        a, b = tree.row.astype(np.int64), tree.col.astype(np.int64)
        width = widths[len(widths) - tree.data.astype(np.int64)]
        self.tree = csr_array((np.r_[width, width], (np.r_[a, b], np.r_[b, a])), shape=(n, n))

    def hops_from(self, sources: Sequence[int] | np.ndarray) -> np.ndarray:
        """Hop counts from each of ``sources`` (device indices) to every device."""
        return shortest_path(self.adjacency, unweighted=True, directed=False, indices=sources)

    def widths_from(self, source: int) -> np.ndarray:
        """Widest-path bandwidth (bytes/s) from ``source`` to every device."""
        order, pred = breadth_first_order(
            self.tree, source, directed=False, return_predecessors=True
        )
        width = np.full(len(pred), np.inf)
        if len(order) < 2:
            return width
        nodes = order[1:]
        parent = pred[nodes]
        edge = np.asarray(self.tree[parent, nodes]).ravel()
        depth = shortest_path(self.tree, unweighted=True, directed=False, indices=source)[nodes]
        for level in np.unique(depth):  # a level at a time: its parents are done
            at = depth == level
            width[nodes[at]] = np.minimum(width[parent[at]], edge[at])
        return width


@functools.lru_cache(maxsize=8)
def _graph(t: Topology) -> _Graph:
    return _Graph(t)


def _acc_index(t: Topology) -> np.ndarray:
    graph = _graph(t)
    return np.array([graph.index[d.id] for d in t.accelerators], dtype=np.int64)


def _hop_row_block(t: Topology, ranks: Sequence[int]) -> list[tuple[int, ...]]:
    acc = _acc_index(t)
    rows: list[tuple[int, ...]] = []
    for first in range(0, len(ranks), 64):  # 64 sources at a time bounds the dense matrix
        block = _graph(t).hops_from(acc[list(ranks[first : first + 64])])
        rows += [tuple(int(h) for h in row) for row in block[:, acc]]
    return rows


@functools.lru_cache(maxsize=8)
def _hop_rows(t: Topology) -> tuple[tuple[int, ...], ...]:
    return tuple(_hop_row_block(t, range(len(t.accelerators))))


@functools.lru_cache(maxsize=4096)
def _bottleneck_row(t: Topology, rank: int) -> tuple[float, ...]:
    acc = _acc_index(t)
    width = _graph(t).widths_from(int(acc[rank]))
    return tuple(float(w) / _GB for w in width[acc])


def _bottleneck_rows(t: Topology) -> tuple[tuple[float, ...], ...]:
    return tuple(_bottleneck_row(t, r) for r in range(len(t.accelerators)))


def sampled_sources(t: Topology) -> tuple[int, ...]:
    """The ranks whose hop counts and bottlenecks to every accelerator :func:`is_uniform` and
    :func:`max_hops` read: all of them up to :data:`ALL_PAIRS_MAX_N` accelerators, else rank 0,
    the last rank and seeded random ranks, :data:`SAMPLED_SOURCES` in all (all pairs are
    O(n^2): 134M of them at 16,384 accelerators)."""
    n = len(t.accelerators)
    if n <= ALL_PAIRS_MAX_N:
        return tuple(range(n))
    rng = random.Random(n)  # seeded: the same topology always gets the same sources
    return tuple(sorted({0, n - 1, *rng.sample(range(1, n - 1), SAMPLED_SOURCES - 2)}))


@functools.lru_cache(maxsize=8)
def _source_rows(t: Topology) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[float, ...], ...]]:
    sources = sampled_sources(t)
    if len(sources) == len(t.accelerators):
        return _hop_rows(t), _bottleneck_rows(t)
    return tuple(_hop_row_block(t, sources)), tuple(_bottleneck_row(t, r) for r in sources)


def hops(t: Topology, a: str | int, b: str | int) -> int:
    """Links on a shortest path between two accelerators (ids or ranks)."""
    graph = _graph(t)
    return int(graph.hops_from([graph.index[_id(t, a)]])[0, graph.index[_id(t, b)]])


def bottleneck_gb_per_s(t: Topology, a: str | int, b: str | int) -> float:
    """Bandwidth of the widest single path between two accelerators, GB/s per direction."""
    return _bottleneck_row(t, t.rank(_id(t, a)))[t.rank(_id(t, b))]


def pair_table(t: Topology) -> list[dict[str, Any]]:
    """Hop count and bottleneck for every accelerator pair ``a < b`` (rank order); refused
    (:class:`~scaleup.errors.LimitError`) beyond :data:`~scaleup.limits.MAX_PAIR_TABLE_RANKS`
    accelerators."""
    limits.check_at_most(
        len(t.accelerators), limits.MAX_PAIR_TABLE_RANKS, source="pairs",
        name="MAX_PAIR_TABLE_RANKS", what="accelerators in a pair table",
    )  # fmt: skip
    ids = [d.id for d in t.accelerators]
    hop, width = _hop_rows(t), _bottleneck_rows(t)
    return [
        {"a": ids[i], "b": ids[j], "hops": hop[i][j], "bottleneck_gb_per_s": width[i][j]}
        for i, j in itertools.combinations(range(len(ids)), 2)
    ]


def max_flow_gb_per_s(t: Topology, a: str | int, b: str | int) -> float:
    """Max-flow bandwidth from accelerator ``a`` to ``b`` over all paths, GB/s per direction."""
    return _flow_network(t).set_flow([_id(t, a)], [_id(t, b)]) / _GB


class _FlowNetwork:
    """The fabric as an integer capacity matrix for SciPy's max-flow (Dinic's algorithm in C).

    NetworkX's pure-Python max-flow took 2 s for one ``topo show`` of 88 accelerators (23 cuts).
    SciPy wants int32 capacities, so bandwidths are counted in a power-of-ten ``unit_bytes_per_s``
    chosen so that everything the accelerators can send fits: decimal datasheet figures (26.5625
    GB/s) stay exact, and no flow overflows.
    """

    def __init__(self, t: Topology) -> None:
        self.index = {d.id: i for i, d in enumerate(t.devices)}
        src = np.array([self.index[c.src] for c in t.channels], dtype=np.int64)
        dst = np.array([self.index[c.dst] for c in t.channels], dtype=np.int64)
        cap = np.array([c.bandwidth_bytes_per_s for c in t.channels], dtype=np.float64)
        n = len(self.index)
        self.out_bytes_per_s = np.bincount(src, weights=cap, minlength=n)
        self.in_bytes_per_s = np.bincount(dst, weights=cap, minlength=n)
        acc = [self.index[d.id] for d in t.accelerators]
        total = float(self.out_bytes_per_s[acc].sum() + self.in_bytes_per_s[acc].sum())
        self.unit_bytes_per_s = 10.0 ** max(0, math.ceil(math.log10(max(total, 1.0) / 2**30)))
        self.edges = (src, dst, self._units(cap))

    def _units(self, bytes_per_s: np.ndarray) -> np.ndarray:
        return np.rint(bytes_per_s / self.unit_bytes_per_s).astype(np.int32)

    def set_flow(self, side_a: Sequence[str], side_b: Sequence[str]) -> float:
        """Max-flow from every device in ``side_a`` to every device in ``side_b``, bytes/s."""
        src, dst, cap = self.edges
        n = len(self.index)
        a = np.array([self.index[x] for x in side_a], dtype=np.int64)
        b = np.array([self.index[x] for x in side_b], dtype=np.int64)
        # A super source feeding side A and a super sink fed by side B, each edge as wide as
        # what its device can send (or receive), so it never binds.
        rows = np.concatenate([src, np.full(len(a), n), b])
        cols = np.concatenate([dst, a, np.full(len(b), n + 1)])
        caps = np.concatenate(
            [cap, self._units(self.out_bytes_per_s[a]), self._units(self.in_bytes_per_s[b])]
        )
        graph = csr_array((caps, (rows, cols)), shape=(n + 2, n + 2))  # parallel edges add up
        return float(maximum_flow(graph, n, n + 1).flow_value) * self.unit_bytes_per_s


@functools.lru_cache(maxsize=8)
def _flow_network(t: Topology) -> _FlowNetwork:
    return _FlowNetwork(t)


def _structured_cuts(n: int) -> list[list[int]]:
    half = n // 2
    cuts = [list(range(half))]
    block = 1
    while block < half:
        side = [r for r in range(n) if (r // block) % 2 == 0][:half]
        if len(side) == half and side not in cuts:
            cuts.append(side)
        block *= 2
    if n <= RANDOM_CUTS_MAX_N:
        rng = random.Random(n)  # seeded: the same topology always gets the same cuts
        cuts += [sorted(rng.sample(range(n), half)) for _ in range(RANDOM_CUTS)]
    return cuts


@functools.lru_cache(maxsize=8)
def bisection(t: Topology) -> tuple[float, bool]:
    """``(bisection GB/s per direction, exact?)``; see the module docstring for the method."""
    ids = [d.id for d in t.accelerators]
    n = len(ids)
    if n < 2:
        return 0.0, True
    network, half = _flow_network(t), n // 2
    n_parts = math.comb(n, half) // (2 if n % 2 == 0 else 1)
    exact = n_parts <= EXACT_BISECTION_LIMIT
    parts: Iterator[list[int]]
    if exact:
        # Fix rank 0 on side A when the halves are equal, so each bipartition is seen once.
        parts = (
            ([0, *rest] for rest in itertools.combinations(range(1, n), half - 1))
            if n % 2 == 0
            else (list(c) for c in itertools.combinations(range(n), half))
        )
    else:
        parts = iter(_structured_cuts(n))
    best = math.inf
    side: list[int]
    for side in parts:
        chosen = set(side)
        a_ids = [ids[r] for r in side]
        b_ids = [ids[r] for r in range(n) if r not in chosen]
        best = min(best, network.set_flow(a_ids, b_ids))  # symmetric capacities: B->A is the same
    return best / _GB, exact


def bisection_gb_per_s(t: Topology) -> float:
    """Bisection bandwidth, GB/s per direction (exact for n <= 12, else a structured-cut bound)."""
    return bisection(t)[0]


def is_uniform(t: Topology) -> bool:
    """Whether every accelerator pair is equidistant (hops) at equal bottleneck bandwidth
    (pairs from :func:`sampled_sources` beyond :data:`ALL_PAIRS_MAX_N` accelerators)."""
    n = len(t.accelerators)
    if n < 2:
        return True
    sources = sampled_sources(t)
    hop, width = _source_rows(t)
    h0, w0 = hop[0][1], width[0][1]
    for s, hops_row, width_row in zip(sources, hop, width, strict=True):
        for b in range(n):
            if b == s:
                continue
            if hops_row[b] != h0 or not math.isclose(width_row[b], w0, rel_tol=_REL):
                return False
    return True


def max_hops(t: Topology) -> int:
    """The largest hop count between two accelerators (from :func:`sampled_sources` beyond
    :data:`ALL_PAIRS_MAX_N` accelerators: a lower bound, exact on fabrics where every source
    sees the same distances, as fat trees and the presets' switch planes do)."""
    return max((max(row) for row in _source_rows(t)[0]), default=0)


def per_accelerator_gb_per_s(t: Topology) -> float:
    """Scale-up bandwidth of one accelerator, GB/s per direction: the sum of its channels out,
    leaving out those to hosts and NICs; the minimum over accelerators."""
    out = dict.fromkeys((d.id for d in t.accelerators), 0.0)
    kind = {d.id: d.kind for d in t.devices}
    for c in t.channels:
        if c.src in out and kind[c.dst] not in (NodeKind.HOST, NodeKind.NIC):
            out[c.src] += c.bandwidth_bytes_per_s
    return min(out.values()) / _GB


def pooled_memory_bytes(t: Topology) -> int:
    """Sum of the accelerators' HBM capacity, bytes."""
    return sum(int(hardware.accelerator(d.type).hbm_bytes) for d in t.accelerators)


def scale_out(t: Topology) -> dict[str, Any] | None:
    """The scale-out fabric (switches whose ports are a ``scale-out`` link technology), or None:
    ``switch_types``, ``switches_per_tier`` (leaves, those with a NIC, first; then each tier the
    one below reaches), ``tiers``, and ``oversubscription``: the most any leaf has down (to
    NICs) per unit up (to other switches), by bandwidth; 1.0 for one switch.

    >>> from scaleup.topology import resolve_topology
    >>> scale_out(resolve_topology("16xdgx-h100"))["switches_per_tier"]
    [4, 2]
    """
    kind = {d.id: d.kind for d in t.devices}
    fabric = {
        d.id: d.type
        for d in t.switches
        if hardware.link_tech(str(hardware.switch_chip(d.type).link_tech)).scope == "scale-out"
    }
    if not fabric:
        return None
    down: dict[str, float] = {}
    up: dict[str, float] = {}
    neighbours: dict[str, list[str]] = {x: [] for x in fabric}
    for c in t.channels:
        if c.src in fabric:
            if kind[c.dst] is NodeKind.NIC:
                down[c.src] = down.get(c.src, 0.0) + c.bandwidth_bytes_per_s
            elif c.dst in fabric:
                up[c.src] = up.get(c.src, 0.0) + c.bandwidth_bytes_per_s
                neighbours[c.src].append(c.dst)
    tier = set(down)
    seen = set(tier)
    per_tier = []
    while tier:
        per_tier.append(len(tier))
        tier = {y for x in tier for y in neighbours[x] if y not in seen}
        seen |= tier
    ratios = [down[x] / up[x] for x in down if up.get(x)]
    return {
        "switch_types": sorted(set(fabric.values())),
        "tiers": len(per_tier),
        "switches_per_tier": per_tier,
        "oversubscription": max(ratios, default=1.0),
    }


def summary(t: Topology) -> dict[str, Any]:
    """The facts ``scaleup topo show --json`` prints.

    Beyond :data:`ALL_PAIRS_MAX_N` accelerators ``uniform`` and ``max_hops`` come from
    ``hop_sources`` sampled ranks (``pairs_sampled`` true), not from all O(n^2) pairs.
    """
    bisect, exact = bisection(t)
    types = sorted({d.type for d in t.accelerators})
    order = {k: i for i, k in enumerate(NodeKind)}
    counts: dict[str, int] = {}
    for d in sorted(t.devices, key=lambda d: (order[d.kind], d.type)):
        counts[d.type] = counts.get(d.type, 0) + 1
    sources = sampled_sources(t)
    return {
        "name": t.name,
        "description": t.description,
        "accelerator_types": types,
        "accelerators": len(t.accelerators),
        "switches": len(t.switches),
        "hosts": len(t.hosts),
        "nics": len(t.nics),
        "device_types": counts,
        "nodes": len(t.nodes),
        "ranks_per_node": t.ranks_per_node,
        "links": sum(x.count for x in t.links),
        "channels": len(t.channels),
        "peer_access": t.peer_access,
        "per_accelerator_gb_per_s": per_accelerator_gb_per_s(t),
        "bisection_gb_per_s": bisect,
        "bisection_exact": exact,
        "uniform": is_uniform(t),
        "max_hops": max_hops(t),
        "pairs_sampled": len(sources) < len(t.accelerators),
        "hop_sources": len(sources),
        "pooled_memory_bytes": pooled_memory_bytes(t),
        "scale_out": scale_out(t),
    }


# ---- predicates of a group of ranks (the tuner's enable rules) --------------------------------


def _rank_devices(t: Topology, ranks: Sequence[int] | None) -> list[Device]:
    accs = t.accelerators
    return list(accs) if ranks is None else [accs[r] for r in ranks]


def _channels_out(t: Topology, devices: list[Device]) -> dict[str, list[Channel]]:
    """The channels leaving each of ``devices``, in ``t.channels`` order."""
    out: dict[str, list[Channel]] = {d.id: [] for d in devices}
    for c in t.channels:
        if c.src in out:
            out[c.src].append(c)
    return out


def rank_nodes(t: Topology, ranks: Sequence[int] | None = None) -> tuple[int, ...]:
    """The server (``Device.node``) of every rank of the group."""
    return tuple(int(d.node) for d in _rank_devices(t, ranks))


def nvls_capable(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether NVLink SHARP applies to the group: peer access on, every rank in one server (or
    switch domain), and every switch a rank's NVLink-family links reach reduces in the switch
    (links of other families, to hosts or NICs, are left out). A rank with no NVLink switch at
    all does not qualify."""
    if not t.peer_access:
        return False
    devices = _rank_devices(t, ranks)
    if len({d.node for d in devices}) > 1:
        return False
    for channels in _channels_out(t, devices).values():
        ends = [t.device(c.dst) for c in channels]
        specs = [hardware.switch_chip(d.type) for d in ends if d.kind is NodeKind.SWITCH]
        nvlink = [s for s in specs if s.link_tech and _family(s.link_tech) == "nvlink"]
        if not nvlink or not all(s.in_switch_reduction for s in nvlink):
            return False
    return True


def nvls_tree_capable(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether NVLS-Tree applies to the group: it spans more than one server and, inside every
    server, its ranks are :func:`nvls_capable` (NVLink SHARP switches reduce for every rank
    there). Whether the servers' NICs suffice is the tuner's business (one head per NIC)."""
    if not t.peer_access:
        return False
    devices = _rank_devices(t, ranks)
    accs = {d.id: i for i, d in enumerate(t.accelerators)}
    by_node: dict[int, list[int]] = {}
    for d in devices:
        by_node.setdefault(int(d.node), []).append(accs[d.id])
    return len(by_node) > 1 and all(nvls_capable(t, group) for group in by_node.values())


def nvlink_class(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether every rank of the group has an NVLink-family link (NCCL's LL128 enable rule:
    LL128 on NVLink paths, never over PCIe-only or host-staged paths); False without peer
    access."""
    if not t.peer_access:
        return False
    channels = _channels_out(t, _rank_devices(t, ranks))
    return all(any(_family(c.tech) == "nvlink" for c in out) for out in channels.values())


def links_per_accelerator(t: Topology, ranks: Sequence[int] | None = None) -> int:
    """Fewest scale-up links (``scope == "scale-up"``, counted with multiplicity) of any rank of
    the group; 0 for an empty group."""
    channels = _channels_out(t, _rank_devices(t, ranks))
    counts = [
        sum(c.count for c in out if hardware.link_tech(c.tech).scope == "scale-up")
        for out in channels.values()
    ]
    return min(counts, default=0)


def is_full_mesh(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether the group has more than two ranks and every ordered pair is directly linked."""
    ids = [d.id for d in _rank_devices(t, ranks)]
    index = t.channel_index
    return len(ids) > 2 and all((a, b) in index for a in ids for b in ids if a != b)


def _family(tech: str) -> str:
    return str(hardware.link_tech(tech).family)
