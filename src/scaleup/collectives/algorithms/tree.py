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
result back down. A node takes its children at once, as NCCL's kernel reads them
(``FanAsymmetric<NCCL_MAX_TREE_ARITY, 1>``, src/device/all_reduce.h): the first child reduces
into the node's sum, each later one lands in a scratch slot of its own (``count`` elements per
child past the first) and one local reduce folds it in. Chunks pipeline, chunk ``c`` running
``c`` steps behind chunk 0::

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

from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    OUTPUT,
    SCRATCH,
    check_int,
    graph_channels,
    split,
    table_builder,
)
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "btree_parents", "dtree_parents", "normalise", "tree_map"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "parents": None, "graph_channels": None}


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
        "graph_channels": graph_channels(params),
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


@dataclass(frozen=True)
class _Template:
    """The ops of one lane over one tree, op ids relative to the lane's first op: every lane
    over that tree repeats them at its own offset, count, channel tag and step (``step`` here
    is relative to the lane's chunk)."""

    cols: dict[str, np.ndarray]  # kind, rank, src_rank, src_buffer, dst_rank, dst_buffer, step,
    # src_slot, dst_slot (offsets in whole counts: the scratch slot of a parent's later child)
    deps: np.ndarray  # (P, 2) relative op ids, -1 = none
    jit: np.ndarray  # (P,) relative id of the op two lanes back that a copy waits for, or -1


def _template(parents: list[int], *, up: bool, down: bool, acc: int, top: int,
              from_input: bool = False) -> _Template:  # fmt: skip
    """Reduce a lane up its tree (``up``: a node accumulates its subtree in buffer ``acc``, the
    root in ``top``), then (``down``) broadcast it back down from the root's output (its input
    with ``from_input``).

    Up: an inner node first copies its own input into the target; that copy waits for the
    node's first reduce of chunk ``c - 2`` on the same channel (``jit``), so chunk ``c``'s copy
    overlaps chunk ``c - 1``'s transfers instead of every chunk copying up front, and the reduce
    of chunk ``c`` is ready (its latency running) while chunk ``c - 1`` still moves bytes, as in
    NCCL's pipeline of ``NCCL_STEPS`` slots. Children after the first copy into scratch slots
    (``slots``: offsets in whole counts) at the same time, and local reduces fold them in.
    Down: each node forwards once its own copy is done.
    """
    root, children, order = _shape(parents)
    height = _heights(children, order)
    ops: list[tuple[int, ...]] = []  # kind, rank, src (2), dst (2), step, slots (2), deps (2), jit
    first_slot = 1 if acc == SCRATCH else 0  # scratch slot 0 holds the accumulators then

    def add(kind: OpKind, issuer: int, src: tuple[int, int], dst: tuple[int, int], step: int,
            deps: list[int], jit: int = -1, slots: tuple[int, int] = (0, 0)) -> int:  # fmt: skip
        ops.append((int(kind), issuer, *src, *dst, step, *slots, *(deps + [-1, -1])[:2], jit))
        return len(ops) - 1

    final = -1
    if up:
        last: dict[int, int] = {}
        for v in order:
            if not children[v]:
                continue
            target = (v, top if v == root else acc)
            own = add(OpKind.COPY, v, (v, INPUT), target, 0, [], jit=len(ops) + 1)
            prev, parked = own, []
            for j, ch in enumerate(children[v]):  # the copy's jit: its first reduce, 2 lanes back
                src = (ch, INPUT if not children[ch] else acc)
                deps = [own] + ([last[ch]] if ch in last else [])
                if j == 0:  # the first child reduces into the target; the others land at once
                    prev = add(OpKind.REDUCE, ch, src, target, height[ch], deps)
                    continue
                slot = first_slot + j - 1
                parked.append((slot, add(OpKind.COPY, ch, src, (v, SCRATCH), height[ch], deps,
                                         slots=(0, slot))))  # fmt: skip
            for slot, landed in parked:  # then one local pass folds them in (no step latency)
                prev = add(OpKind.REDUCE, v, (v, SCRATCH), target, height[v] - 1, [prev, landed],
                           slots=(slot, 0))  # fmt: skip
            last[v] = prev
        final = last.get(root, -1)
    if down:
        step0 = height[root] + 1 if up else 0
        stack = [(root, final, 0)]
        while stack:
            v, dep, depth = stack.pop()
            src = (v, INPUT if from_input and v == root else OUTPUT)
            for ch in children[v]:
                deps = [dep] if dep >= 0 else []
                op = add(OpKind.COPY, v, src, (ch, OUTPUT), step0 + depth, deps)
                stack.append((ch, op, depth + 1))
    table = np.array(ops, dtype=np.int64).reshape(-1, 12)
    names = ("kind", "rank", "src_rank", "src_buffer", "dst_rank", "dst_buffer", "step",
             "src_slot", "dst_slot")  # fmt: skip
    return _Template({k: table[:, i] for i, k in enumerate(names)}, table[:, 9:11], table[:, 11])


def tree_map(tree0: list[int], tree1: list[int]) -> np.ndarray | None:
    """A rank map taking ``tree0`` onto ``tree1`` (``tree1[phi[r]] == phi[tree0[r]]``) among
    those NCCL's double binary tree uses (``ncclGetDtree``): the mirror ``r -> n-1-r``, the
    shift by one, and the same per block of ``g`` ranks (servers in reverse order or shifted by
    one, each server's ranks in place: the channel search's chains under a double binary tree
    over the servers); None when none does."""
    n = len(tree0)
    if n < 2 or tree0 == tree1:
        return None
    rank = np.arange(n, dtype=np.int64)
    t0, t1 = np.asarray(tree0, dtype=np.int64), np.asarray(tree1, dtype=np.int64)
    for g in (d for d in range(1, n) if n % d == 0):
        block, local = rank // g, rank % g
        for phi in ((n // g - 1 - block) * g + local, (block + 1) % (n // g) * g + local):
            if np.array_equal(t1[phi], np.where(t0 >= 0, phi[np.maximum(t0, 0)], -1)):
                return phi
    return None


def _image(tpl: _Template, phi: np.ndarray) -> _Template:
    """``tpl`` with every rank ``r`` renamed ``phi[r]``: the same ops in the same order. Built
    so, tree 1's lanes are tree 0's moved op for op (a node reduces the images of tree 0's
    children in tree 0's order; built from its parents alone it would take them in rank order,
    which the mirror reverses), so the map between the trees is an automorphism of the schedule
    wherever the fabric follows it (:mod:`scaleup.sim.symmetry`)."""
    cols = dict(tpl.cols)
    for name in ("rank", "src_rank", "dst_rank"):
        cols[name] = phi[tpl.cols[name]]
    return _Template(cols, tpl.deps, tpl.jit)


def _add_lanes(b: ScheduleBuilder, spec: CollectiveSpec, params: dict[str, Any],
               root: int | None, **shape: Any) -> None:  # fmt: skip
    """Append every lane's ops (:func:`_template` with ``shape``) in lane order, one
    ``add_batch`` for all: lanes over the same tree (one channel tag) are filled at once."""
    lanes = _lanes(spec, params, root)
    tpl: dict[tuple[int, ...], _Template] = {}
    groups: dict[int, list[int]] = {}
    for tree0, tree1 in _trees(spec, params, root):  # tree 1 as tree 0 moved, where it is
        if tuple(tree0) not in tpl:
            tpl[tuple(tree0)] = _template(tree0, **shape)
        phi = tree_map(tree0, tree1)
        if phi is not None and tuple(tree1) not in tpl:
            tpl[tuple(tree1)] = _image(tpl[tuple(tree0)], phi)
    for i, lane in enumerate(lanes):
        if tuple(lane[4]) not in tpl:
            tpl[tuple(lane[4])] = _template(lane[4], **shape)
        groups.setdefault(lane[2], []).append(i)  # by channel tag
    of_lane = [tpl[tuple(lane[4])] for lane in lanes]
    sizes = np.array([len(t.jit) for t in of_lane], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    total = int(sizes.sum())
    if not total:
        return
    off, size, tag, chunk = (np.array([lane[j] for lane in lanes], dtype=np.int64)
                             for j in range(4))  # fmt: skip
    cols = {k: np.empty(total, dtype=np.int64) for k in (*of_lane[0].cols, "offset", "count",
                                                           "channel")}  # fmt: skip
    deps = np.empty((total, 2), dtype=np.int64)
    start = b.n_ops
    for members in groups.values():  # the lanes of one channel tag, in chunk order
        idx = np.asarray(members)
        t = of_lane[members[0]]
        at = base[idx][:, None] + np.arange(len(t.jit))  # (L, P) positions
        for k, v in t.cols.items():
            cols[k][at] = v
        cols["step"][at] += chunk[idx][:, None]
        cols["offset"][at], cols["count"][at] = off[idx][:, None], size[idx][:, None]
        cols["channel"][at] = tag[idx][:, None]
        d = np.where(t.deps >= 0, t.deps + start + base[idx][:, None, None], -1)
        copies = np.flatnonzero(t.jit >= 0)
        d[2:, copies, 0] = t.jit[copies] + start + base[idx[:-2]][:, None]
        deps[at] = d
    src_offset = cols["offset"] + cols["src_slot"] * spec.count
    dst_offset = cols["offset"] + cols["dst_slot"] * spec.count
    b.add_batch(
        cols["kind"], src_rank=cols["src_rank"], src_buffer=cols["src_buffer"],
        src_offset=src_offset, dst_rank=cols["dst_rank"], dst_buffer=cols["dst_buffer"],
        dst_offset=dst_offset, count=cols["count"], deps=deps, rank=cols["rank"],
        channel=cols["channel"], step=cols["step"],
    )  # fmt: skip


def _scratch_slots(spec: CollectiveSpec, params: dict[str, Any], root: int | None,
                   acc: int) -> int:  # fmt: skip
    """Scratch regions of ``spec.count`` elements the up phase needs: one per child past a
    node's first (they land side by side), after the accumulators' region when ``acc`` is
    scratch."""
    trees = {tuple(t) for pair in _trees(spec, params, root) for t in pair}
    fan = max((len(kids) for t in trees for kids in _shape(list(t))[1]), default=0)
    return max(fan - 1, 0) + (1 if acc == SCRATCH else 0)


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    slots = _scratch_slots(spec, params, None, OUTPUT)
    b = table_builder(spec, "tree", scratch_count=slots * spec.count, params=params)
    _add_lanes(b, spec, params, None, up=True, down=True, acc=OUTPUT, top=OUTPUT)
    return b.build()


def broadcast(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    b = table_builder(spec, "tree", params=params)
    if spec.count:
        b.copy(b.input(spec.root, 0, spec.count), b.output(spec.root, 0, spec.count), deps=[])
    _add_lanes(b, spec, params, spec.root, up=False, down=True, acc=OUTPUT, top=OUTPUT,
               from_input=True)  # fmt: skip
    return b.build()


def reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    slots = _scratch_slots(spec, params, spec.root, SCRATCH)
    b = table_builder(spec, "tree", scratch_count=slots * spec.count, params=params)
    _add_lanes(b, spec, params, spec.root, up=True, down=False, acc=SCRATCH, top=OUTPUT)
    return b.build()


BUILDERS = {"all_reduce": all_reduce, "broadcast": broadcast, "reduce": reduce}
