"""Shared hypothesis strategies for scaleup's tests.

Collective cases are drawn from the shapes that break algorithms: world sizes 1..16 (odd, prime,
powers of two), element counts 0, 1, primes and non-multiples of the world size, and the dtypes
int32, float32, float16 (exact integer checks plus the float tolerance path).

Input files for fuzzing are drawn as TOML documents (:func:`toml_values` written by
:func:`toml_text`) whose keys and strings come mostly from the format's own vocabulary, so that
most cases get past the parser into validation, then spliced with random text or replaced by
arbitrary bytes (:func:`file_bytes`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.collectives.schedule import OpKind
from scaleup.collectives.spec import CollectiveSpec
from scaleup.topology.io import _str as toml_string  # the TOML string writer of topology files

__all__ = [
    "PRIMES",
    "AliasedOp",
    "CollectiveCase",
    "aliased_ops",
    "collective_cases",
    "counts",
    "dtypes",
    "file_bytes",
    "rank_subsets",
    "sweep_spec_texts",
    "toml_text",
    "toml_values",
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
    if algorithm in ("hierarchical", "nvls_tree"):
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


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # TOML: no surrogates
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_values(words: Sequence[str] = (), *, max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Any TOML value: ``words`` or any string, integers (64-bit edges and beyond), floats (inf,
    nan), booleans, dates and times, and lists and tables of them."""
    scalars = st.one_of(
        st.sampled_from(tuple(words) or ("",)),
        _TEXT,
        st.integers(),
        st.sampled_from((0, 1, -1, 2**63 - 1, -(2**63), 2**64, 10**30)),
        st.floats(),
        st.booleans(),
        st.dates(),
        st.datetimes(),
        st.times(),
    )
    keys = st.one_of(st.sampled_from(tuple(words) or ("k",)), _TEXT)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def _toml_inline(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(str(value), repr(value))
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Mapping):
        return (
            "{" + ", ".join(f"{_toml_key(k)} = {_toml_inline(v)}" for k, v in value.items()) + "}"
        )
    return "[" + ", ".join(_toml_inline(v) for v in value) + "]"


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_text(document: Mapping[str, Any]) -> str:
    """``document`` as TOML: one ``key = value`` line per top-level key, inline below that."""
    return "".join(f"{_toml_key(k)} = {_toml_inline(v)}\n" for k, v in document.items())


_GOOD_SIZES = (
    ["1K"],
    [0, 8, "1M"],
    {"min": 8, "max": "1M"},
    {"min": "1K", "max": "1G", "factor": 4},
)
_BAD_SIZES = (
    ["1Q"],
    [-1],
    [],
    {"min": 1, "max": "1024T", "factor": 1.0001},
    {"min": "1M", "max": "1K"},
    {"min": 1, "max": 8, "factor": 1.0},
    {"min": 1, "max": 8, "factor": float("nan")},
)
#: Per block of a sweep spec, per key: whether it is required, values that pass validation, and
#: values that must not (each a rule of the format).
_SPEC_VOCABULARY: dict[str, dict[str, tuple[bool, Sequence[Any], Sequence[Any]]]] = {
    "bench": {
        "topologies": (
            True,
            (["dgx-h100"], ["mi300x-8", "2xdgx-h100"], ["ualink-pod:n=8"]),
            (["nope"], ["missing.toml"], ["dgx-h100:bogus=1"], [], ["a\x00b"], ["ualink-pod:n=-1"]),
        ),
        "nodes": (False, ([1], [1, 2]), ([0], [-1], [2**40], [2**63])),
        "collectives": (
            True,
            (["all_reduce"], ["all_gather", "broadcast"]),
            (["allreduce"], [], [1]),
        ),
        "sizes": (True, _GOOD_SIZES, _BAD_SIZES),
        "algorithms": (False, (["tuned"], ["ring", "tree"], ["direct"]), (["warp"], [])),
        "protocols": (False, (["tuned"], ["simple", "ll"]), (["fast"],)),
        "ranks": (False, ([0], [2, 4]), ([-1], [2**70], [float("inf")])),
        "dtype": (False, ("float32", ["float16", "int32"]), ("float33", [])),
    },
    "plan": {
        "models": (True, (["llama-70b"], ["llama3-8b", "other"]), ([],)),
        "topologies": (True, (["dgx-h100"], ["2xdgx-h100"]), (["nope"], [""])),
        "nodes": (False, ([1], [1, 2]), ([0],)),
        "tp": (False, ([1, 2, 4, 8], 2, "x"), ([], float("inf"), [{"a": 1}])),
        "pp": (False, ([1, 2], 1), ([1, float("nan")], dt.date(2020, 1, 1))),
        "kind": (False, (), ("os:system",)),
        "status": (False, (), ("ok",)),
    },
    "grid": {
        "kind": (
            True,
            ("square", "failing", "bench", "plan"),
            ("os:system", "logging.config:dictConfig", "", "nope"),
        ),
        "params": (
            False,
            ({"x": [1, 2, 3]}, {"x": 3, "tag": "t"}, {"x": [1, 2], "y": [True, False]}),
            (
                {"x": []},
                {"kind": "square"},
                {"x": [1.5, float("inf")]},
                {"point_id": 1},
                {"x": {"nested": 1}},
                {"x": [[1]]},
                {"\n": 1},
            ),
        ),
    },
}


@st.composite
def _spec_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A spec document: *clean* (every value good: a spec that runs) or *noisy* (some keys
    missing, bad or arbitrary values, extra keys)."""
    words = [w for block in _SPEC_VOCABULARY.values() for w in block] + list(_SPEC_VOCABULARY)
    anything = toml_values(words)
    clean = draw(st.integers(0, 4)) < 2
    document: dict[str, Any] = {}
    if draw(st.booleans()):
        document["name"] = draw(_TEXT if clean else st.one_of(_TEXT, anything))
    known = list(_SPEC_VOCABULARY)
    blocks = draw(
        st.lists(
            st.sampled_from(known if clean else [*known, "other"]),
            min_size=1 if clean else 0,
            max_size=3,
            unique=True,
        )
    )
    for block in blocks:
        tables = []
        for _ in range(draw(st.integers(1 if clean else 0, 2))):
            table: dict[str, Any] = {}
            for key, (required, good, bad) in _SPEC_VOCABULARY.get(block, {}).items():
                if clean:
                    if good and (required or draw(st.booleans())):
                        table[key] = draw(st.sampled_from(good))
                    continue
                if draw(st.integers(0, 3)) > 0:
                    pick = draw(st.integers(0, 9))
                    pool = good if pick < 6 and good else bad if pick < 9 and bad else None
                    table[key] = draw(st.sampled_from(pool) if pool else anything)
            if not clean and draw(st.integers(0, 4)) == 0:
                table[draw(st.one_of(st.sampled_from(words), _TEXT))] = draw(anything)
            tables.append(table)
        document[block] = tables if clean or draw(st.integers(0, 6)) else draw(anything)
    return document


@st.composite
def sweep_spec_texts(draw: st.DrawFn) -> str:
    """Sweep spec text: mostly well-formed TOML with the spec's own keys and values, good and
    bad, sometimes spliced with random text (a deletion and an insertion)."""
    text = toml_text(draw(_spec_documents()))
    if draw(st.integers(0, 3)) == 0:
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 8)))
        text = text[:start] + draw(_TEXT) + text[end:]
    return text


def file_bytes(texts: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """The content of an input file: ``texts`` as UTF-8 mostly, else any text or any bytes."""
    return st.one_of(
        texts.map(str.encode),
        texts.map(str.encode),
        texts.map(str.encode),
        st.text().map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=64),
    )


def rank_subsets(n: int, *, min_size: int = 1) -> st.SearchStrategy[list[int]]:
    """Distinct accelerator indices of a topology with ``n`` accelerators, in any order (a
    communicator's ranks: ``--ranks k`` takes the first k, a user may pick any)."""
    return st.lists(st.integers(0, n - 1), min_size=min_size, max_size=n, unique=True)
