"""Rank orders for rings: which rank follows which on each channel, by the shape of the fabric.

The ring builder (:mod:`scaleup.collectives.algorithms.ring`) takes ``orders=[[...], ...]``, one
rank order per channel; these functions compute the orders NCCL's and RCCL's graph searches
arrive at on two shapes of fabric:

- :func:`mesh_ring_orders`: a full mesh (MI300X), rings spread over distinct links;
- :func:`rail_ring_orders`: several servers, crossing between servers on one rail per channel.

Which one a topology gets is the tuner's choice (:mod:`scaleup.tune.channels`).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence

__all__ = ["mesh_ring_orders", "rail_ring_orders"]


def rail_ring_orders(nodes: Sequence[int], channels: int) -> list[list[int]] | None:
    """Ring orders for several servers that cross between servers on one rail, a new rail per
    channel, as NCCL's multi-node rings do (each channel leaves a server through another NIC).

    ``nodes[r]`` is the server of rank r. Channel k uses local index l = k mod p (p ranks per
    server): even servers run their ranks from l+1 round to l, odd servers from l back to l+1, so
    every crossing joins local index l to l (or l+1 to l+1) of the next server. None when the
    servers hold different numbers of ranks, or there is only one.

    >>> rail_ring_orders([0, 0, 1, 1], 2)
    [[1, 0, 2, 3], [0, 1, 3, 2]]
    """
    groups: dict[int, list[int]] = {}
    for rank, node in enumerate(nodes):
        groups.setdefault(int(node), []).append(rank)
    members = list(groups.values())
    p = len(members[0]) if members else 0
    if len(members) < 2 or any(len(g) != p for g in members):
        return None
    orders = []
    for k in range(channels):
        lane = k % p
        order: list[int] = []
        for i, group in enumerate(members):
            if i % 2 == 0:
                order += [group[(lane + 1 + j) % p] for j in range(p)]
            else:
                order += [group[(lane - j) % p] for j in range(p)]
        orders.append(order)
    return orders


def mesh_ring_orders(nranks: int, channels: int) -> list[list[int]]:
    """Ring orders for a full mesh, spread over distinct links as NCCL/RCCL's graph search does.

    Where the complete digraph on ``nranks`` vertices splits into ``nranks - 1`` arc-disjoint
    directed Hamiltonian cycles (every n except 4 and 6, Tillson 1980), channel k follows cycle
    ``k % (n - 1)``: the rings then use every link of every accelerator in both directions (8
    MI300X: 7 rings on 7 xGMI links). For n = 4 and 6, Walecki's n/2 - 1 undirected Hamiltonian
    cycles run both ways (all but one link per accelerator); for small odd n, coprime strides.

    >>> rings = mesh_ring_orders(8, 7)
    >>> len({(r[i], r[(i + 1) % 8]) for r in rings for i in range(8)})  # 56 arcs: all distinct
    56
    """
    cycles = _directed_cycles(nranks)
    if cycles:
        return [list(cycles[k % len(cycles)]) for k in range(channels)]
    if nranks >= 4 and nranks % 2 == 0:
        rings = []
        for cycle in _walecki_cycles(nranks):
            rings += [cycle, [cycle[0], *cycle[1:][::-1]]]  # each cycle both ways round
        return [rings[k % len(rings)] for k in range(channels)]
    strides = [s for s in range(1, max(nranks, 2)) if math.gcd(s, nranks) == 1] or [1]
    return [
        [(i * strides[k % len(strides)]) % nranks for i in range(nranks)] for k in range(channels)
    ]


@functools.lru_cache(maxsize=64)
def _directed_cycles(n: int) -> tuple[tuple[int, ...], ...]:
    """``n - 1`` arc-disjoint directed Hamiltonian cycles of the complete digraph K_n*, found by
    a seeded randomised depth-first search (deterministic), or () if none is found (n = 4, 6
    have none; n > 64 is not searched)."""
    if n < 3 or n > 64 or n in (4, 6):
        return ()
    rng = random.Random(n)
    for _ in range(200):
        free = {v: set(range(n)) - {v} for v in range(n)}
        cycles: list[tuple[int, ...]] = []
        for _c in range(n - 1):
            cycle = _hamiltonian(n, free, rng)
            if cycle is None:
                break
            for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
                free[a].discard(b)
            cycles.append(cycle)
        if len(cycles) == n - 1:
            return tuple(cycles)
    return ()


def _hamiltonian(n: int, free: dict[int, set[int]], rng: random.Random) -> tuple[int, ...] | None:
    """A directed Hamiltonian cycle from 0 over the ``free`` arcs (bounded DFS), or None."""
    path, seen = [0], {0}
    stack = [iter(rng.sample(sorted(free[0]), len(free[0])))]
    for _ in range(50_000):
        if not stack:
            return None
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        if nxt in seen:
            continue
        path.append(nxt)
        seen.add(nxt)
        if len(path) == n:
            if 0 in free[nxt]:
                return tuple(path)
            seen.discard(path.pop())
            continue
        stack.append(iter(rng.sample(sorted(free[nxt]), len(free[nxt]))))
    return None


def _walecki_cycles(n: int) -> list[list[int]]:
    """Walecki's decomposition of the complete graph K_n (n even) into n/2 - 1 edge-disjoint
    Hamiltonian cycles (plus a perfect matching left over): vertex n-1 is the hub, the others
    sit on a circle and cycle k zigzags k, k+1, k-1, k+2, ... around it."""
    m = n - 1
    cycles = []
    for k in range(n // 2 - 1):
        path = [k % m]
        for j in range(1, m):
            step = (j + 1) // 2
            path.append((k + step) % m if j % 2 else (k - step) % m)
        cycles.append([n - 1, *path])
    return cycles
