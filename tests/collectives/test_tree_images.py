"""The double binary tree's tree 1 is built as tree 0 moved by the map between them, op for op."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.tune.channel_plan import double_binary_tree


def _server_trees(m: int, g: int) -> list[list[int]]:
    """The channel search's shape: a chain per server of ``g`` ranks, its head under the head
    of its parent server in NCCL's double binary tree over the ``m`` servers."""
    trees = []
    for over in double_binary_tree(m):
        parents = [-1] * (m * g)
        for s, up in enumerate(over):
            parents[s * g] = -1 if up < 0 else up * g
            for j in range(1, g):
                parents[s * g + j] = s * g + j - 1
        trees.append(parents)
    return trees


def _moved(t, phi: np.ndarray) -> None:
    """Channel tag 1 (tree 1) holds tag 0's ops (tree 0) with every rank moved by ``phi``."""
    zero, one = np.flatnonzero(t.channel == 0), np.flatnonzero(t.channel == 1)
    assert len(zero) == len(one)
    assert np.array_equal(t.kind[zero], t.kind[one])
    assert np.array_equal(phi[t.rank[zero]], t.rank[one])
    for ptr, rank in ((t.src_ptr, t.src_rank), (t.dst_ptr, t.dst_rank)):
        a = np.concatenate([rank[ptr[i] : ptr[i + 1]] for i in zero])
        b = np.concatenate([rank[ptr[i] : ptr[i + 1]] for i in one])
        assert np.array_equal(phi[a], b)


@pytest.mark.parametrize("n", [6, 7, 8, 12, 13])
def test_nccl_trees_over_ranks(n: int) -> None:
    """NCCL's trees over the ranks: tree 1 is the mirror (n even) or the shift (n odd)."""
    rank = np.arange(n)
    phi = n - 1 - rank if n % 2 == 0 else (rank + 1) % n
    schedule = build_schedule("tree", CollectiveSpec("all_reduce", n, 4 * n))
    _moved(schedule.table, phi)
    verify(schedule)


@pytest.mark.parametrize(("m", "g"), [(2, 4), (3, 2), (4, 3), (5, 2)])
def test_chains_under_a_tree_of_servers(m: int, g: int) -> None:
    """Given trees (chains in servers under a double binary tree of servers): tree 1 is tree 0
    with the servers reversed (m even) or shifted by one (m odd), each server's ranks in place,
    so a head reduces the images of tree 0's children in tree 0's order (by rank, a server
    before or after its own chain child would swap)."""
    rank = np.arange(m * g)
    block, local = rank // g, rank % g
    phi = ((m - 1 - block) if m % 2 == 0 else (block + 1) % m) * g + local
    trees = _server_trees(m, g)
    assert np.array_equal(np.asarray(trees[1])[phi], [-1 if p < 0 else phi[p] for p in trees[0]])
    for collective in ("all_reduce",):
        spec = CollectiveSpec(collective, m * g, 8 * m * g)
        schedule = build_schedule("tree", spec, parents=[trees], chunks=2)
        _moved(schedule.table, phi)
        verify(schedule)


def test_trees_that_are_not_images_are_built_alone() -> None:
    """A tree 1 no candidate map takes tree 0 onto (here tree 0 itself re-rooted) is built from
    its own parents, as before; the schedule still verifies."""
    tree0, _ = dtree_parents(6)
    other = [1, -1, 1, 2, 3, 4]
    schedule = build_schedule("tree", CollectiveSpec("all_reduce", 6, 48), parents=[[tree0, other]])
    verify(schedule)
