"""``bench --runtime``'s nccl-tests groups: out of place, in place (aliased as NCCL aliases), and
the check of every timed iteration against the numpy reference (``#wrong``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.spec import CollectiveSpec, reduce_arrays
from scaleup.runtime import measure

_OPS = ("all_reduce", "reduce", "broadcast", "reduce_scatter", "all_gather", "all_to_all")


@settings(max_examples=60, deadline=None)
@given(
    collective=st.sampled_from(_OPS),
    nranks=st.integers(1, 5),
    blocks=st.integers(0, 7),
    redop=st.sampled_from(("sum", "prod", "max", "min", "avg")),
    dtype=st.sampled_from(("float32", "float16", "int32", "uint8")),
    data=st.data(),
)
def test_expected_is_the_spec_reference(collective, nranks, blocks, redop, dtype, data):
    """The streamed expectation (one peer's input at a time) equals CollectiveSpec.reference on
    all inputs at once, avg being the sum over n."""
    if redop == "avg" and dtype in ("int32", "uint8"):
        return
    spec_redop = "sum" if redop == "avg" else redop
    root = data.draw(st.integers(0, nranks - 1))
    spec = CollectiveSpec(collective, nranks, blocks * nranks, root=root, redop=spec_redop)
    np_dtype = np.dtype(dtype)
    inputs = [measure._input_of(spec, np_dtype, p) for p in range(nranks)]
    reference = spec.reference(inputs)
    for rank in range(nranks):
        got = measure._expected(spec, np_dtype, rank, redop == "avg")
        want = reference[rank]
        if want is None:
            assert got is None
            continue
        if redop == "avg" and spec.reduces:
            want = np.divide(want, nranks, casting="unsafe").astype(np_dtype)
        assert got is not None
        np.testing.assert_array_equal(got, want)


def test_inputs_reduce_exactly_in_any_order():
    """The check asks for equality: the drawn values sum and multiply exactly in any order."""
    spec = CollectiveSpec("all_reduce", 8, 4096, redop="sum")
    inputs = [measure._input_of(spec, np.dtype("float16"), p) for p in range(8)]
    forward = reduce_arrays(inputs, "sum")
    backward = reduce_arrays(inputs[::-1], "sum")
    np.testing.assert_array_equal(forward, backward)


@pytest.mark.parametrize("collective", _OPS)
def test_both_groups_are_checked_and_right(collective):
    """Every collective, out of place and in place (all_gather's input a block of its output,
    reduce_scatter's output a block of its input): no wrong element, both times measured."""
    rows = measure.bench_rows("shm", 3, collective, [1024], iters=2, warmup=1, redop="sum", root=1)
    row = rows[0]
    assert (row.wrong, row.in_place_wrong) == (0, 0)
    assert row.time_us > 0
    assert row.in_place_us > 0
    assert {"wrong", "in_place_wrong", "in_place_time_us"} <= set(row.to_dict())


def test_avg_is_checked_and_unchecked_rows_say_so():
    rows = measure.bench_rows("shm", 2, "all_reduce", [4096], iters=2, warmup=0, redop="avg")
    assert (rows[0].wrong, rows[0].in_place_wrong, rows[0].redop) == (0, 0, "avg")
    unchecked = measure.bench_rows("shm", 2, "all_gather", [4096], iters=1, warmup=0, check=False)
    assert (unchecked[0].wrong, unchecked[0].in_place_wrong) == (None, None)
    assert "wrong" not in unchecked[0].to_dict()
