"""Known decompositions of a full mesh into channel paths, tried before any search.

On ``n`` accelerators joined pairwise by equal links (the complete digraph ``K_n*``):

- **Zig-zag paths** (n even): ``P_i = i, i+1, i-1, i+2, i-2, ..., i+n/2`` (mod n) for every i.
  Consecutive steps are +1, -2, +3, -4, ...: n-1 distinct differences mod n, so the n paths
  together use every arc exactly once, and every member starts one path and ends one. Across
  servers each is a NET -> GPU ... GPU -> NET path: 8 MI300X with 8 NICs get 8 channels that
  share no xGMI arc and cover all 56, every NIC sending once and receiving once (RCCL's model).
- **Walecki's cycles** (n odd): the zig-zag paths of ``K_{n-1}`` starting at 0 .. (n-3)/2, each
  closed through member n-1, are (n-1)/2 edge-disjoint Hamiltonian cycles; run both ways round
  they are n-1 rings using every arc once.
- **Zig-zag chains** (n even, trees): the n/2 zig-zag paths starting at 0 .. n/2-1 share no
  edge, so as chains (each hop both ways) they use every arc once; the other n/2 are the same
  chains headed from their other end (used at half the speed, every member heading one).

``K_n*`` with n even has n-1 arc-disjoint Hamiltonian cycles too (except n = 4, 6; Tillson
1980), but no construction this short; the depth-first search finds them.

On a **grid** (a torus or mesh of chips, rank ``x + k0 (y + k1 z ...)``, every hop to a grid
neighbour) the seed is the boustrophedon ("snake", the reflected mixed-radix Gray code): each
step moves one coordinate by one, so it is a Hamiltonian path over direct links, and it
closes into a ring where its last chip neighbours its first (wraparound on the slowest
dimension, which the snake ends on at coordinate 0 elsewhere when that dimension's size is
even). Its two directions share no arc, so a ring seed gives two rings at a link's full
speed. Without it the depth-first search, which has no notion of coordinates, can spend its
whole budget on a 512-chip torus without closing one ring over direct links (and then took
rings routed through other chips: ~35 s of search for one ring at 8 x 8 x 8).
"""

from __future__ import annotations

from scaleup.tune.channel_graph import CHAIN, PATH, RING, NodeGraph

__all__ = ["grid_seeds", "seeds", "snake", "walecki_cycles", "zigzag_path"]


def zigzag_path(start: int, m: int) -> tuple[int, ...]:
    """``start, start+1, start-1, start+2, ...`` over all of ``0..m-1`` (mod m).

    >>> zigzag_path(0, 6)
    (0, 1, 5, 2, 4, 3)
    """
    out = [start % m]
    for j in range(1, m):
        step = (j + 1) // 2
        out.append((start + step) % m if j % 2 else (start - step) % m)
    return tuple(out)


def walecki_cycles(n: int) -> list[tuple[int, ...]]:
    """n-1 arc-disjoint directed Hamiltonian cycles of ``K_n*``, n odd (see the module).

    >>> walecki_cycles(5)
    [(4, 0, 1, 3, 2), (4, 2, 3, 1, 0), (4, 1, 2, 0, 3), (4, 3, 0, 2, 1)]
    """
    hub, out = n - 1, []
    for k in range((n - 1) // 2):
        path = zigzag_path(k, n - 1)
        out += [(hub, *path), (hub, *path[::-1])]
    return out


def _uniform_mesh(graph: NodeGraph) -> bool:
    n = graph.n
    if len(graph.direct) != n * (n - 1):
        return False
    caps = {graph.capacity[graph.arc_index[(graph.members[i], graph.members[j])]]
            for i, j in graph.direct}  # fmt: skip
    return len(caps) == 1


def seeds(graph: NodeGraph, kind: str) -> list[tuple[int, ...]]:
    """The known decomposition for ``kind`` on this server, or [] where none applies (rings
    start at member 0 as the search's do)."""
    n = graph.n
    if n < 3 or not _uniform_mesh(graph):
        return []
    if kind in (PATH, CHAIN) and n % 2 == 0:
        return [zigzag_path(i, n) for i in range(n)]
    if kind == RING and n % 2:
        rings = walecki_cycles(n)
        return [r[r.index(0) :] + r[: r.index(0)] for r in rings]
    return []


def snake(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The boustrophedon over a grid of ``dims`` (dimension 0 fastest): ranks in an order where
    consecutive ones differ by one in one coordinate.

    >>> snake((3, 2))
    (0, 1, 2, 5, 4, 3)
    >>> snake((2, 2, 2))
    (0, 1, 3, 2, 6, 7, 5, 4)
    """
    order = [0]
    stride = 1
    for k in dims:
        line = []
        for c in range(k):  # the grid so far, forwards then backwards, at each coordinate
            line += [r + c * stride for r in (order if c % 2 == 0 else order[::-1])]
        order, stride = line, stride * k
    return tuple(order)


def grid_seeds(dims: tuple[int, ...], graph: NodeGraph, kind: str) -> list[tuple[int, ...]]:
    """The snake's channels on a grid whose member ``i`` is rank ``i`` (see the module): for
    rings, the closed snake both ways round where its ends are linked; for paths, the snake
    both ways; for chains, the snake. [] where a hop is not a direct link."""
    path = snake(dims)
    if len(path) != graph.n or len(path) < 3:
        return []
    if any((a, b) not in graph.direct for a, b in zip(path[:-1], path[1:], strict=True)):
        return []
    if kind == RING:
        if (path[-1], path[0]) not in graph.direct:
            return []
        return [path, (path[0], *path[:0:-1])]
    if kind == PATH:
        return [path, path[::-1]]
    return [path] if kind == CHAIN else []
