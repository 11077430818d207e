"""The per-dimension rings (``torus``): all_reduce, reduce_scatter and all_gather verify on
random grids, move what a flat ring moves, in fewer steps, and refuse dims that do not hold
the ranks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import UnsupportedCollective, UsageError


@settings(deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3).filter(lambda d: math.prod(d) <= 24),
    st.integers(0, 60),
    st.integers(1, 2),
    st.integers(1, 2),
    st.sampled_from(("sum", "max", "prod")),
)
def test_verifies_on_any_grid(
    dims: list[int], count: int, channels: int, chunks: int, redop: str
) -> None:
    spec = CollectiveSpec("all_reduce", nranks=math.prod(dims), count=count, redop=redop)
    s = build_schedule("torus", spec, dims=dims, channels=channels, chunks=chunks)
    verify(s, "int32", seed=count)


def test_steps_and_bytes_against_a_flat_ring() -> None:
    """4x4x4: 2 x (3+3+3) ring steps instead of 2 x 63; each rank sends 2 (n-1)/n of the
    buffer either way (64 | count: no rounding)."""
    n, count = 64, 64 * 16
    spec = CollectiveSpec("all_reduce", nranks=n, count=count)
    torus = build_schedule("torus", spec, dims="4x4x4")
    ring = build_schedule("ring", spec)
    assert torus.n_steps == 2 * 9  # the ring steps (input copies share their steps' tags)
    sent = torus.bytes_sent_per_rank()
    assert np.all(sent == 2 * (n - 1) / n * count)
    assert np.all(sent == ring.bytes_sent_per_rank())
    assert ring.n_steps == 2 * (n - 1)


def test_dims_forms_and_errors() -> None:
    spec = CollectiveSpec("all_reduce", nranks=8, count=16)
    assert build_schedule("torus", spec).params["dims"] == [8]
    assert build_schedule("torus", spec, dims="2x4").params["dims"] == [2, 4]
    assert build_schedule("torus", spec, dims=[2, 2, 2]).params["dims"] == [2, 2, 2]
    with pytest.raises(UnsupportedCollective, match="holds 9 ranks"):
        build_schedule("torus", spec, dims="3x3")
    with pytest.raises(UsageError) as info:
        build_schedule("torus", spec, dims="2xfour")
    assert info.value.source == "dims"


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.sampled_from((1, 2, 3, 5)), min_size=1, max_size=4).filter(
        lambda d: math.prod(d) <= 30
    ),
    st.integers(0, 97).map(lambda c: 2 * c + 1),
    st.integers(1, 7),
    st.integers(1, 2),
    st.booleans(),
    st.booleans(),
)
def test_rotated_and_reversed_lanes_verify(
    dims: list[int], count: int, channels: int, chunks: int, rotate: bool, bidirectional: bool
) -> None:
    """Odd sizes and counts, 1-4 dimensions (size-1 ones skipped by the lanes), 1-7 channels:
    every lane order and direction reduces every element over every rank exactly once."""
    spec = CollectiveSpec("all_reduce", nranks=math.prod(dims), count=count, redop="sum")
    s = build_schedule(
        "torus", spec, dims=dims, channels=channels, chunks=chunks, rotate=rotate,
        bidirectional=bidirectional,
    )  # fmt: skip
    verify(s, "int32", seed=count)


def _first_hops(s: object, rank: int) -> list[int]:
    """The ranks ``rank`` sends to at the first ring step (step tag 1), by channel."""
    ops = [o for o in s.ops if o.step == 1 and o.srcs[0].rank == rank]  # type: ignore[attr-defined]
    return [o.dsts[0].rank for o in sorted(ops, key=lambda o: o.channel) if o.dsts[0].rank != rank]


def test_six_lanes_use_the_six_links_of_a_3d_torus() -> None:
    """Known answer, 4x4x4, rank 0 at (0, 0, 0): its neighbours are 1 (+x), 4 (+y), 16 (+z),
    3 (-x), 12 (-y), 48 (-z). Lanes 0-2 start along x, y, z forward, lanes 3-5 backward; the
    single-order schedule sends every lane to 1."""
    spec = CollectiveSpec("all_reduce", nranks=64, count=64 * 6)
    s = build_schedule("torus", spec, dims="4x4x4", channels=6)
    assert _first_hops(s, 0) == [1, 4, 16, 3, 12, 48]
    old = build_schedule("torus", spec, dims="4x4x4", channels=6, rotate=False,
                         bidirectional=False)  # fmt: skip
    assert _first_hops(old, 0) == [1] * 6
    assert np.all(s.bytes_sent_per_rank() == old.bytes_sent_per_rank())
    assert s.n_steps == old.n_steps == 18


def test_reversed_ring_known_answer() -> None:
    """dims (3,), 2 lanes of 3 elements: lane 1 runs 0 -> 2 -> 1 -> 0. Its position of rank r
    is (3 - r) mod 3 and rank r reduces block (position - t) mod 3 at step t: rank 0 sends
    element 3 (block 0 of lane 1) to rank 2 at step 1, rank 2 sends element 4 to rank 1."""
    spec = CollectiveSpec("all_reduce", nranks=3, count=6)
    s = build_schedule("torus", spec, channels=2)
    assert s.params["bidirectional"]
    assert s.params["rotate"]
    hops = sorted(
        (o.step, o.srcs[0].rank, o.dsts[0].rank, o.dsts[0].offset)
        for o in s.ops
        if o.channel == 1 and o.srcs[0].rank != o.dsts[0].rank
    )
    assert hops == [
        (1, 0, 2, 3), (1, 1, 0, 5), (1, 2, 1, 4),  # reduce-scatter
        (2, 0, 2, 5), (2, 1, 0, 4), (2, 2, 1, 3),
        (3, 0, 2, 4), (3, 1, 0, 3), (3, 2, 1, 5),  # all-gather of the reduced blocks
        (4, 0, 2, 3), (4, 1, 0, 5), (4, 2, 1, 4),
    ]  # fmt: skip
    verify(s, "int32", seed=1)


@settings(deadline=None, max_examples=80)
@given(
    st.sampled_from(("reduce_scatter", "all_gather")),
    st.lists(st.sampled_from((1, 2, 3, 4, 5)), min_size=1, max_size=4).filter(
        lambda d: math.prod(d) <= 30
    ),
    st.integers(0, 9),
    st.integers(1, 7),
    st.integers(1, 2),
    st.booleans(),
    st.booleans(),
    st.sampled_from(("sum", "max", "prod")),
    st.sampled_from(("int32", "float32", "float16")),
)
def test_the_two_halves_verify_on_any_grid(
    collective: str, dims: list[int], per_rank: int, channels: int, chunks: int,
    rotate: bool, bidirectional: bool, redop: str, dtype: str,
) -> None:  # fmt: skip
    """reduce_scatter leaves rank j block j reduced over every rank, all_gather gives every
    rank every rank's input, for odd block sizes (including empty lanes and blocks), 1-4
    dimensions with size-1 ones, every lane order and direction."""
    n = math.prod(dims)
    spec = CollectiveSpec(collective, nranks=n, count=n * per_rank + n // 2, redop=redop)
    s = build_schedule(
        "torus", spec, dims=dims, channels=channels, chunks=chunks, rotate=rotate,
        bidirectional=bidirectional,
    )  # fmt: skip
    verify(s, dtype, seed=per_rank)


@pytest.mark.parametrize("collective", ["reduce_scatter", "all_gather"])
def test_halves_send_what_a_flat_ring_sends_in_fewer_steps(collective: str) -> None:
    """4x4x4: each rank sends (n - 1) / n of the buffer, as a flat ring's rank does, in
    3 + 3 + 3 ring steps instead of 63; on every rank, and with 12 lanes (each block cut in
    12 pieces: one op per piece, so the flat ring's op count for all_gather)."""
    n = 64
    spec = CollectiveSpec(collective, nranks=n, count=n * 12 * 5)
    torus = build_schedule("torus", spec, dims="4x4x4", channels=12)
    ring = build_schedule("ring", spec, channels=12)
    assert np.array_equal(torus.bytes_sent_per_rank(), ring.bytes_sent_per_rank())
    assert np.all(torus.bytes_sent_per_rank() == (n - 1) * 5 * 12)  # elements: 63 blocks
    assert torus.n_steps == 9 + (collective == "all_gather")  # + the own-block copies' tag
    assert ring.n_steps == n - 1
    if collective == "all_gather":
        assert torus.n_ops == ring.n_ops
