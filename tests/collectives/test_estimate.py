"""The schedule size estimate: an upper bound on every builder, tight within 8x, checked before
a schedule is built (so ``--chunks 10000000`` is refused in one line instead of taking the
machine), and the other limits on collectives."""

from __future__ import annotations

import pytest

from scaleup import limits
from scaleup.collectives.algorithms import ALGORITHMS, _prepare, build_schedule
from scaleup.collectives.algorithms import _estimate as estimate
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import LimitError, UnsupportedCollective, UsageError

_SIZES = (1, 2, 3, 5, 8, 13, 16, 24)
_LANES = ((1, 1), (2, 3))


def _variants(algorithm: str, n: int) -> list[dict]:
    if algorithm in ("hierarchical", "nvls_tree"):
        return [{"ranks_per_node": g} for g in range(1, n + 1) if n % g == 0]
    if algorithm == "direct":
        return [{"shot": 1}, {"shot": 2}]
    if algorithm == "ring":
        return [{}, {"bidirectional": True}]
    if algorithm == "torus":  # one ring, and a grid of n's prime factors (2x2x2, 2x3x4 ...)
        return [{}, {"dims": _factors(n)}, {"dims": _factors(n), "bidirectional": False}]
    return [{}]


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out or [1]


def _op_equivalents(schedule) -> float:
    t = schedule.table
    return max(schedule.n_ops, (len(t.src_rank) + len(t.dst_rank)) / 2)


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_estimate_bounds_every_builder_from_above_within_8x(algorithm: str) -> None:
    for collective in ALGORITHMS[algorithm].collectives:
        for n in _SIZES:
            for channels, chunks in _LANES:
                for extra in _variants(algorithm, n):
                    params = {"channels": channels, "chunks": chunks, **extra}
                    count = n * channels * chunks * 8 + 3
                    spec = CollectiveSpec(collective, nranks=n, count=count)
                    try:
                        _, merged = _prepare(algorithm, spec, params)
                        schedule = build_schedule(algorithm, spec, **params)
                    except UnsupportedCollective:
                        continue
                    actual = _op_equivalents(schedule)
                    bound = estimate.estimate_ops(algorithm, spec, merged)
                    case = f"{algorithm} {spec.name} {params}"
                    assert actual <= bound, f"{case}: {actual} ops over the estimate {bound}"
                    if n >= 8:
                        assert bound <= 8 * actual, f"{case}: estimate {bound} vs {actual} ops"


@pytest.mark.parametrize(
    ("params", "source"),
    [
        ({"channels": limits.MAX_CHANNELS + 1}, "channels"),
        ({"chunks": limits.MAX_CHUNKS + 1}, "chunks"),
    ],
)
def test_channels_and_chunks_past_their_limits_are_refused(params: dict, source: str) -> None:
    with pytest.raises(LimitError) as info:
        build_schedule("ring", CollectiveSpec("all_reduce", nranks=2, count=8), **params)
    assert info.value.source == source


def test_a_schedule_estimated_over_the_op_limit_is_refused_before_it_is_built(monkeypatch) -> None:
    monkeypatch.setattr(estimate, "MAX_SCHEDULE_OPS", 100)
    with pytest.raises(LimitError, match="MAX_SCHEDULE_OPS") as info:
        build_schedule("ring", CollectiveSpec("all_reduce", nranks=8, count=64), chunks=2)
    assert info.value.source == "chunks"


def test_a_schedule_larger_than_free_memory_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 1000)
    with pytest.raises(LimitError, match="would need about"):
        build_schedule("tree", CollectiveSpec("all_reduce", nranks=8, count=64))


def test_verify_refuses_buffers_larger_than_free_memory(monkeypatch) -> None:
    schedule = build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=64))
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 1000)
    with pytest.raises(LimitError, match="the replay would need about") as info:
        verify(schedule)
    assert info.value.source == "count"


def test_verify_refuses_a_negative_seed() -> None:
    schedule = build_schedule("ring", CollectiveSpec("all_reduce", nranks=2, count=4))
    with pytest.raises(UsageError, match="seed") as info:
        verify(schedule, seed=-1)
    assert info.value.source == "seed"


@pytest.mark.parametrize(
    ("nranks", "count", "source"),
    [
        (limits.MAX_RANKS + 1, 1, "ranks"),
        (2**40, 1, "ranks"),
        (2, limits.MAX_ELEMENTS + 1, "count"),
    ],
)
def test_collective_spec_sizes_past_the_limits_are_refused(
    nranks: int, count: int, source: str
) -> None:
    with pytest.raises(LimitError) as info:
        CollectiveSpec("all_reduce", nranks=nranks, count=count)
    assert info.value.source == source
