"""NVLS-Tree (``nvls_tree``): verified for every world size it accepts, and its traffic."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup.collectives.algorithms import build_schedule, supports
from scaleup.collectives.schedule import Buffer, OpKind
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import UnsupportedCollective, UsageError


def _layouts(n: int) -> list[tuple[int, tuple[int, ...] | None]]:
    """Every server size g dividing n, with every local rank a head (None) or a few of them."""
    out: list[tuple[int, tuple[int, ...] | None]] = []
    for g in (d for d in range(1, n + 1) if n % d == 0):
        out += [(g, None), (g, (g - 1,))]
        if g > 2:
            out.append((g, (g - 1, 0)))
    return out


@pytest.mark.parametrize("n", range(1, 17))
def test_every_accepted_world_size_verifies(n: int) -> None:
    """World sizes 1..16, every ranks_per_node dividing them, heads (all, one, two), lanes
    (channels x chunks) 1x1 and 2x3, counts empty, tiny, uneven; int32 out of place, float16
    in place (the head's output is its input there)."""
    for g, heads in _layouts(n):
        for channels, chunks in ((1, 1), (2, 3)):
            for count in (0, 5, 6 * n + 1):
                spec = CollectiveSpec("all_reduce", nranks=n, count=count)
                s = build_schedule(
                    "nvls_tree", spec, ranks_per_node=g, heads=heads, channels=channels,
                    chunks=chunks,
                )  # fmt: skip
                verify(s, "int32")
                if count:
                    verify(s, "float16", in_place=True)


def test_unsupported_sizes_and_bad_params_are_refused() -> None:
    assert supports("nvls_tree", "all_reduce", 12)  # default: one server of 12
    assert supports("nvls_tree", "all_reduce", 12, ranks_per_node=4)
    assert not supports("nvls_tree", "all_reduce", 12, ranks_per_node=5)
    assert not supports("nvls_tree", "all_reduce", 8, ranks_per_node=4, heads=[4])
    assert not supports("nvls_tree", "all_gather", 8)  # NCCL's NVLS_TREE: all_reduce only
    with pytest.raises(UnsupportedCollective, match="not a multiple"):
        build_schedule("nvls_tree", CollectiveSpec("all_reduce", 6, 8), ranks_per_node=4)
    for heads in ([], [1, 1], "01", [-1]):
        with pytest.raises(UsageError):
            build_schedule("nvls_tree", CollectiveSpec("all_reduce", 4, 8), heads=heads)


@pytest.mark.parametrize(("m", "g", "heads"), [(2, 8, None), (4, 4, (0, 2)), (3, 2, None)])
def test_traffic(m: int, g: int, heads: tuple[int, ...] | None) -> None:
    """Each rank puts its whole buffer into its switch and gets the sum back from it; across
    servers only heads talk, a head to the head of its own slice (one rail), and every tree edge
    carries every slice once up and once down: 2 (m - 1) x count elements cross, in all."""
    n, count = m * g, 2 * 3 * 4 * m * g
    s = build_schedule(
        "nvls_tree", CollectiveSpec("all_reduce", n, count), ranks_per_node=g, heads=heads,
        channels=2, chunks=2,
    )  # fmt: skip
    t = s.table
    src_in = np.zeros(n, dtype=np.int64)
    dst_in = np.zeros(n, dtype=np.int64)
    crossing = 0
    for op in s.ops:
        if op.kind is OpKind.SWITCH_REDUCE and len(op.srcs) == g:
            for c in op.srcs:
                src_in[c.rank] += c.count
        elif op.kind is OpKind.SWITCH_REDUCE:
            for c in op.dsts:
                dst_in[c.rank] += c.count
        else:
            (a,), (b,) = op.srcs, op.dsts
            if a.rank == b.rank:  # a head folds a later child's landed sum into its own
                assert op.kind is OpKind.REDUCE
                assert a.buffer is Buffer.SCRATCH
                assert a.rank % g in (heads or range(g))
                continue
            assert a.rank // g != b.rank // g  # p2p only across servers
            assert a.rank % g == b.rank % g  # head to head of the same slice
            assert a.rank % g in (heads or range(g))
            crossing += op.count
    assert np.all(src_in == count)
    assert np.all(dst_in == count)
    assert crossing == 2 * (m - 1) * count
    # channel c: tag 2c for the in-switch phases and local folds, 2c + 1 for the tree leg
    assert set(np.unique(t.channel).tolist()) == ({0, 1, 2, 3} if m > 1 else {0, 2})
    for op, tag in zip(s.ops, t.channel.tolist(), strict=True):
        p2p = op.kind is not OpKind.SWITCH_REDUCE
        across = p2p and op.srcs[0].rank // g != op.dsts[0].rank // g
        assert tag % 2 == int(across)


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_tree1_is_tree0_moved_op_for_op(m: int) -> None:
    """Channel 1 (tree 1) repeats channel 0's ops (tree 0) in the same order with every server
    moved by NCCL's map between the trees: the mirror for an even server count, the shift by
    one for an odd one (``ncclGetDtree``), so a parent reduces its children in the images of
    tree 0's order and the mirror is an automorphism of the schedule."""
    g = 2
    spec = CollectiveSpec("all_reduce", m * g, m * g * 4)
    t = build_schedule("nvls_tree", spec, ranks_per_node=g, channels=2).table
    phi = (m - 1 - np.arange(m)) if m % 2 == 0 else (np.arange(m) + 1) % m
    lane = t.channel // 2  # tags 2c (in-switch) and 2c + 1 (tree leg) are channel c's
    zero, one = np.flatnonzero(lane == 0), np.flatnonzero(lane == 1)
    assert np.array_equal(t.channel[zero] % 2, t.channel[one] % 2)
    assert len(zero) == len(one)
    assert np.array_equal(t.kind[zero], t.kind[one])
    assert np.array_equal(phi[t.rank[zero] // g] * g + t.rank[zero] % g, t.rank[one])
    for ptr, rank in ((t.src_ptr, t.src_rank), (t.dst_ptr, t.dst_rank)):
        a = np.concatenate([rank[ptr[i] : ptr[i + 1]] for i in zero])
        b = np.concatenate([rank[ptr[i] : ptr[i + 1]] for i in one])
        assert np.array_equal(phi[a // g] * g + a % g, b)
