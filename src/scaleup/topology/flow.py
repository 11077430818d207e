"""Max-flow and bisection bandwidth of a fabric, over SciPy's max-flow (Dinic's algorithm in C).

Split from :mod:`scaleup.topology.analysis` (which re-exports the public names and documents the
bisection method) so that the flow network and its cut enumeration stand alone.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterator, Sequence

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from scaleup.topology.model import Topology
from scaleup.topology.paths import GB, _id

__all__ = [
    "EXACT_BISECTION_LIMIT",
    "RANDOM_CUTS",
    "RANDOM_CUTS_MAX_N",
    "bisection",
    "bisection_gb_per_s",
    "max_flow_gb_per_s",
]

EXACT_BISECTION_LIMIT = 512  #: balanced bipartitions enumerated at most (C(12, 6) / 2 = 462)
RANDOM_CUTS = 16  #: seeded random bipartitions added to the structured cuts ...
RANDOM_CUTS_MAX_N = 128  #: ... up to this many accelerators (beyond, structured cuts only)


def max_flow_gb_per_s(t: Topology, a: str | int, b: str | int) -> float:
    """Max-flow bandwidth from accelerator ``a`` to ``b`` over all paths, GB/s per direction."""
    return _flow_network(t).set_flow([_id(t, a)], [_id(t, b)]) / GB


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
    return best / GB, exact


def bisection_gb_per_s(t: Topology) -> float:
    """Bisection bandwidth, GB/s per direction (exact for n <= 12, else a structured-cut bound)."""
    return bisection(t)[0]
