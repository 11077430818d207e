"""The channels a schedule uses, read back from its ops: rings and paths as rank orders.

Per channel tag, the ops that move data between two ranks give directed edges ``src -> dst``
(communicator ranks). They are described, in this order of preference, as

- ``ring``: directed cycles, every rank sending to one and receiving from one (``orders``: each
  ring from its least rank; the last rank sends to the first);
- ``chain``: paths whose hops carry data both ways or one way (a tree's chains, NVLS-Tree's
  legs), when the edges, taken undirected, form disjoint simple paths (``orders``: each path
  from its least end);
- ``tree``: when they form one tree instead (hops both ways: reduce up, broadcast down),
  ``orders`` its hops ``(parent, child)`` breadth first from its least rank;
- ``switch``: in-switch reductions (NVLS), ``orders`` the ranks reduced together;
- ``edges``: anything else (trees with branches, all-to-all), ``orders`` the directed edges as
  ``(src, dst)`` pairs.

A channel with switch reductions and point-to-point edges (NVLS with a tree) gets one entry of
each; edges that are no one shape are split into the one-way edges (rings inside servers) and the
two-way ones (hops between servers), each described as above.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.schedule import OpKind, Schedule

__all__ = ["ChannelPath", "channel_paths"]

#: Ranks shown per order in :meth:`ChannelPath.text` (the data keeps them all).
SHOWN = 16


@dataclass(frozen=True)
class ChannelPath:
    """One channel tag's layout: ``kind`` (``ring``, ``chain``, ``switch``, ``edges``) and its
    rank ``orders`` (see the module)."""

    channel: int
    kind: str
    orders: tuple[tuple[int, ...], ...]

    def text(self) -> str:
        """``ring 0>1>...>7>0``, ``chain 0-1-2``, ``tree 0-4 4-2``, ``switch {0,1,...}``,
        ``edges 0>1 2>3``."""

        def cut(items: list[str]) -> list[str]:
            return items if len(items) <= SHOWN else [*items[: SHOWN - 1], "...", items[-1]]

        if self.kind == "ring":
            rings = ([str(r) for r in o] for o in self.orders)
            return "ring " + " | ".join(">".join(cut([*o, o[0]])) for o in rings)
        if self.kind == "chain":
            return "chain " + " | ".join("-".join(cut([str(r) for r in o])) for o in self.orders)
        if self.kind == "switch":
            return "switch " + " | ".join(
                "{" + ",".join(cut([str(r) for r in o])) + "}" for o in self.orders
            )
        sep = "-" if self.kind == "tree" else ">"
        return f"{self.kind} " + " ".join(cut([f"{a}{sep}{b}" for a, b in self.orders]))


def channel_paths(schedule: Schedule) -> tuple[ChannelPath, ...]:
    """Every channel tag's layout in ``schedule`` (see the module), channel tags ascending."""
    t = schedule.table
    if not t.n_ops:
        return ()
    src = t.src_rank[t.src_ptr[:-1]]
    dst = t.dst_rank[t.dst_ptr[:-1]]
    switch = t.kind == int(OpKind.SWITCH_REDUCE)
    p2p = ~switch & (src != dst)
    out: list[ChannelPath] = []
    for ch in unique(t.channel).tolist():
        mine = t.channel == ch
        groups = sorted(
            {_switch_group(t.src_rank, t.src_ptr, t.dst_rank, t.dst_ptr, i)
             for i in np.flatnonzero(mine & switch).tolist()}
        )  # fmt: skip
        if groups:
            out.append(ChannelPath(int(ch), "switch", tuple(groups)))
        pairs = np.unique(np.stack([src[mine & p2p], dst[mine & p2p]], axis=1), axis=0)
        edges = [(int(a), int(b)) for a, b in pairs]
        if edges:
            out += _describe(int(ch), edges)
    return tuple(out)


def _switch_group(
    src: np.ndarray, src_ptr: np.ndarray, dst: np.ndarray, dst_ptr: np.ndarray, i: int
) -> tuple[int, ...]:
    """The ranks op ``i`` (a switch reduction) reads from or writes to, ascending."""
    ranks = {*src[src_ptr[i] : src_ptr[i + 1]].tolist(), *dst[dst_ptr[i] : dst_ptr[i + 1]].tolist()}
    return tuple(sorted(int(r) for r in ranks))


def _describe(channel: int, edges: list[tuple[int, int]]) -> list[ChannelPath]:
    """The layout of one channel's edges; when they are no one shape, the one-way edges (rings
    inside servers, say) and the two-way ones (hops between them) are described apart."""
    whole = _shape(channel, edges)
    if whole.kind != "edges":
        return [whole]
    both = {(a, b) for a, b in edges if (b, a) in set(edges)}
    one_way = [e for e in edges if e not in both]
    two_way = [(a, b) for a, b in edges if (a, b) in both and a < b]
    if not one_way or not two_way:
        return [whole]
    return [_shape(channel, one_way), _shape(channel, [*two_way, *((b, a) for a, b in two_way)])]


def _shape(channel: int, edges: list[tuple[int, int]]) -> ChannelPath:
    for kind, read in (("ring", _rings), ("chain", _chains), ("tree", _tree)):
        orders = read(edges)
        if orders is not None:
            return ChannelPath(channel, kind, orders)
    return ChannelPath(channel, "edges", tuple(sorted(edges)))


def _rings(edges: list[tuple[int, int]]) -> tuple[tuple[int, ...], ...] | None:
    """Disjoint directed cycles (each from its least rank) when every rank of ``edges`` sends
    to one and receives from one, else None."""
    succ = dict(edges)
    if len(succ) != len(edges) or set(succ.values()) != set(succ) or len(edges) < 2:
        return None
    rings, seen = [], set()
    for start in sorted(succ):
        if start in seen:
            continue
        order = [start]
        while succ[order[-1]] != start:
            order.append(succ[order[-1]])
        seen.update(order)
        rings.append(tuple(order))
    if any(len(r) < 3 for r in rings) and len(rings) > 1:  # pairs both ways: chains, not rings
        return None
    return tuple(rings)


def _chains(edges: list[tuple[int, int]]) -> tuple[tuple[int, ...], ...] | None:
    """Disjoint simple paths when the undirected edges form them, else None."""
    adj: dict[int, set[int]] = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    if any(len(nbrs) > 2 for nbrs in adj.values()):
        return None
    seen: set[int] = set()
    chains = []
    for end in sorted(r for r, nbrs in adj.items() if len(nbrs) == 1):
        if end in seen:
            continue
        chain, prev = [end], None
        while True:
            seen.add(chain[-1])
            step = [r for r in adj[chain[-1]] if r != prev]
            if not step:
                break
            prev = chain[-1]
            chain.append(step[0])
        chains.append(tuple(chain))
    if len(seen) != len(adj):  # an undirected cycle that is not a directed ring
        return None
    return tuple(chains)


def _tree(edges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...] | None:
    """The hops (parent, child), breadth first from the least rank, when the undirected edges
    form one tree; else None."""
    adj: dict[int, set[int]] = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    n_edges = sum(len(nbrs) for nbrs in adj.values()) // 2
    if n_edges != len(adj) - 1:
        return None
    root = min(adj)
    hops, seen, queue = [], {root}, [root]
    for parent in queue:
        for child in sorted(adj[parent] - seen):
            seen.add(child)
            hops.append((parent, child))
            queue.append(child)
    return tuple(hops) if len(seen) == len(adj) else None
