"""Builder parameters the tuner fills from the channel search: tree ``parents`` and the
hierarchical algorithm's ``local_orders``; every structure replays to the right answer."""

from __future__ import annotations

import pytest

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import UsageError

#: Two servers of 3 ranks: chains 0-1-2 and 3-4-5 (heads 0 and 3), one tree per direction.
CHAINS = [[[-1, 0, 1, 0, 3, 4], [3, 0, 1, -1, 3, 4]], [[-1, 2, 0, 5, 3, 0], [5, 2, 0, 5, 3, -1]]]


@pytest.mark.parametrize("op", ["all_reduce", "broadcast", "reduce"])
@pytest.mark.parametrize("root", [0, 4])
def test_tree_with_given_parents(op: str, root: int) -> None:
    spec = CollectiveSpec(op, nranks=6, count=997, root=root if op != "all_reduce" else 0)
    s = build_schedule("tree", spec, channels=3, chunks=2, parents=CHAINS)
    verify(s, "int32")
    edges = {frozenset((a, b)) for pair in CHAINS for t in pair for a, b in enumerate(t) if b >= 0}
    moved = {frozenset((op_.srcs[0].rank, op_.dsts[0].rank)) for op_ in s.ops if op_.srcs}
    assert {e for e in moved if len(e) == 2} <= edges  # re-rooting keeps the trees' edges


def test_tree_parents_are_checked() -> None:
    spec = CollectiveSpec("all_reduce", nranks=3, count=10)
    for bad in ([[[-1, 0, 5], [-1, 0, 1]]], [[[-1, -1, 0], [-1, 0, 1]]], [[[1, 2, 0], [-1, 0, 1]]]):
        with pytest.raises(UsageError):
            build_schedule("tree", spec, parents=bad)


@pytest.mark.parametrize("chunks", [1, 3])
def test_hierarchical_local_orders(chunks: int) -> None:
    spec = CollectiveSpec("all_reduce", nranks=8, count=1001)
    orders = [[0, 2, 3, 1], [3, 2, 1, 0]]
    s = build_schedule(
        "hierarchical", spec, ranks_per_node=4, channels=3, chunks=chunks, local_orders=orders
    )
    verify(s, "int32")
    intra = {
        (op.srcs[0].rank % 4, op.dsts[0].rank % 4)
        for op in s.ops
        if op.srcs
        and op.srcs[0].rank // 4 == op.dsts[0].rank // 4
        and op.srcs[0].rank != op.dsts[0].rank
    }
    ring_arcs = {(o[i], o[(i + 1) % 4]) for o in orders for i in range(4)}
    assert intra <= ring_arcs
    with pytest.raises(UsageError):
        build_schedule("hierarchical", spec, ranks_per_node=4, local_orders=[[0, 1, 2]])
