"""Every algorithm x collective x world sizes 1..16 x awkward counts x dtypes verifies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from scaleup.collectives.algorithms import ALGORITHMS, algorithms_for, build_schedule, supports
from scaleup.collectives.spec import COLLECTIVES, CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import UnsupportedCollective, UsageError
from strategies import CollectiveCase, collective_cases

SIZES = (1, 2, 3, 5, 8, 13, 16)


def _rpn(n: int) -> dict[str, int]:
    """A ranks_per_node that divides n and gives more than one node when it can."""
    return {"ranks_per_node": next((g for g in (4, 3, 2) if n % g == 0 and n > g), n)}


def _cases() -> list[tuple[str, str, int, int]]:
    cases = []
    for name, algorithm in ALGORITHMS.items():
        for collective in algorithm.collectives:
            for n in SIZES:
                for count in (0, 1, 13, 4 * n + 3):
                    cases.append((name, collective, n, count))
    return cases


@pytest.mark.parametrize(("name", "collective", "n", "count"), _cases())
def test_every_algorithm_verifies(name: str, collective: str, n: int, count: int) -> None:
    params = _rpn(n) if name in ("hierarchical", "nvls_tree") else {}
    spec = CollectiveSpec(collective, nranks=n, count=count, root=n // 2)
    schedule = build_schedule(name, spec, **params)
    report = verify(schedule, "int32")
    assert report.n_ops == schedule.n_ops
    assert schedule.algorithm == name


@settings(max_examples=300, deadline=None)
@given(collective_cases())
def test_property_every_case_verifies(case: CollectiveCase) -> None:
    schedule = build_schedule(case.algorithm, case.spec, **case.params)
    verify(schedule, case.dtype, seed=case.spec.count)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float16"])
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ring", {"chunks": 4, "channels": 2, "bidirectional": True}),
        ("tree", {"chunks": 3, "channels": 2}),
        ("recursive", {"chunks": 2}),
        ("direct", {"shot": 1}),
        ("direct", {"shot": 2, "chunks": 2}),
        ("nvls", {"chunks": 4}),
        ("hierarchical", {"ranks_per_node": 4, "chunks": 2}),
    ],
)
def test_pipelined_all_reduce(name: str, params: dict, dtype: str) -> None:
    spec = CollectiveSpec("all_reduce", nranks=12, count=1009)
    verify(build_schedule(name, spec, **params), dtype)


def test_ring_orders_are_channels() -> None:
    orders = [[0, 2, 4, 1, 3], [4, 3, 2, 1, 0], [1, 0, 3, 2, 4]]
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=5, count=97), orders=orders)
    assert s.n_channels == 3
    assert s.params["channels"] == 3
    verify(s, "int32")
    first = [op for op in s.ops if op.channel == 0 and op.kind.label == "reduce"][0]
    assert first.srcs[0].rank in orders[0]


def test_ring_all_reduce_steps() -> None:
    """Ring all_reduce has 2(n-1) steps, whatever chunks/channels."""
    for n in (2, 5, 8):
        s = build_schedule(
            "ring", CollectiveSpec("all_reduce", nranks=n, count=1000), chunks=3, channels=2
        )
        assert s.n_steps == 2 * (n - 1)


def test_channels_tag_ops() -> None:
    for name in ("ring", "direct", "nvls", "tree", "recursive", "hierarchical"):
        s = build_schedule(name, CollectiveSpec("all_reduce", nranks=8, count=4096), channels=2)
        assert s.n_channels == (4 if name == "tree" else 2), name


def test_registry_queries() -> None:
    assert set(ALGORITHMS) == {
        *("ring", "tree", "recursive", "direct", "allpairs", "nvls", "hierarchical", "nvls_tree"),
        "torus",
    }
    assert algorithms_for("all_to_all") == ["direct"]
    assert "tree" in algorithms_for("broadcast")
    for collective in COLLECTIVES:
        assert algorithms_for(collective)
    assert supports("ring", "all_reduce", 7)
    assert not supports("tree", "all_gather", 8)
    assert not supports("hierarchical", "all_reduce", 12)
    assert supports("hierarchical", "all_reduce", 12, ranks_per_node=4)
    for collective in ("all_gather", "reduce_scatter"):
        assert "hierarchical" in algorithms_for(collective)
        assert not supports("hierarchical", collective, 12)
        assert supports("hierarchical", collective, 12, ranks_per_node=4)


def test_unsupported_pair_is_one_clear_line() -> None:
    with pytest.raises(
        UnsupportedCollective,
        match="ring does not implement all_to_all; algorithms for all_to_all: direct",
    ):
        build_schedule("ring", CollectiveSpec("all_to_all", nranks=4, count=8))
    with pytest.raises(UnsupportedCollective, match="not a multiple of ranks_per_node=8"):
        build_schedule("hierarchical", CollectiveSpec("all_reduce", nranks=12, count=8))


def test_bad_params_name_the_param() -> None:
    spec = CollectiveSpec("all_reduce", nranks=4, count=8)
    with pytest.raises(UsageError, match="'shot'") as info:
        build_schedule("ring", spec, shot=2)
    assert info.value.source == "shot"
    with pytest.raises(UsageError, match="chunks"):
        build_schedule("ring", spec, chunks=0)
    with pytest.raises(UsageError, match="permutation"):
        build_schedule("ring", spec, orders=[[0, 1, 1, 2]])
    with pytest.raises(UsageError, match="shot"):
        build_schedule("direct", spec, shot=3)
    with pytest.raises(UsageError, match="unknown algorithm"):
        build_schedule("collnet", spec)


def test_direct_auto_shot() -> None:
    small = build_schedule("direct", CollectiveSpec("all_reduce", nranks=4, count=1024))
    large = build_schedule("direct", CollectiveSpec("all_reduce", nranks=4, count=1 << 20))
    assert small.params["shot"] == 1
    assert large.params["shot"] == 2


def test_count_zero_has_no_ops() -> None:
    for name, algorithm in ALGORITHMS.items():
        for collective in algorithm.collectives:
            params = {"ranks_per_node": 2} if name == "hierarchical" else {}
            s = build_schedule(name, CollectiveSpec(collective, nranks=4, count=0), **params)
            assert s.n_ops == 0, (name, collective)
            verify(s)


def test_large_builds() -> None:
    """Vectorised builders: a 1024-rank ring all_reduce (3.1M ops) builds (speed: bench/)."""
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=1024, count=1 << 20))
    assert s.n_ops == 3 * 1024 * 1023
