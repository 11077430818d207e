"""Traffic accounting against textbook volumes (S = buffer bytes; counts divisible by n)."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec

ITEM = 4  # float32


def _sent(name: str, collective: str, n: int, count: int, **params) -> np.ndarray:
    return build_schedule(
        name, CollectiveSpec(collective, nranks=n, count=count), **params
    ).bytes_sent_per_rank(ITEM)


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_ring_all_reduce_bus_factor(n: int) -> None:
    """Ring all_reduce: every rank sends 2(n-1)/n x S (nccl-tests' all_reduce bus factor)."""
    count = 48 * n
    size = count * ITEM
    sent = _sent("ring", "all_reduce", n, count, chunks=2, channels=2)
    assert np.all(sent == 2 * (n - 1) * size // n)
    received = build_schedule(
        "ring", CollectiveSpec("all_reduce", n, count)
    ).bytes_received_per_rank(ITEM)
    assert np.all(received == 2 * (n - 1) * size // n)


@pytest.mark.parametrize("n", [2, 5, 8])
def test_ring_all_gather_and_reduce_scatter(n: int) -> None:
    """Ring all_gather sends (n-1)/n x S (S = output bytes); reduce_scatter (n-1)/n x input."""
    count = 12 * n
    assert np.all(_sent("ring", "all_gather", n, count) == (n - 1) * count * ITEM // n)
    assert np.all(
        _sent("ring", "reduce_scatter", n, count, bidirectional=True) == (n - 1) * count * ITEM // n
    )


def test_ring_uneven_total() -> None:
    """Uneven counts: the per-rank volumes differ by a block, the total is still 2(n-1) x S."""
    n, count = 5, 103
    assert _sent("ring", "all_reduce", n, count).sum() == 2 * (n - 1) * count * ITEM


@pytest.mark.parametrize("n", [4, 6])
def test_direct_volumes(n: int) -> None:
    """Direct one-shot: each rank's S is read by n-1 peers ((n-1) x S); two-shot: 2(n-1)/n x S;
    all_to_all pairwise: (n-1)/n x S; broadcast: the root sends (n-1) x S, nobody else sends."""
    count = 24 * n
    size = count * ITEM
    assert np.all(_sent("direct", "all_reduce", n, count, shot=1) == (n - 1) * size)
    assert np.all(_sent("direct", "all_reduce", n, count, shot=2) == 2 * (n - 1) * size // n)
    assert np.all(_sent("direct", "all_to_all", n, count) == (n - 1) * size // n)
    bcast = _sent("direct", "broadcast", n, count)
    assert bcast[0] == (n - 1) * size
    assert bcast[1:].sum() == 0


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_recursive_volumes(n: int) -> None:
    """Rabenseifner on a power of two: halving sends S/2 + S/4 + ... and doubling the same,
    2(n-1)/n x S per rank; the non-power-of-two fold adds S from each folded rank."""
    count = 16 * n
    assert np.all(_sent("recursive", "all_reduce", n, count) == 2 * (n - 1) * count * ITEM // n)
    sent = _sent("recursive", "all_reduce", 6, 64)
    assert sent[0] == 64 * ITEM  # rank 0 only folds in its buffer


@pytest.mark.parametrize("n", [3, 8, 13])
def test_tree_volumes(n: int) -> None:
    """Double binary tree all_reduce: in each tree every non-root rank sends its half up once and
    receives it down once, so the total sent is 2(n-1) x S, as for the ring."""
    count = 8 * n
    assert _sent("tree", "all_reduce", n, count, chunks=2).sum() == 2 * (n - 1) * count * ITEM
    assert _sent("tree", "broadcast", n, count).sum() == (n - 1) * count * ITEM


@pytest.mark.parametrize("n", [2, 8])
def test_nvls_volumes(n: int) -> None:
    """NVLS all_reduce: each rank sends S to the switch and receives S (reduced, multicast);
    all_gather: each rank sends its block once (S/n) and receives S."""
    count = 16 * n
    size = count * ITEM
    s = build_schedule("nvls", CollectiveSpec("all_reduce", n, count), chunks=2)
    assert np.all(s.bytes_sent_per_rank(ITEM) == size)
    assert np.all(s.bytes_received_per_rank(ITEM) == size)
    ag = build_schedule("nvls", CollectiveSpec("all_gather", n, count))
    assert np.all(ag.bytes_sent_per_rank(ITEM) == size // n)
    assert np.all(ag.bytes_received_per_rank(ITEM) == size)


def test_hierarchical_volumes() -> None:
    """Hierarchical (g ranks per node, m nodes): 2(g-1)/g x S inside the node plus
    2(m-1)/m x S/g across nodes, per rank."""
    g, m = 4, 3
    n, count = g * m, 48 * g * m
    size = count * ITEM
    expected = 2 * (g - 1) * size // g + 2 * (m - 1) * (size // g) // m
    assert np.all(_sent("hierarchical", "all_reduce", n, count, ranks_per_node=g) == expected)


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_hierarchical_all_gather_reduce_scatter_volumes(collective: str) -> None:
    """Hierarchical all_gather / reduce_scatter (g ranks per node, m nodes, S = the n-block
    buffer): (n-1)/n x S per rank in all, of which only (m-1)/n x S crosses nodes."""
    g, m = 4, 3
    n, count = g * m, 24 * g * m
    size = count * ITEM
    s = build_schedule(
        "hierarchical", CollectiveSpec(collective, nranks=n, count=count), ranks_per_node=g,
        channels=2,
    )  # fmt: skip
    assert np.all(s.bytes_sent_per_rank(ITEM) == (n - 1) * size // n)
    assert np.all(s.bytes_received_per_rank(ITEM) == (n - 1) * size // n)
    t = s.table
    src, dst = t.src_rank[t.src_ptr[:-1]], t.dst_rank[t.dst_ptr[:-1]]
    cross = src // g != dst // g
    inter = np.bincount(src[cross], weights=t.count[cross], minlength=n) * ITEM
    assert np.all(inter == (m - 1) * size // n)
