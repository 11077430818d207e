"""Shared hypothesis strategies for scaleup's tests.

Collective cases are drawn from the shapes that break algorithms: world sizes 1..16 (odd, prime,
powers of two), element counts 0, 1, primes and non-multiples of the world size, and the dtypes
int32, float32, float16 (exact integer checks plus the float tolerance path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.collectives.spec import CollectiveSpec

__all__ = [
    "PRIMES",
    "CollectiveCase",
    "collective_cases",
    "counts",
    "dtypes",
    "rank_subsets",
    "world_sizes",
]

PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127)


def world_sizes(max_size: int = 16) -> st.SearchStrategy[int]:
    """World sizes 1..max_size."""
    return st.integers(1, max_size)


def counts(nranks: int, *, max_blocks: int = 12) -> st.SearchStrategy[int]:
    """Element counts that stress block splits: 0, 1, primes, non-multiples and multiples of n."""
    return st.one_of(
        st.sampled_from((0, 1)),
        st.sampled_from(PRIMES),
        st.integers(0, max_blocks).map(lambda k: k * nranks + max(1, nranks // 2)),  # non-multiple
        st.integers(0, max_blocks).map(lambda k: k * nranks),
    )


def dtypes() -> st.SearchStrategy[str]:
    """The dtypes every algorithm is verified with."""
    return st.sampled_from(("int32", "float32", "float16"))


@dataclass(frozen=True)
class CollectiveCase:
    """One algorithm run: which algorithm, the spec, its parameters and the dtype to verify."""

    algorithm: str
    spec: CollectiveSpec
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str = "int32"

    def __str__(self) -> str:
        return f"{self.algorithm} {self.spec.name} {self.params} {self.dtype}"


def _params(draw: st.DrawFn, algorithm: str, nranks: int) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if draw(st.booleans()):
        params["chunks"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        params["channels"] = draw(st.integers(1, 3))
    if algorithm == "ring" and draw(st.booleans()):
        params["bidirectional"] = True
    if algorithm == "ring" and draw(st.booleans()):
        k = params.get("channels", 1)
        orders = [draw(st.permutations(range(nranks))) for _ in range(k)]
        params["orders"] = [list(o) for o in orders]
    if algorithm == "direct":
        params["shot"] = draw(st.sampled_from((1, 2, "auto")))
    if algorithm == "hierarchical":
        divisors = [g for g in range(1, nranks + 1) if nranks % g == 0]
        params["ranks_per_node"] = draw(st.sampled_from(divisors))
    return params


@st.composite
def collective_cases(
    draw: st.DrawFn, algorithm: str | None = None, max_size: int = 16
) -> CollectiveCase:
    """A (algorithm, collective, world size, count, params, dtype) that the algorithm supports."""
    name = algorithm or draw(st.sampled_from(sorted(ALGORITHMS)))
    collective = draw(st.sampled_from(ALGORITHMS[name].collectives))
    n = draw(world_sizes(max_size))
    count = draw(counts(n))
    root = draw(st.integers(0, n - 1))
    redop = draw(st.sampled_from(("sum", "sum", "max", "min", "prod")))
    spec = CollectiveSpec(collective, nranks=n, count=count, root=root, redop=redop)
    return CollectiveCase(name, spec, _params(draw, name, n), draw(dtypes()))


def rank_subsets(n: int, *, min_size: int = 1) -> st.SearchStrategy[list[int]]:
    """Distinct accelerator indices of a topology with ``n`` accelerators, in any order (a
    communicator's ranks: ``--ranks k`` takes the first k, a user may pick any)."""
    return st.lists(st.integers(0, n - 1), min_size=min_size, max_size=n, unique=True)
