"""The depth-first packing of channel paths into one server's links at one speed.

A :class:`Packer` walks one path at a time over the members of a
:class:`~scaleup.tune.channel_pack.Shape`: from the current member it tries the next ones in
order of preference (a direct link first, then the hop with the most bandwidth left, then the
next member round), charging each hop's load at the speed
and giving it back when it backtracks. A completed path stays charged while the search packs the
next one into what is left; when no next path exists the search resumes the previous path's walk
(backtracking across paths). Rings all start at member 0 with non-decreasing second members, so
a reordering of the same rings is not searched twice. Every step counts against a budget: the
search is deterministic and its cost bounded; ``spent <= budget`` afterwards means it searched
everything, so no more paths exist.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from scaleup.tune.channel_graph import REL_TOL, RING, Load

if TYPE_CHECKING:
    from scaleup.tune.channel_pack import Shape

__all__ = ["Packer"]


class Packer:
    """Paths of a shape packed into its arcs at one speed (see the module docstring)."""

    def __init__(self, shape: Shape, speed: float, budget: int) -> None:
        self.shape, self.speed, self.budget = shape, speed, budget
        self.n = shape.graph.n
        self.rem = list(shape.graph.capacity)
        self.tol = [c * REL_TOL for c in shape.graph.capacity]
        self.spent = 0
        self.starts = [0] * self.n

    def fits(self, load: Load | None) -> bool:
        """Whether ``load`` at this speed fits the bandwidth left."""
        if load is None:
            return False
        return all(self.rem[a] + self.tol[a] >= self.speed * f for a, f in load)

    def charge(self, load: Load, sign: float = 1.0) -> None:
        """Take (sign 1) or give back (sign -1) ``load`` at this speed."""
        for a, f in load:
            self.rem[a] -= sign * self.speed * f

    def _candidates(self, v: int, seen: list[bool]) -> list[tuple[int, Load]]:
        """The hops from ``v`` that fit, best last (the walk pops them from the end)."""
        row, n, direct = self.shape.steps[v], self.n, self.shape.graph.direct
        rem, tol, speed = self.rem, self.tol, self.speed
        ranked = []
        for u, load in row:
            if seen[u]:
                continue
            units = math.inf
            for a, f in load:
                if rem[a] + tol[a] < speed * f:
                    break
                units = min(units, rem[a] / (speed * f))
            else:
                ranked.append(((v, u) in direct, units, -((u - v) % n), u, load))
        ranked.sort()
        return [(u, load) for *_, u, load in ranked]

    def walks(self, min_second: int = 0) -> Iterator[tuple[int, ...]]:
        """Every path that fits, depth first; each stays charged while it is yielded (the
        caller packs the next path into what is left) and is given back on resumption."""
        shape, n = self.shape, self.n
        ring = shape.kind == RING
        order = [0] if ring else sorted(range(n), key=lambda i: (self.starts[i], i))
        for start in order:
            first = shape.head(start)
            if first is None or not self.fits(first):
                continue
            self.charge(first)
            self.starts[start] += 1
            path, seen, taken = [start], [False] * n, []
            seen[start] = True
            stack = [self._candidates(start, seen)]
            while stack:
                self.spent += 1
                if self.spent > self.budget:
                    return
                if len(path) == n:
                    last = shape.tail(path)
                    if last is not None and self.fits(last):
                        self.charge(last)
                        yield tuple(path)
                        self.charge(last, -1.0)
                    stack.pop()
                elif stack[-1]:
                    u, load = stack[-1].pop()
                    if (ring and len(path) == 1 and u < min_second) or not self.fits(load):
                        continue
                    self.charge(load)
                    taken.append(load)
                    path.append(u)
                    seen[u] = True
                    stack.append(self._candidates(u, seen) if len(path) < n else [])
                    continue
                else:
                    stack.pop()
                if len(path) == 1:
                    break
                seen[path.pop()] = False
                self.charge(taken.pop(), -1.0)
            self.starts[start] -= 1
            self.charge(first, -1.0)

    def pack(self, target: int) -> list[tuple[int, ...]]:
        """Up to ``target`` paths that fit together: the most found within the budget."""
        best: list[tuple[int, ...]] = []
        chosen: list[tuple[int, ...]] = []
        ring = self.shape.kind == RING

        def more(min_second: int) -> bool:
            if len(chosen) > len(best):
                best[:] = chosen
            if len(chosen) >= target:
                return True
            for path in self.walks(min_second):
                chosen.append(path)
                if more(path[1] if ring and len(path) > 1 else 0):
                    return True
                chosen.pop()
            return self.spent > self.budget

        more(0)
        return best
