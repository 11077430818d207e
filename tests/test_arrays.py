"""scaleup.arrays.unique: the values np.unique returns, without numpy >= 2.3's hash path; and no
plain ``np.unique(x)`` left in the library to take that path."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scaleup.arrays import unique
from scaleup.sim.rank_ops import _function_of

SRC = Path(__file__).resolve().parents[1] / "src" / "scaleup"


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.int64, np.int32, np.int8, np.uint16, np.bool_]),
        shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=40),
    )
)
def test_unique_is_np_unique_on_integers(values: np.ndarray) -> None:
    got, want = unique(values), np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@given(st.lists(st.floats(allow_nan=False, width=64), max_size=60))
def test_unique_is_np_unique_on_finite_floats(values: list[float]) -> None:
    np.testing.assert_array_equal(unique(np.array(values)), np.unique(np.array(values)))


def test_unique_known_answers() -> None:
    assert unique([3, 1, 3, 2, 1]).tolist() == [1, 2, 3]
    assert unique(np.array([[5, 5], [4, 5]])).tolist() == [4, 5]  # flattened
    assert unique(np.array([], dtype=np.int32)).dtype == np.int32
    assert unique([7]).tolist() == [7]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=30))
def test_function_of_finds_the_map_or_refuses(pairs: list[tuple[int, int]]) -> None:
    x = np.array([a for a, _ in pairs], dtype=np.int64)
    y = np.array([b for _, b in pairs], dtype=np.int64)
    images: dict[int, set[int]] = {}
    for a, b in pairs:
        images.setdefault(a, set()).add(b)
    got = _function_of(x, y)
    if any(len(v) > 1 for v in images.values()):
        assert got is None
    else:
        assert got is not None
        assert got[0].tolist() == sorted(images)
        assert got[1].tolist() == [next(iter(images[a])) for a in sorted(images)]


def test_no_plain_np_unique_in_the_library() -> None:
    """``np.unique(x)`` without return_* flags takes numpy's hash path (2-15x slower from ~500
    values); the library calls :func:`scaleup.arrays.unique` instead."""
    plain = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "unique"
                and getattr(node.func.value, "id", "") == "np"
                and not node.keywords
            ):
                plain.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert plain == []
