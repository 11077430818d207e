"""Channels that keep a server's symmetry: the images of a few base paths under its automorphisms.

Why. On a server that is neither switched nor a uniform full mesh (a torus of Trainium or TPU
chips, a hybrid cube-mesh) the depth-first packing (:mod:`~scaleup.tune.channel_dfs`) finds
paths one after the other, and they come out irregular: on two trn2 servers (4 x 4 tori, a NIC
per chip) its 16 paths are 16 different shapes. Nothing is wrong with them, but the simulator
can then fold no two channels onto each other (:mod:`scaleup.sim.lane_orbits` maps lanes by the
fabric's automorphisms), and a ring of 32 ranks on 16 or 32 channels takes 12-33 s a size in
the event loop. Built as the images of one path under a group of the server's automorphisms,
the same 16 channels at the same 40 GB/s fold into one class there: ring/simple/16 at 64 MiB
is timed in ~1.5 s instead of 14.4 s (598.6 against 626.9 us: another plan of the same count
and speed, not a correction; docs/models.md, "Channel search").

What. A group ``H`` of member permutations that preserve every direct arc's bandwidth and every
member's NIC attachment (:func:`free_groups`: automorphisms found with networkx's
``DiGraphMatcher``, then the groups one or two of them generate that move every member, so that
``H`` acts freely and its ``k = n / |H|`` member orbits have ``|H|`` members each). The search
(:func:`orbit_paths`) walks ``k`` base paths, the ``b``-th from the first member of orbit ``b``,
charging every hop's ``|H|`` images at once into a :class:`~scaleup.tune.channel_dfs.Packer`'s
arcs: the ``n`` images then fit together by construction, each member starts one channel, and
(for NIC -> ... -> NIC paths) ends one, because the base paths end in distinct orbits. Largest
group first; the first plan found is taken.

Scope. Only for path kinds whose channels enter each server through a NIC (``path``, ``chain``),
on direct hops, on servers of at most :data:`MAX_MEMBERS` members with at most
:data:`MAX_AUTOMORPHISMS` automorphisms; a full mesh (``n!`` automorphisms) keeps its known
decompositions (:mod:`~scaleup.tune.channel_seeds`). The search itself is unchanged:
:mod:`scaleup.tune.channel_search` picks the count and speed as before, and only a plan of one
channel per member is rebuilt, at its speed, where the images fit (else it stays as found).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import networkx as nx

from scaleup.tune.channel_dfs import Packer
from scaleup.tune.channel_graph import CHAIN, PATH, Load

if TYPE_CHECKING:
    from scaleup.tune.channel_pack import Shape

__all__ = ["MAX_AUTOMORPHISMS", "MAX_MEMBERS", "ORBIT_BUDGET", "free_groups", "orbit_paths"]

#: Servers of more members are left to the depth-first search (the automorphism search grows
#: with the graph; the tori that need this have 16).
MAX_MEMBERS = 32
#: Stop listing automorphisms beyond this many (a 4 x 4 torus has 128, a 4 x 4 x 2 one 256).
MAX_AUTOMORPHISMS = 4096
#: Hops tried per group and speed before the search gives up (deterministic, bounded cost).
ORBIT_BUDGET = 20_000
#: Groups tried per speed, largest first.
MAX_GROUPS = 8

Perm = tuple[int, ...]


def _compose(p: Perm, q: Perm) -> Perm:
    """``p`` after ``q``."""
    return tuple(p[i] for i in q)


def _generated(gens: Sequence[Perm], n: int) -> frozenset[Perm] | None:
    """The group ``gens`` generate, or None when it has more than ``n`` elements or an element
    other than the identity fixes a member (it would not act freely)."""
    identity = tuple(range(n))
    group = {identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for p in frontier:
            for g in gens:
                q = _compose(g, p)
                if q in group:
                    continue
                if len(group) >= n or any(q[i] == i for i in range(n)):
                    return None
                group.add(q)
                nxt.append(q)
        frontier = nxt
    return frozenset(group)


def _automorphisms(shape: Shape) -> list[Perm]:
    """The member permutations that keep every direct arc (with its bandwidth) and every
    member's NIC loads (their bandwidths), at most :data:`MAX_AUTOMORPHISMS` of them."""
    g = shape.graph
    cap = g.capacity
    dg = nx.DiGraph()
    for i in range(g.n):
        nic = tuple(
            tuple(sorted((cap[a], f) for a, f in (load or ())))
            for load in (g.nic_in[i], g.nic_out[i])
        )
        dg.add_node(i, nic=nic)
    for i, j in g.direct:
        dg.add_edge(i, j, bw=cap[g.arc_index[(g.members[i], g.members[j])]])
    matcher = nx.algorithms.isomorphism.DiGraphMatcher(
        dg, dg, node_match=lambda a, b: a["nic"] == b["nic"],
        edge_match=lambda a, b: a["bw"] == b["bw"],
    )  # fmt: skip
    found = []
    for mapping in itertools.islice(matcher.isomorphisms_iter(), MAX_AUTOMORPHISMS + 1):
        found.append(tuple(mapping[i] for i in range(g.n)))
    return [] if len(found) > MAX_AUTOMORPHISMS else sorted(found)


def free_groups(shape: Shape) -> list[tuple[Perm, ...]]:
    """Groups of automorphisms that move every member (each element but the identity is
    fixed-point free, so every orbit has the group's size), generated by one or two
    automorphisms; largest first, then by their elements (deterministic). Empty where the
    server is too large, a full mesh (its known decompositions serve it), has too many
    automorphisms, or none moves every member."""
    n = shape.graph.n
    complete = len(shape.graph.direct) >= n * (n - 1)  # a full mesh: n! automorphisms, seeded
    if n < 2 or n > MAX_MEMBERS or shape.routed or complete:
        return []
    autos = _automorphisms(shape)
    moving = [p for p in autos if all(p[i] != i for i in range(n))]
    seen: set[frozenset[Perm]] = set()
    for gens in itertools.chain(((p,) for p in moving), itertools.combinations(moving[: 2 * n], 2)):
        group = _generated(gens, n)
        if group is not None and n % len(group) == 0:
            seen.add(group)
    return [tuple(sorted(grp)) for grp in sorted(seen, key=lambda s: (-len(s), sorted(s)))]


def orbit_paths(shape: Shape, speed: float) -> list[tuple[int, ...]]:
    """``n`` paths that fit together at ``speed``: the images of ``n / |H|`` base paths under
    the largest group ``H`` of :func:`free_groups` for which the search finds them; empty where
    none is found. Only for ``path`` and ``chain`` shapes with NICs (``shape.groups`` holds
    :func:`free_groups`, found once per shape)."""
    if shape.kind not in (PATH, CHAIN) or not shape.nics:
        return []
    for group in shape.groups[:MAX_GROUPS]:
        found = _search(shape, speed, group)
        if found:
            return found
    return []


def _search(shape: Shape, speed: float, group: tuple[Perm, ...]) -> list[tuple[int, ...]]:
    """The images of base paths, one from each member orbit of ``group``, found depth first
    (see the module docstring); empty when the budget runs out or none fits."""
    n = shape.graph.n
    orbit_of = [-1] * n
    orbits: list[int] = []  # each orbit's first member
    for i in range(n):
        if orbit_of[i] < 0:
            for g in group:
                orbit_of[g[i]] = len(orbits)
            orbits.append(i)
    packer = Packer(shape, speed, ORBIT_BUDGET)
    spent = 0

    def images(loads: Sequence[Load | None]) -> list[Load] | None:
        """Charge every image load, or none of them (None) when one does not fit."""
        taken: list[Load] = []
        for load in loads:
            if load is None or not packer.fits(load):
                for back in taken:
                    packer.charge(back, -1.0)
                return None
            packer.charge(load)
            taken.append(load)
        return taken

    def release(taken: list[Load]) -> None:
        for load in taken:
            packer.charge(load, -1.0)

    bases: list[tuple[int, ...]] = []
    ends: set[int] = set()

    def walk(b: int) -> bool:
        nonlocal spent
        if b == len(orbits):
            return True
        start = orbits[b]
        heads = images([shape.head(g[start]) for g in group])
        if heads is None:
            return False
        path, seen = [start], [False] * n
        seen[start] = True

        def extend() -> bool:
            nonlocal spent
            spent += 1
            if spent > ORBIT_BUDGET:
                return False
            if len(path) == n:
                end = orbit_of[path[-1]]
                if shape.kind == PATH and end in ends:
                    return False
                tails = images([shape.tail([g[x] for x in path]) for g in group])
                if tails is None:
                    return False
                bases.append(tuple(path))
                ends.add(end)
                if walk(b + 1):
                    return True
                bases.pop()
                ends.discard(end)
                release(tails)
                return False
            v = path[-1]
            for u, _load in _ranked(shape, packer, v, seen):
                hops = images([shape.step(g[v], g[u]) for g in group])
                if hops is None:
                    continue
                path.append(u)
                seen[u] = True
                if extend():
                    return True
                seen[path.pop()] = False
                release(hops)
                if spent > ORBIT_BUDGET:
                    return False
            return False

        if extend():
            return True
        release(heads)
        return False

    if not walk(0):
        return []
    return [tuple(g[x] for x in base) for base in bases for g in group]


def _ranked(shape: Shape, packer: Packer, v: int, seen: list[bool]) -> list[tuple[int, Load]]:
    """The direct hops from ``v`` to unvisited members, the most bandwidth left first, then by
    member (deterministic)."""
    out = []
    for u, load in shape.steps[v]:
        if seen[u] or (v, u) not in shape.graph.direct:
            continue
        left = min((packer.rem[a] / f for a, f in load if f > 0), default=float("inf"))
        out.append((-left, u, load))
    out.sort(key=lambda t: (t[0], t[1]))
    return [(u, load) for _, u, load in out]
