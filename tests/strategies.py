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
from scaleup.collectives.schedule import OpKind
from scaleup.collectives.spec import CollectiveSpec

__all__ = [
    "PRIMES",
    "AliasedOp",
    "CollectiveCase",
    "aliased_ops",
    "collective_cases",
    "counts",
    "dtypes",
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


@dataclass(frozen=True)
class AliasedOp:
    """One op whose chunks all lie in one buffer (so any of them may overlap), by offsets."""

    kind: OpKind
    count: int
    srcs: tuple[int, ...]
    dsts: tuple[int, ...]  # pairwise disjoint, as the verifier requires


@st.composite
def aliased_ops(draw: st.DrawFn, size: int = 32) -> AliasedOp:
    """Ops on chunks of one ``size``-element buffer: sources overlap destinations any which way.

    Sources are drawn at a destination, near one, or anywhere, so that aliasing is common.
    """
    kind = draw(st.sampled_from(list(OpKind)))
    count = draw(st.integers(1, size // 4))
    switch = kind == OpKind.SWITCH_REDUCE
    slot = st.integers(0, size // count - 2)
    slots = draw(st.lists(slot, min_size=1, max_size=3 if switch else 1, unique=True))
    shift = draw(st.integers(0, count - 1))
    dsts = tuple(slot * count + shift for slot in slots)
    near = st.tuples(st.sampled_from(dsts), st.integers(-count, count)).map(
        lambda p: min(max(p[0] + p[1], 0), size - count)
    )
    source = st.one_of(st.sampled_from(dsts), near, st.integers(0, size - count))
    srcs = draw(st.lists(source, min_size=1, max_size=4 if switch else 1))
    return AliasedOp(kind, count, tuple(srcs), dsts)
