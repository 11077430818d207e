"""``np.unique`` against :func:`scaleup.arrays.unique` on the integer arrays scaleup asks about.

    python bench/bench_unique.py

From numpy 2.3 a plain ``np.unique(x)`` hashes; :func:`scaleup.arrays.unique` sorts. Prints, per
size and dtype, the microseconds of each (best of 5 repeats) and their ratio, with numpy's
version: the reason the library calls the sort (scaleup/arrays.py, BENCHMARKS.md).
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

import numpy as np

from scaleup.arrays import unique

SIZES = (10, 100, 600, 5_000, 100_000, 2_000_000)


def _best(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, number: int) -> float:
    """Seconds per call of ``fn(x)``, best of 5 repeats of ``number`` calls."""
    return min(timeit.repeat(lambda: fn(x), number=number, repeat=5)) / number


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}")
    print(f"{'size':>9} {'dtype':>6} {'np.unique us':>13} {'arrays.unique us':>17} {'ratio':>6}")
    for size in SIZES:
        for dtype in (np.int64, np.int32):
            x = rng.integers(0, max(2, size // 3), size=size).astype(dtype)
            assert np.array_equal(np.unique(x), unique(x))
            number = max(3, 20_000 // size)
            hashed = _best(np.unique, x, number)
            sorted_ = _best(unique, x, number)
            name = np.dtype(dtype).name
            print(
                f"{size:>9} {name:>6} {hashed * 1e6:>13.1f} {sorted_ * 1e6:>17.1f} "
                f"{hashed / sorted_:>6.1f}"
            )


if __name__ == "__main__":
    main()
