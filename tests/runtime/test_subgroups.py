"""Subgroups (torch's ``new_group(ranks)``): collectives among members only, checked against
numpy; disjoint groups at the same time; world collectives interleaved; non-members and bad rank
lists refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup import runtime as rt
from scaleup.collectives.spec import reduce_arrays
from scaleup.errors import RankFailed, UsageError
from scaleup.runtime.subgroup import _bounds, check_ranks

SIZES = (1, 7, 1000, 1 << 16)
DTYPES = ("float32", "float64", "int32")
OPS = ("sum", "prod", "min", "max", "avg")


def _data(rank: int, size: int, dtype: str, salt: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: small values, so an int32 product over 4 ranks cannot overflow."""
    rng = np.random.default_rng([rank, size, salt, DTYPES.index(dtype)])
    if dtype == "int32":
        return rng.integers(1, 4, size).astype(np.int32)
    return rng.uniform(0.5, 2.0, size).astype(dtype)


def _expected(ranks: list[int], size: int, dtype: str, op: str, salt: int = 0) -> np.ndarray:
    arrays = [_data(r, size, dtype, salt) for r in ranks]
    result = reduce_arrays(arrays, "sum" if op == "avg" else op)
    return result / len(ranks) if op == "avg" else result


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if np.issubdtype(got.dtype, np.integer):
        return bool(np.array_equal(got, want))
    rtol = 1e-5 if got.dtype == np.float32 else 1e-12
    return bool(np.allclose(got, want, rtol=rtol))


def _check_all_reduce(group: rt.SubGroup, salt: int, *, world: bool) -> list[str]:
    """Every op, dtype and size on ``group``; with a world all_reduce after each if ``world``
    (every rank must then run the same number of them)."""
    bad = []
    me = rt.get_rank()
    for dtype in DTYPES:
        for size in SIZES:
            for op in OPS:
                if op == "avg" and dtype == "int32":
                    continue
                x = _data(me, size, dtype, salt)
                rt.all_reduce(x, op=op, group=group)
                if not _same(x, _expected(list(group.ranks), size, dtype, op, salt)):
                    bad.append(f"all_reduce {group.ranks} {op} {dtype} {size}")
                if not world:
                    continue
                w = np.full(3, me, np.int64)
                rt.all_reduce(w)  # the world, interleaved
                if int(w[0]) != sum(range(rt.get_world_size())):
                    bad.append("world all_reduce")
    return bad


def _check_others(group: rt.SubGroup) -> list[str]:
    """broadcast, reduce, all_gather (both forms), reduce_scatter, all_to_all, barrier."""
    bad = []
    me, ranks, n = rt.get_rank(), list(group.ranks), group.world_size
    for dtype in DTYPES:
        for size in SIZES:
            root = ranks[-1]
            x = _data(me, size, dtype)
            rt.broadcast(x, src=root, group=group)
            if not np.array_equal(x, _data(root, size, dtype)):
                bad.append(f"broadcast {ranks} {dtype} {size}")
            x = _data(me, size, dtype)
            rt.reduce(x, dst=ranks[0], op="max", group=group)
            want = (
                _expected(ranks, size, dtype, "max") if me == ranks[0] else _data(me, size, dtype)
            )
            if not np.array_equal(x, want):
                bad.append(f"reduce {ranks} {dtype} {size}")
            flat = np.zeros(n * size, dtype)
            rt.all_gather(flat, _data(me, size, dtype), group=group)
            listed = [np.zeros(size, dtype) for _ in ranks]
            rt.all_gather(listed, _data(me, size, dtype), group=group)
            gathered = np.concatenate([_data(r, size, dtype) for r in ranks])
            if not (
                np.array_equal(flat, gathered) and np.array_equal(np.concatenate(listed), gathered)
            ):
                bad.append(f"all_gather {ranks} {dtype} {size}")
            out = np.zeros(size, dtype)
            rt.reduce_scatter(out, _data(me, n * size, dtype), group=group)
            block = _expected(ranks, n * size, dtype, "sum")[
                group.rank * size : (group.rank + 1) * size
            ]
            if not _same(out, block):
                bad.append(f"reduce_scatter {ranks} {dtype} {size}")
            a2a = np.zeros(n * size, dtype)
            rt.all_to_all(a2a, _data(me, n * size, dtype), group=group)
            col = np.concatenate(
                [
                    _data(r, n * size, dtype)[group.rank * size : (group.rank + 1) * size]
                    for r in ranks
                ]
            )
            if not np.array_equal(a2a, col):
                bad.append(f"all_to_all {ranks} {dtype} {size}")
    rt.barrier(group=group)
    return bad


def _four_ranks() -> dict[str, object]:
    rt.init_process_group()
    me = rt.get_rank()
    pair = [rt.new_group([0, 1]), rt.new_group([2, 3])]
    trio = rt.new_group([3, 2, 0])  # sorted: group ranks 0, 1, 2 are 0, 2, 3
    mine = pair[me // 2]
    bad = _check_all_reduce(
        mine, salt=me // 2, world=True
    )  # both pairs at the same time, different data
    # asynchronous: the pair's and the trio's collectives in flight together with the world's
    x = _data(me, 1 << 16, "float64", 9)
    work = rt.all_reduce(x, group=mine, async_op=True)
    y = _data(me, 1000, "float32", 9)
    trio_work = rt.all_reduce(y, group=trio, async_op=True) if me != 1 else None
    w = np.ones(5)
    rt.all_reduce(w)
    assert work is not None
    work.wait()
    if trio_work is not None:
        trio_work.wait()
        if not _same(y, _expected([0, 2, 3], 1000, "float32", "sum", 9)):
            bad.append("async trio all_reduce")
    if not _same(x, _expected(list(mine.ranks), 1 << 16, "float64", "sum", 9)) or w[0] != 4:
        bad.append("async pair all_reduce")
    if me != 1:
        bad += _check_all_reduce(trio, salt=5, world=False)
        bad += _check_others(trio)
    bad += _check_others(mine)
    facts = {
        "bad": bad,
        "trio": (rt.get_rank(trio), rt.get_world_size(trio)),
        "ranks": rt.get_process_group_ranks(trio),
        "global": [rt.get_global_rank(trio, g) for g in range(3)],
        "group_rank": rt.get_group_rank(trio, 3),
    }
    if me == 1:
        try:
            rt.all_reduce(np.ones(2), group=trio)
        except UsageError as error:
            facts["refused"] = str(error)
    rt.destroy_process_group()
    return facts


@pytest.mark.parametrize("transport", ["shm", "pipe", "local"])
def test_subgroup_collectives_match_numpy(transport: str) -> None:
    results = rt.launch(_four_ranks, 4, transport=transport, timeout_s=60)
    for rank, facts in enumerate(results):
        assert facts["bad"] == [], f"rank {rank}"
        assert facts["ranks"] == [0, 2, 3]
        assert facts["global"] == [0, 2, 3]
        assert facts["group_rank"] == 2
    assert [f["trio"] for f in results] == [(0, 3), (-1, -1), (1, 3), (2, 3)]
    assert str(results[1]["refused"]).startswith(
        "all_reduce: rank 1 is not a member of new_group([0, 2, 3])"
    )


def _bad_rank_lists() -> list[str]:
    rt.init()
    messages = []
    for ranks in ([0, 0], [0, 4], [-1, 1], [], [0.5]):
        try:
            rt.new_group(ranks)
        except UsageError as error:
            messages.append(str(error))
    return messages


def test_bad_rank_lists_name_new_group_and_the_rule() -> None:
    messages = rt.launch(_bad_rank_lists, 2, transport="local", timeout_s=10)[0]
    assert len(messages) == 5
    assert all(m.startswith("new_group: ") for m in messages)
    assert all("ranks must be distinct ranks of the world, 0..1" in m for m in messages)
    assert "0 appears twice" in messages[0]
    assert "4 is out of range" in messages[1]


def _mismatched() -> None:
    rt.init()
    rt.new_group([0, 1] if rt.rank() == 0 else [1, 2])


def test_ranks_that_disagree_on_the_list_are_refused() -> None:
    with pytest.raises(RankFailed, match="every rank must call new_group with the same ranks"):
        rt.launch(_mismatched, 3, transport="local", timeout_s=10)


def _misuse() -> list[str]:
    rt.init_process_group()
    group = rt.new_group([0, 1])
    messages = []
    if rt.rank() == 0:
        for call in (
            lambda: rt.broadcast(np.ones(2), src=2, group=group),
            lambda: rt.all_reduce(np.ones(2), group=group, algo="ring"),
            lambda: rt.get_group_rank(group, 2),
            lambda: rt.all_reduce(np.ones(2), group="nope"),
        ):
            try:
                call()
            except UsageError as error:
                messages.append(str(error))
    rt.destroy_process_group(group)
    try:
        rt.barrier(group=group)
    except UsageError as error:
        messages.append(str(error))
    rt.destroy_process_group()
    return messages


def test_misuse_of_a_subgroup_says_what_is_wrong() -> None:
    messages = rt.launch(_misuse, 3, transport="local", timeout_s=10)[0]
    assert "src=2 is not a member of new_group([0, 1])" in messages[0]
    assert "all_reduce(algo='ring') on a subgroup" in messages[1]
    assert "global_rank=2 is not a member" in messages[2]
    assert "group='nope'" in messages[3]
    assert "was destroyed" in messages[4]


def _whole_world() -> bool:
    rt.init()
    return rt.new_group() is rt.group() and rt.new_group([1, 0]) is rt.group()


def test_whole_world_is_the_world_group() -> None:
    assert all(rt.launch(_whole_world, 2, transport="local", timeout_s=10))


@given(st.lists(st.integers(-2, 6), max_size=6))
def test_check_ranks_accepts_exactly_distinct_ranks_of_the_world(ranks: list[int]) -> None:
    ok = bool(ranks) and len(set(ranks)) == len(ranks) and all(0 <= r < 4 for r in ranks)
    if ok:
        assert check_ranks(ranks, 4) == tuple(sorted(ranks))
    else:
        with pytest.raises(UsageError, match="new_group"):
            check_ranks(ranks, 4)


@given(st.integers(0, 10_000), st.integers(1, 9))
def test_ring_blocks_cover_the_array_evenly(count: int, n: int) -> None:
    edges = _bounds(count, n)
    sizes = np.diff(edges)
    assert (edges[0], edges[-1]) == (0, count)
    assert sizes.max() - sizes.min() <= 1


def _random_case(ranks: list[int], size: int, dtype: str, op: str) -> bool:
    rt.init()
    group = rt.new_group(ranks)
    if rt.rank() not in ranks:
        return True
    x = _data(rt.rank(), size, dtype, 3)
    rt.all_reduce(x, op=op, group=group)
    return _same(x, _expected(sorted(ranks), size, dtype, op, 3))


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
    st.sampled_from(SIZES + (3, 130_001)),
    st.sampled_from(DTYPES),
    st.sampled_from(OPS[:4]),
)
def test_random_subsets_all_reduce_like_numpy(ranks: list[int], size: int, dtype: str, op: str):
    assert all(rt.launch(_random_case, 4, ranks, size, dtype, op, transport="shm", timeout_s=60))
