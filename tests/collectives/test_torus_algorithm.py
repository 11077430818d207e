"""The per-dimension ring all_reduce (``torus``): verifies on random grids, moves what a flat
ring moves, in fewer steps, and refuses dims that do not hold the ranks."""

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
    assert torus.n_steps == 1 + 2 * 9  # the input -> output copy, then the ring steps
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
