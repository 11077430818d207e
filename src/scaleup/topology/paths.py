"""Hop counts and widest-path bottlenecks between accelerators, over SciPy sparse graphs.

Split from :mod:`scaleup.topology.analysis` (which re-exports the public names) so that the
path metrics, with their caches and sampling rule, live apart from max-flow and the tuner's
predicates. Breadth-first searches and a maximum spanning tree run in SciPy's C code, so a
40,000-device fabric takes seconds.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree, shortest_path

from scaleup import limits
from scaleup.arrays import unique
from scaleup.topology.model import Topology

__all__ = [
    "ALL_PAIRS_MAX_N",
    "SAMPLED_SOURCES",
    "bottleneck_gb_per_s",
    "hops",
    "pair_table",
    "sampled_sources",
]

#: Accelerators up to which :func:`is_uniform` and :func:`max_hops` read every pair; beyond,
#: :data:`SAMPLED_SOURCES` source ranks to every accelerator (``topo show`` of 16,384 GPUs).
ALL_PAIRS_MAX_N = 256
SAMPLED_SOURCES = 16
GB = 1e9  #: bytes/s in a GB/s


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
        widths = unique(cap)
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
        for level in unique(depth):  # a level at a time: its parents are done
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
    return tuple(float(w) / GB for w in width[acc])


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
