"""Distinct values of an array by sorting: ``np.unique`` without its hash path.

From numpy 2.3, ``np.unique(x)`` called without ``return_index`` / ``return_inverse`` /
``return_counts`` finds the distinct values with a hash table and sorts them afterwards. On the
integer arrays scaleup asks about (ranks, channel tags, constraint rows, device ids) that is
3-20 times slower than sorting once and keeping the first of each run, from about 500 elements
up (``python bench/bench_unique.py``, numpy 2.4.6: 600 int64 values 45 vs 12 us, 5,000 values
607 vs 71 us, 2 million 889 vs 47 ms). The symmetry search of a 144-rank schedule spent 135 of
its 219 s in ``np.unique`` (BENCHMARKS.md, eighteenth session). :func:`unique` returns what
``np.unique`` did before the hash path (numpy 1.26 sorts too), so the result does not depend on
the numpy version.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["unique"]


def unique(values: ArrayLike) -> np.ndarray:
    """The sorted distinct values of ``values`` (flattened), as ``np.unique(values)`` returns
    them; NaNs, which no caller passes, would each be kept."""
    flat = np.asarray(values).ravel()
    if flat.size < 2:
        return flat.copy()
    ordered = np.sort(flat)
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]
