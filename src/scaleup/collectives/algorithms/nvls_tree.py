"""NVLS-Tree (``nvls_tree``, NCCL's ``NVLS_TREE``): all_reduce across servers whose NVLink
switches reduce (NVLink SHARP).

NCCL's names map to the library's as its collectives do (``ncclFuncAllReduce`` ->
``all_reduce``): ``NCCL_ALGO_NVLS_TREE`` (``NCCL_ALGO=NVLSTree``) -> ``nvls_tree``.

Ranks ``N * g .. N * g + g - 1`` form server ``N`` (``g = ranks_per_node``; default: the whole
world is one server). Every lane (``chunks x channels`` near-equal regions of the count) is cut
into one slice per *head*: ``heads`` lists the local ranks that head a
slice (default every local rank; the tuner passes one per NIC, NCCL's ``nvlsHeads``). Slice
``h`` of a lane, with ``head(N) = N * g + heads[h]``:

1. in every server ``N``: a ``switch_reduce`` of the slice from the ``g`` ranks' inputs into
   ``head(N)``'s output (``multimem.ld_reduce``: the switch reads every rank's slice and
   returns the sum to the head);
2. across servers, among the ``m = n / g`` heads of slice ``h``: reduce up NCCL's double binary
   tree over the servers (``ncclGetDtree``; channel ``c`` rides tree ``c % 2``, as
   ``connectNvls`` in NCCL's ``src/graph/connect.cc`` sets ``treeUp[c % 2]``), every head
   accumulating its subtree into its output (a head's first child reduces into it; later
   children land in scratch slots of their own at the same time and one local pass folds them
   in, NCCL's ``FanAsymmetric`` read of every child at once), then copy the sum back down;
3. in every server ``N``: a ``switch_reduce`` with one source, ``head(N)``'s output, into the
   outputs of all ``g`` ranks (``multimem.st``: one copy up, replicated by the switch).

::

    2 servers x 4 ranks, heads (0, 1, 2, 3), slice 1 of channel 0 (tree 0: server 1 under 0)
    phase 1   server N: sw-reduce inputs of N.0..N.3 -> N.1
    phase 2   1.1 -R-> 0.1 (0.1 holds the sum), then 0.1 -C-> 1.1
    phase 3   server N: N.1 -multicast-> N.0..N.3

Channel ``c``'s in-switch phases and a head's local folds run on thread-block tag ``2c``, its
tree leg (the copies and reductions between two servers' heads) on tag ``2c + 1``: NCCL's kernel
runs the leg in warp groups of its own (src/device/all_reduce.h, NVLS_TREE: reduce-and-send,
receive-and-multicast), and on two servers the simulator caps the leg with NCCL's per-head
NVLS-Tree rate (:data:`scaleup.sim.params.NVLS_TREE_BUS_BYTES_PER_S`,
:meth:`scaleup.sim.simulate.CompiledSchedule.tree_leg_caps`) without slowing the in-switch
phases.

Each rank sends its whole buffer into its switch and receives it back (``S`` each way), a head
also ``S / H`` each way for its own slice; a head sends and receives ``S / H`` through its NIC
per tree edge. With ``chunks > 1`` every op of chunk ``c`` also waits for the same op of chunk
``c - 1`` (a channel's thread block runs its chunks in order), so chunk ``c`` crosses the servers
while chunk ``c + 1`` is reduced in the switches. With one server the tree is empty: NVLS with a
reduction into heads followed by a multicast.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.collectives.algorithms._common import (
    INPUT,
    OUTPUT,
    SCRATCH,
    check_int,
    op_table,
    split,
)
from scaleup.collectives.algorithms.tree import dtree_parents, tree_map
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "check", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "ranks_per_node": None, "heads": None}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks``, ``ranks_per_node`` (default: the world size) and
    ``heads`` (default: every local rank)."""
    rpn = params.get("ranks_per_node")
    g = spec.nranks if rpn is None else check_int("ranks_per_node", rpn)
    heads = params.get("heads")
    heads = tuple(range(g)) if heads is None else _heads(heads)
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "ranks_per_node": g,
        "heads": heads,
    }


def _heads(value: Any) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise UsageError(
            f"heads must be a non-empty list of local ranks, got {value!r}", source="heads"
        )
    heads = tuple(check_int("heads", h, minimum=0) for h in value)
    if len(set(heads)) != len(heads):
        raise UsageError(f"heads must be distinct, got {list(heads)}", source="heads")
    return heads


def check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    """The world size must be a multiple of ``ranks_per_node``; heads must be local ranks."""
    g = params["ranks_per_node"]
    if spec.nranks > 1 and spec.nranks % g:
        return f"world size {spec.nranks} is not a multiple of ranks_per_node={g}"
    if spec.nranks > 1 and max(params["heads"]) >= g:
        return f"heads {list(params['heads'])} are not all local ranks 0..{g - 1}"
    return None


#: A template row (server, local rank or HEAD, buffer): ``HEAD`` is the slice's head.
HEAD = -1


@dataclass(frozen=True)
class _Template:
    """The ops of one slice over one tree, with op ids relative to the slice's first op and the
    head's local rank left open (``HEAD``): every slice over that tree repeats them."""

    kind: np.ndarray  # (P,) op kinds
    issuer: np.ndarray  # (P,) server of the issuing head
    step: np.ndarray  # (P,)
    deps: np.ndarray  # (P, D) relative op ids, -1 = none
    n_src: np.ndarray  # (P,)
    src: np.ndarray  # (R, 4) rows (server, local rank or HEAD, buffer, scratch slot)
    n_dst: np.ndarray
    dst: np.ndarray


def _depths(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for v in range(len(parents)):
        u = v
        while parents[u] >= 0:
            u = parents[u]
            depth[v] += 1
    return depth


def _template(g: int, parents: list[int]) -> _Template:
    """The three phases of one slice over the tree ``parents`` (one node per server)."""
    m = len(parents)
    depth = _depths(parents)
    top = max(depth)
    Row = tuple[int, int, int, int]
    ops: list[tuple[int, int, int, list[int], list[Row], list[Row]]] = []
    server = [(N, r, INPUT, 0) for N in range(m) for r in range(g)]

    def add(kind: OpKind, issuer: int, step: int, deps: list[int], src: list[Row],
            dst: list[Row]) -> int:  # fmt: skip
        ops.append((int(kind), issuer, step, deps, src, dst))
        return len(ops) - 1

    last = [
        add(OpKind.SWITCH_REDUCE, N, 0, [], server[N * g : (N + 1) * g], [(N, HEAD, OUTPUT, 0)])
        for N in range(m)
    ]
    landed: list[list[tuple[int, int, int]]] = [[] for _ in range(m)]  # (op, slot, step)
    seen = [0] * m  # children of each head taken so far

    def fold(p: int) -> None:  # the later children's sums, landed in scratch, into p's
        for op, slot, step in landed[p]:
            last[p] = add(OpKind.REDUCE, p, step, [last[p], op], [(p, HEAD, SCRATCH, slot)],
                          [(p, HEAD, OUTPUT, 0)])  # fmt: skip

    up_order = sorted(range(m), key=lambda v: (-depth[v], v))
    for v in up_order:  # children before parents: each head sends its whole subtree's sum
        p = parents[v]
        if p < 0:
            continue
        fold(v)
        step, seen[p] = 1 + top - depth[v], seen[p] + 1
        if seen[p] == 1:
            last[p] = add(OpKind.REDUCE, p, step, [last[v], last[p]], [(v, HEAD, OUTPUT, 0)],
                          [(p, HEAD, OUTPUT, 0)])  # fmt: skip
        else:
            slot = seen[p] - 2
            copy = add(OpKind.COPY, p, step, [last[v]], [(v, HEAD, OUTPUT, 0)],
                       [(p, HEAD, SCRATCH, slot)])  # fmt: skip
            landed[p].append((copy, slot, step))
    fold(parents.index(-1))
    sent = [[op] for op in last]  # ops that must precede the multicast rewriting a head
    for v in reversed(up_order):  # parents before children: the sum comes back down
        p = parents[v]
        if p >= 0:
            last[v] = add(OpKind.COPY, p, top + depth[v], [last[p]], [(p, HEAD, OUTPUT, 0)],
                          [(v, HEAD, OUTPUT, 0)])  # fmt: skip
            sent[p].append(last[v])
            sent[v] = [last[v]]
    for N in range(m):
        add(OpKind.SWITCH_REDUCE, N, 1 + 2 * top, sent[N], [(N, HEAD, OUTPUT, 0)],
            [(N, r, OUTPUT, 0) for r in range(g)])  # fmt: skip
    width = max(len(op[3]) for op in ops)
    deps = np.full((len(ops), width), -1, dtype=np.int64)
    for i, op in enumerate(ops):
        deps[i, : len(op[3])] = op[3]

    def column(j: int) -> np.ndarray:
        return np.array([op[j] for op in ops], dtype=np.int64)

    return _Template(
        kind=column(0), issuer=column(1), step=column(2), deps=deps,
        n_src=np.array([len(op[4]) for op in ops]), src=np.array([r for op in ops for r in op[4]]),
        n_dst=np.array([len(op[5]) for op in ops]), dst=np.array([r for op in ops for r in op[5]]),
    )  # fmt: skip


def _tree_leg(tpl: _Template) -> np.ndarray:
    """Per template op, 1 for the tree leg (a copy or reduction between two servers' heads),
    0 for the in-switch phases and a head's local folds: the leg's thread-block tag."""
    src_ptr = np.concatenate([[0], np.cumsum(tpl.n_src)])[:-1]
    dst_ptr = np.concatenate([[0], np.cumsum(tpl.n_dst)])[:-1]
    p2p = (tpl.kind == int(OpKind.REDUCE)) | (tpl.kind == int(OpKind.COPY))
    across = tpl.src[src_ptr, 0] != tpl.dst[dst_ptr, 0]
    return (p2p & across).astype(np.int64)


def _image(tpl: _Template, phi: np.ndarray) -> _Template:
    """``tpl`` with every server ``v`` renamed ``phi[v]``: the same ops in the same order, so
    that tree 1's slice is tree 0's moved by ``phi`` op for op (a parent reduces the images of
    tree 0's children in tree 0's order)."""

    def moved(rows: np.ndarray) -> np.ndarray:
        out = rows.copy()
        out[:, 0] = phi[rows[:, 0]]
        return out

    return _Template(
        kind=tpl.kind, issuer=phi[tpl.issuer], step=tpl.step, deps=tpl.deps,
        n_src=tpl.n_src, src=moved(tpl.src), n_dst=tpl.n_dst, dst=moved(tpl.dst),
    )  # fmt: skip


def _rows(rows: np.ndarray, g: int, local: np.ndarray, offset: np.ndarray,
          count: int) -> np.ndarray:  # fmt: skip
    """(S * R, 3) chunk rows (rank, buffer, offset) of every slice's template rows ((S, R, 4):
    server, local rank or HEAD, buffer, scratch slot of ``count`` elements) with slice ``s``'s
    head ``local[s]`` and ``offset[s]``."""
    head = np.where(rows[:, :, 1] == HEAD, local[:, None], rows[:, :, 1])
    rank = rows[:, :, 0] * g + head
    return np.stack([rank, rows[:, :, 2], offset[:, None] + rows[:, :, 3] * count], axis=2)


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, g, heads = spec.nranks, params["ranks_per_node"], params["heads"]
    m, k, chunks = n // g, params["channels"], params["chunks"]
    h = len(heads)
    reg_off, reg_size = split(spec.count, k * chunks)  # lane = chunk * k + channel
    parts = [split(int(s), h) for s in reg_size]
    # slices in lane order, heads within a lane; empty ones left out
    offset = (reg_off[:, None] + np.array([p[0] for p in parts])).ravel()
    size = np.array([p[1] for p in parts]).ravel()
    lane = np.repeat(np.arange(k * chunks), h)
    keep = np.flatnonzero(size > 0)
    offset, size, lane = offset[keep], size[keep], lane[keep]
    local = np.asarray(heads, dtype=np.int64)[np.tile(np.arange(h), k * chunks)[keep]]
    channel = lane % k
    tree0, tree1 = dtree_parents(m)
    first = _template(g, tree0)
    phi = tree_map(tree0, tree1)  # NCCL's mirror or shift; None for one server
    tpl = [first, _template(g, tree1) if phi is None else _image(first, phi)]
    which = channel % 2  # channel c rides tree c % 2
    s, p = len(keep), len(tpl[0].kind)
    leg = _tree_leg(tpl[0])

    def per_op(name: str) -> np.ndarray:  # (S, P, ...) from the slices' templates (the two
        # trees are relabellings of one shape: their templates have the same sizes)
        return np.stack([getattr(t, name) for t in tpl])[which]

    ids = np.arange(s * p, dtype=np.int64).reshape(s, p)
    rel = per_op("deps")
    deps = np.where(rel >= 0, rel + ids[:, :1, None], -1)
    if int(reg_size.min()) >= h:  # every chunk has the same ops: op j of chunk c waits for
        # op j of chunk c - 1 (a channel's thread block runs its chunks in order)
        chain = ids - k * h * p
        deps = np.concatenate([deps, np.where(chain >= 0, chain, -1)[:, :, None]], axis=2)
    valid = deps >= 0
    table = op_table(
        per_op("kind").ravel(), per_op("n_src").ravel(),
        _rows(per_op("src"), g, local, offset, spec.count), per_op("n_dst").ravel(),
        _rows(per_op("dst"), g, local, offset, spec.count),
        np.repeat(size, p), (per_op("issuer") * g + local[:, None]).ravel(),
        (2 * channel[:, None] + leg[None, :]).ravel(), per_op("step").ravel(),
        n_deps=valid.sum(axis=2).ravel(),
        dep_idx=deps[valid],
    )  # fmt: skip
    fan = max(max(Counter(p for p in t if p >= 0).values(), default=0) for t in (tree0, tree1))
    return Schedule(spec, "nvls_tree", table, max(fan - 1, 0) * spec.count, params)


BUILDERS = {"all_reduce": all_reduce}
