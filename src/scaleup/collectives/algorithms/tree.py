"""Double binary tree (NCCL's ``tree``): all_reduce, broadcast, reduce.

NCCL builds two complementary binary trees so that every rank is a leaf in one and an inner node
in (at most) the other, and sends half of the data down each (``ncclGetBtree``/``ncclGetDtree``
in NCCL's ``graph/trees.cc``). Tree 0 is a binary tree over the bit structure of the ranks,
rooted at 0 whose single child is the largest power of two below n; tree 1 is its mirror
(``n-1-r``, n even) or its shift by one rank (n odd)::

    n=12  tree 0:  0 - 8                  tree 1 (mirror):  11 - 3
                     4       10                               1       7
                   2   6    9  11                           0   2   5   9
                  1 3 5 7                                         4 6 8 10

Lanes: the data is split into ``chunks x channels x 2`` pieces; lane ``(c * channels + k) * 2 + t``
rides tree ``t`` with channel tag ``2k + t``. all_reduce reduces each piece up its tree (a node
accumulates its subtree in its output, children pushing their partial sums) and broadcasts the
result back down; chunks pipeline, chunk ``c`` running ``c`` steps behind chunk 0::

    step:      0              1             2               3
    chunk 0    leaves->mid    mid->root     root->mid       mid->leaves
    chunk 1                   leaves->mid   mid->root       root->mid      ...

broadcast and reduce relabel both trees so that their roots are the collective's root
(``r -> (r - tree_root + root) % n``); reduce accumulates in scratch below the root.

``parents=[(tree0, tree1), ...]`` replaces NCCL's two trees over the ranks by given ones, one
pair of parent arrays per channel (channel ``k`` uses pair ``k % len(parents)``): the tuner passes
the channel search's trees (a chain inside each server, the double binary tree over the servers).
broadcast and reduce then re-root each given tree at the collective's root (the edges stay, so
the links a tree uses stay).
"""

from __future__ import annotations

from typing import Any

from scaleup.collectives.algorithms._common import check_int, split, table_builder
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "btree_parents", "dtree_parents", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "parents": None}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks`` and ``parents`` (each a tree over the ``n`` ranks)."""
    parents = params.get("parents")
    if parents is not None:
        parents = [[_check_tree(spec.nranks, list(t)) for t in pair] for pair in parents]
        if not parents or any(len(pair) != 2 for pair in parents):
            raise UsageError(
                "parameter parents must hold (tree0, tree1) pairs, one per channel",
                source="parents",
            )
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "parents": parents,
    }


def _check_tree(n: int, parents: list[Any]) -> list[int]:
    """``parents`` as ints if it is one tree over ranks 0..n-1 (one root), else a UsageError."""
    try:
        out = [int(p) for p in parents]
    except (TypeError, ValueError):
        raise UsageError("parameter parents: a tree is a list of ints", source="parents") from None
    ok = len(out) == n and out.count(-1) == 1 and all(-1 <= p < n for p in out)
    if ok:  # every rank reaches the root without a cycle
        for r in range(n):
            seen, v = 0, r
            while v >= 0 and seen <= n:
                v, seen = out[v], seen + 1
            ok = ok and seen <= n
    if not ok:
        raise UsageError(f"parameter parents: {out} is not a tree over {n} ranks", source="parents")
    return out


def btree_parents(n: int) -> list[int]:
    """Parent of every rank in NCCL's binary tree (root 0 has parent -1)."""
    parents = [-1] * n
    for rank in range(1, n):
        bit = 1
        while bit < n and not bit & rank:
            bit <<= 1
        up = (rank ^ bit) | (bit << 1)
        parents[rank] = up if up < n else rank ^ bit
    return parents


def dtree_parents(n: int) -> tuple[list[int], list[int]]:
    """Parents in NCCL's two trees: the binary tree and its mirror (n even) or shift (n odd)."""
    tree0 = btree_parents(n)
    if n % 2:
        tree1 = [-1 if tree0[(r - 1) % n] == -1 else (tree0[(r - 1) % n] + 1) % n for r in range(n)]
    else:
        tree1 = [-1 if tree0[n - 1 - r] == -1 else n - 1 - tree0[n - 1 - r] for r in range(n)]
    return tree0, tree1


def _shape(parents: list[int]) -> tuple[int, list[list[int]], list[int]]:
    """(root, children lists, post-order) of a parent array."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    root = -1
    for r, p in enumerate(parents):
        if p < 0:
            root = r
        else:
            children[p].append(r)
    order: list[int] = []
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((ch, False) for ch in reversed(children[node]))
    return root, children, order


def _relabel(parents: list[int], root: int) -> list[int]:
    """The same tree with labels rotated so that its root becomes ``root``."""
    n = len(parents)
    shift = root - parents.index(-1)
    out = [-1] * n
    for r, p in enumerate(parents):
        out[(r + shift) % n] = -1 if p < 0 else (p + shift) % n
    return out


def _reroot(parents: list[int], root: int) -> list[int]:
    """The same tree (the same edges) with its root moved to ``root``: the path from ``root``
    up to the old root is reversed."""
    out = list(parents)
    prev, v = -1, root
    while v >= 0:
        up = parents[v]
        out[v] = prev
        prev, v = v, up
    return out


def _trees(spec: CollectiveSpec, params: dict[str, Any], root: int | None) -> list[list[list[int]]]:
    """The (tree0, tree1) parent arrays of every channel, rooted at ``root`` when given."""
    given = params.get("parents")
    if given is None:
        trees = list(dtree_parents(spec.nranks))
        if root is not None:
            trees = [_relabel(t, root) for t in trees]
        return [trees] * params["channels"]
    pairs = [given[k % len(given)] for k in range(params["channels"])]
    return [[list(t) if root is None else _reroot(list(t), root) for t in p] for p in pairs]


def _lanes(
    spec: CollectiveSpec, params: dict[str, Any], root: int | None
) -> list[tuple[int, int, int, int, list[int]]]:
    """(offset, size, channel tag, chunk, parents) of every non-empty lane."""
    k, c = params["channels"], params["chunks"]
    trees = _trees(spec, params, root)
    off, size = split(spec.count, c * k * 2)
    lanes = []
    for ci in range(c):
        for ki in range(k):
            for t in range(2):
                lane = (ci * k + ki) * 2 + t
                if size[lane]:
                    lanes.append((int(off[lane]), int(size[lane]), 2 * ki + t, ci, trees[ki][t]))
    return lanes


def _heights(children: list[list[int]], order: list[int]) -> list[int]:
    height = [0] * len(children)
    for v in order:
        height[v] = 1 + max((height[ch] for ch in children[v]), default=-1)
    return height


def _up(
    b: ScheduleBuilder,
    parents: list[int],
    off: int,
    size: int,
    channel: int,
    chunk: int,
    acc_buffer: str,
    root_buffer: str,
    jit: dict[tuple[int, int], tuple[int, ...]],
) -> tuple[int, int, list[list[int]], list[int]]:
    """Reduce a lane up its tree; returns (root, root's final op, children, heights).

    An inner node first copies its own input into the target; that copy waits for the node's
    first reduce of chunk ``c - 2`` on the same channel (``jit``: the last two, updated here), so
    chunk ``c``'s copy overlaps chunk ``c - 1``'s transfers instead of every chunk copying up
    front, and the reduce of chunk ``c`` is ready (its latency running) while chunk ``c - 1``
    still moves bytes, as in NCCL's pipeline of ``NCCL_STEPS`` slots.
    """
    root, children, order = _shape(parents)
    height = _heights(children, order)
    last: dict[int, int] = {}
    for v in order:
        if not children[v]:
            continue
        buffer = root_buffer if v == root else acc_buffer
        target = getattr(b, buffer)(v, off, size)
        before = jit.get((channel, v), ())
        prev = b.copy(b.input(v, off, size), target, deps=list(before[:1]) if len(before) == 2
                      else [], channel=channel, step=chunk)  # fmt: skip
        first = True
        for ch in children[v]:
            src = (
                b.input(ch, off, size)
                if not children[ch]
                else getattr(b, acc_buffer)(ch, off, size)
            )
            deps = [prev] + ([last[ch]] if ch in last else [])
            prev = b.reduce(
                src, target, rank=ch, deps=deps, channel=channel, step=chunk + height[ch]
            )
            if first:
                jit[(channel, v)] = (*before, prev)[-2:]
                first = False
        last[v] = prev
    return root, last.get(root, -1), children, height


def _down(
    b: ScheduleBuilder,
    root: int,
    children: list[list[int]],
    ready: int,
    off: int,
    size: int,
    channel: int,
    step0: int,
    from_input: bool = False,
) -> None:
    """Broadcast a lane down its tree from ``root``'s output (or input) once ``ready`` is done."""
    stack = [(root, ready, 0)]
    while stack:
        v, dep, depth = stack.pop()
        src = b.input(v, off, size) if (from_input and v == root) else b.output(v, off, size)
        for ch in children[v]:
            op = b.copy(
                src,
                b.output(ch, off, size),
                deps=[dep] if dep >= 0 else [],
                channel=channel,
                step=step0 + depth,
            )
            stack.append((ch, op, depth + 1))


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    b = table_builder(spec, "tree", params=params)
    jit: dict[tuple[int, int], tuple[int, ...]] = {}
    for off, size, channel, chunk, parents in _lanes(spec, params, None):
        root, final, children, height = _up(
            b, parents, off, size, channel, chunk, "output", "output", jit
        )
        _down(b, root, children, final, off, size, channel, chunk + height[root] + 1)
    return b.build()


def broadcast(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    b = table_builder(spec, "tree", params=params)
    if spec.count:
        b.copy(b.input(spec.root, 0, spec.count), b.output(spec.root, 0, spec.count), deps=[])
    for off, size, channel, chunk, parents in _lanes(spec, params, spec.root):
        root, children, _order = _shape(parents)
        _down(b, root, children, -1, off, size, channel, chunk, from_input=True)
    return b.build()


def reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    b = table_builder(spec, "tree", scratch_count=spec.count, params=params)
    jit: dict[tuple[int, int], tuple[int, ...]] = {}
    for off, size, channel, chunk, parents in _lanes(spec, params, spec.root):
        _up(b, parents, off, size, channel, chunk, "scratch", "output", jit)
    return b.build()


BUILDERS = {"all_reduce": all_reduce, "broadcast": broadcast, "reduce": reduce}
