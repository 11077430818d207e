"""What a candidate must move and wait for: the terms of the tuner's lower bounds.

Split from :mod:`scaleup.tune.bounds` (whose docstring says why each term holds, and which turns
them into a time) so that each algorithm's structure -- ring orders, tree parents, NVLS and
hierarchical servers -- and the collectives' algorithm-independent minimum read one function
each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.sim import params as P
from scaleup.tune.group_fabric import GroupFabric
from scaleup.tune.rules import Candidate

__all__ = ["Terms", "terms"]


def _tree_loads(
    fabric: GroupFabric, trees: list[tuple[list[int], float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-rank and per-node bytes out of an all_reduce up-and-down ``trees`` (parent arrays
    over the ranks, each with the bytes it carries): a rank sends its piece to its parent (the
    reduction) and to each child (the broadcast); equally it receives one per tree edge, so the
    loads in and out are equal."""
    rank = np.zeros(fabric.nranks)
    node = np.zeros(fabric.n_nodes)
    for parents, piece in trees:
        par = np.asarray(parents, dtype=np.int64)
        child = np.flatnonzero(par >= 0)
        deg = np.bincount(child, minlength=fabric.nranks) + np.bincount(
            par[child], minlength=fabric.nranks
        )
        rank += deg * piece
        nc, npar = fabric.node_of_rank[child], fabric.node_of_rank[par[child]]
        x = nc != npar
        node += piece * (
            np.bincount(nc[x], minlength=fabric.n_nodes)
            + np.bincount(npar[x], minlength=fabric.n_nodes)
        )
    return rank, node


def _depth(parents: Sequence[int]) -> int:
    """Edges on the longest leaf-to-root path of a tree given by its parent array (every rank
    walks up one level per round, all at once)."""
    par = np.asarray(parents, dtype=np.int64)
    cur = np.flatnonzero(par >= 0)
    depth = 0
    while len(cur):
        depth += 1
        cur = par[cur]
        cur = cur[par[cur] >= 0]
    return depth


@dataclass
class Terms:
    """Per-rank / per-server bytes that must cross (out, in), total thread-block bytes and tags,
    and the dependent chain; each None or 0 where not modelled."""

    rank_out: np.ndarray | float = 0.0
    rank_in: np.ndarray | float = 0.0
    node_out: np.ndarray | float = 0.0
    node_in: np.ndarray | float = 0.0
    nvls_out: float = 0.0  # per rank, on its NVLS switch links, x 1/NVLS efficiency
    nvls_in: float = 0.0
    fabric_bytes: float = 0.0
    tags: int = 0
    chain: int = 0  # dependent p2p ops
    switch_chain: int = 0  # dependent switch reductions
    chain_bytes: float = 0.0  # bytes each chain op moves when the algorithm is not pipelined
    chain_piece: float = 0.0  # bytes each chain op moves before the pipeline's chunk split
    any_chain: int = 0  # dependent ops that may be either
    switch_only: bool = False  # every fabric op is a switch reduction (nvls)


def _whole_blocks(fabric: GroupFabric, g: int) -> bool:
    """The ranks form servers of ``g`` consecutive ranks, one block per server."""
    n = fabric.nranks
    if g <= 0 or n % g:
        return False
    blocks = fabric.node_of_rank.reshape(n // g, g)
    return bool((blocks == blocks[:, :1]).all() and len(set(blocks[:, 0].tolist())) == n // g)


def _generic(collective: str, fabric: GroupFabric, s: float, root: int) -> Terms:
    """The collective's algorithm-independent minimum: what must leave and enter each rank and
    server whatever the algorithm (every output element depends on other ranks' inputs)."""
    n, k = fabric.nranks, fabric.n_nodes
    node = fabric.node_of_rank
    m_v = np.bincount(node, minlength=k).astype(np.float64)  # ranks per server
    t = Terms(any_chain=1)
    if collective == "all_reduce":
        t.rank_out = t.rank_in = s
        t.node_out = t.node_in = s if k > 1 else 0.0
    elif collective == "reduce_scatter":
        t.rank_out, t.rank_in = (n - 1) / n * s, s / n
        t.node_out, t.node_in = (n - m_v) / n * s, m_v / n * s
    elif collective == "all_gather":
        t.rank_out, t.rank_in = s / n, (n - 1) / n * s
        t.node_out, t.node_in = m_v / n * s, (n - m_v) / n * s
    elif collective == "all_to_all":
        t.rank_out = t.rank_in = (n - 1) / n * s
        t.node_out = t.node_in = m_v * (n - m_v) / n * s
    elif collective in ("broadcast", "reduce"):
        one = np.zeros(n)
        one[root] = s
        others = np.where(np.arange(n) == root, 0.0, s)
        at_root = np.bincount(node, weights=one, minlength=k)
        not_root = np.where(at_root > 0, 0.0, s)
        sender, receiver = (one, others) if collective == "broadcast" else (others, one)
        t.rank_out, t.rank_in = sender, receiver
        t.node_out, t.node_in = (
            (at_root, not_root) if collective == "broadcast" else (not_root, at_root)
        )
    return t


def _nvls_inflate(fabric: GroupFabric) -> float:
    """1/NVLS efficiency of the group's part (1.0 for mixed parts: the smallest, >= 1)."""
    if len(fabric.archs) > 1:
        return 1.0
    arch = fabric.archs[0] if fabric.archs else "default"
    return 1.0 / P.NVLS_EFFICIENCY.get(
        P.ARCH_ALIASES.get(arch, "default"), P.NVLS_EFFICIENCY["default"]
    )


def _ring_all_reduce(
    cand: Candidate, fabric: GroupFabric, params: Mapping[str, Any], s: float, root: int
) -> Terms:
    """A ring all_reduce: 2(n-1)/n of the message over every ring edge, per channel's order."""
    n, ch = fabric.nranks, cand.channels
    orders = params.get("orders") or [list(range(n))] * ch
    per_edge = 2 * (n - 1) / n * s / ch
    node = fabric.node_of_rank
    node_out = np.zeros(fabric.n_nodes)
    node_in = np.zeros(fabric.n_nodes)
    for order in orders:
        a = node[np.asarray(order, dtype=np.int64)]
        b = np.roll(a, -1)
        x = a != b
        node_out += per_edge * np.bincount(a[x], minlength=fabric.n_nodes)
        node_in += per_edge * np.bincount(b[x], minlength=fabric.n_nodes)
    return Terms(
        2 * (n - 1) / n * s, 2 * (n - 1) / n * s, node_out, node_in,
        fabric_bytes=2 * (n - 1) * s, tags=ch, chain=2 * (n - 1), chain_bytes=s / (n * ch),
    )  # fmt: skip


def _tree_all_reduce(
    cand: Candidate, fabric: GroupFabric, params: Mapping[str, Any], s: float, root: int
) -> Terms:
    """A double-binary-tree all_reduce: each channel's half message up and down its tree."""
    n, ch = fabric.nranks, cand.channels
    given = params.get("parents")
    pairs = given if given else [list(dtree_parents(n))]
    lanes = [(pairs[k % len(pairs)][i], s / (2 * ch)) for k in range(ch) for i in (0, 1)]
    rank, node = _tree_loads(fabric, lanes)
    depth = max(_depth(p) for pair in pairs for p in pair)
    return Terms(rank, rank, node, node, fabric_bytes=2 * (n - 1) * s, tags=2 * ch,
                  chain=2 * depth, chain_piece=s / (2 * ch))  # fmt: skip


def _nvls_all_reduce(
    cand: Candidate, fabric: GroupFabric, params: Mapping[str, Any], s: float, root: int
) -> Terms:
    """An NVLS all_reduce: every rank's links to its switches carry the message up and down."""
    n = fabric.nranks
    t = _generic("all_reduce", fabric, s, root)
    t.nvls_out = t.nvls_in = s * (1 + 1 / n) * _nvls_inflate(fabric)
    t.fabric_bytes, t.tags, t.any_chain, t.switch_chain = s, cand.channels, 0, 1
    t.switch_only = True
    return t


def _servers(fabric: GroupFabric, g: int, *, whole: bool) -> int:
    """How many blocks of ``g`` consecutive ranks the group splits into (0: it does not; with
    ``whole``, also 0 unless each block is exactly one server's ranks)."""
    n = fabric.nranks
    if g <= 0 or n % g or (whole and not _whole_blocks(fabric, g)):
        return 0
    return n // g


def _hierarchical_all_reduce(
    cand: Candidate, fabric: GroupFabric, params: Mapping[str, Any], s: float, root: int
) -> Terms:
    """A hierarchical all_reduce: rings inside servers of ``ranks_per_node``, then across."""
    ch = cand.channels
    generic = _generic("all_reduce", fabric, s, root)
    g = int(params.get("ranks_per_node", 8))
    m = _servers(fabric, g, whole=False)
    if not m:
        return generic
    per_rank = 2 * (g - 1) / g * s + 2 * (m - 1) / m * s / g
    t = Terms(per_rank, per_rank, fabric_bytes=2 * m * (g - 1) * s + 2 * (m - 1) * s,
               tags=ch, chain=2 * (g - 1) + 2 * (m - 1))  # fmt: skip
    if _whole_blocks(fabric, g):
        t.node_out = t.node_in = 2 * (m - 1) / m * s
    else:
        t.node_out, t.node_in = generic.node_out, generic.node_in
    return t


def _nvls_tree_all_reduce(
    cand: Candidate, fabric: GroupFabric, params: Mapping[str, Any], s: float, root: int
) -> Terms:
    """An NVLS-Tree all_reduce: NVLS inside each server, double binary trees across them."""
    ch = cand.channels
    generic = _generic("all_reduce", fabric, s, root)
    g = int(params.get("ranks_per_node") or fabric.nranks)
    m = _servers(fabric, g, whole=True)
    if not m:
        return generic
    dtrees = dtree_parents(m)  # channel c rides tree c % 2
    per_tree = [sum(1 for c in range(ch) if c % 2 == i) * s / ch for i in (0, 1)]
    server = np.zeros(m)
    for i, parents in enumerate(dtrees):
        par = np.asarray(parents, dtype=np.int64)
        child = np.flatnonzero(par >= 0)
        deg = np.bincount(child, minlength=m) + np.bincount(par[child], minlength=m)
        server += deg * per_tree[i]
    node = np.zeros(fabric.n_nodes)
    node[fabric.node_of_rank[::g]] = server  # block b is server b's ranks
    depth = max(_depth(p) for p in dtrees)
    # tags: channel c's in-switch phases on 2c, its tree leg on 2c + 1 (the builder)
    t = Terms(generic.rank_out, generic.rank_in, node, node, tags=2 * ch,
               fabric_bytes=2 * m * s + 2 * (m - 1) * s, chain=2 * depth,
               switch_chain=1)  # fmt: skip  # its two in-switch phases share one NVLS step
    t.nvls_out = t.nvls_in = s * _nvls_inflate(fabric)
    return t


#: The all_reduce algorithms whose structure the bound models, by name.
_ALL_REDUCE_TERMS: dict[str, Callable[..., Terms]] = {
    "ring": _ring_all_reduce,
    "tree": _tree_all_reduce,
    "nvls": _nvls_all_reduce,
    "hierarchical": _hierarchical_all_reduce,
    "nvls_tree": _nvls_tree_all_reduce,
}


def terms(
    collective: str,
    cand: Candidate,
    fabric: GroupFabric,
    params: Mapping[str, Any],
    s: float,
    root: int,
) -> Terms:
    """What ``cand`` must move and wait for (see the module): its algorithm's structure where
    modelled, else the collective's algorithm-independent minimum."""
    alg = cand.algorithm
    if collective == "all_reduce" and alg in _ALL_REDUCE_TERMS:
        return _ALL_REDUCE_TERMS[alg](cand, fabric, params, s, root)
    t = _generic(collective, fabric, s, root)
    if collective in ("reduce_scatter", "all_gather") and alg == "ring":
        n, ch = fabric.nranks, cand.channels
        t.fabric_bytes, t.tags = (n - 1) * s, ch
        t.chain, t.chain_bytes, t.any_chain = n - 1, s / (n * ch), 0
    return t
