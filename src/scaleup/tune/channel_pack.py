"""Packing channel paths into one server shape's links, speed by speed.

A :class:`Shape` is the search on one server's :class:`~scaleup.tune.channel_graph.NodeGraph`
for one kind of path:

``ring``
    a closed Hamiltonian cycle (a channel on a single server);
``path``
    NIC -> accelerators -> NIC (a ring's stretch on one of several servers);
``chain``
    a tree's stretch from its head: every hop carries bytes both ways (reduce up, broadcast
    down); across servers the head also talks both ways through its NIC.

It offers candidate per-channel speeds, an upper bound on the channels at a speed, and the paths
found at a speed:

- On a *switched* server (no direct link between two members: NVSwitch, UALink, PCIe trees)
  every order loads the same ports, so channel ``c`` starts at member ``c`` and runs round the
  server in rank order; the speed of ``k`` channels is computed exactly.
- On a uniform full mesh the known decompositions come first (:mod:`channel_seeds`): Walecki's
  Hamiltonian cycles (odd meshes) and the zig-zag paths (even meshes, across servers).
- Otherwise a :class:`~scaleup.tune.channel_dfs.Packer` searches depth first with backtracking
  under an expansion budget per speed and :data:`SHAPE_BUDGETS` times that per shape:
  deterministic, and bounded in cost where the upper bound cannot be reached. (Restarts with
  other tie-breaks were tried and found nothing the first search missed: the "next member
  round" tie-break is what finds the decompositions.)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from scaleup.errors import NoRouteError
from scaleup.tune.channel_dfs import Packer
from scaleup.tune.channel_graph import CHAIN, PATH, REL_TOL, RING, Load, NodeGraph, merge
from scaleup.tune.channel_orbits import free_groups
from scaleup.tune.channel_seeds import grid_seeds, seeds

__all__ = ["PAIR_CUT_MAX_MEMBERS", "SHAPE_BUDGETS", "Shape"]

#: Pair cuts (two members against the rest) bound the channels up to this many members.
PAIR_CUT_MAX_MEMBERS = 32
#: A shape's whole search may spend this many times the per-speed budget.
SHAPE_BUDGETS = 5


class Shape:
    """The channel search on one server shape (see the module docstring)."""

    def __init__(
        self,
        graph: NodeGraph,
        kind: str,
        max_channels: int,
        budget: int,
        *,
        nics: bool = True,
        routed: bool = False,
        grid: tuple[int, ...] | None = None,
    ) -> None:
        self.graph, self.kind, self.max_channels, self.budget = graph, kind, max_channels, budget
        #: the grid ``dims`` when member ``i`` is rank ``i`` of a whole torus (its seeds)
        self.grid = grid
        self.nics = nics and bool(graph.nics) and kind != RING
        #: whether hops between members without a direct link are taken (switched servers:
        #: always; elsewhere only where direct links alone make no channel)
        self.routed = routed or graph.switched
        self.left = SHAPE_BUDGETS * budget
        self._cap = np.array(graph.capacity)
        self._solved: dict[float, list[tuple[int, ...]]] = {}
        self._proved: dict[float, bool] = {}  # speeds searched to the end
        self._rotation: list[tuple[int, ...]] = []
        self._rotation_speed: list[float] = []
        self._loads: dict[tuple[int, ...], Load] = {}
        self._load_arrays: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        if graph.switched:
            self._rotate()

    # -- loads -----------------------------------------------------------------------------
    def step(self, i: int, j: int) -> Load | None:
        """Load of one hop (a chain's hop carries bytes both ways); None for a hop without a
        direct link while routed hops are off."""
        if not self.routed and (i, j) not in self.graph.direct:
            return None
        if self.kind == CHAIN:
            return merge(self.graph.hop(i, j), self.graph.hop(j, i))
        return self.graph.hop(i, j)

    @functools.cached_property
    def steps(self) -> list[list[tuple[int, Load]]]:
        """``steps[i]``: ``(j, step(i, j))`` for every member ``j`` one hop can reach from ``i``
        (sparse: on a mesh or a ring of thousands of members, only the direct links)."""
        n, g = self.graph.n, self.graph
        if self.routed:
            pairs = [[j for j in range(n) if j != i] for i in range(n)]
        else:
            pairs = [[] for _ in range(n)]
            for i, j in sorted(g.direct):
                if i != j:
                    pairs[i].append(j)
        out: list[list[tuple[int, Load]]] = []
        for i, row in enumerate(pairs):
            hops = ((j, self.step(i, j)) for j in row)
            out.append([(j, load) for j, load in hops if load is not None])
        return out

    def head(self, i: int) -> Load | None:
        """Load of entering at member ``i`` (None: it cannot, it has no NIC)."""
        g = self.graph
        if not self.nics:
            return ()
        if self.kind == PATH:
            return g.nic_in[i]
        nin, nout = g.nic_in[i], g.nic_out[i]
        return None if nin is None or nout is None else merge(nin, nout)

    def tail(self, path: Sequence[int]) -> Load | None:
        """Load of leaving: a ring's closing hop, a path's NIC outbound, nothing for a chain."""
        if self.kind == RING:
            return self.step(path[-1], path[0]) if len(path) > 1 else ()
        if self.kind == PATH and self.nics:
            return self.graph.nic_out[path[-1]]
        return ()

    def load_of(self, path: Sequence[int]) -> Load:
        """Every arc one channel along ``path`` loads, as fractions of its bytes (kept per
        path: the hops' loads never change, and rotated channels repeat one path)."""
        key = tuple(path)
        load = self._loads.get(key)
        if load is None:
            load = self._loads[key] = self._load_of(key)
        return load

    def _load_of(self, path: Sequence[int]) -> Load:
        parts = [self.head(path[0]), self.tail(path)]
        parts += [self.step(a, b) for a, b in itertools.pairwise(path)]
        if any(p is None for p in parts):
            raise NoRouteError(f"path {list(path)} takes a hop this search does not take")
        return merge(*(p for p in parts if p is not None))

    def _totals(self, paths: Sequence[Sequence[int]]) -> np.ndarray:
        """The arcs' loads summed over ``paths``, path by path (a load lists every arc once,
        so adding its arrays at once adds what one entry at a time did)."""
        total = np.zeros(len(self._cap))
        for path in paths:
            arcs, fracs = self._arrays(tuple(path))
            total[arcs] += fracs
        return total

    def _arrays(self, path: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        hit = self._load_arrays.get(path)
        if hit is None:
            load = self.load_of(path)
            hit = self._load_arrays[path] = (
                np.array([a for a, _ in load], dtype=np.int64),
                np.array([f for _, f in load], dtype=np.float64),
            )
        return hit

    def speed_limit(self, paths: Sequence[Sequence[int]]) -> float:
        """The highest per-channel speed at which all ``paths`` fit together."""
        total = self._totals(paths)
        used = total > 0
        return float(np.min(self._cap[used] / total[used])) if used.any() else math.inf

    def saturated(self, paths: Sequence[Sequence[int]], speed: float) -> list[tuple[str, str]]:
        """Arcs that ``paths`` at ``speed`` fill to capacity (the limiting links)."""
        full = self._totals(paths) * speed >= self._cap * (1 - 1e-6)
        return [self.graph.arcs[a] for a in np.flatnonzero(full)]

    # -- switched servers --------------------------------------------------------------------
    def _rotate(self) -> None:
        """Channel ``c`` runs ``c, c+1, ..., c-1`` (rings: all ``0 .. n-1``): the round ring's
        hops less the one into ``c``, plus entering at ``c`` and leaving from ``c-1``."""
        n = self.graph.n
        hops = [self.step(j, (j + 1) % n) for j in range(n)] if n > 1 else []
        ring = np.zeros(len(self._cap))
        for hop in hops:  # one hop at a time, in order: np.sum(axis=0)'s sums, without n rows
            ring += self._vector(hop)
        total = np.zeros(len(self._cap))
        for c in range(self.max_channels):
            path = tuple(range(n)) if self.kind == RING else tuple((c + i) % n for i in range(n))
            ends = (self.head(path[0]), () if self.kind == RING else self.tail(path))
            if any(p is None for p in ends):
                break
            total += ring + sum(self._vector(p) for p in ends)
            if self.kind != RING and n > 1:
                total -= self._vector(hops[(c - 1) % n])
            used = total > 0
            speed = float(np.min(self._cap[used] / total[used])) if used.any() else math.inf
            self._rotation.append(path)
            self._rotation_speed.append(speed)

    def _vector(self, load: Load | None) -> np.ndarray:
        out = np.zeros(len(self._cap))
        for arc, frac in load or ():
            out[arc] += frac
        return out

    def _rotation_count(self, speed: float) -> int:
        return sum(1 for s in self._rotation_speed if s * (1 + REL_TOL) >= speed)

    # -- bounds --------------------------------------------------------------------------------
    def speeds(self) -> list[float]:
        """Candidate per-channel speeds: those at which ``k`` channels exactly fill a budget
        (an arc, a cut, an accelerator's links), no faster than the fastest hop."""
        if self.graph.switched:
            return [s for s in self._rotation_speed if math.isfinite(s)]
        g, n = self.graph, self.graph.n
        budgets = {g.out_capacity(cut) for cut in self._cuts()}
        budgets |= {c for (u, _), c in zip(g.arcs, g.capacity, strict=True) if u in g.local}
        hops = [h for row in self.steps for _, h in row]
        fastest = max((self._fastest(h) for h in hops), default=math.inf)
        if self.nics:
            fastest = min(fastest, max(self._fastest(g.nic_in[i] or ()) for i in range(n)))
        return [
            b / k
            for b in budgets
            for k in range(1, self.max_channels + 1)
            if 0 < b / k <= fastest * (1 + REL_TOL)
        ]

    def _fastest(self, load: Load) -> float:
        return min((self.graph.capacity[a] / f for a, f in load), default=math.inf)

    def _cuts(self) -> list[tuple[int, ...]]:
        n = self.graph.n
        pairs = itertools.combinations(range(n), 2) if n <= PAIR_CUT_MAX_MEMBERS else ()
        return [(i,) for i in range(n)] + list(pairs)

    @functools.cached_property
    def _cut_bytes_per_s(self) -> float:
        return min(self.graph.out_capacity(c) for c in self._cuts())

    def upper_bound(self, speed: float) -> int:
        """At most this many channels fit at ``speed`` (exact on a switched server): a cut of
        one or two members, the links of each member and of all members (direct hops only),
        and the NICs' links into the fabric."""
        if self.graph.switched:
            return self._rotation_count(speed)
        g, n = self.graph, self.graph.n

        def units(caps: list[float]) -> int:
            return sum(int(c / speed * (1 + REL_TOL)) for c in caps)

        bound = min(self.max_channels, int(self._cut_bytes_per_s / speed * (1 + REL_TOL)))
        if not self.routed:
            bound = min([bound] + [g.unit_bound(i, speed, self.nics) for i in range(n)])
            hops_per_channel = {RING: n, PATH: n - 1, CHAIN: 2 * (n - 1)}[self.kind]
            if hops_per_channel:
                bound = min(bound, units(self._direct_caps) // hops_per_channel)
        if self.nics:
            bound = min(bound, units(self._fabric_caps))
        return bound

    @functools.cached_property
    def _direct_caps(self) -> list[float]:
        g = self.graph
        return [g.capacity[g.arc_index[(g.members[i], g.members[j])]] for i, j in g.direct]

    @functools.cached_property
    def _fabric_caps(self) -> list[float]:
        """The NICs' links from the fabric (each channel enters through one, whole)."""
        g = self.graph
        wires = {a for load in g.nic_in if load for a, f in load if f == 1.0}
        return [g.capacity[a] for a in sorted(wires) if g.arcs[a][0] not in g.local]

    # -- the search ----------------------------------------------------------------------------
    def solve(self, speed: float, target: int) -> list[tuple[int, ...]]:
        """Up to ``target`` paths that fit together at ``speed`` (the most the search finds)."""
        if self.graph.switched:
            return self._rotation[: min(target, self._rotation_count(speed))]
        done = self._solved.get(speed)
        if done is not None and (len(done) >= target or self._proved.get(speed, False)):
            return done[:target]
        best = self._seeded(speed, target)
        proved = False
        if len(best) < target and self.left > 0:
            packer = Packer(self, speed, min(self.budget, self.left))
            found = packer.pack(target)
            self.left -= packer.spent
            proved = packer.spent <= packer.budget and len(found) < target  # no more exist
            best = max(best, found, key=len)
        self._solved[speed] = best
        self._proved[speed] = proved
        return best[:target]

    @functools.cached_property
    def groups(self) -> list[tuple[tuple[int, ...], ...]]:
        """The automorphism groups :mod:`~scaleup.tune.channel_orbits` may build channels from."""
        return free_groups(self)

    def _seeded(self, speed: float, target: int) -> list[tuple[int, ...]]:
        """The known decomposition's paths, round after round while they fit."""
        if self.routed:
            return []
        known = seeds(self.graph, self.kind)
        if not known and self.grid:
            known = grid_seeds(self.grid, self.graph, self.kind)
        if not known:
            return []
        packer = Packer(self, speed, 0)
        out: list[tuple[int, ...]] = []
        while len(out) < target:
            added = 0
            for path in known:
                load = self.load_of(path)
                if len(out) < target and packer.fits(load):
                    packer.charge(load)
                    out.append(path)
                    added += 1
            if not added:
                break
        return out
